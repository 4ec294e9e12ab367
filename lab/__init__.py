"""The local Kubernetes lab: a real control plane whose nodes are hosts reached over SSH (docs/lab.md);
lab.testing is how tests use it."""

import pathlib
import sys

# The collection under its one import name, ansible_collections.poweraware.k8s, as Ansible, the unit
# tests and mutation testing import it: `make collection` (behind every make target) links the
# checkout there. Appended: the checkout's own directories keep their precedence.
COLLECTIONS = pathlib.Path(__file__).resolve().parent.parent / ".cache" / "collections"
if str(COLLECTIONS) not in sys.path:
    sys.path.append(str(COLLECTIONS))
