"""The state journal (plugins/module_utils/node_power/power_journal.py) on a plain file: originals recorded once."""

from __future__ import annotations

import json
import os
import stat

import pytest
from ansible_collections.poweraware.k8s.plugins.module_utils.node_files import files
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power import power_journal
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.power_journal import StateStore
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.sysfs import PowerError

POLICY0 = {"name": "policy0", "path": "devices/system/cpu/cpufreq/policy0", "related_cpus": [3, 0, 1, 2]}
POLICY4 = {"name": "policy4", "path": "devices/system/cpu/cpufreq/policy4", "related_cpus": [4]}


def uncore(path, label, cpu=None):
    step = {"path": path, "control": "uncore", "label": label}
    if cpu is not None:
        step["cpu"] = cpu
    return step


def test_the_default_state_file_and_version():
    assert power_journal.DEFAULT_STATE_FILE == "/var/lib/poweraware/cpu_power_state.json"
    assert power_journal.STATE_VERSION == 1


def test_a_missing_file_is_an_empty_clean_journal(tmp_path):
    store = StateStore(str(tmp_path / "state.json"))
    assert store.data == {"version": 1, "policies": {}}
    assert not (tmp_path / "state.json").exists()
    assert store.policies == {} and store.attributes == {}
    assert store.dirty() is False
    assert not (tmp_path / "state.json").exists()


def test_an_original_is_recorded_once_with_the_policy_it_belongs_to(tmp_path):
    store = StateStore(str(tmp_path / "state.json"))
    assert store.record(POLICY0, "scaling_governor", "powersave") is True
    assert store.record(POLICY0, "scaling_max_freq", "3900000") is True
    # a second original of the same attribute is refused: the first one is what the machine had
    assert store.record(POLICY0, "scaling_governor", "performance") is False
    assert store.record(POLICY4, "scaling_governor", "performance") is True
    assert store.policies == {
        "policy0": {
            "path": "devices/system/cpu/cpufreq/policy0",
            "cpus": "0-3",
            "original": {"scaling_governor": "powersave", "scaling_max_freq": "3900000"},
            "order": ["scaling_governor", "scaling_max_freq"],
        },
        "policy4": {
            "path": "devices/system/cpu/cpufreq/policy4",
            "cpus": "4",
            "original": {"scaling_governor": "performance"},
            "order": ["scaling_governor"],
        },
    }
    assert store.dirty() is True


def test_forgetting_a_policy_drops_it_and_an_unknown_one_is_no_error(tmp_path):
    store = StateStore(str(tmp_path / "state.json"))
    store.record(POLICY0, "scaling_governor", "powersave")
    store.record(POLICY4, "scaling_governor", "powersave")
    store.forget("policy0")
    store.forget("policy9")
    assert list(store.policies) == ["policy4"]


def test_attribute_originals_are_recorded_once_in_sequence(tmp_path):
    store = StateStore(str(tmp_path / "state.json"))
    assert store.record_attribute(uncore("a/max_freq_khz", "uncore max", cpu=0), "2400000") is True
    assert store.record_attribute(uncore("b/min_freq_khz", "uncore min"), "800000") is True
    assert store.record_attribute(uncore("a/max_freq_khz", "again", cpu=1), "1") is False
    assert store.attributes == {
        "a/max_freq_khz": {"control": "uncore", "cpu": 0, "label": "uncore max", "original": "2400000", "seq": 1},
        "b/min_freq_khz": {"control": "uncore", "cpu": None, "label": "uncore min", "original": "800000", "seq": 2},
    }
    # forgotten originals leave a gap; the next one still comes after the newest left
    store.forget_attribute("a/max_freq_khz")
    store.forget_attribute("never/recorded")
    assert list(store.attributes) == ["b/min_freq_khz"]
    assert store.record_attribute(uncore("c/x", "c"), "0") is True
    assert store.attributes["c/x"]["seq"] == 3


