# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Files on a node, changed safely: atomic replace, backups outside the live directory, pruning,
the original bytes of a file, and a write sequence that is put back when a step fails.

Pure Python, no Ansible import; Python 3.9 compatible (runs on the managed node). Used by the
kube_scheduler_extender module (manifest and configuration) and by the node power state journal.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import os
import tempfile
import time

__all__ = ["LOCK_WAIT_S", "NodeFileError", "NodeFiles", "atomic_write", "inside", "lock_directory"]

# How long a run waits for another run's lock (a run holds it for a second or two; a boot unit on a
# slow node for a few): longer means something hangs, and a play must not hang with it.
LOCK_WAIT_S = 120.0
LOCK_POLL_S = 0.01


class NodeFileError(ValueError):
    """A node file that cannot be read or written as asked; the message says how to fix it."""


def inside(path, directory):
    """``path`` is ``directory`` or below it (lexically)."""
    path, directory = os.path.normpath(path), os.path.normpath(directory)
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def atomic_write(path, data, mode=0o600, prefix=None, move=None, fsync=False):
    """Replace ``path`` by ``data`` (bytes or text) through a temporary file in the same directory.

    The temporary file is a dot file (kubelet ignores hidden files in the static pod directory).
    ``move(tmp, path)`` replaces the target (default ``os.replace``; Ansible's ``atomic_move``
    keeps an existing file's mode, owner and SELinux context); a new file gets ``mode``.
    The directory is created (0755) when missing.
    """
    directory = os.path.dirname(path) or "."
    # exist_ok: two first runs at once both find it missing
    os.makedirs(directory, mode=0o755, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=prefix or ("." + os.path.basename(path) + "."), suffix=".tmp", dir=directory)
    existed = os.path.exists(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
            if fsync:
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        try:
            (move or os.replace)(tmp, path)
        except OSError:
            raise
        except Exception as exc:
            # ansible-core's atomic_move raises a bare Exception (the OSError as its cause) when the
            # rename and its copy fallback fail (an immutable file, a read-only bind mount): the
            # callers' rollback handles OSError, so it must not slip past them as something else
            cause = exc.__cause__
            raise OSError(getattr(cause, "errno", None) or errno.EIO, f"{exc} ({cause or 'no cause given'})") from exc
        if not existed:
            os.chmod(path, mode)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def lock_directory(directory, exclusive=True, deadline=None, clock=time.monotonic, sleep=time.sleep):
    """Take flock(2) on ``directory`` (exclusive, or shared for a run that only reads).

    A directory, not a lock file: nothing to create or clean up, and the files in it are replaced by
    rename, which a lock on a file would not survive. Returns the open descriptor that holds the lock
    (closing it releases it); None when the directory does not exist, or was replaced while this run
    waited (its creator removed it): the caller then looks again. Raises TimeoutError when another
    run still holds it at ``deadline`` (a ``clock()`` value); OSError when it cannot be opened.
    """
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        return None
    try:
        while True:
            try:
                fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if deadline is not None and clock() >= deadline:
                    raise TimeoutError(f"another run holds the lock on {directory}") from None
                sleep(LOCK_POLL_S)
        try:
            now = os.stat(directory)
        except FileNotFoundError:
            now = None
        held = os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise
    if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
        return fd
    os.close(fd)
    return None


def _now_stamp():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")


class NodeFiles:
    """Node paths under ``root`` (``/`` on a real node), with backups in ``backup_dir`` (a node path)."""

    def __init__(self, root, backup_dir, backup_keep=5, move=None):
        self.root = root
        self.backup_dir = backup_dir
        self.backup_keep = backup_keep
        self.move = move
        self.stamp = _now_stamp()

    def host(self, path):
        """The file system path of node path ``path``."""
        if self.root in ("", "/"):
            return path
        return os.path.join(self.root, path.lstrip("/"))

    def resolve(self, path):
        """The real file behind node ``path``: symbolic links followed, refused when they leave ``root``.

        Writing to the resolved path keeps a symlinked file a symlink (the file it points to is
        replaced atomically instead of the link being replaced by a regular file).
        """
        host = self.host(path)
        real = os.path.realpath(host)
        if self.root not in ("", "/") and not inside(real, os.path.realpath(self.root)):
            link = os.readlink(host) if os.path.islink(host) else real
            raise NodeFileError(
                f"{path} is a symbolic link to {link}, which is outside the node root {self.root}; the module reads "
                "and writes only inside root; fix: point the link at a file inside the node's file system (a "
                f"relative link, or an absolute one under {self.root})"
            )
        return real

    def read(self, path):
        """Text of node file ``path`` (None when missing); a clear NodeFileError when it cannot be text."""
        target = self.resolve(path)
        try:
            with open(target, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            return None
        except IsADirectoryError:
            raise NodeFileError(
                f"{path} is a directory, but a file is expected there; fix: point the path at the file, or remove "
                "the directory"
            ) from None
        except OSError as exc:
            raise NodeFileError(
                f"cannot read {path}: {exc.strerror}; fix: run the module as root (become: true)"
            ) from None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NodeFileError(
                f"{path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); Kubernetes manifests "
                "and scheduler configurations are UTF-8 YAML; fix: convert the file to UTF-8 (for example with "
                "iconv -t utf-8) or point the path at the right file"
            ) from None

    def write(self, path, text, mode=0o600):
        atomic_write(self.resolve(path), text, mode=mode, move=self.move)

    def remove(self, path):
        os.unlink(self.resolve(path))

    def _backups(self, path):
        directory = self.host(self.backup_dir)
        if not os.path.isdir(directory):
            return directory, []
        prefix = os.path.basename(path) + "."
        return directory, sorted(n for n in os.listdir(directory) if n.startswith(prefix) and n.endswith(".bak"))

    def backup(self, path, text):
        """Keep ``text`` (the file before the change) as ``<name>.<stamp>.bak``; return its node path."""
        directory = self.host(self.backup_dir)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        while True:
            name = f"{os.path.basename(path)}.{self.stamp}.bak"
            try:
                fd = os.open(os.path.join(directory, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                break
            except FileExistsError:
                # a run that started in the same microsecond (and waited for this one's lock) made it:
                # never overwrite a backup, take the time now instead (later, and still sorted by age)
                stamp = _now_stamp()
                self.stamp = stamp if stamp > self.stamp else self.stamp + "1"
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
        _directory, found = self._backups(path)
        for old in found[: -self.backup_keep]:
            os.unlink(os.path.join(directory, old))
        return os.path.join(self.backup_dir, name)

    def original_text(self, path, matches):
        """Text of the newest backup of ``path`` for which ``matches(text)`` is true (None without one)."""
        directory, found = self._backups(path)
        for name in reversed(found):
            try:
                with open(os.path.join(directory, name), "rb") as handle:
                    text = handle.read().decode("utf-8")
                if matches(text):
                    return text
            except (OSError, ValueError):
                continue
        return None

    def apply(self, steps):
        """Run ``steps`` in order, each ``(path, before, after)`` (``after`` None deletes the file).

        Every file whose ``before`` is not None is backed up first. Returns ``(backups by path, None)``
        on success; on a failure puts back what was written (newest first) and returns
        ``(backups, failure)`` with ``failure = {reason, problems}``: ``problems`` empty means the
        node is as before (the backups of this run are then removed again).
        """
        backups, done = {}, []
        step = "the backups"
        try:
            for path, before, _after in steps:
                if before is not None:
                    backups[path] = self.backup(path, before)
            for path, before, after in steps:
                step = path
                if after is None:
                    self.remove(path)
                else:
                    self.write(path, after)
                done.append((path, before))
        except (OSError, NodeFileError) as exc:
            reason = f"writing {step} failed: {getattr(exc, 'strerror', None) or exc}"
            problems = []
            for path, before in reversed(done):
                try:
                    if before is None:
                        self.remove(path)
                    else:
                        self.write(path, before)
                except (OSError, NodeFileError) as undo_exc:
                    problems.append(f"putting back {path} failed too: {undo_exc}")
            if not problems:
                for backup in backups.values():  # nothing changed, so nothing to restore from
                    with contextlib.suppress(OSError):
                        os.unlink(self.host(backup))
            return backups, {"reason": reason, "problems": problems, "undone": bool(done)}
        return backups, None
