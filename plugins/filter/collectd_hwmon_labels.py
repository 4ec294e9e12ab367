# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The poweraware.k8s.collectd_hwmon_labels filter; documentation in collectd_hwmon_labels.yml beside this file."""

from __future__ import annotations

from collections.abc import Callable

from ansible.errors import AnsibleFilterError
from ansible_collections.poweraware.k8s.plugins.module_utils.node_power.power_zones import hwmon_label_rules


def _quoted(text: str) -> str:
    # collectd's config scanner (liboconfig) reads a quoted string with backslash escapes: a
    # backslash keeps the next character, so both the backslash and the quote are escaped
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def collectd_hwmon_labels(rules, variable="collectd_hwmon_labels"):
    """The plugin's ``HwmonLabel "<class>" "<pattern>"`` lines for ``rules``; every problem raised at once."""
    if rules is None or rules == "":
        rules = []
    if not isinstance(rules, list):
        raise AnsibleFilterError(
            f"Nothing was changed: {variable}: {rules!r} is not a list; give a list of {{class, pattern}} rules "
            f'(with -e, as JSON: -e \'{{"{variable}": [{{"class": "package", "pattern": "..."}}]}}\')'
        )
    _compiled, problems = hwmon_label_rules(rules)
    problems = [p.replace("hwmon_labels entry", f"{variable} entry", 1) for p in problems]
    for index, rule in enumerate(rules, start=1):
        pattern = rule.get("pattern") if isinstance(rule, dict) else None
        if isinstance(pattern, str) and any(ord(c) < 32 for c in pattern):
            problems.append(
                f"{variable} entry {index}: pattern {pattern!r} has a control character (a newline?), which a "
                "label never has and collectd's configuration cannot hold; remove it"
            )
    if problems:  # in entry order
        problems.sort(key=lambda problem: int(problem.split(" entry ", 1)[1].split(":", 1)[0]))
        raise AnsibleFilterError("Nothing was changed: " + "; ".join(problems))
    return [f"HwmonLabel {_quoted(rule['class'])} {_quoted(rule['pattern'])}" for rule in rules]


class FilterModule:
    """collectd configuration lines."""

    def filters(self) -> dict[str, Callable]:
        return {"collectd_hwmon_labels": collectd_hwmon_labels}
