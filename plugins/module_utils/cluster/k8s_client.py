# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which Kubernetes client a host's Python gets, and whether an interpreter already has it.

kubernetes.core needs the ``kubernetes`` package (>= 24.2) where its tasks run, community.crypto
needs ``cryptography``. Their newest releases dropped older Pythons, and control planes run the
Python their distribution ships: 3.8 (Ubuntu 20.04, RHEL/Rocky 8's python38), 3.9 (RHEL 8/9),
3.10-3.12 (Ubuntu 22.04/24.04, Debian 12), up to 3.14. ``CLIENT_RELEASES`` is the newest release of
each package that installs on each Python, read off the wheels' ``Requires-Python`` on PyPI:

- kubernetes 36.0.0 and later: ``>=3.10``; 35.0.0 (the last before): ``>=3.6``.
- cryptography 48.0.0 and later: ``!=3.9.0,!=3.9.1,>=3.9``; 46.0.0-47.0.0: ``!=3.9.0,!=3.9.1,>=3.8``;
  43.0.3 (the last without the 3.9.0/3.9.1 exclusion): ``>=3.7``.

Hosts are read by a probe (k8s_client.yml) that prints its Python version and the distributions it
has; the decision is made here, on the controller. Pure: no I/O.
"""

from __future__ import annotations

import json
import re

# ansible-core 2.19, the oldest release the collection supports, manages targets from Python 3.8.
OLDEST_PYTHON = (3, 8, 0)

# (oldest Python of the row, kubernetes, cryptography); newest first, the first row whose Python is
# not newer than the host's applies. The kubernetes and cryptography of the first row are the
# controller's (requirements.txt).
CLIENT_RELEASES = (
    ((3, 10, 0), "37.0.2", "50.0.2"),
    ((3, 9, 2), "35.0.0", "50.0.2"),
    ((3, 9, 0), "35.0.0", "43.0.3"),
    ((3, 8, 0), "35.0.0", "47.0.0"),
)

_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([A-Za-z0-9][A-Za-z0-9.+!_-]*)\s*$")


def _version_text(version) -> str:
    return ".".join(str(part) for part in version)


def requirements_for(python) -> list[str]:
    """The pins for a Python version (a tuple of ints); ValueError for one older than 3.8."""
    python = tuple(python)
    for oldest, kubernetes, cryptography in CLIENT_RELEASES:
        if python >= oldest:
            return [f"kubernetes=={kubernetes}", f"cryptography=={cryptography}"]
    raise ValueError(
        f"Python {_version_text(python)} is older than {_version_text(OLDEST_PYTHON[:2])}, the oldest that"
        " ansible-core 2.19 manages and that the Kubernetes client installs on"
    )


def as_pins(packages):
    """poweraware_k8s_client_packages as a list: a string (``-e`` gives one) is split on commas, as
    Ansible's ``list`` type splits it."""
    if isinstance(packages, str):
        return [part.strip() for part in packages.split(",") if part.strip()]
    return packages


def override_errors(packages) -> list[str]:
    """What is wrong with poweraware_k8s_client_packages (a list of name==version pins), all at once."""
    packages = as_pins(packages)
    if not isinstance(packages, (list, tuple)):
        return [
            f"poweraware_k8s_client_packages must be a list of name==version pins, got {type(packages).__name__}"
            f" {packages!r}; fix: a YAML list such as [kubernetes==35.0.0, cryptography==47.0.0], or [] to pin"
            " by the host's Python"
        ]
    return [
        f"poweraware_k8s_client_packages[{index}] {entry!r} is not a name==version pin (the probe compares exact"
        " versions); fix: write it as, for example, kubernetes==35.0.0"
        for index, entry in enumerate(packages)
        if not isinstance(entry, str) or not _PIN.match(entry)
    ]


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _probe(result: dict) -> tuple[tuple[int, ...] | None, dict, str]:
    """(python version, {normalised name: version}, why it is unusable) from one probe result."""
    if result.get("skipped"):
        return None, {}, "not probed"
    if result.get("rc") != 0:
        why = (result.get("stderr") or result.get("msg") or "").strip().splitlines()
        return None, {}, f"did not run ({why[-1] if why else 'rc ' + str(result.get('rc'))})"
    try:
        answer = json.loads(result.get("stdout") or "")
        python = tuple(int(part) for part in answer["python"])
        packages = {_normal(name): str(version) for name, version in dict(answer.get("packages") or {}).items()}
    except (ValueError, TypeError, KeyError) as error:
        return None, {}, f"answered {str(result.get('stdout'))[:200]!r}, not the probe's JSON ({error})"
    return python, packages, ""


def client_choice(probes, packages=()) -> dict:
    """The interpreter to use, or what to install, from the probes of k8s_client.yml.

    ``probes`` is the registered loop result (its ``results``, in order: the host's interpreter first,
    then the virtualenv's); ``packages`` a user's own pins (poweraware_k8s_client_packages) or empty
    for the table. Returns ``found`` (the first interpreter that has every pin, or ""), ``python``
    (the host interpreter's version), ``wanted`` (the pins for it), ``missing`` (what each
    interpreter lacks, in words) and ``error`` (why nothing can be installed, with the fix; "" if
    it can).
    """
    results = list((probes or {}).get("results") or [])
    packages = as_pins(packages if packages is not None else [])
    problems = override_errors(packages)
    if problems:
        return {"found": "", "python": "", "wanted": [], "missing": [], "error": "; ".join(problems)}
    choice = {"found": "", "python": "", "wanted": [], "missing": [], "error": ""}
    for position, result in enumerate(results):
        interpreter = result.get(result.get("ansible_loop_var") or "item", "")
        python, have, unusable = _probe(result)
        if python is None:
            choice["missing"].append(f"{interpreter}: {unusable}")
            if position == 0:
                choice["error"] = (
                    f"this host's Python {interpreter} {unusable}; fix: point ansible_python_interpreter at"
                    f" a Python >= {_version_text(OLDEST_PYTHON[:2])} that exists on this host"
                )
            continue
        try:
            wanted = list(packages) or requirements_for(python)
        except ValueError as error:
            choice["missing"].append(f"{interpreter}: {error}")
            if position == 0:
                choice["python"] = _version_text(python)
                choice["error"] = (
                    f"this host's {error}; fix: install a newer Python on this host (RHEL/Rocky 8: dnf install"
                    f" python39) and point ansible_python_interpreter at it"
                )
            continue
        if position == 0:
            choice["python"], choice["wanted"] = _version_text(python), wanted
        lacking = []
        for pin in wanted:
            name, version = (part.strip() for part in pin.split("==", 1))
            found = have.get(_normal(name))
            if found != version:
                lacking.append(f"{name}=={version} (found {found or 'none'})")
        if not lacking and not choice["found"]:
            choice["found"] = interpreter
        elif lacking:
            choice["missing"].append(f"{interpreter} (Python {_version_text(python)}): {', '.join(lacking)}")
    if not results:
        choice["error"] = "no interpreter was probed"
    return choice
