"""Copy the shared zone discovery (plugins/module_utils/_power_zones.py) into the collectd plugin.

collectd's python plugin loads roles/collectd/files/rapl_power.py as one file from the directory
the collectd role installs, so the plugin carries a verbatim copy of everything below the
"shared code" marker of _power_zones.py, between its BEGIN/END markers. tests/unit/telemetry
fails when the copy is stale; this script refreshes it (``--check``: exit 1 if stale).
"""

from __future__ import annotations

import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
SOURCE = REPO / "plugins" / "module_utils" / "_power_zones.py"
PLUGIN = REPO / "roles" / "collectd" / "files" / "rapl_power.py"
SOURCE_MARKER = "# --- shared code (copied verbatim into roles/collectd/files/rapl_power.py)"
BEGIN = "# --- BEGIN shared code: plugins/module_utils/_power_zones.py (scripts/sync_collectd_plugin.py) ---\n"
END = "# --- END shared code ---\n"


def shared_code() -> str:
    text = SOURCE.read_text()
    start = text.index(SOURCE_MARKER)
    # two blank lines before the END marker, as the formatter wants after a function
    return text[text.index("\n", start) + 1 :].strip("\n") + "\n\n\n"


def embedded(plugin_text: str) -> str:
    return plugin_text[plugin_text.index(BEGIN) + len(BEGIN) : plugin_text.index(END)]


def synced(plugin_text: str) -> str:
    head = plugin_text[: plugin_text.index(BEGIN) + len(BEGIN)]
    tail = plugin_text[plugin_text.index(END) :]
    return head + shared_code() + tail


def main(argv: list[str]) -> int:
    text = PLUGIN.read_text()
    if "--check" in argv:
        return 0 if embedded(text) == shared_code() else 1
    PLUGIN.write_text(synced(text))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
