"""Originals of power caps and TPMI uncore domains follow their zone across boots (issue 45 item 5).

The kernel numbers ``intel-rapl:N`` (powercap_sys.c, idr_alloc) and ``uncoreNN`` (uncore-frequency-
common.c, ida_alloc) in registration order, which may differ on the next boot. The journal keys an
original by the zone's identity (its ``name``; a domain's package and domain ids), so state=absent
puts each package's original back into that package's zone, whatever its number is now. The kernel
model's ``registration_order`` builds such a boot."""

from __future__ import annotations

import json
import sys

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power import power_apply as pa
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power import power_journal as journal

fake_sysfs = sys.modules["poweraware_lab_fake_sysfs"]  # loaded by conftest
fake_kernel = sys.modules["poweraware_lab_fake_kernel"]

LIMIT = "constraint_0_power_limit_uw"
TPMI = "devices/system/cpu/intel_uncore_frequency"


def _zones(node):
    """package name -> its zone directory on this boot."""
    powercap = node.sys / "class" / "powercap"
    return {
        (z / "name").read_text().strip(): z.name
        for z in sorted(powercap.iterdir())
        if z.name.count(":") == 1 and (z / "name").read_text().strip().startswith("package-")
    }


def _domains(node):
    """(package id, domain id) -> its uncoreNN directory on this boot."""
    base = node.sys / TPMI
    return {
        (int((d / "package_id").read_text()), int((d / "domain_id").read_text())): d.name
        for d in sorted(base.iterdir())
        if d.name.startswith("uncore")
    }


def _reboot(node, scenario, **shape):
    """A power cycle: firmware values again, packages registered as ``shape`` says; a new kernel."""
    fake_sysfs.build_tree(node.sys, scenario, rebuild=True, **shape)
    return fake_kernel.FakeKernel(node.sys)


def test_the_model_numbers_zones_in_registration_order(make_node):
    node = make_node("intel_idle_uncore")
    assert _zones(node) == {"package-0": "intel-rapl:0", "package-1": "intel-rapl:1"}
    _reboot(node, "intel_idle_uncore", registration_order=[1, 0])
    assert _zones(node) == {"package-1": "intel-rapl:0", "package-0": "intel-rapl:1"}
    assert (node.sys / "class/powercap/intel-rapl:0/intel-rapl:0:0/name").read_text().strip() == "dram"
    tpmi = make_node("uncore_tpmi", registration_order=[1, 0])
    assert _domains(tpmi)[(1, 0)] == "uncore00" and _domains(tpmi)[(0, 0)] == "uncore02"
    with pytest.raises(ValueError, match="must list each of the 2 package ids once"):
        make_node("uncore_tpmi", registration_order=[1, 1])


def test_a_power_cap_original_goes_back_to_its_package_after_the_zones_were_renumbered(make_node):
    node = make_node("intel_idle_uncore")
    state = str(node.state_file)
    # the operator had set package 1 to 110 W; package 0 is at its rating (125 W)
    node.kernel.write(f"class/powercap/intel-rapl:1/{LIMIT}", "110000000")
    request = pa.Request(cpus="all")
    pa.apply_controls(node.kernel, request, power_cap={"watts": 90}, state_file=state)
    recorded = json.loads(node.state_file.read_text())["attributes"]
    assert recorded[f"class/powercap/intel-rapl:1/{LIMIT}"]["identity"] == "RAPL zone package-1"

    # the next boot registers package 1 first: intel-rapl:0 is package 1 now; the boot unit re-applies
    kernel = _reboot(node, "intel_idle_uncore", registration_order=[1, 0])
    result = pa.apply_controls(kernel, request, power_cap={"watts": 90}, state_file=state)
    assert result["changed"] is True
    moved = json.loads(node.state_file.read_text())["attributes"]
    assert moved[f"class/powercap/intel-rapl:0/{LIMIT}"]["original"] == "110000000"  # package 1's, moved with it
    assert moved[f"class/powercap/intel-rapl:1/{LIMIT}"]["original"] == "125000000"

    restored = pa.restore_controls(kernel, state_file=state)
    assert restored["changed"] is True and restored["messages"] == []
    zones = _zones(node)
    assert kernel.read(f"class/powercap/{zones['package-1']}/{LIMIT}") == "110000000"
    assert kernel.read(f"class/powercap/{zones['package-0']}/{LIMIT}") == "125000000"


