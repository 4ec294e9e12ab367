# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.module_utils_closure filter; documentation in module_utils_closure.yml beside this file."""

from __future__ import annotations

import pathlib
from collections.abc import Callable

from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.plugin_utils.code_closure import ClosureError, shipped_files

# The collection's own module_utils, where this filter is installed (the controller's copy is what ships).
MODULE_UTILS = pathlib.Path(__file__).resolve().parent.parent / "module_utils"


def _read(relative: str) -> str | None:
    path = MODULE_UTILS / relative
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def module_utils_closure(source, where="the script", directory=""):
    """The module_utils files ``source`` imports, as ``path``/``content`` to install (``path``
    under ``directory`` when it is given)."""
    if not isinstance(source, str) or not source:
        raise AnsibleFilterError(
            f"module_utils_closure: the input must be a Python script's text (got {type(source).__name__}); "
            "pass lookup('ansible.builtin.file', <script>, rstrip=false)"
        )
    if not isinstance(directory, str) or (directory and not directory.startswith("/")):
        raise AnsibleFilterError(
            f"module_utils_closure: directory {directory!r} is not an absolute path: give the directory the "
            "script puts on sys.path, or leave it out for paths relative to it"
        )
    try:
        files = shipped_files(source, _read, str(where))
    except ClosureError as err:
        raise AnsibleFilterError(f"Nothing was changed: {err}") from None
    if directory:
        for entry in files:
            entry["path"] = directory.rstrip("/") + "/" + entry["path"]
    return files


class FilterModule:
    """The collection code a script needs off the controller."""

    def filters(self) -> dict[str, Callable]:
        return {"module_utils_closure": module_utils_closure}
