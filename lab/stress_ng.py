"""The lab's stress-ng: the power demo's load, without burning this machine's CPUs.

The power demo's container runs ``stress-ng --cpu N --timeout T``: N workers keep N CPUs busy for
T, then the process ends (and kubelet restarts the container). The lab's nodes share this
machine's two cores, so this executable does what stress-ng does to the node's *simulated* load
instead: it runs for the timeout, printing what stress-ng prints, and while it runs the lab's power
meter (lab/components/node_power.py) counts the CPUs its arguments stress, with ``parse`` and
``cpus``, the same reading of the same arguments. Arguments stress-ng would refuse are refused the
same way (exit 1, the message on stderr), so the pod shows ``CrashLoopBackOff`` as a real node
would. SIGTERM and SIGINT end it like stress-ng's own handler (exit 0).

The subset is what the demo and the role use: ``--cpu N`` (``-c``; 0 stresses every online CPU, a
negative count is refused), ``--cpu-load P`` (``-l``; 0..100 percent per worker, default 100) and
``--timeout T`` (``-t``; seconds with an optional ``s``, ``m``, ``h``, ``d`` or ``y``; 0 runs until
stopped), each as ``--opt VALUE`` or ``--opt=VALUE``, and ``--metrics-brief`` / ``-q`` (accepted).

lab/images.py writes this file into the images directory as ``stress-ng``, behind a line that
runs it with the node's Python (``#!/usr/bin/python3``): it imports nothing outside the standard
library.
"""

from __future__ import annotations

import dataclasses
import signal
import sys
import time

UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "y": 31556926}
FLAGS = {"--metrics-brief", "-q", "--quiet"}
OPTIONS = {
    "--cpu": "cpu",
    "-c": "cpu",
    "--cpu-load": "cpu_load",
    "-l": "cpu_load",
    "--timeout": "timeout",
    "-t": "timeout",
}


class UsageError(ValueError):
    """An argument stress-ng refuses; the message is stress-ng's kind of message."""


@dataclasses.dataclass(frozen=True)
class Load:
    workers: int = 0  # 0: one per online CPU
    cpu_load: float = 100.0  # percent each worker keeps its CPU busy
    timeout: float = 0.0  # seconds; 0: until stopped


def _timeout(value: str) -> float:
    number, unit = value, ""
    if value and value[-1] in UNITS and value[-1].isalpha():
        number, unit = value[:-1], value[-1]
    if not number.isdigit():
        raise UsageError(f"invalid timeout value '{value}': give seconds with an optional s, m, h, d or y")
    return float(int(number) * UNITS[unit])


def parse(argv: list[str]) -> Load:
    """stress-ng's arguments (without the program name) as the load they ask for."""
    values: dict[str, str] = {}
    items = list(argv)
    while items:
        arg = items.pop(0)
        if arg in FLAGS:
            continue
        name, equals, inline = arg.partition("=")
        if name not in OPTIONS:
            raise UsageError(f"unrecognized option '{arg}'")
        if not equals:
            if not items:
                raise UsageError(f"option '{name}' requires an argument")
            inline = items.pop(0)
        values[OPTIONS[name]] = inline
    workers = 0
    if "cpu" in values:
        if not values["cpu"].lstrip("-").isdigit():
            raise UsageError(f"invalid number of cpu stressors '{values['cpu']}'")
        workers = int(values["cpu"])
        if workers < 0:
            raise UsageError(f"invalid number of cpu stressors {workers}: must be 0 or more")
    elif not values:
        raise UsageError("no stress workers specified (give --cpu N)")
    cpu_load = 100.0
    if "cpu_load" in values:
        try:
            cpu_load = float(values["cpu_load"])
        except ValueError:
            raise UsageError(f"invalid cpu-load '{values['cpu_load']}'") from None
        if not 0.0 <= cpu_load <= 100.0:
            raise UsageError(f"cpu-load {values['cpu_load']} must be in the range 0 to 100")
    timeout = _timeout(values["timeout"]) if "timeout" in values else 0.0
    return Load(workers, cpu_load, timeout)


def cpus(argv: list[str], online: float) -> float:
    """The CPUs a running stress-ng with these arguments keeps busy on a node with ``online`` CPUs
    (0 when the arguments are refused: that process never ran)."""
    try:
        load = parse(argv)
    except UsageError:
        return 0.0
    workers = online if load.workers == 0 else min(float(load.workers), online)
    return workers * load.cpu_load / 100.0


def main(argv: list[str]) -> int:
    try:
        load = parse(argv)
    except UsageError as exc:
        print(f"stress-ng: error: [1] {exc}", file=sys.stderr, flush=True)
        return 1
    started = time.monotonic()
    # SIGTERM and SIGINT are blocked and waited for, not handled: a Python handler runs only between
    # bytecodes, so a signal that came just before time.sleep entered its system call waited out the
    # whole sleep (1 run in a few hundred: a pod that ignored its SIGTERM until the kubelet killed it).
    stops = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stops)
    workers = "every online" if load.workers == 0 else str(load.workers)
    print(f"stress-ng: info:  [1] dispatching hogs: {workers} cpu (load {load.cpu_load:g} %)", flush=True)
    received = signal.sigtimedwait(stops, load.timeout) if load.timeout else signal.sigwaitinfo(stops)
    if received is not None:
        print(f"stress-ng: info:  [1] stressors stopped by signal {received.si_signo}", flush=True)
        return 0
    print(f"stress-ng: info:  [1] successful run completed in {time.monotonic() - started:.2f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
