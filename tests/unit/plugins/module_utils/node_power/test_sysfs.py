"""The sysfs accessor and small helpers (plugins/module_utils/node_power/sysfs.py) on a plain directory tree."""

from __future__ import annotations

import errno
import os

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power import sysfs


@pytest.fixture
def tree(tmp_path):
    policy = tmp_path / "devices/system/cpu/cpufreq/policy0"
    policy.mkdir(parents=True)
    (policy / "scaling_max_freq").write_text("3900000\n")
    (policy / "b_attr").write_text("  padded  \n")
    (policy / "a_attr").write_text("x")
    cpu0 = tmp_path / "devices/system/cpu/cpu0"
    cpu0.mkdir()
    (cpu0 / "cpufreq").symlink_to("../cpufreq/policy0")
    return tmp_path


def test_constants_are_the_kernel_paths():
    assert (sysfs.CPU_DIR, sysfs.POWERCAP_DIR, sysfs.HWMON_DIR) == (
        "devices/system/cpu",
        "class/powercap",
        "class/hwmon",
    )


def test_error_hierarchy():
    assert issubclass(sysfs.ValidationError, sysfs.PowerError)
    assert issubclass(sysfs.ApplyError, sysfs.PowerError)
    assert not issubclass(sysfs.ValidationError, sysfs.ApplyError)


def test_default_root_is_sys():
    assert sysfs.SysfsAccessor().root == "/sys"
    assert sysfs.SysfsAccessor().path("class/powercap") == "/sys/class/powercap"


def test_reads_lists_and_resolves(tree):
    acc = sysfs.SysfsAccessor(str(tree))
    p0 = "devices/system/cpu/cpufreq/policy0"
    assert acc.path(f"{p0}/scaling_max_freq") == os.path.join(str(tree), f"{p0}/scaling_max_freq")
    assert acc.exists(f"{p0}/scaling_max_freq") and not acc.exists(f"{p0}/scaling_min_freq")
    assert acc.isdir(p0) and not acc.isdir(f"{p0}/scaling_max_freq") and not acc.isdir("nowhere")
    assert acc.listdir(p0) == ["a_attr", "b_attr", "scaling_max_freq"]
    assert acc.read(f"{p0}/scaling_max_freq") == "3900000"
    assert acc.read(f"{p0}/b_attr") == "padded"
    assert acc.resolve("devices/system/cpu/cpu0/cpufreq") == p0
    assert acc.resolve("devices/system/cpu/cpu0/cpufreq/scaling_max_freq") == f"{p0}/scaling_max_freq"


def test_write_replaces_the_value_with_a_trailing_newline(tree):
    acc = sysfs.SysfsAccessor(str(tree))
    rel = "devices/system/cpu/cpufreq/policy0/scaling_max_freq"
    acc.write(rel, 2000000)
    assert (tree / rel).read_bytes() == b"2000000\n"  # truncated, not appended
    acc.write(rel, "x" * 70000)  # longer than one pipe buffer: every byte is written
    assert (tree / rel).read_bytes() == b"x" * 70000 + b"\n"


def test_write_never_creates_an_attribute(tree):
    acc = sysfs.SysfsAccessor(str(tree))
    with pytest.raises(FileNotFoundError):
        acc.write("devices/system/cpu/cpufreq/policy0/scaling_min_freq", "1")
    assert not (tree / "devices/system/cpu/cpufreq/policy0/scaling_min_freq").exists()


def test_write_closes_its_descriptor_on_failure(tree, monkeypatch):
    acc = sysfs.SysfsAccessor(str(tree))
    closed = []
    real_close = os.close

    def failing_write(fd, data):
        raise OSError(errno.EBUSY, "Device or resource busy")

    monkeypatch.setattr(sysfs.os, "write", failing_write)
    monkeypatch.setattr(sysfs.os, "close", lambda fd: (closed.append(fd), real_close(fd)))
    with pytest.raises(OSError) as exc:
        acc.write("devices/system/cpu/cpufreq/policy0/scaling_max_freq", "1")
    assert exc.value.errno == errno.EBUSY
    assert len(closed) == 1


@pytest.mark.parametrize(
    ("exc", "text"),
    [
        (OSError(errno.EINVAL, "Invalid argument"), "EINVAL: Invalid argument"),
        (OSError(errno.EBUSY, "Device or resource busy"), "EBUSY: Device or resource busy"),
        (OSError(9999, "odd"), "9999: odd"),
        (OSError("no errno"), "error: no errno"),
        (OSError(errno.EIO, ""), "EIO: [Errno 5] "),
    ],
)
def test_describe_oserror(exc, text):
    assert sysfs.describe_oserror(exc) == text


def test_read_optional(tree):
    acc = sysfs.SysfsAccessor(str(tree))
    assert sysfs.read_optional(acc, "devices/system/cpu/cpufreq/policy0/scaling_max_freq") == "3900000"
    assert sysfs.read_optional(acc, "devices/system/cpu/cpufreq/policy0/missing") is None
    assert sysfs.read_optional(acc, "devices/system/cpu/cpufreq/policy0") is None  # a directory: EISDIR


@pytest.mark.parametrize(
    ("value", "mhz"),
    [(None, None), ("", None), ("abc", None), ("-5", None), ("1.5", None), ("3900000", 3900), ("999", 0),
     ("1999999", 1999), (2000000, 2000), (0, 0)],
)  # fmt: skip
def test_khz_to_mhz(value, mhz):
    assert sysfs.khz_to_mhz(value) == mhz


def test_write_finishes_after_short_writes(tree, monkeypatch):
    """os.write may write less than asked: the rest is written, not dropped."""
    acc = sysfs.SysfsAccessor(str(tree))
    rel = "devices/system/cpu/cpufreq/policy0/scaling_max_freq"
    real_write = os.write
    calls = []

    def short_write(fd, data):
        calls.append(len(data))
        return real_write(fd, bytes(data[:3]))

    monkeypatch.setattr(sysfs.os, "write", short_write)
    acc.write(rel, "1234567")
    monkeypatch.undo()
    assert (tree / rel).read_bytes() == b"1234567\n"
    assert calls == [8, 5, 2]