def test_forgetting_an_attribute_without_any_is_no_error(tmp_path):
    store = StateStore(str(tmp_path / "state.json"))
    store.forget_attribute("a/max_freq_khz")
    assert store.data == {"version": 1, "policies": {}}
    assert store.dirty() is False


def test_save_writes_sorted_indented_json_readable_by_everyone(tmp_path):
    path = tmp_path / "lib" / "state.json"
    store = StateStore(str(path))
    store.record(POLICY0, "scaling_governor", "powersave")
    store.record_attribute(uncore("a/max_freq_khz", "uncore max"), "2400000")
    store.save()
    assert path.read_text() == json.dumps(store.data, indent=2, sort_keys=True) + "\n"
    assert path.read_text().startswith('{\n  "attributes": {\n    "a/max_freq_khz": {\n      "control"')
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert os.listdir(path.parent) == ["state.json"]
    assert store.dirty() is False
    store.record(POLICY4, "scaling_governor", "powersave")
    assert store.dirty() is True


def test_save_goes_through_a_hidden_temporary_file_that_is_synced(tmp_path, monkeypatch):
    made, synced = [], []
    real_mkstemp, real_fsync = files.tempfile.mkstemp, files.os.fsync

    def mkstemp(**kwargs):
        made.append(kwargs)
        return real_mkstemp(**kwargs)

    def fsync(fd):
        synced.append(fd)
        return real_fsync(fd)

    monkeypatch.setattr(files.tempfile, "mkstemp", mkstemp)
    monkeypatch.setattr(files.os, "fsync", fsync)
    StateStore(str(tmp_path / "state.json")).save()
    assert [(k["prefix"], k["dir"]) for k in made] == [(".cpu_power_state.", str(tmp_path))]
    assert len(synced) == 1


def test_a_saved_file_is_read_back_and_keeps_its_originals(tmp_path):
    path = str(tmp_path / "state.json")
    first = StateStore(path)
    first.record(POLICY0, "scaling_governor", "powersave")
    first.save()
    again = StateStore(path)
    assert again.data == first.data
    assert again.dirty() is False
    assert again.record(POLICY0, "scaling_governor", "performance") is False
    assert again.policies["policy0"]["original"] == {"scaling_governor": "powersave"}


def test_a_file_without_policies_gets_an_empty_mapping_and_stays_clean(tmp_path):
    path = tmp_path / "state.json"
    path.write_text('{"version": 1, "attributes": {}}')
    store = StateStore(str(path))
    assert store.data == {"version": 1, "attributes": {}, "policies": {}}
    assert store.dirty() is False


@pytest.mark.parametrize("content", ['{"version": 2, "policies": {}}', '{"policies": {}}', "[1]", '"text"'])
def test_an_unknown_format_is_refused(tmp_path, content):
    path = tmp_path / "state.json"
    path.write_text(content)
    with pytest.raises(PowerError) as err:
        StateStore(str(path))
    assert str(err.value) == f"state file {path} has an unknown format (expected version 1)"


def test_an_unreadable_file_says_what_it_holds_and_what_to_do(tmp_path):
    path = tmp_path / "state.json"
    path.write_text("{not json")
    with pytest.raises(PowerError) as err:
        StateStore(str(path))
    with pytest.raises(ValueError) as parse_error:
        json.loads("{not json")
    reason = parse_error.value
    assert str(err.value) == (
        f"state file {path} cannot be read ({reason}); it holds the original CPU settings: repair it or move it "
        "away (originals then become the current values)"
    )


DAMAGE = "; it holds the original CPU settings: repair it or move it away (originals then become the current values)"


