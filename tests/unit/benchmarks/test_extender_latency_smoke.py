"""benchmarks/extender_latency.py runs end to end for our extender (the stub API, real TLS, a table).

TAS is left out (--no-tas): it needs a Go build. The full run, TAS beside ours, is the benchmark itself.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

BENCHMARK = pathlib.Path(__file__).resolve().parents[3] / "benchmarks" / "extender_latency.py"


def test_latency_benchmark_measures_our_extender(tmp_path):
    out = tmp_path / "latency.json"
    argv = [sys.executable, str(BENCHMARK), "--nodes", "20", "--requests", "5", "--warmup", "1", "--no-tas"]
    argv += ["--json", str(out), "--workdir", str(tmp_path / "work")]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "| 20 | ours (NodeNames) |" in proc.stdout and "| 20 | ours (Nodes) |" in proc.stdout
    results = json.loads(out.read_text())["results"]
    assert [(r["extender"], r["body"], r["requests"]) for r in results] == [
        ("ours", "NodeNames", 5),
        ("ours", "Nodes", 5),
    ]
    assert all(0 < r["p50_ms"] <= r["p99_ms"] for r in results)
