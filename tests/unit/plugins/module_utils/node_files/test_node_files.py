"""poweraware.k8s.node_files: several directories and files, and paths to remove, in one module run.

The module runs in this process against a temporary directory (the paths are absolute paths inside
it); a step that fails is made to fail through the module's Ops.
"""

from __future__ import annotations

import json
import os
import pathlib
import stat

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.poweraware.k8s.plugins.module_utils.node_files import file_set as fs
from ansible_collections.poweraware.k8s.plugins.modules import node_files
from poweraware_testing import as_target_process


def run(args, capsys, check=False, diff=False):
    full = dict(args, _ansible_check_mode=check, _ansible_diff=diff)
    with as_target_process(), patch_module_args(full), pytest.raises(SystemExit) as exc:
        node_files.main()
    out = json.loads(capsys.readouterr().out)
    out["_rc"] = exc.value.code
    return out


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def snapshot(root):
    """Every path under root with its kind, mode and bytes."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            data = None if os.path.isdir(path) else pathlib.Path(path).read_bytes()
            found[os.path.relpath(path, root)] = (mode_of(path), data)
    return found


@pytest.fixture
def boot(tmp_path):
    """The cpu_power role's boot-time install, as one request."""
    root = tmp_path
    (root / "lib" / "ansible_collections" / "old").mkdir(parents=True)
    (root / "lib" / "ansible_collections" / "old" / "x.py").write_text("old\n")
    os.chmod(root / "lib", 0o755)  # noqa: S103 - the mode the request asks for
    return {
        "directories": [
            {"path": f"{root}/etc/poweraware", "mode": "0755"},
            {"path": f"{root}/lib/", "mode": "0755"},  # a directory with its trailing slash
            {"path": f"{root}/var/lib/poweraware", "mode": "0755"},
        ],
        "files": [
            {"path": f"{root}/lib/apply.py", "content": "#!/usr/bin/python3\nprint('hi')\n", "mode": "0755"},
            {"path": f"{root}/etc/poweraware/cpu_power.json", "content": '{"a": 1}\n', "mode": "0644"},
            {"path": f"{root}/etc/systemd/system/poweraware.service", "content": "[Unit]\n", "mode": "0644"},
        ],
        "absent": [f"{root}/lib/ansible_collections"],
    }


def test_converge_then_nothing_to_do(boot, tmp_path, capsys):
    first = run(boot, capsys)
    assert first["changed"] is True, first
    root = str(tmp_path)
    assert first["changed_paths"] == [
        f"{root}/etc/poweraware",
        f"{root}/var/lib/poweraware",
        f"{root}/lib/apply.py",
        f"{root}/etc/poweraware/cpu_power.json",
        f"{root}/etc/systemd/system/poweraware.service",
        f"{root}/lib/ansible_collections",
    ]
    assert first["actions"][f"{root}/lib/ansible_collections"] == ["remove"]
    assert first["actions"][f"{root}/lib/apply.py"] == ["create"]
    assert pathlib.Path(f"{root}/lib/apply.py").read_text() == "#!/usr/bin/python3\nprint('hi')\n"
    assert mode_of(f"{root}/lib/apply.py") == 0o755
    assert mode_of(f"{root}/etc/poweraware/cpu_power.json") == 0o644
    # the unit's missing parents were made, 0755 whatever the umask
    assert mode_of(f"{root}/etc/systemd") == 0o755 and mode_of(f"{root}/etc/systemd/system") == 0o755
    assert not os.path.exists(f"{root}/lib/ansible_collections")
    again = run(boot, capsys, check=True, diff=True)
    assert (again["changed"], again["changed_paths"], again["diff"]) == (False, [], []), again
    assert run(boot, capsys)["changed"] is False


def test_check_mode_changes_nothing_and_says_what_would(boot, tmp_path, capsys):
    before = snapshot(tmp_path)
    out = run(boot, capsys, check=True, diff=True)
    assert snapshot(tmp_path) == before
    assert out["changed"] is True and len(out["changed_paths"]) == 6
    by_path = {d["before_header"]: d for d in out["diff"]}
    assert by_path[f"{tmp_path}/lib/apply.py"]["after"] == "#!/usr/bin/python3\nprint('hi')\n"
    assert by_path[f"{tmp_path}/lib/apply.py"]["before"] == ""
    assert by_path[f"{tmp_path}/lib/ansible_collections"] == {
        "before_header": f"{tmp_path}/lib/ansible_collections",
        "after_header": f"{tmp_path}/lib/ansible_collections",
        "before": "directory\n",
        "after": "absent\n",
    }
    assert by_path[f"{tmp_path}/etc/poweraware"]["after"] == "directory, mode 0755\n"


