# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes client a control-plane host gets, by its Python (module_utils/cluster/k8s_client.py).

The table's rows are the wheels' Requires-Python on PyPI (kubernetes 36.0.0+ ">=3.10", 35.0.0
">=3.6"; cryptography 48.0.0+ "!=3.9.0,!=3.9.1,>=3.9", 46.0.0-47.0.0 "!=3.9.0,!=3.9.1,>=3.8",
43.0.3 ">=3.7"), written here as specifiers and checked against the table for every Python from
3.8.0 to 3.14.x; tests/integration/test_k8s_client_pythons.py installs the choice on real
interpreters.
"""

from __future__ import annotations

import json
import pathlib

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.filter.k8s_client_choice import k8s_client_choice
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster import k8s_client

# PyPI's Requires-Python of the releases the table pins, as (minimum, excluded versions).
REQUIRES_PYTHON = {
    "kubernetes==37.0.2": ((3, 10, 0), ()),
    "kubernetes==35.0.0": ((3, 6, 0), ()),
    "cryptography==50.0.2": ((3, 9, 0), ((3, 9, 0), (3, 9, 1))),
    "cryptography==47.0.0": ((3, 8, 0), ((3, 9, 0), (3, 9, 1))),
    "cryptography==43.0.3": ((3, 7, 0), ()),
}
# What kubernetes.core (kubernetes >= 24.2.0) and community.crypto (cryptography >= 3.3) need.
NEEDED = {"kubernetes": (24, 2, 0), "cryptography": (3, 3)}
PYTHONS = [(3, minor, micro) for minor in range(8, 15) for micro in range(0, 20)]


def _release(pin):
    return tuple(int(part) for part in pin.split("==")[1].split("."))


def _installs_on(pin, python):
    oldest, excluded = REQUIRES_PYTHON[pin]
    return python >= oldest and python not in excluded


@pytest.mark.parametrize("python", PYTHONS, ids=lambda v: ".".join(map(str, v)))
def test_every_supported_python_gets_pins_that_install_on_it_and_that_the_collections_accept(python):
    pins = k8s_client.requirements_for(python)
    assert [p.split("==", maxsplit=1)[0] for p in pins] == ["kubernetes", "cryptography"]
    for pin in pins:
        assert _installs_on(pin, python), (python, pin)
        name, version = pin.split("==")
        assert tuple(int(part) for part in version.split(".")) >= NEEDED[name]


@pytest.mark.parametrize("python", PYTHONS, ids=lambda v: ".".join(map(str, v)))
def test_each_pin_is_the_newest_of_the_table_that_installs(python):
    # No newer row's pin installs on this Python: the choice is the newest possible.
    pins = k8s_client.requirements_for(python)
    for name in ("kubernetes", "cryptography"):
        chosen = next(p for p in pins if p.startswith(name + "=="))
        newer = [p for p in REQUIRES_PYTHON if p.startswith(name + "==") and _release(p) > _release(chosen)]
        assert not [p for p in newer if _installs_on(p, python)], (python, chosen, newer)


def test_the_newest_row_is_the_controllers_requirements():
    requirements = (pathlib.Path(__file__).resolve().parents[5] / "requirements.txt").read_text()
    pins = k8s_client.requirements_for((3, 12, 0))
    assert pins[0] in requirements.split()
    assert pins == ["kubernetes==37.0.2", "cryptography==50.0.2"]


@pytest.mark.parametrize("python", [(3, 7, 16), (3, 6, 8), (2, 7, 18)])
def test_a_python_older_than_3_8_is_refused_with_the_fix(python):
    with pytest.raises(ValueError, match=r"older than 3\.8"):
        k8s_client.requirements_for(python)
    choice = k8s_client_choice(_probes((python, {})))
    assert choice["found"] == "" and choice["wanted"] == []
    assert "ansible_python_interpreter" in choice["error"] and "older than 3.8" in choice["error"]


def _probe(python, packages, interpreter):
    return {
        "rc": 0,
        "stdout": json.dumps({"python": list(python), "packages": packages}),
        "ansible_loop_var": "_common_k8s_client_candidate",
        "_common_k8s_client_candidate": interpreter,
    }


def _probes(host, venv=None):
    results = [_probe(*host, "/usr/bin/python3")]
    if venv is None:
        results.append(
            {
                "rc": 2,
                "stderr": "[Errno 2] No such file or directory: b'/opt/poweraware/k8s-client/bin/python'",
                "ansible_loop_var": "_common_k8s_client_candidate",
                "_common_k8s_client_candidate": "/opt/poweraware/k8s-client/bin/python",
            }
        )
    else:
        results.append(_probe(*venv, "/opt/poweraware/k8s-client/bin/python"))
    return {"results": results, "changed": False}


def test_the_hosts_python_is_used_when_it_has_the_pins_for_it():
    choice = k8s_client_choice(_probes(((3, 8, 10), {"kubernetes": "35.0.0", "Cryptography": "47.0.0"})))
    assert choice["found"] == "/usr/bin/python3"
    assert choice["wanted"] == ["kubernetes==35.0.0", "cryptography==47.0.0"]
    assert choice["python"] == "3.8.10" and choice["error"] == ""


def test_a_virtualenv_with_the_pins_is_used_when_the_host_lacks_them():
    choice = k8s_client_choice(
        _probes(
            ((3, 11, 2), {"kubernetes": "22.6.0"}), ((3, 11, 2), {"kubernetes": "37.0.2", "cryptography": "50.0.2"})
        )
    )
    assert choice["found"] == "/opt/poweraware/k8s-client/bin/python"
    assert choice["missing"] == [
        "/usr/bin/python3 (Python 3.11.2): kubernetes==37.0.2 (found 22.6.0), cryptography==50.0.2 (found none)"
    ]


def test_nothing_found_names_what_each_interpreter_lacks_and_what_to_install():
    choice = k8s_client_choice(_probes(((3, 9, 18), {"kubernetes": "37.0.2"})))
    assert choice["found"] == ""
    assert choice["wanted"] == ["kubernetes==35.0.0", "cryptography==50.0.2"]
    assert choice["missing"][0] == (
        "/usr/bin/python3 (Python 3.9.18): kubernetes==35.0.0 (found 37.0.2), cryptography==50.0.2 (found none)"
    )
    assert choice["missing"][1].startswith("/opt/poweraware/k8s-client/bin/python: did not run (")
    assert choice["error"] == ""


def test_distribution_names_compare_as_pip_compares_them():
    choice = k8s_client_choice(
        _probes(((3, 12, 1), {"Kubernetes": "37.0.2", "cryptography": "50.0.2"})), ["python_dateutil==2.9.0"]
    )
    assert choice["found"] == ""
    found = k8s_client_choice(_probes(((3, 12, 1), {"python-dateutil": "2.9.0"})), ["python_dateutil==2.9.0"])
    assert found["found"] == "/usr/bin/python3"


def test_the_users_pins_replace_the_table_and_a_string_from_e_is_a_list():
    host = ((3, 12, 1), {"kubernetes": "33.1.0", "cryptography": "44.0.0"})
    for packages in (["kubernetes==33.1.0", "cryptography==44.0.0"], "kubernetes==33.1.0, cryptography==44.0.0"):
        choice = k8s_client_choice(_probes(host), packages)
        assert choice["found"] == "/usr/bin/python3"
        assert choice["wanted"] == ["kubernetes==33.1.0", "cryptography==44.0.0"]


def test_pins_that_are_not_name_version_are_all_named_with_the_fix():
    choice = k8s_client_choice(_probes(((3, 12, 1), {})), ["kubernetes>=30", "cryptography==50.0.2", 7])
    assert choice["found"] == "" and choice["wanted"] == []
    assert "poweraware_k8s_client_packages[0] 'kubernetes>=30' is not a name==version pin" in choice["error"]
    assert "poweraware_k8s_client_packages[2] 7 is not a name==version pin" in choice["error"]
    assert "[1]" not in choice["error"]
    mapping = k8s_client_choice(_probes(((3, 12, 1), {})), {"kubernetes": "37.0.2"})
    assert "must be a list of name==version pins, got dict" in mapping["error"]


def test_a_host_python_that_does_not_run_or_answers_nonsense_is_the_error():
    gone = {"results": [{"rc": 2, "stderr": "No such file", "ansible_loop_var": "c", "c": "/usr/bin/python3.11"}]}
    choice = k8s_client_choice(gone)
    assert choice["error"].startswith("this host's Python /usr/bin/python3.11 did not run (No such file)")
    noise = {"results": [{"rc": 0, "stdout": "hello", "ansible_loop_var": "c", "c": "/usr/bin/python3"}]}
    assert "not the probe's JSON" in k8s_client_choice(noise)["error"]


def test_the_filter_refuses_what_is_not_the_probe_loop():
    with pytest.raises(AnsibleFilterError, match="registered result of the probe loop"):
        k8s_client_choice([{"rc": 0}])
