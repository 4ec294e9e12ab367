"""The collectd pod's energy reader (roles/collectd/files/energy_reader.py): what it serves, what it
refuses, and the plugin reading energy_uj through it over a real Unix socket."""

from __future__ import annotations

import errno
import os
import pathlib
import socket
import stat
import threading

import pytest
from poweraware_testing import load_module

REPO = pathlib.Path(__file__).resolve().parents[3]
FILES = REPO / "roles" / "collectd" / "files"

zones = load_module("poweraware_power_zones", REPO / "plugins" / "module_utils" / "node_power" / "power_zones.py")
reader = load_module("energy_reader", FILES / "energy_reader.py")
rapl = load_module("rapl_power", FILES / "rapl_power.py")


def _tree(tmp_path: pathlib.Path) -> pathlib.Path:
    root = tmp_path / "powercap"
    zone = root / "intel-rapl" / "intel-rapl:0"
    (zone / "intel-rapl:0:0").mkdir(parents=True)
    (zone / "name").write_text("package-0\n")
    (zone / "energy_uj").write_text("1000000\n")
    (zone / "max_energy_range_uj").write_text("262143328850\n")
    (zone / "constraint_0_max_power_uw").write_text("150000000\n")
    (zone / "intel-rapl:0:0" / "energy_uj").write_text("42\n")
    (root / "secret").write_text("not a counter\n")
    return root


@pytest.fixture
def served(tmp_path):
    """A reader serving a fake powercap tree on a socket of tmp_path, stopped afterwards."""
    root = _tree(tmp_path)
    path = str(tmp_path / "energy.sock")
    ready, stop = threading.Event(), threading.Event()
    thread = threading.Thread(
        target=reader.serve,
        args=(str(root), path),
        kwargs={"log": lambda _m: None, "ready": ready.set, "stop": stop.is_set},
    )
    thread.start()
    assert ready.wait(5)
    yield root, path
    stop.set()
    thread.join(5)
    assert not thread.is_alive()


def test_answers_energy_counters_under_its_root(tmp_path):
    root = _tree(tmp_path)
    zone = root / "intel-rapl" / "intel-rapl:0"
    assert reader.answer(str(root), f"{zone}/energy_uj\n".encode()) == b"OK 1000000\n"
    assert reader.answer(str(root), f"{zone}/intel-rapl:0:0/energy_uj\n".encode()) == b"OK 42\n"


@pytest.mark.parametrize(
    ("request_path", "why"),
    [
        ("{root}/secret", "serves energy_uj files only"),
        ("{root}/intel-rapl/intel-rapl:0/name", "serves energy_uj files only"),
        ("{root}/../escape/energy_uj", "a path with '..' is not served"),  # no .. at all
        ("/etc/energy_uj", "is not under the energy reader's root"),
        ("relative/energy_uj", "not an absolute path"),
        ("{root}/link/energy_uj", "is not under the energy reader's root"),  # a symlink out of the root
    ],
)
def test_refuses_everything_else(tmp_path, request_path, why):
    root = _tree(tmp_path)
    outside = tmp_path / "escape"
    outside.mkdir()
    (outside / "energy_uj").write_text("7\n")
    (root / "link").symlink_to(outside)
    reply = reader.answer(str(root), (request_path.format(root=root) + "\n").encode()).decode()
    assert reply.startswith(f"ERR {errno.EACCES} ") and why in reply, reply
    assert reply.endswith("\n") and reply.count("\n") == 1


def _hwmon_tree(tmp_path: pathlib.Path) -> pathlib.Path:
    """A sysfs with amd_energy's chip as Linux 5.10-5.12 lays it out: the counters in the chip's
    hwmonN directory under its platform device, class/hwmon/hwmonN a relative link to it."""
    sys_root = tmp_path / "sys"
    chip = sys_root / "devices" / "platform" / "amd_energy.0" / "hwmon" / "hwmon0"
    chip.mkdir(parents=True)
    (chip / "name").write_text("amd_energy\n")
    (chip / "energy17_input").write_text("123456789\n")
    (chip / "energy17_label").write_text("Esocket0\n")
    (chip / "power1_input").write_text("5000000\n")
    hwmon = sys_root / "class" / "hwmon"
    hwmon.mkdir(parents=True)
    (hwmon / "hwmon0").symlink_to("../../devices/platform/amd_energy.0/hwmon/hwmon0")
    (sys_root / "devices" / "virtual" / "powercap").mkdir(parents=True)
    return sys_root


def test_answers_hwmon_energy_counters_under_its_hwmon_root(tmp_path):
    """amd_energy's counters are root-only on Linux 5.10-5.12, like energy_uj: the reader serves
    them as collectd sees them (class/hwmon/hwmonN/energyN_input); without --hwmon-root it does not."""
    sys_root = _hwmon_tree(tmp_path)
    powercap, hwmon = str(sys_root / "devices/virtual/powercap"), str(sys_root / "class/hwmon")
    request = f"{hwmon}/hwmon0/energy17_input\n".encode()
    assert reader.answer(powercap, request, hwmon_root=hwmon) == b"OK 123456789\n"
    refused = reader.answer(powercap, request).decode()
    assert refused == (
        f"ERR {errno.EACCES} the energy reader serves energy_uj files only, not '{hwmon}/hwmon0/energy17_input'\n"
    )