def test_a_tpmi_domain_original_goes_back_to_its_domain_after_renumbering(make_node):
    node = make_node("uncore_tpmi")
    state = str(node.state_file)
    first = _domains(node)
    node.kernel.write(f"{TPMI}/{first[(1, 0)]}/max_freq_khz", "1800000")  # set by hand before our run
    request = pa.Request(cpus="all")
    pa.apply_controls(node.kernel, request, uncore={"min_khz": 1200000, "max_khz": 1600000}, state_file=state)

    kernel = _reboot(node, "uncore_tpmi", registration_order=[1, 0])
    pa.apply_controls(kernel, request, uncore={"min_khz": 1200000, "max_khz": 1600000}, state_file=state)
    pa.restore_controls(kernel, state_file=state)
    now = _domains(node)
    assert now[(1, 0)] != first[(1, 0)]  # it did move
    assert kernel.raw_read(f"{TPMI}/{now[(1, 0)]}/max_freq_khz") == "1800000"
    initial = kernel.raw_read(f"{TPMI}/{now[(0, 0)]}/initial_max_freq_khz")
    assert kernel.raw_read(f"{TPMI}/{now[(0, 0)]}/max_freq_khz") == initial


def test_a_zone_not_present_keeps_its_original_and_is_named(make_node):
    node = make_node("intel_idle_uncore")
    state = str(node.state_file)
    pa.apply_controls(node.kernel, pa.Request(cpus="all"), power_cap={"watts": 90}, state_file=state)
    kernel = _reboot(node, "intel_idle_uncore", packages=1)  # a socket gone (or its driver not loaded)
    result = pa.restore_controls(kernel, state_file=state)
    assert result["messages"] == [
        "package-1 long_term power_limit_uw: RAPL zone package-1 is not present on this boot; its original stays "
        "recorded"
    ]
    kept = json.loads(node.state_file.read_text())["attributes"]
    assert [e["identity"] for e in kept.values()] == ["RAPL zone package-1"]
    assert kernel.read(f"class/powercap/intel-rapl:0/{LIMIT}") == "125000000"


def _store(tmp_path, attributes):
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"version": 1, "policies": {}, "attributes": attributes}))
    return journal.StateStore(str(path))


def _entry(seq, identity, label="package-1 long_term power_limit_uw"):
    return {"control": "power_cap", "cpu": None, "label": label, "original": "1", "seq": seq, "identity": identity}


def test_relocation_refuses_what_it_cannot_place(tmp_path):
    # package 1 is gone and its old directory is package 0's now: its original must not be taken for package 0's
    store = _store(tmp_path, {f"class/powercap/intel-rapl:1/{LIMIT}": _entry(1, "RAPL zone package-1")})
    with pytest.raises(journal.PowerError) as refused:
        store.relocate({"RAPL zone package-0": "class/powercap/intel-rapl:1"})
    assert str(refused.value).startswith(
        f"state file {store.path}: the original of package-1 long_term power_limit_uw (RAPL zone package-1, not "
        f"present now) is recorded at class/powercap/intel-rapl:1/{LIMIT}, which is RAPL zone package-0's now; "
        "restore RAPL zone package-1's value by hand when it is back, then remove that entry from the file"
    )
    # an entry without identity (an earlier release) stays where it is
    old = {k: v for k, v in _entry(1, None).items() if k != "identity"}
    store = _store(tmp_path, {f"class/powercap/intel-rapl:0/{LIMIT}": old})
    assert store.relocate({"RAPL zone package-1": "class/powercap/intel-rapl:0"}) == []
    assert list(store.attributes) == [f"class/powercap/intel-rapl:0/{LIMIT}"]


def test_a_damaged_identity_is_refused_on_load(tmp_path):
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"version": 1, "policies": {}, "attributes": {
        f"class/powercap/intel-rapl:0/{LIMIT}": _entry(1, ["package-0"])}}))  # fmt: skip
    with pytest.raises(journal.PowerError, match=r"identity is \['package-0'\], not the name of a RAPL zone"):
        journal.StateStore(str(path))