def test_a_damaged_policy_entry_is_refused_on_load_with_every_problem(tmp_path):
    """A policy's CPUs are read by every restore: a damaged entry is refused when the file is loaded,
    naming each entry and what is wrong with it, instead of a bare CPU-list error during a plan."""
    path = tmp_path / "state.json"
    good = {"path": "devices/system/cpu/cpufreq/policy0", "cpus": "0-1", "original": {}, "order": []}
    path.write_text(
        json.dumps(
            {
                "version": 1,
                "policies": {
                    "policy0": good,
                    "policy2": {**good, "cpus": "2-x"},
                    "policy4": {**good, "cpus": 4, "original": ["scaling_max_freq"]},
                    "policy6": "gone",
                    "policy8": {"original": {}},
                },
            }
        )
    )
    with pytest.raises(PowerError) as err:
        StateStore(str(path))
    assert str(err.value) == (
        f"state file {path} is damaged: "
        "policy policy2: cpus: invalid CPU list '2-x': 'x' is not a CPU number (expected a form like '0-3,8,10-11'); "
        "policy policy4: cpus is 4, not a CPU list such as '0-3' (the form this module writes); "
        "policy policy4: original is not a mapping of attribute to value; "
        "policy policy6 is str, not a mapping; "
        "policy policy8: cpus is None, not a CPU list such as '0-3' (the form this module writes)" + DAMAGE
    )
    path.write_text('{"version": 1, "policies": ["policy0"]}')
    with pytest.raises(PowerError) as err:
        StateStore(str(path))
    assert str(err.value) == (
        f"state file {path} is damaged: policies is list, not a mapping of policy name to its originals" + DAMAGE
    )
    path.write_text(json.dumps({"version": 1, "policies": {"policy0": good}}))
    assert StateStore(str(path)).policies == {"policy0": good}


def test_a_damaged_attributes_part_is_refused_on_load_with_every_problem(tmp_path):
    """The other controls' originals are written back as root by every restore: each entry is
    checked on load (a path outside the sysfs directories the module manages, absolute or with
    "..", would make the restore write there; a damaged entry gave tracebacks)."""
    path = tmp_path / "state.json"
    good = {"control": "cstates", "cpu": 0, "label": "CPU 0 C6 disable", "original": "0", "seq": 1}
    cap = "class/powercap/intel-rapl:a/constraint_0_power_limit_uw"
    attributes = {
        "devices/system/cpu/cpu0/cpuidle/state3/disable": good,
        cap: {**good, "control": "power_cap", "cpu": None, "original": None, "seq": 2},
        "/etc/shadow": {**good, "seq": 3},
        "devices/system/cpu/../../../etc/passwd": {**good, "seq": 4},
        "class/hwmon/hwmon0/power1_cap": {**good, "seq": 5},
        "devices/system/cpu/cpu1/cpuidle/state3/disable": {**good, "control": "cpufreq", "seq": True, "cpu": "1"},
        "devices/system/cpu/cpu2/cpuidle/state3/disable": {"label": 7, "original": 0},
        "devices/system/cpu/cpu3/cpuidle/state3/disable": [],
    }
    path.write_text(json.dumps({"version": 1, "policies": {}, "attributes": attributes}))
    with pytest.raises(PowerError) as err:
        StateStore(str(path))
    assert str(err.value) == (
        f"state file {path} is damaged: "
        "attribute '/etc/shadow': path '/etc/shadow' is not a plain path relative to the sysfs root; "
        "attribute 'class/hwmon/hwmon0/power1_cap': path 'class/hwmon/hwmon0/power1_cap' is outside "
        "devices/system/cpu and class/powercap; "
        "attribute 'devices/system/cpu/../../../etc/passwd': path 'devices/system/cpu/../../../etc/passwd' is not "
        "a plain path relative to the sysfs root; "
        "attribute 'devices/system/cpu/cpu1/cpuidle/state3/disable': control is 'cpufreq', not one of cstates, "
        "uncore, power_cap; "
        "attribute 'devices/system/cpu/cpu1/cpuidle/state3/disable': seq is True, not the order number (1, 2, ...) "
        "it was recorded in; "
        "attribute 'devices/system/cpu/cpu1/cpuidle/state3/disable': cpu is '1', not a CPU number or null; "
        "attribute 'devices/system/cpu/cpu2/cpuidle/state3/disable': control is None, not one of cstates, uncore, "
        "power_cap; "
        "attribute 'devices/system/cpu/cpu2/cpuidle/state3/disable': label is 7, not a string; "
        "attribute 'devices/system/cpu/cpu2/cpuidle/state3/disable': seq is None, not the order number (1, 2, ...) "
        "it was recorded in; "
        "attribute 'devices/system/cpu/cpu2/cpuidle/state3/disable': original is 0, not a sysfs value (a string); "
        "attribute 'devices/system/cpu/cpu3/cpuidle/state3/disable' is list, not a mapping" + DAMAGE
    )
    path.write_text(json.dumps({"version": 1, "attributes": ["x"]}))
    with pytest.raises(PowerError) as err:
        StateStore(str(path))
    assert str(err.value) == (
        f"state file {path} is damaged: attributes is list, not a mapping of sysfs path to its original" + DAMAGE
    )
    kept = {k: v for k, v in attributes.items() if k.endswith(("state3/disable", "limit_uw")) and v in (good,)}
    kept[cap] = attributes[cap]
    path.write_text(json.dumps({"version": 1, "attributes": kept}))
    assert StateStore(str(path)).attributes == kept


