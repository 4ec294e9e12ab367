"""Run ansible-playbook from integration tests and read its PLAY RECAP.

One helper for every integration test, so that "second run reports no change" and
"check mode changes nothing" are judged the same way everywhere.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re
import subprocess
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
# The scheduler_extender role's waits, shortened for the lab: its kubelet notices a manifest change
# within a second (a real one may take 20 s, which the role's defaults allow for).
FAST_SCHEDULER_EXTENDER = {
    "scheduler_extender_settle_seconds": 3,
    "scheduler_extender_stable_seconds": 3,
    "scheduler_extender_health_timeout": 45,
}
_RECAP = re.compile(
    r"^(?P<host>\S+)\s*:\s*ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)"
    r"\s+failed=(?P<failed>\d+)\s+skipped=(?P<skipped>\d+)\s+rescued=(?P<rescued>\d+)\s+ignored=(?P<ignored>\d+)",
    re.MULTILINE,
)


@dataclasses.dataclass
class PlaybookResult:
    rc: int
    stdout: str
    stderr: str
    recap: dict[str, dict[str, int]]

    @property
    def changed(self) -> int:
        return sum(h["changed"] for h in self.recap.values())

    @property
    def failed(self) -> int:
        return sum(h["failed"] + h["unreachable"] for h in self.recap.values())

    def __str__(self) -> str:  # shown by pytest when an assertion on the result fails
        failed = self.stdout[self.stdout.find("fatal:") :][:3000] if "fatal:" in self.stdout else ""
        return (
            f"rc={self.rc}\n--- first failure\n{failed}\n--- stdout (tail)\n{self.stdout[-6000:]}"
            f"\n--- stderr (tail)\n{self.stderr[-3000:]}"
        )

    # pytest shows an assertion message that is not a string with repr(): make that the readable form.
    __repr__ = __str__


def run_playbook(
    playbook: str | os.PathLike,
    inventory: str | os.PathLike | None = None,
    extra_vars: dict | None = None,
    check: bool = False,
    diff: bool = False,
    tags: list[str] | None = None,
    limit: str | None = None,
    env: dict[str, str] | None = None,
    timeout: int = 1800,
) -> PlaybookResult:
    """Run ansible-playbook from the repository's venv with the repository's ansible.cfg."""
    bin_dir = pathlib.Path(sys.executable).parent
    cmd = [str(bin_dir / "ansible-playbook"), str(playbook)]
    if inventory:
        cmd += ["-i", str(inventory)]
    if extra_vars:
        cmd += ["-e", json.dumps(extra_vars)]
    if check:
        cmd.append("--check")
    if diff:
        cmd.append("--diff")
    if tags:
        cmd += ["--tags", ",".join(tags)]
    if limit:
        cmd += ["--limit", limit]
    full_env = dict(os.environ)
    full_env.update(
        {
            "ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"),
            "ANSIBLE_FORCE_COLOR": "0",
            "ANSIBLE_NOCOLOR": "1",
            "PATH": f"{bin_dir}{os.pathsep}{full_env.get('PATH', '')}",
        }
    )
    full_env.update(env or {})
    proc = subprocess.run(
        cmd, cwd=REPO_ROOT, env=full_env, capture_output=True, text=True, timeout=timeout, check=False
    )
    recap = {
        m["host"]: {k: int(v) for k, v in m.groupdict().items() if k != "host"} for m in _RECAP.finditer(proc.stdout)
    }
    return PlaybookResult(proc.returncode, proc.stdout, proc.stderr, recap)