@pytest.mark.parametrize(
    ("request_path", "why"),
    [
        ("{hwmon}/hwmon0/power1_input", "serves energy_uj and hwmon energyN_input files only"),
        ("{hwmon}/hwmon0/energy17_label", "serves energy_uj and hwmon energyN_input files only"),
        ("{sys}/devices/platform/amd_energy.0/hwmon/hwmon0/energy17_input", "is not an hwmon chip's counter under"),
        ("{hwmon}/stray/energy1_input", "is not an hwmon chip's counter under"),  # a link to a non-chip directory
        ("{hwmon}/out/energy1_input", "is not an hwmon chip's counter under"),  # a chip outside devices/
        ("{hwmon}/hwmon0/../hwmon0/energy17_input", "a path with '..' is not served"),
    ],
)
def test_refuses_other_hwmon_files(tmp_path, request_path, why):
    sys_root = _hwmon_tree(tmp_path)
    hwmon = sys_root / "class" / "hwmon"
    stray = sys_root / "devices" / "platform" / "stray"
    stray.mkdir()
    (stray / "energy1_input").write_text("7\n")
    (hwmon / "stray").symlink_to("../../devices/platform/stray")
    outside = tmp_path / "elsewhere" / "hwmon" / "hwmon9"
    outside.mkdir(parents=True)
    (outside / "energy1_input").write_text("7\n")
    (hwmon / "out").symlink_to(outside)
    path = request_path.format(hwmon=hwmon, sys=sys_root)
    reply = reader.answer(str(sys_root / "devices/virtual/powercap"), (path + "\n").encode(), hwmon_root=str(hwmon))
    assert reply.decode().startswith(f"ERR {errno.EACCES} ") and why in reply.decode(), reply


def test_read_errors_travel_with_their_errno(tmp_path):
    root = _tree(tmp_path)
    missing = root / "intel-rapl" / "intel-rapl:9" / "energy_uj"
    (root / "intel-rapl" / "intel-rapl:9").mkdir()
    assert reader.answer(str(root), f"{missing}\n".encode()).startswith(f"ERR {errno.ENOENT} ".encode())

    def denied(_path):
        raise PermissionError(errno.EACCES, "Permission denied")

    zone = root / "intel-rapl" / "intel-rapl:0" / "energy_uj"
    assert (
        reader.answer(str(root), f"{zone}\n".encode(), read=denied)
        == f"ERR {errno.EACCES} Permission denied\n".encode()
    )
    (root / "intel-rapl" / "intel-rapl:0" / "energy_uj").write_text("garbage\n")
    assert reader.answer(str(root), f"{zone}\n".encode()).startswith(f"ERR {errno.EIO} unexpected content".encode())


def test_socket_is_group_only_and_replaced_when_stale(tmp_path):
    root = _tree(tmp_path)
    path = tmp_path / "energy.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))  # an earlier run's socket file: the volume outlives the container
    stale.close()
    ready, stop, modes = threading.Event(), threading.Event(), []

    def on_ready():
        modes.append(stat.S_IMODE(os.stat(path).st_mode))
        ready.set()

    thread = threading.Thread(
        target=reader.serve,
        args=(str(root), str(path)),
        kwargs={"log": lambda _m: None, "ready": on_ready, "stop": stop.is_set},
    )
    thread.start()
    assert ready.wait(5)
    stop.set()
    thread.join(5)
    assert modes == [0o660]
    assert not path.exists()  # removed on the way out