def test_a_policy_entry_naming_a_file_the_module_does_not_change_is_refused(tmp_path):
    """A policy restore writes <policy directory>/<attribute> for each recorded original: only the
    four cpufreq attributes the module changes, with string values, in a cpufreq directory."""
    path = tmp_path / "state.json"
    good = {"path": "devices/system/cpu/cpufreq/policy0", "cpus": "0", "original": {}, "order": []}
    path.write_text(
        json.dumps(
            {
                "version": 1,
                "policies": {
                    "policy0": {**good, "original": {"../../../../../etc/cron.d/x": "* * * * * root sh"}},
                    "policy1": {**good, "path": "/etc", "original": {"scaling_max_freq": 3000000}},
                    "policy2": {**good, "path": "class/powercap/intel-rapl:0", "order": ["scaling_governor"]},
                },
            }
        )
    )
    with pytest.raises(PowerError) as err:
        StateStore(str(path))
    assert str(err.value) == (
        f"state file {path} is damaged: "
        "policy policy0: original names '../../../../../etc/cron.d/x', not one of scaling_min_freq, "
        "scaling_max_freq, scaling_governor, energy_performance_preference; "
        "policy policy1: path '/etc' is not a plain path relative to the sysfs root; "
        "policy policy1: scaling_max_freq: original is 3000000, not a sysfs value (a string); "
        "policy policy2: path 'class/powercap/intel-rapl:0' is not a cpufreq policy directory; "
        "policy policy2: order is ['scaling_governor'], not a list of the attributes in original" + DAMAGE
    )


def test_restore_saved_puts_a_snapshot_back_and_writes_it(tmp_path):
    path = tmp_path / "state.json"
    store = StateStore(str(path))
    store.record(POLICY0, "scaling_governor", "powersave")
    store.save()
    snapshot = store.saved
    store.record(POLICY4, "scaling_governor", "powersave")
    store.restore_saved(snapshot)
    assert list(store.policies) == ["policy0"]
    assert json.loads(path.read_text()) == snapshot
    assert store.dirty() is False
    # the store works on a copy: changing it does not change the snapshot
    store.forget("policy0")
    assert list(snapshot["policies"]) == ["policy0"]


@pytest.mark.parametrize("path", ["cpu_power_state.json", "var/lib/poweraware/cpu_power_state.json", "", None])
def test_a_state_file_that_is_not_an_absolute_path_is_refused(path):
    """The boot unit and later runs start in other directories: a relative state file would hide the
    originals this run records from them (state=absent would find nothing)."""
    with pytest.raises(PowerError) as err:
        StateStore(path)
    assert str(err.value) == (
        f"state_file {path!r} is not an absolute path: the boot unit and later runs start elsewhere and would not "
        "find the originals recorded there; give an absolute path such as /var/lib/poweraware/cpu_power_state.json"
    )
