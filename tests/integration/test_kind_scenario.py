"""The kind scenario (extensions/molecule/kind) runs for a normal user without sudo.

kind cannot run on the build machines: they have the Docker client but no Docker engine, and kind's
nodes are containers of that engine. So the scenario's own converge playbook, inventory and
environment (molecule.yml's ``ansible.env``) run here in check mode, with the tags of NFD, TAS and
the Prometheus Adapter, against the lab's API server instead of a kind cluster's, as molecule
would start them, by a process that is not root and cannot become
root: uid 1000 in a user namespace, where sudo refuses to run. The plays keep ``become: true`` (a real
control plane's admin.conf and /etc/kubernetes/pki are root-only); the kind inventory's
``ansible_become: false`` turns that off for its controller host. Without that line the same run
fails at its first task, which this test shows too.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest
import yaml
from ansible_run import REPO_ROOT

# make lifecycle, not make test, for make test's time (45 s)
pytestmark = [pytest.mark.lab, pytest.mark.lifecycle]

SCENARIO = REPO_ROOT / "extensions" / "molecule" / "kind"
NORMAL_USER = ["unshare", "--user", "--map-user=1000", "--map-group=1000"]


def _scenario_run(scenario: pathlib.Path, kubeconfig: pathlib.Path) -> subprocess.CompletedProcess:
    """The scenario's converge in check mode (it changes nothing in the lab), as molecule starts it:
    molecule.yml's environment and ansible-playbook arguments, run as uid 1000 without sudo."""
    molecule = yaml.safe_load((scenario / "molecule.yml").read_text())
    places = {"${MOLECULE_SCENARIO_DIRECTORY}": str(scenario), "${MOLECULE_PROJECT_DIRECTORY}": str(REPO_ROOT)}

    def placed(value: str) -> str:
        for name, path in places.items():
            value = value.replace(name, path)
        return value

    env = {name: placed(str(value)) for name, value in molecule["ansible"]["env"].items()}
    work = pathlib.Path(env["POWERAWARE_KIND_WORK_DIR"])
    work.mkdir(mode=0o700)
    shutil.copyfile(kubeconfig, env["KUBECONFIG"])
    os.chmod(env["KUBECONFIG"], 0o600)
    (work / "ansible.cfg").write_text("[defaults]\n")  # molecule's own, not the repository's lab settings
    bin_dir = pathlib.Path(sys.executable).parent
    env.update(
        {
            "ANSIBLE_CONFIG": str(work / "ansible.cfg"),
            "ANSIBLE_NOCOLOR": "1",
            "HOME": str(work),
            "PATH": f"{bin_dir}{os.pathsep}/usr/sbin:/usr/bin:/sbin:/bin",
        }
    )
    args = [placed(a) for a in molecule["ansible"]["executor"]["args"]["ansible_playbook"]]
    # The cluster play's steps for every role (the Kubernetes client, the look for other installations)
    # and the three roles that keep files on the host the play runs on (NFD's CRDs; TAS's and the
    # adapter's certificates), not the whole stack: make test's time
    tags = ["--tags", "nfd,tas,prometheus_adapter"]
    cmd = [*NORMAL_USER, str(bin_dir / "ansible-playbook"), *args, "--check", *tags, str(scenario / "converge.yml")]
    return subprocess.run(cmd, env=env, cwd=scenario, capture_output=True, text=True, timeout=900, check=False)


def test_the_kind_scenario_converges_as_a_normal_user_without_sudo(lab, site, tmp_path):
    assert site["converge"].rc == 0  # the stack the scenario's dry run finds converged
    scenario = tmp_path / "kind"
    shutil.copytree(SCENARIO, scenario, ignore=shutil.ignore_patterns(".work"))
    client_venv = pathlib.Path("/opt/poweraware/k8s-client")
    existed = client_venv.exists()

    run = _scenario_run(scenario, lab.kubeconfig)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "sudo:" not in run.stdout + run.stderr
    [recap] = [line for line in run.stdout[run.stdout.rindex("PLAY RECAP") :].splitlines() if "kind-controller" in line]
    assert "failed=0" in recap and "unreachable=0" in recap, recap
    # every API read went through the scenario's kubeconfig, as a user that is not root
    assert "Look for existing installations of each enabled component" in run.stdout
    assert client_venv.exists() == existed  # nothing on the workstation outside the scenario's directory

    # Without the inventory's ansible_become: false the plays' become: true asks sudo, which a
    # normal user without sudo rights cannot pass: the run stops at its first task on that host.
    inventory = scenario / "inventory" / "hosts.yml"
    inventory.write_text(inventory.read_text().replace("ansible_become: false", "ansible_become: true"))
    shutil.rmtree(scenario / ".work")
    refused = _scenario_run(scenario, lab.kubeconfig)
    assert refused.returncode != 0, refused.stdout[-2000:]
    assert "sudo:" in refused.stdout + refused.stderr, refused.stdout[-2000:]
    print(f"PROOF kind scenario: converge --check as uid 1000 without sudo: {' '.join(recap.split())}")
