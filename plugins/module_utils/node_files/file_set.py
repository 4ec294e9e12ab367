# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Several directories and files on a node, and paths to remove, changed in one module run.

What ``ansible.builtin.file`` and ``ansible.builtin.copy`` do for one path each, for a set of paths:
the whole request is checked before anything is read (every problem at once), the node is compared
path by path, and the changes are made in order (directories, files, then removals), each file
replaced atomically. A step that fails puts back what the earlier steps of the run changed. One run
instead of one per path is the point: on a node every module run costs a connection, a Python start
and a sudo, which for a role's handful of files is most of its time.

Pure Python, no Ansible import; Python 3.8 compatible (runs on the managed node). The node's I/O
goes through ``Ops`` so tests can make a step fail.
"""

from __future__ import annotations

import os
import re
import shutil
import stat

from ansible_collections.poweraware.k8s.plugins.module_utils.node_files.files import atomic_write

__all__ = ["DIFF_MAX_BYTES", "Ops", "apply_file_set", "check_file_set", "parse_mode", "plan_file_set"]

# ansible.builtin.copy's limit for showing a file's content in a diff (DEFAULT_MAX_FILE_SIZE_FOR_DIFF)
DIFF_MAX_BYTES = 104448

_MODE_TEXT = re.compile(r"^(?:0o|0)?([0-7]{3,4})$")
_SLASHES = re.compile(r"/{2,}")


def parse_mode(value):
    """A numeric mode as Ansible reads it: an int as YAML gives it (``0644`` is 420), text as octal.

    ``"0644"``, ``"644"`` and ``"0o644"`` are 0o644, so a value from ``-e`` (text) and one from YAML
    mean the same. Symbolic modes (``u=rw``) are not taken: None.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value <= 0o7777 else None
    if isinstance(value, str):
        found = _MODE_TEXT.match(value.strip())
        return int(found.group(1), 8) if found else None
    return None


def _path_problem(where, path):
    if not isinstance(path, str) or not path:
        return f"{where}={path!r}: a path is required; fix: give the absolute path"
    if not path.startswith("/"):
        return f"{where}={path!r}: not an absolute path; fix: give the path from / (for example /etc/{path})"
    if os.path.normpath(path) != path:
        return (
            f"{where}={path!r}: not a normalised path ('..', '.' or a file's trailing /); fix: write it as "
            f"{os.path.normpath(path)!r}"
        )
    return None


def _ids(where, entry, user_id, group_id, problems):
    """uid and gid (None: keep / the running user's) for an entry's owner and group."""
    found = []
    for field, lookup, what in (("owner", user_id, "user"), ("group", group_id, "group")):
        value = entry.get(field)
        if value is None or value == "":
            found.append(None)
            continue
        text = str(value)
        number = lookup(text)
        if number is None:
            problems.append(
                f"{where}.{field}={text!r}: no such {what} on this host; fix: create the {what} first, or name "
                f"one that exists (getent {'passwd' if what == 'user' else 'group'} {text})"
            )
        found.append(number)
    return found


def check_file_set(directories, files, absent, user_id, group_id, absent_when_empty=None):
    """The request as entries to plan, and every problem in it.

    ``directories`` and ``files`` are lists of dicts (``path``, ``mode``, ``owner``, ``group``; files
    also ``content``, text), ``absent`` a list of paths, ``absent_when_empty`` directories removed
    only when nothing is left in them once the rest of the request is done (deepest first).
    ``user_id(name)``/``group_id(name)`` give the node's number for a name or a number as text (None
    when there is none). Returns ``(entries, problems)``; ``entries`` is only meaningful when
    ``problems`` is empty.
    """
    entries, problems, seen = [], [], {}
    kinds = {"directories": "directory", "files": "file", "absent": "absent", "absent_when_empty": "empty"}
    for field, items in (
        ("directories", directories),
        ("files", files),
        ("absent", absent),
        ("absent_when_empty", absent_when_empty),
    ):
        for index, item in enumerate(items or []):
            where = f"{field}[{index}]"
            if field in ("absent", "absent_when_empty"):
                item = {"path": item}
            elif not isinstance(item, dict):
                problems.append(
                    f"{where}={item!r}: expected a mapping with path and mode; fix: write it as "
                    "{path: ..., mode: ...}"
                )
                continue
            path = item.get("path")
            if isinstance(path, str) and path.startswith("/"):
                # Repeated slashes are one (POSIX), which is what a role variable with a trailing slash
                # joined to a file name gives; a directory written with its trailing slash is the directory.
                path = _SLASHES.sub("/", path)
                if field != "files" and len(path) > 1:
                    path = path.rstrip("/")
            problem = _path_problem(where if "absent" in field else f"{where}.path", path)
            if problem:
                problems.append(problem)
                continue
            if path in seen:
                problems.append(f"{where}: {path} is also {seen[path]}; fix: name each path once")
                continue
            seen[path] = where
            entry = {"kind": kinds[field], "path": path}
            if field in ("absent", "absent_when_empty"):
                if path.count("/") < 2:
                    problems.append(
                        f"{where}={path!r}: a top-level directory is never removed; fix: name the file or the "
                        "directory below it that should go"
                    )
                entries.append(entry)
                continue
            allowed = {"path", "mode", "owner", "group"} | ({"content"} if field == "files" else set())
            unknown = sorted(set(item) - allowed)
            if unknown:
                problems.append(
                    f"{where}: unknown key(s) {', '.join(sorted(unknown))}; fix: use path, mode, owner, group"
                    + (" and content" if field == "files" else "")
                )
            mode = parse_mode(item.get("mode"))
            if mode is None:
                problems.append(
                    f"{where}.mode={item.get('mode')!r}: not a numeric mode; fix: quote it as octal text, for example "
                    f'mode: "{"0755" if field == "directories" else "0644"}"'
                )
            entry["mode"] = mode
            entry["uid"], entry["gid"] = _ids(where, item, user_id, group_id, problems)
            if field == "files":
                content = item.get("content")
                if not isinstance(content, str):
                    problems.append(
                        f"{where}.content: text is required (got {type(content).__name__}); fix: give the file's text"
                    )
                else:
                    entry["content"] = content.encode("utf-8")
            entries.append(entry)
    removed = [e["path"] for e in entries if e["kind"] in ("absent", "empty")]
    for entry in entries:
        for gone in removed:
            if entry["kind"] in ("directory", "file") and entry["path"].startswith(gone + "/"):
                problems.append(
                    f"{entry['path']} is inside {gone}, which is to be removed; fix: keep the path or remove the "
                    "directory, not both"
                )
    return entries, problems