def test_content_mode_and_owner_changes(tmp_path, capsys):
    path = tmp_path / "f.conf"
    path.write_text("old\n")
    os.chmod(path, 0o600)
    uid, gid = os.getuid(), os.getgid()
    args = {"files": [{"path": str(path), "content": "new\n", "mode": "0644", "owner": str(uid), "group": str(gid)}]}
    out = run(args, capsys, diff=True)
    assert out["actions"] == {str(path): ["content", "mode"]}
    assert out["diff"][0]["before"] == "old\n" and out["diff"][0]["after"] == "new\n"
    assert path.read_text() == "new\n" and mode_of(path) == 0o644
    # only the mode: the diff shows kind, mode, uid and gid
    os.chmod(path, 0o640)
    out = run(args, capsys, diff=True)
    assert out["actions"] == {str(path): ["mode"]}
    assert out["diff"][0]["before"] == f"file, mode 0640, uid {uid}, gid {gid}\n"
    assert out["diff"][0]["after"] == f"file, mode 0644, uid {uid}, gid {gid}\n"
    assert mode_of(path) == 0o644


@pytest.mark.parametrize("mode", ["0644", "644", "0o644", 0o644])
def test_modes_from_e_and_from_yaml_agree(tmp_path, capsys, mode):
    path = tmp_path / "f"
    path.write_text("x")
    os.chmod(path, 0o644)
    out = run({"files": [{"path": str(path), "content": "x", "mode": mode}]}, capsys)
    assert out["changed"] is False, out


def test_a_symbolic_link_is_written_through(tmp_path, capsys):
    (tmp_path / "real").write_text("a\n")
    os.chmod(tmp_path / "real", 0o644)
    (tmp_path / "link").symlink_to("real")
    out = run({"files": [{"path": str(tmp_path / "link"), "content": "b\n", "mode": "0644"}]}, capsys)
    assert out["changed"] is True
    assert os.path.islink(tmp_path / "link") and (tmp_path / "real").read_text() == "b\n"


def test_every_problem_at_once_and_nothing_changed(tmp_path, capsys):
    (tmp_path / "keep").mkdir()
    before = snapshot(tmp_path)
    out = run(
        {
            "directories": [
                {"path": "etc/poweraware", "mode": "0755"},
                {"path": f"{tmp_path}/a/../b", "mode": "0755"},
                {"path": f"{tmp_path}/d", "mode": "u=rwx"},
                {"path": f"{tmp_path}/e", "mode": "0755", "owner": "no-such-user-here"},
            ],
            "files": [
                {"path": f"{tmp_path}/d", "content": "x", "mode": "0644"},
                {"path": f"{tmp_path}/keep/f", "content": "x", "mode": "0644"},
            ],
            "absent": ["/etc", f"{tmp_path}/keep"],
        },
        capsys,
    )
    assert out["failed"] is True and out["msg"].startswith("Nothing was changed: ")
    problems = out["problems"]
    assert problems == [
        "directories[0].path='etc/poweraware': not an absolute path; fix: give the path from / (for example "
        "/etc/etc/poweraware)",
        f"directories[1].path='{tmp_path}/a/../b': not a normalised path ('..', '.' or a file's trailing /); fix: "
        f"write it as '{tmp_path}/b'",
        "directories[2].mode='u=rwx': not a numeric mode; fix: quote it as octal text, for example mode: \"0755\"",
        "directories[3].owner='no-such-user-here': no such user on this host; fix: create the user first, or name "
        "one that exists (getent passwd no-such-user-here)",
        f"files[0]: {tmp_path}/d is also directories[2]; fix: name each path once",
        "absent[0]='/etc': a top-level directory is never removed; fix: name the file or the directory below it "
        "that should go",
        f"{tmp_path}/keep/f is inside {tmp_path}/keep, which is to be removed; fix: keep the path or remove the "
        "directory, not both",
    ]
    assert snapshot(tmp_path) == before


