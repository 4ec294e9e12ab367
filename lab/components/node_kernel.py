"""A node's kernel: its sysfs served through FUSE from the kernel model (lab/fake_kernel.py).

A lab node's ``/sys/devices/system/cpu``, ``/sys/class/powercap`` ... are what the roles, the boot
re-apply script and the node's exporters read and write. Plain files would accept any write (root
ignores mode 0444), so the node's tree (lab/fake_sysfs.py, ``<node>/sys`` on the controller) is
not grafted into the node as it is: this process mounts it through FUSE at ``<node>/kernel`` and
lab/node_init.py grafts the subtrees from there. Every system call then meets the kernel's rules:

* a write is one ``store``: the model parses it (EINVAL), refuses what the kernel refuses (EBUSY
  for an EPP under the ``performance`` governor, EACCES on a BIOS-locked RAPL zone ...), clamps
  what the kernel clamps and rewrites the attributes the kernel would then report;
* opening a read-only attribute for writing is EACCES for root too, as kernfs does
  (``kernfs_fop_open``: no write permission bit, no ``store``), and nothing can be created,
  removed or renamed (no ``create`` in kernfs: EACCES);
* a read shows the attribute once per open file, as kernfs' seq_file does (a counter that moves
  between two ``read`` calls of one ``cat`` is not torn); a policy of offline CPUs reads EBUSY;
* ``O_TRUNC`` is accepted and ignored, as by sysfs (``echo x > attr`` works);
* modes and owners are the tree's, enforced by the kernel (``default_permissions``): a root-only
  ``energy_uj`` (0400) is EACCES for other users; every user may read the rest (``allow_other``).

RAPL ``energy_uj`` is computed at the instant of the read from what the node's power meter
(lab/components/node_power.py) published, the counter and the power since (lab/fake_kernel.py);
every other attribute is read from the tree as it is now (no page cache: ``direct_io``). A power cycle rebuilds the tree
(lab/nodes.py ``power_on_kernel``) while this process is stopped with the node; it starts again
with a fresh model, as a kernel boots. The model is reloaded too when the tree is rebuilt under it
(its marker file changes), so a test that rebuilds a tree in place meets the new kernel.

Command line: ``python -m lab.components.node_kernel TREE MOUNTPOINT`` (root, ``/dev/fuse``, the
Debian package ``fuse3`` for libfuse3, and ``mfusepy`` from requirements-dev.txt).
"""

from __future__ import annotations

import errno
import itertools
import os
import pathlib
import stat
import sys
import time

import mfusepy

from lab import fake_kernel, fake_sysfs

SYSFS_BLOCK = 4096  # sysfs reports every attribute as one page, whatever it holds


def log(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} node-kernel: {message}", flush=True)