class Ops:
    """The node's file system as the plan and the changes see it; tests replace single methods."""

    def __init__(self, move=None):
        self.move = move

    def stat(self, path):
        """``os.stat`` (symbolic links followed) or None when nothing is there."""
        try:
            return os.stat(path)
        except FileNotFoundError:
            return None

    def lstat(self, path):
        """``os.lstat`` (a symbolic link itself) or None when nothing is there."""
        try:
            return os.lstat(path)
        except FileNotFoundError:
            return None

    def read(self, path):
        with open(path, "rb") as handle:
            return handle.read()

    def mkdir(self, path, mode):
        os.mkdir(path, mode)
        os.chmod(path, mode)  # mkdir's mode passes through the umask

    def write(self, path, data, mode):
        atomic_write(os.path.realpath(path), data, mode=mode, move=self.move)

    def chmod(self, path, mode):
        os.chmod(path, mode)

    def chown(self, path, uid, gid):
        os.chown(path, -1 if uid is None else uid, -1 if gid is None else gid)

    def unlink(self, path):
        os.unlink(path)

    def rmdir(self, path):
        os.rmdir(path)

    def rmtree(self, path):
        shutil.rmtree(path)

    def listdir(self, path):
        return os.listdir(path)


def _kind(st):
    if st is None:
        return "absent"
    if stat.S_ISDIR(st.st_mode):
        return "directory"
    if stat.S_ISREG(st.st_mode):
        return "file"
    if stat.S_ISLNK(st.st_mode):
        return "symbolic link"
    return "special file"


def _attributes(entry, st):
    """The attribute changes an existing path needs: mode, owner, group."""
    actions = []
    if entry["mode"] is not None and stat.S_IMODE(st.st_mode) != entry["mode"]:
        actions.append("mode")
    if entry["uid"] is not None and st.st_uid != entry["uid"]:
        actions.append("owner")
    if entry["gid"] is not None and st.st_gid != entry["gid"]:
        actions.append("group")
    return actions


def _describe(kind, mode=None, uid=None, gid=None):
    parts = [kind]
    if mode is not None:
        parts.append(f"mode {mode:04o}")
    if uid is not None:
        parts.append(f"uid {uid}")
    if gid is not None:
        parts.append(f"gid {gid}")
    return ", ".join(parts) + "\n"


def _shown(data):
    if len(data) > DIFF_MAX_BYTES:
        return f"({len(data)} bytes, larger than {DIFF_MAX_BYTES}: not shown)\n"
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return f"({len(data)} bytes, not UTF-8 text: not shown)\n"


_GONE_DIFF = {"before": "directory\n", "after": "absent\n"}