def test_a_path_of_the_wrong_kind_stops_the_run_before_any_change(tmp_path, capsys):
    (tmp_path / "is-a-file").write_text("x")
    before = snapshot(tmp_path)
    out = run(
        {
            "directories": [
                {"path": f"{tmp_path}/new", "mode": "0755"},
                {"path": f"{tmp_path}/is-a-file", "mode": "0755"},
            ],
            "files": [{"path": f"{tmp_path}/new2", "content": "x", "mode": "0644"}],
        },
        capsys,
    )
    assert out["failed"] is True
    assert out["msg"] == (
        f"Nothing was changed: {tmp_path}/is-a-file is a file, but a directory is asked for there; fix: remove or "
        "move it, or choose another path"
    )
    assert snapshot(tmp_path) == before


def test_a_failed_step_puts_back_what_the_run_changed(boot, tmp_path, capsys, monkeypatch):
    root = str(tmp_path)
    os.makedirs(f"{root}/etc/poweraware")
    os.chmod(f"{root}/etc/poweraware", 0o700)
    with open(f"{root}/etc/poweraware/cpu_power.json", "w") as handle:
        handle.write("earlier\n")
    os.chmod(f"{root}/etc/poweraware/cpu_power.json", 0o600)
    before = snapshot(tmp_path)
    real_write = fs.Ops.write

    def write(self, path, data, mode):
        if path.endswith("poweraware.service"):
            raise OSError(28, "No space left on device")
        real_write(self, path, data, mode)

    monkeypatch.setattr(fs.Ops, "write", write)
    out = run(boot, capsys)
    assert out["failed"] is True
    assert out["msg"] == (
        f"changing {root}/etc/systemd/system/poweraware.service failed: No space left on device; what this run "
        "changed before it was put back; fix: the cause (a read-only or full file system, an immutable file) and "
        "run again"
    )
    # the directory's mode, the replaced file, the new file, the new directories: all as before,
    # and the tree to remove is still there (removals come last)
    assert snapshot(tmp_path) == before


def test_a_failed_put_back_is_named(tmp_path, capsys, monkeypatch):
    (tmp_path / "a").write_text("a\n")
    os.chmod(tmp_path / "a", 0o644)

    def write(self, path, data, mode):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(fs.Ops, "write", write)
    out = run({"files": [{"path": str(tmp_path / "a"), "content": "b\n", "mode": "0644"}]}, capsys)
    assert out["failed"] is True
    assert (
        f"putting back what this run changed before it failed too: putting back {tmp_path}/a failed too: "
        "Read-only file system" in out["msg"]
    )


def test_large_or_binary_text_is_not_shown_in_the_diff(tmp_path, capsys):
    big = "x" * (fs.DIFF_MAX_BYTES + 1)
    (tmp_path / "bin").write_bytes(b"\xff\xfe")
    out = run(
        {
            "files": [
                {"path": str(tmp_path / "big"), "content": big, "mode": "0644"},
                {"path": str(tmp_path / "bin"), "content": "text\n", "mode": "0644"},
            ]
        },
        capsys,
        check=True,
        diff=True,
    )
    assert out["diff"][0]["after"] == f"({fs.DIFF_MAX_BYTES + 1} bytes, larger than {fs.DIFF_MAX_BYTES}: not shown)\n"
    assert out["diff"][1]["before"] == "(2 bytes, not UTF-8 text: not shown)\n"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0755", 0o755),
        ("755", 0o755),
        ("0o755", 0o755),
        ("04755", 0o4755),
        (493, 0o755),
        (" 0644 ", 0o644),
        ("0855", None),
        ("u=rw", None),
        (True, None),
        (-1, None),
        (0o10000, None),
        ("", None),
        (None, None),
        (1.5, None),
    ],
)
def test_parse_mode(value, expected):
    assert fs.parse_mode(value) == expected


def test_repeated_slashes_are_one_slash(tmp_path, capsys):
    """A role's directory variable with a trailing slash, joined to a file name, names the same file."""
    (tmp_path / "d").mkdir()
    os.chmod(tmp_path / "d", 0o755)  # noqa: S103 - the mode the request asks for
    (tmp_path / "d" / "f").write_text("x")
    os.chmod(tmp_path / "d" / "f", 0o644)
    out = run(
        {
            "directories": [{"path": f"{tmp_path}//d/", "mode": "0755"}],
            "files": [{"path": f"{tmp_path}/d//f", "content": "x", "mode": "0644"}],
            "absent": [f"{tmp_path}/d//gone/"],
        },
        capsys,
    )
    assert (out["changed"], out.get("failed")) == (False, None), out
    trailing = run({"files": [{"path": f"{tmp_path}/d/f/", "content": "x", "mode": "0644"}]}, capsys)
    assert trailing["problems"] == [
        f"files[0].path='{tmp_path}/d/f/': not a normalised path ('..', '.' or a file's trailing /); fix: write it "
        f"as '{tmp_path}/d/f'"
    ]


