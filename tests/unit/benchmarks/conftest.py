"""The placement benchmark's helpers live in benchmarks/ (scripts, not a package)."""

from __future__ import annotations

import pathlib
import sys

BENCHMARKS = pathlib.Path(__file__).resolve().parents[3] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))
