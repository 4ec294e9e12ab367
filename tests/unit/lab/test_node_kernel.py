"""A lab node's kernel (lab/components/node_kernel.py): the FUSE operations over a fake sysfs tree
keep the kernel's rules (the model's refusals as errnos, kernfs' open and create rules, a read shown
once per open file, O_TRUNC ignored) and reload the model when the tree is rebuilt. The operations
are called as libfuse calls them; the integration tests (test_node_power.py) go through the mount."""

from __future__ import annotations

import errno
import os
import time

import pytest

from lab import fake_kernel, fake_sysfs

# mfusepy loads libfuse3 when imported: without it (the Debian package fuse3, `make system-deps`)
# these tests fail and say so, and the rest of the unit tests still run (an import error here
# would stop the whole collection).
try:
    import mfusepy

    from lab.components import node_kernel
except OSError as error:
    mfusepy = node_kernel = None
    LIBFUSE_MISSING = f"{error}: install libfuse3 (Debian package fuse3; `make system-deps` does)"
else:
    LIBFUSE_MISSING = ""


@pytest.fixture(autouse=True)
def _libfuse():
    if LIBFUSE_MISSING:
        pytest.fail(LIBFUSE_MISSING, pytrace=False)


POLICY = "/devices/system/cpu/cpufreq/policy0"


@pytest.fixture
def fs(tmp_path):
    return node_kernel.KernelFS(fake_sysfs.build_tree(tmp_path / "sys", "intel_idle_uncore", cpus=4))


def refused(call) -> int:
    with pytest.raises(mfusepy.FuseOSError) as info:
        call()
    return info.value.errno


def show(fs, path):
    fh = fs.open(path, os.O_RDONLY)
    try:
        return fs.read(path, 4096, 0, fh)
    finally:
        fs.release(path, fh)


def store(fs, path, text):
    fh = fs.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        fs.truncate(path, 0, fh)  # what `echo x > attr` sends first
        return fs.write(path, text.encode(), 0, fh)
    finally:
        fs.release(path, fh)


def test_a_write_goes_through_the_kernels_rules(fs):
    assert store(fs, f"{POLICY}/scaling_governor", "performance\n") == len("performance\n")
    assert show(fs, f"{POLICY}/energy_performance_preference") == b"performance\n"  # forced to 0
    assert refused(lambda: store(fs, f"{POLICY}/energy_performance_preference", "power\n")) == errno.EBUSY
    assert refused(lambda: store(fs, f"{POLICY}/scaling_governor", "turbo\n")) == errno.EINVAL
    store(fs, f"{POLICY}/scaling_governor", "powersave\n")
    assert show(fs, f"{POLICY}/energy_performance_preference") == b"balance_performance\n"  # restored
    # clamped into the hardware's limits, as the kernel does silently
    hi = show(fs, f"{POLICY}/cpuinfo_max_freq")
    store(fs, f"{POLICY}/scaling_max_freq", "99999999\n")
    assert show(fs, f"{POLICY}/scaling_max_freq") == hi
    # a RAPL time window reads back as the MSR encodes it
    store(fs, "/class/powercap/intel-rapl:0/constraint_0_time_window_us", "1000000\n")
    assert show(fs, "/class/powercap/intel-rapl:0/constraint_0_time_window_us") == b"999424\n"


def test_read_only_attributes_and_new_files_are_refused_for_root_too(fs):
    assert refused(lambda: fs.open(f"{POLICY}/cpuinfo_max_freq", os.O_WRONLY)) == errno.EACCES
    assert refused(lambda: fs.open(f"{POLICY}/cpuinfo_max_freq", os.O_RDWR)) == errno.EACCES
    assert fs.open(f"{POLICY}/cpuinfo_max_freq", os.O_RDONLY) > 0
    assert refused(lambda: fs.create(f"{POLICY}/new", 0o644)) == errno.EACCES
    assert refused(lambda: fs.unlink(f"{POLICY}/scaling_governor")) == errno.EACCES
    assert refused(lambda: fs.mkdir("/devices/system/cpu/cpu9", 0o755)) == errno.EACCES
    assert refused(lambda: fs.rename(f"{POLICY}/scaling_governor", f"{POLICY}/x")) == errno.EACCES
    assert refused(lambda: fs.truncate("/devices/system/cpu", 0)) == errno.EACCES
    assert refused(lambda: fs.open(f"{POLICY}/no_such_attribute", os.O_RDONLY)) == errno.ENOENT