def test_no_powercap_tree_serves_refusals_and_a_file_is_a_clear_error(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(SystemExit, match="is not a directory .is the host's sysfs mounted"):
        reader.serve(str(tmp_path / "file"), str(tmp_path / "s"), log=lambda _m: None)
    # a node without RAPL (ARM: collectd reads hwmon): the reader runs, so the pod is Ready, and
    # every counter request is refused with ENOENT
    logged = []
    absent = str(tmp_path / "absent")
    assert reader.answer(absent, (absent + "/intel-rapl/intel-rapl:0/energy_uj\n").encode()).startswith(b"ERR 2 ")
    ready, stop = threading.Event(), threading.Event()
    thread = threading.Thread(
        target=reader.serve,
        args=(absent, str(tmp_path / "s")),
        kwargs={"log": logged.append, "ready": ready.set, "stop": stop.is_set},  # fmt: skip
    )
    thread.start()
    try:
        assert ready.wait(5)
        assert reader.check(str(tmp_path / "s"))[0] is True
    finally:
        stop.set()
        thread.join(5)
    assert logged[0] == (
        f"energy reader: no powercap tree at {absent} (a node without RAPL): every energy_uj request is refused"
    )


def test_the_plugin_reads_energy_through_the_reader(served):
    root, path = served
    zone = root / "intel-rapl" / "intel-rapl:0"
    reads = []

    def direct(p):
        reads.append(os.path.basename(p))
        if os.path.basename(p) == "energy_uj":
            raise PermissionError(errno.EACCES, "Permission denied")  # as for collectd: root-only
        return zones.read_text(p)

    client = reader.EnergyClient(path, direct)
    now = [100.0]
    plugin = rapl.RaplReader(str(root / "intel-rapl"), clock=lambda: now[0], read_text=client, hwmon_root=None)
    assert [s.power_w for s in plugin.read()] == [None]  # baseline
    (zone / "energy_uj").write_text("51000000\n")  # 50 J later
    now[0] += 10
    (sample,) = plugin.read()
    assert sample.power_w == pytest.approx(5.0) and sample.tdp_w == 150.0
    assert "energy_uj" not in reads and "name" in reads  # the counter never read directly


def test_client_errors_name_the_reader(served, tmp_path):
    root, path = served
    client = reader.EnergyClient(path, zones.read_text)
    with pytest.raises(OSError, match="energy reader: .* is not under the energy reader.s root") as refused:
        client(str(tmp_path / "elsewhere" / "energy_uj"))
    assert refused.value.errno == errno.EACCES
    gone = reader.EnergyClient(str(tmp_path / "no.sock"), zones.read_text)
    with pytest.raises(OSError, match="energy reader at .*no.sock") as down:
        gone(str(root / "intel-rapl" / "intel-rapl:0" / "energy_uj"))
    assert down.value.errno in (errno.ENOENT, errno.ECONNREFUSED)
    # a reader that is down is logged once by the plugin with the file and the hint, as a denied read
    log = []
    plugin = rapl.RaplReader(
        str(root / "intel-rapl"), log=lambda lvl, m: log.append((lvl, m)), read_text=gone, hwmon_root=None
    )
    plugin.read()
    plugin.read()
    errors = [m for lvl, m in log if lvl == "error"]
    assert len(errors) == 1 and "energy reader at" in errors[0], errors


def test_a_counter_the_reader_refuses_is_logged_with_the_readers_hint(served, tmp_path):
    root, path = served
    counter = root / "intel-rapl" / "intel-rapl:0" / "energy_uj"
    outside = tmp_path / "outside_energy_uj"
    outside.write_text("5\n")
    counter.unlink()
    counter.symlink_to(outside)  # not a counter the reader may read
    log = []
    plugin = rapl.RaplReader(
        str(root / "intel-rapl"),
        log=lambda lvl, m: log.append((lvl, m)),
        read_text=reader.EnergyClient(path, zones.read_text),
        hwmon_root=None,
    )
    assert [s.power_w for s in plugin.read()] == [None]
    (error,) = [m for lvl, m in log if lvl == "error"]
    assert f"cannot read {counter} (Permission denied): {rapl.READER_HINT}" == error


@pytest.mark.parametrize(
    "path",
    [FILES / "rapl_power.py", FILES / "energy_reader.py", REPO / "plugins/module_utils/node_power/power_zones.py"],
)
def test_files_the_image_runs_stay_valid_for_python_3_6(path):
    """collectd's embedded Python and the reader's python3 are the image's, which may be as old as
    3.6: the 3.6 grammar parses them, and no ``from __future__ import annotations`` (a SyntaxError
    before 3.7), which the grammar check alone does not catch."""
    import ast

    source = path.read_text()
    tree = ast.parse(source, feature_version=(3, 6))
    futures = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "__future__"
        for alias in node.names
    }
    assert not futures - {"absolute_import", "division", "print_function"}, futures


def test_check_passes_only_while_a_reader_answers(served, tmp_path, capsys):
    """--check, the container's readiness probe: 0 with a reader serving (its refusal of '/' is an
    answer), 1 with nothing on the socket path, and 1 for a listener that answers garbage."""
    _root, path = served
    assert reader.main(["--check", "--socket", path]) == 0
    assert capsys.readouterr().out.startswith(f"ERR {errno.EACCES} ")
    missing = str(tmp_path / "none.sock")
    assert reader.main(["--check", "--socket", missing]) == 1
    assert f"no energy reader answers on {missing}" in capsys.readouterr().err

    other = str(tmp_path / "other.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(other)
    listener.listen(1)

    def garbage():
        conn, _peer = listener.accept()
        with conn:
            conn.recv(100)
            conn.sendall(b"HELLO\n")

    thread = threading.Thread(target=garbage)
    thread.start()
    try:
        ok, message = reader.check(other)
    finally:
        thread.join(5)
        listener.close()
    assert (ok, message) == (False, f"unexpected reply on {other}: 'HELLO\\n'")


def test_serving_without_a_root_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        reader.main(["--socket", str(tmp_path / "s.sock")])
    assert exc.value.code == 2
    assert "--root is required to serve" in capsys.readouterr().err
