"""Numbers in cpu_power_profile's inputs: what the kernel's kstrto* would take, nothing else, and a
read-back tolerance that cannot hide a wrong frequency (issue 45 item 13). Each refusal names the
field, the value, the reason and the fix, with nothing written."""

from __future__ import annotations

import pytest
from ansible_collections.poweraware.k8s.plugins.modules import cpu_power_profile
from test_cpu_power_modules import run

FREQUENCY = "is not a frequency: give MHz as an integer, or 'min' / 'max' for each CPU's own limit"


@pytest.fixture
def node(make_node, monkeypatch):
    made = make_node("intel_pstate_active")
    monkeypatch.setattr(cpu_power_profile, "SysfsAccessor", lambda root: made.kernel)
    return made


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # str.isdigit takes '²' and int() then raised ValueError: a traceback
        ({"max_mhz": "²000"}, f"max_mhz='²000' {FREQUENCY}"),
        ({"min_mhz": "３０００"}, f"min_mhz='３０００' {FREQUENCY}"),
        # int() dropped the .5 silently
        ({"max_mhz": 2000.5}, f"max_mhz=2000.5 {FREQUENCY}"),
        # int() of a list raised TypeError: a traceback
        ({"max_mhz": [2000]}, f"max_mhz=[2000] {FREQUENCY}"),
        ({"max_mhz": True}, "max_mhz=True is not a frequency: give a positive integer in MHz"),
        (
            {"cpus": "２-３", "epp": "power"},
            "invalid CPU list '２-３': '２' is not a CPU number (expected a form like '0-3,8,10-11')",
        ),
        (
            {"epp": "²"},
            "epp '²' is not available for CPU 2 (policy2); energy_performance_available_preferences: default "
            "performance balance_performance balance_power power",
        ),
        # a tolerance of half the range or more took 3900 MHz for the 2000 MHz asked: changed=false
        (
            {"max_mhz": 2000, "tolerance_mhz": 1550},
            "tolerance_mhz=1550 is not below half of CPU 2's range (800-3900 MHz, policy2): a frequency that far "
            "from the request would be taken for applied and nothing written; keep the default 100 (drivers "
            "round to 100 MHz steps), at most 1549",
        ),
    ],
    ids=["superscript", "fullwidth", "fraction", "list", "bool", "fullwidth-cpus", "superscript-epp", "tolerance"],
)
def test_a_number_the_kernel_would_not_take_is_refused(node, capsys, args, message):
    pristine = node.digest()
    full = {"cpus": "2-3", "sysfs_root": str(node.sys), "state_file": str(node.state_file), **args}
    out = run(cpu_power_profile, full, capsys)
    assert out["failed"] is True and out["changed"] is False
    assert out["msg"] == f"invalid request, nothing was changed: {message}"
    assert node.digest() == pristine


def test_a_whole_float_and_the_largest_tolerance_are_taken(node, capsys):
    base = {"cpus": "2-3", "sysfs_root": str(node.sys), "state_file": str(node.state_file)}
    out = run(cpu_power_profile, {**base, "max_mhz": 2000.0, "tolerance_mhz": 1549}, capsys)
    assert out["changed"] is True
    assert node.policy("policy2", "scaling_max_freq") == "2000000"


def test_a_request_whose_cpus_are_all_offline_is_refused(make_node, monkeypatch, capsys):
    """Before, every requested CPU offline was a success that applied nothing and said nothing but
    'skipped_offline' (issue 45 item 13, silent no-ops); some CPUs offline stay skipped and reported."""
    node = make_node("offline_cpus")  # CPUs 6-7 offline
    monkeypatch.setattr(cpu_power_profile, "SysfsAccessor", lambda root: node.kernel)
    pristine = node.digest()
    base = {"sysfs_root": str(node.sys), "state_file": str(node.state_file), "max_mhz": 2000}
    out = run(cpu_power_profile, {**base, "cpus": "6-7"}, capsys)
    assert out["failed"] is True and out["changed"] is False
    assert out["msg"] == (
        "invalid request, nothing was changed: every CPU to manage is offline (cpus 6-7; online: 0-5): nothing "
        "would be applied; bring them online first (echo 1 > /sys/devices/system/cpu/cpuN/online) or choose online "
        "CPUs in cpus"
    )
    assert node.digest() == pristine
    out = run(cpu_power_profile, {**base, "cpus": "5-7"}, capsys)
    assert out["changed"] is True and out["skipped_offline"] == "6-7"