def test_metadata_is_the_trees_with_sysfs_sizes(fs):
    energy = fs.getattr("/devices/virtual/powercap/intel-rapl/intel-rapl:0/energy_uj")
    assert energy["st_mode"] & 0o777 == 0o400 and energy["st_uid"] == os.getuid()
    assert energy["st_size"] == node_kernel.SYSFS_BLOCK
    link = fs.getattr("/class/powercap/intel-rapl:0")
    assert link["st_mode"] & 0o170000 == 0o120000
    assert fs.readlink("/class/powercap/intel-rapl:0") == "../../devices/virtual/powercap/intel-rapl/intel-rapl:0"
    assert {"cpu0", "cpufreq", "online"} <= set(fs.readdir("/devices/system/cpu", 0))
    assert refused(lambda: fs.getattr("/devices/system/cpu/cpu99")) == errno.ENOENT


def test_a_read_is_shown_once_per_open_file(fs):
    path = "/devices/virtual/powercap/intel-rapl/intel-rapl:0/energy_uj"
    real = fs.tree / path.lstrip("/")
    real.write_text("123456789\n")
    fh = fs.open(path, os.O_RDONLY)
    assert fs.read(path, 4, 0, fh) == b"1234"
    real.write_text("987654321\n")  # the meter advances the counter between two reads of one `cat`
    assert fs.read(path, 4096, 4, fh) == b"56789\n"  # the rest of what was shown, not a torn number
    fs.release(path, fh)
    assert show(fs, path) == b"987654321\n"


def test_a_metered_counter_is_computed_when_read(fs):
    """The power meter publishes a counter and a power; each read shows the energy up to its instant."""
    zone = "devices/virtual/powercap/intel-rapl/intel-rapl:0"
    path = f"/{zone}/energy_uj"
    at, uw = time.monotonic(), 2e9  # 2 kW: 2 J in a millisecond
    fake_kernel.publish_meter(fs.tree, at, {zone: {"uj": 1000, "uw": uw, "max": 10**15}})
    readings = []
    for _reading in range(2):
        before = time.monotonic()
        value = int(show(fs, path))
        readings.append(value)
        after = time.monotonic()
        assert 1000 + uw * (before - at) - 1 <= value <= 1000 + uw * (after - at) + 1
        time.sleep(0.01)
    assert readings[1] - readings[0] >= uw * 0.01 - 1  # at least the sleep's energy, nothing written
    assert (fs.tree / path.lstrip("/")).read_text() == "123456789\n"  # the file is not what is shown
    # the class link shows the same counter; a zone the meter does not publish shows its file
    assert int(show(fs, "/class/powercap/intel-rapl:0/energy_uj")) >= readings[1]
    assert (
        show(fs, "/devices/virtual/powercap/intel-rapl/intel-rapl:1/energy_uj")
        == (fs.tree / "devices/virtual/powercap/intel-rapl/intel-rapl:1/energy_uj").read_bytes()
    )


def test_offline_policies_read_busy(tmp_path):
    fs = node_kernel.KernelFS(fake_sysfs.build_tree(tmp_path / "sys", "offline_cpus"))
    fh = fs.open("/devices/system/cpu/cpufreq/policy7/scaling_governor", os.O_RDONLY)
    assert refused(lambda: fs.read("/devices/system/cpu/cpufreq/policy7/scaling_governor", 4096, 0, fh)) == errno.EBUSY


def test_a_rebuilt_tree_is_a_rebooted_kernel(tmp_path):
    tree = fake_sysfs.build_tree(tmp_path / "sys", "intel_idle_uncore", cpus=4)
    fs = node_kernel.KernelFS(tree)
    cap = "/class/powercap/intel-rapl:0/constraint_0_power_limit_uw"
    store(fs, cap, "100000000\n")
    fake_sysfs.build_tree(tree, "intel_idle_uncore", rebuild=True, cpus=4, powercap="locked")
    assert refused(lambda: store(fs, cap, "100000000\n")) == errno.EACCES  # the new kernel's lock
