# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes client installs and imports on every Python a control plane may run (3.8 to 3.13).

For each interpreter: k8s_client.yml's own probe runs on it, k8s_client_choice picks the pins, a
virtualenv made with that interpreter gets them (uv, from the package index or its cache, as the
role's pip would from the host's index), the probe of the virtualenv then finds them, and the
client kubernetes.core imports (kubernetes.dynamic, kubernetes.config) and cryptography's x509
import there. The interpreters are pyenv's or python3.X on PATH; under CI=true a missing one fails.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
import yaml
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster.k8s_client import client_choice

pytestmark = [pytest.mark.slow, pytest.mark.standalone, pytest.mark.timeout(900)]

REPO = pathlib.Path(__file__).resolve().parents[2]
UV = pathlib.Path(sys.executable).with_name("uv")
MINORS = range(8, 14)


def _probe_script() -> str:
    tasks = yaml.safe_load((REPO / "roles/_common/tasks/k8s_client.yml").read_text())
    return next(t for t in tasks if "_common_k8s_client_probe" in t.get("vars", {}))["vars"]["_common_k8s_client_probe"]


def _interpreter(minor: int) -> str | None:
    root = pathlib.Path(os.environ.get("PYENV_ROOT", pathlib.Path.home() / ".pyenv")) / "versions"
    for candidate in sorted(root.glob(f"3.{minor}.*/bin/python3.{minor}"), reverse=True):
        return str(candidate)
    found = shutil.which(f"python3.{minor}")
    # pyenv's shims answer only for the versions pyenv has selected: a real interpreter or none.
    return found if found and "/shims/" not in found else None


def _probe(interpreter: str) -> dict:
    proc = subprocess.run([interpreter, "-c", _probe_script()], capture_output=True, text=True, check=False)
    return {
        "rc": proc.returncode,
        "stdout": proc.stdout,
        "stderr": proc.stderr,
        "ansible_loop_var": "candidate",
        "candidate": interpreter,
    }


@pytest.mark.parametrize("minor", MINORS, ids=lambda m: f"python3.{m}")
def test_the_chosen_client_installs_and_imports_on_this_python(minor, tmp_path):
    python = _interpreter(minor)
    if python is None:
        message = f"no Python 3.{minor} on this machine (python3.{minor} on PATH or pyenv's)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    venv = tmp_path / "k8s-client"
    # Without pip: uv installs into it (the role's virtualenv has pip; the client is the same).
    subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
    venv_python = str(venv / "bin" / "python")

    before = client_choice({"results": [_probe(python), _probe(venv_python)]})
    assert before["error"] == "", before
    assert before["found"] != venv_python, before  # a new virtualenv has nothing yet
    install = subprocess.run(
        [str(UV), "pip", "install", "--python", venv_python, "--quiet", *before["wanted"]],
        capture_output=True,
        text=True,
        check=False,
    )
    assert install.returncode == 0, f"Python 3.{minor}: {before['wanted']}\n{install.stderr[-3000:]}"

    after = client_choice(
        {"results": [{"rc": 1, "stderr": "skip", "ansible_loop_var": "c", "c": "-"}, _probe(venv_python)]}
    )
    assert after["found"] == venv_python, after
    imported = subprocess.run(
        [
            venv_python,
            "-c",
            "import json, kubernetes, cryptography, kubernetes.dynamic, kubernetes.config, cryptography.x509; "
            "print(json.dumps([kubernetes.__version__, cryptography.__version__]))",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert imported.returncode == 0, imported.stderr[-3000:]
    versions = json.loads(imported.stdout)
    assert [f"kubernetes=={versions[0]}", f"cryptography=={versions[1]}"] == before["wanted"]
    print(f"PROOF Python {before['python']}: {', '.join(before['wanted'])} installed and imported")
