"""collectd_hwmon_labels: the RAPL plugin's HwmonLabel lines, validated before the role changes anything.

That collectd's own parser reads the quoting back is shown in tests/integration/test_collectd_rapl.py
(the hwmon run of the plugin in real collectd)."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.filter.collectd_hwmon_labels import collectd_hwmon_labels


def test_lines_quote_backslashes_and_quotes_for_collectd():
    rules = [
        {"class": "package", "pattern": r"SoC Power Socket (?P<package>\d+)"},
        {"class": "io", "pattern": 'IO "rail"'},
    ]
    assert collectd_hwmon_labels(rules) == [
        r'HwmonLabel "package" "SoC Power Socket (?P<package>\\d+)"',
        r'HwmonLabel "io" "IO \"rail\""',
    ]
    assert collectd_hwmon_labels([]) == collectd_hwmon_labels(None) == collectd_hwmon_labels("") == []


def test_every_problem_named_at_once():
    with pytest.raises(AnsibleFilterError) as caught:
        collectd_hwmon_labels([{"class": "Package", "pattern": "x"}, {"class": "package", "pattern": "a\nb"}, "x"])
    assert str(caught.value) == (
        "Nothing was changed: collectd_hwmon_labels entry 1: class 'Package' is not a lower-case word; use "
        "'package' for package power, any other word (io, memory, ...) to leave the sensor out; "
        "collectd_hwmon_labels entry 2: pattern 'a\\nb' has a control character (a newline?), which a label never "
        "has and collectd's configuration cannot hold; remove it; collectd_hwmon_labels entry 3: 'x' is not a "
        "mapping of exactly 'class' and 'pattern'; write e.g. {class: package, pattern: 'CPU Power Socket "
        "(?P<package>\\d+)'}"
    )
    with pytest.raises(AnsibleFilterError, match=r"^Nothing was changed: collectd_hwmon_labels: 'x' is not a list"):
        collectd_hwmon_labels("x")