def plan_file_set(entries, ops):
    """What each entry needs on this node: ``(steps, problems)``.

    A step is the entry plus ``actions`` (``create``, ``content``, ``mode``, ``owner``, ``group``,
    ``remove``), ``before`` (what is there now, for the undo), ``found`` (for a removal: what the
    path is, which says how to remove it) and ``diff``. Entries that need nothing
    are left out. ``problems``: paths of the wrong kind (a file where a directory is asked for, a
    directory or a special file where a file is asked for).
    """
    steps, problems, gone = [], [], set()
    for entry in entries:
        path, kind = entry["path"], entry["kind"]
        if kind == "empty":
            # removed only when what is left in it is what this request removes (files and trees
            # listed in absent, directories listed here before it)
            if _kind(ops.lstat(path)) == "directory" and all(
                os.path.join(path, name) in gone for name in ops.listdir(path)
            ):
                steps.append(dict(entry, actions=["remove"], found="directory", diff=_GONE_DIFF))
                gone.add(path)
            continue
        if kind == "absent":
            gone.add(path)
            # the path itself: a link is removed as a link, whatever it points to
            found = _kind(ops.lstat(path))
            if found != "absent":
                diff = {"before": found + "\n", "after": "absent\n"}
                steps.append(dict(entry, actions=["remove"], found=found, diff=diff))
            continue
        st = ops.stat(path)
        found = _kind(st)
        if found not in ("absent", kind):
            problems.append(
                f"{path} is a {found}, but a {kind} is asked for there; fix: remove or move it, or choose another path"
            )
            continue
        after = _describe(kind, entry["mode"], entry["uid"], entry["gid"])
        if st is None:
            missing, parent = [], os.path.dirname(path)
            while ops.stat(parent) is None and parent != "/":
                missing.append(parent)
                parent = os.path.dirname(parent)
            step = dict(entry, actions=["create"], missing_parents=list(reversed(missing)))
            if kind == "file":
                step["diff"] = {"before": "", "after": _shown(entry["content"])}
            else:
                step["diff"] = {"before": "absent\n", "after": after}
            steps.append(step)
            continue
        actions = _attributes(entry, st)
        before = {"mode": stat.S_IMODE(st.st_mode), "uid": st.st_uid, "gid": st.st_gid}
        diff = {"before": _describe(kind, *before.values()), "after": after}
        if kind == "file":
            old = ops.read(path)
            before["content"] = old
            if old != entry["content"]:
                actions.insert(0, "content")
                diff = {"before": _shown(old), "after": _shown(entry["content"])}
        if actions:
            steps.append(dict(entry, actions=actions, before=before, diff=diff))
    return steps, problems


def apply_file_set(steps, ops):
    """Make the planned changes in order; ``None`` on success, else ``{reason, problems}``.

    Removals come last (a tree removed is not put back); when a step fails, what the run changed
    before it is put back, newest first, and ``problems`` lists what could not be.
    """
    undo = []
    ordered = (
        [s for s in steps if s["kind"] in ("directory", "file")]
        + [s for s in steps if s["kind"] == "absent"]
        + [s for s in steps if s["kind"] == "empty"]
    )
    current = None
    try:
        for step in ordered:
            current, path = step["path"], step["path"]
            if step["kind"] == "empty":
                ops.rmdir(path)  # refused by the kernel when something appeared in it since the plan
                continue
            if step["kind"] == "absent":
                if step["found"] == "directory":
                    ops.rmtree(path)
                else:
                    ops.unlink(path)
                continue
            if "create" in step["actions"]:
                for parent in step["missing_parents"]:
                    if ops.stat(parent) is not None:  # an earlier step of this run made it
                        continue
                    ops.mkdir(parent, 0o755 if step["kind"] == "file" else step["mode"])
                    undo.append(("rmdir", parent))
                    if step["kind"] == "directory":
                        ops.chown(parent, step["uid"], step["gid"])
                if step["kind"] == "directory":
                    ops.mkdir(path, step["mode"])
                    undo.append(("rmdir", path))
                else:
                    ops.write(path, step["content"], step["mode"])
                    undo.append(("unlink", path))
                if step["uid"] is not None or step["gid"] is not None:
                    ops.chown(path, step["uid"], step["gid"])
                continue
            before = step["before"]
            undo.append(("restore", path, step["kind"], before))
            if "content" in step["actions"]:
                ops.write(path, step["content"], step["mode"])
            # atomic_move keeps an existing file's mode and owner: set what is asked for after it
            if "content" in step["actions"] or "mode" in step["actions"]:
                ops.chmod(path, step["mode"])
            if "owner" in step["actions"] or "group" in step["actions"]:
                ops.chown(path, step["uid"], step["gid"])
    except OSError as exc:
        reason = f"changing {current} failed: {exc.strerror or exc}"
        return {"reason": reason, "problems": _undo(undo, ops)}
    return None


def _undo(undo, ops):
    problems = []
    for item in reversed(undo):
        try:
            if item[0] == "rmdir":
                ops.rmdir(item[1])
            elif item[0] == "unlink":
                ops.unlink(item[1])
            else:
                path, kind, before = item[1:]
                if kind == "file":
                    ops.write(path, before["content"], before["mode"])
                ops.chmod(path, before["mode"])
                ops.chown(path, before["uid"], before["gid"])
        except OSError as exc:
            problems.append(f"putting back {item[1]} failed too: {exc.strerror or exc}")
    return problems
