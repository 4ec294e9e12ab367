"""The node's kubelet, as lab/node_init.py starts it: ``/usr/bin/python3 /usr/lib/poweraware-lab/kubelet
ARGS`` (the node's copy of this package, lab/nodes.py), or ``python -m lab.kubelet ARGS`` here.

Run by its path, this file is a script and the package's relative imports need the package: the
directory that holds it takes the script's place at the head of sys.path, which is then what it was
when the kubelet was a script in that directory (``stress_ng.py`` is importable from there).
"""

import os
import sys

if __package__:
    from .main import main
else:
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    from kubelet.main import main

if __name__ == "__main__":
    sys.exit(main())
