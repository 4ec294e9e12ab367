"""The Linux calls the node's Python has no function for, through libc: unshare(2) and setns(2) with
their namespace flags, mount(2) with its flags, prctl(2).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
_PR_SET_PDEATHSIG = 1


libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p)


def own_namespace(flag: int, name: str, death_signal: int = signal.SIGTERM) -> None:
    """A preexec's first step: end with the kubelet (as a pod's processes do here), then
    unshare(2) the namespace ``flag``."""
    with contextlib.suppress(OSError, AttributeError):
        libc.prctl(_PR_SET_PDEATHSIG, death_signal, 0, 0, 0)
    if libc.unshare(flag) != 0:
        raise OSError(ctypes.get_errno(), f"unshare({name})")


def mount(source, target, fstype=None, flags=0, data=None) -> None:
    def enc(value):
        return None if value is None else str(value).encode()

    if libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {source} on {target}: {os.strerror(errno)}")