class KernelFS(mfusepy.Operations):
    """Path-based FUSE operations over ``tree``; every write goes through ``fake_kernel.FakeKernel``."""

    use_ns = True  # times as nanoseconds (mfusepy warns about float seconds)

    def __init__(self, tree: pathlib.Path):
        self.tree = pathlib.Path(tree)
        self._tree_str = str(self.tree)  # a string: the marker is looked at on every read
        self._model: fake_kernel.FakeKernel | None = None
        self._built: tuple | None = None
        self._handles = itertools.count(1)
        self._shown: dict[int, bytes] = {}  # open file -> what its first read showed (seq_file)

    # --- helpers -----------------------------------------------------------------------------
    def _real(self, path: str) -> str:
        return os.path.join(self.tree, path.lstrip("/"))

    @staticmethod
    def _rel(path: str) -> str:
        return path.lstrip("/")

    def model(self) -> fake_kernel.FakeKernel:
        """The kernel model of the tree as built now (a rebuilt tree has a new marker file)."""
        built = fake_sysfs.built(self._tree_str)
        if self._model is None or built != self._built:
            self._model = fake_kernel.FakeKernel(self.tree)
            self._built = built
            log(f"kernel model loaded from {self.tree}")
        return self._model

    @staticmethod
    def _refuse(code: int) -> mfusepy.FuseOSError:
        return mfusepy.FuseOSError(code)

    # --- metadata ----------------------------------------------------------------------------
    def getattr(self, path, fh=None):
        try:
            info = os.lstat(self._real(path))
        except OSError as exc:
            raise self._refuse(exc.errno) from None
        size = SYSFS_BLOCK if stat.S_ISREG(info.st_mode) else info.st_size
        return {
            "st_mode": info.st_mode,
            "st_nlink": info.st_nlink,
            "st_uid": info.st_uid,
            "st_gid": info.st_gid,
            "st_size": size,
            "st_atime": info.st_atime,
            "st_mtime": info.st_mtime,
            "st_ctime": info.st_ctime,
        }

    def readdir(self, path, fh):
        try:
            return [".", "..", *sorted(os.listdir(self._real(path)))]
        except OSError as exc:
            raise self._refuse(exc.errno) from None

    def readlink(self, path):
        try:
            return os.readlink(self._real(path))
        except OSError as exc:
            raise self._refuse(exc.errno) from None

    def statfs(self, path):
        return {"f_bsize": SYSFS_BLOCK, "f_frsize": SYSFS_BLOCK, "f_namemax": 255}

    # --- files ------------------------------------------------------------------------------
    def open(self, path, flags):
        real = self._real(path)
        try:
            info = os.stat(real)
        except OSError as exc:
            raise self._refuse(exc.errno) from None
        if flags & os.O_ACCMODE != os.O_RDONLY and not info.st_mode & 0o222:
            raise self._refuse(errno.EACCES)  # kernfs_fop_open: an attribute without store, root too
        return next(self._handles)

    def read(self, path, size, offset, fh):
        shown = self._shown.get(fh)
        if shown is None or offset == 0:
            try:
                shown = self.model().show(self._rel(path))
            except OSError as exc:
                raise self._refuse(exc.errno or errno.EIO) from None
            self._shown[fh] = shown
        return shown[offset : offset + size]

    def write(self, path, data, offset, fh):
        text = data.decode("utf-8", "surrogateescape")
        try:
            self.model().write(self._rel(path), text)
        except OSError as exc:
            code = exc.errno or errno.EIO
            log(f"refused {text.strip()!r} -> /sys/{self._rel(path)}: {errno.errorcode.get(code, code)}")
            raise self._refuse(code) from None
        return len(data)

    def truncate(self, path, length, fh=None):
        if not os.path.isfile(self._real(path)):
            raise self._refuse(errno.EACCES)
        return 0  # sysfs ignores O_TRUNC and truncate(2) on attributes

    def release(self, path, fh):
        self._shown.pop(fh, None)
        return 0

    def flush(self, path, fh):
        return 0

    # --- what sysfs has no operation for ----------------------------------------------------
    def create(self, path, mode, fi=None):
        raise self._refuse(errno.EACCES)

    def mkdir(self, path, mode):
        raise self._refuse(errno.EACCES)

    def unlink(self, path):
        raise self._refuse(errno.EACCES)

    def rmdir(self, path):
        raise self._refuse(errno.EACCES)

    def rename(self, old, new):
        raise self._refuse(errno.EACCES)

    def symlink(self, target, source):
        raise self._refuse(errno.EACCES)


def serve(tree: pathlib.Path, mountpoint: pathlib.Path) -> None:
    mountpoint.mkdir(mode=0o755, parents=True, exist_ok=True)
    log(f"serving {tree} at {mountpoint}")
    try:
        mfusepy.FUSE(
            KernelFS(tree),
            str(mountpoint),
            foreground=True,
            nothreads=True,  # one model, one write at a time, as the kernel serialises a store per attribute
            allow_other=True,  # the node's users read sysfs as themselves
            default_permissions=True,  # the kernel enforces the tree's modes and owners
            direct_io=True,  # no page cache: counters and rewritten attributes are read as they are now
            fsname="sysfs",
        )
    except RuntimeError as exc:
        # libfuse's own SIGTERM handler ends the loop with a non-zero status after unmounting
        if os.path.ismount(mountpoint):
            raise
        log(f"stopped (libfuse status {exc})")
        return
    log("unmounted")


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m lab.components.node_kernel TREE MOUNTPOINT", file=sys.stderr)
        return 2
    serve(pathlib.Path(argv[1]), pathlib.Path(argv[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