def test_a_link_to_remove_goes_as_a_link(tmp_path, capsys):
    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "kept").write_text("x")
    (tmp_path / "link").symlink_to("target")
    (tmp_path / "dangling").symlink_to("nowhere")
    out = run({"absent": [str(tmp_path / "link"), str(tmp_path / "dangling")]}, capsys, diff=True)
    assert out["actions"] == {str(tmp_path / "link"): ["remove"], str(tmp_path / "dangling"): ["remove"]}
    assert [d["before"] for d in out["diff"]] == ["symbolic link\n", "symbolic link\n"]
    assert not os.path.lexists(tmp_path / "link") and not os.path.lexists(tmp_path / "dangling")
    assert (tmp_path / "target" / "kept").read_text() == "x"


def test_directories_go_when_nothing_but_what_the_request_removes_is_left(tmp_path, capsys):
    """An uninstall's files and the directories made for them: a directory goes when what is left in
    it is what this request removes (files of absent, directories named before it), deepest first;
    one that holds anything else stays, and a second run has nothing to do."""
    (tmp_path / "etc/certs/public").mkdir(parents=True)
    (tmp_path / "etc/certs/public/ca.crt").write_text("ca\n")
    (tmp_path / "etc/poweraware/pki/appqos").mkdir(parents=True)
    (tmp_path / "etc/poweraware/pki/appqos/ca.key").write_text("key\n")
    (tmp_path / "etc/poweraware/users.conf").write_text("not ours\n")  # keeps /etc/poweraware
    args = {
        "absent": [f"{tmp_path}/etc/certs/public/ca.crt", f"{tmp_path}/etc/poweraware/pki/appqos"],
        "absent_when_empty": [
            f"{tmp_path}/etc/certs/public",
            f"{tmp_path}/etc/certs",
            f"{tmp_path}/etc/poweraware/pki",
            f"{tmp_path}/etc/poweraware",
            f"{tmp_path}/var/lib/never-made",
        ],
    }
    dry = run(args, capsys, check=True, diff=True)
    assert dry["changed"] and (tmp_path / "etc/certs/public/ca.crt").exists()
    assert dry["changed_paths"] == [
        f"{tmp_path}/etc/certs/public/ca.crt",
        f"{tmp_path}/etc/poweraware/pki/appqos",
        f"{tmp_path}/etc/certs/public",
        f"{tmp_path}/etc/certs",
        f"{tmp_path}/etc/poweraware/pki",
    ]
    assert dry["diff"][2] == {
        "before": "directory\n",
        "after": "absent\n",
        "before_header": f"{tmp_path}/etc/certs/public",
        "after_header": f"{tmp_path}/etc/certs/public",
    }
    done = run(args, capsys)
    assert done["changed_paths"] == dry["changed_paths"]
    assert sorted(os.listdir(tmp_path / "etc")) == ["poweraware"]
    assert os.listdir(tmp_path / "etc/poweraware") == ["users.conf"]
    assert run(args, capsys)["changed"] is False


def test_a_directory_that_gained_a_file_since_the_plan_is_refused_by_the_kernel(tmp_path, capsys, monkeypatch):
    (tmp_path / "etc/certs").mkdir(parents=True)
    real_rmdir = fs.Ops.rmdir

    def someone_writes_first(self, path):
        pathlib.Path(path, "new.crt").write_text("x\n")
        real_rmdir(self, path)

    monkeypatch.setattr(fs.Ops, "rmdir", someone_writes_first)
    failed = run({"absent_when_empty": [f"{tmp_path}/etc/certs"]}, capsys)
    assert failed["failed"] and f"changing {tmp_path}/etc/certs failed" in failed["msg"]
    assert (tmp_path / "etc/certs/new.crt").exists()


def test_a_top_level_directory_is_never_removed_even_when_empty(capsys):
    out = run({"absent_when_empty": ["/srv"]}, capsys)
    assert out["failed"] and "absent_when_empty[0]='/srv': a top-level directory is never removed" in out["msg"]
