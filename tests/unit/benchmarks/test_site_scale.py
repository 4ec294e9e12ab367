"""The scale benchmark's arithmetic (benchmarks/site_scale.py): recap counts, the line fit, both
projections and the report; the runs themselves need a lab of their own (make scale-bench)."""

from __future__ import annotations

import math

import pytest
import site_scale as scale

RECAP = """
PLAY RECAP *********************************************************************
lab-worker-1               : ok=54   changed=18   unreachable=0    failed=0    skipped=20   rescued=0    ignored=0
lab-worker-2               : ok=50   changed=0    unreachable=1    failed=2    skipped=3    rescued=0    ignored=0
"""


def test_recap_counts_sum_every_host_task():
    assert scale.recap_counts(RECAP) == {
        "host_tasks": 54 + 18 + 20 + 50 + 1 + 2 + 3,
        "changed": 18,
        "failed": 3,
        "hosts": 2,
    }
    assert scale.recap_counts("no recap") == {"host_tasks": 0, "changed": 0, "failed": 0, "hosts": 0}


def test_fit_line_is_least_squares():
    a, b = scale.fit_line([(3, 10.0), (7, 18.0), (15, 34.0)])  # exactly 4 + 2x
    assert a == pytest.approx(4.0) and b == pytest.approx(2.0)
    a, b = scale.fit_line([(1, 1.0), (2, 3.0), (3, 2.0)])  # mean x 2, mean y 2, slope 0.5
    assert a == pytest.approx(1.0) and b == pytest.approx(0.5)
    assert scale.fit_line([(4, 8.0)]) == (0.0, 2.0)
    with pytest.raises(ValueError):
        scale.fit_line([])


def test_projections():
    assert scale.project_linear((10.0, 2.0), 100) == 210.0
    # batches bound: 1000 nodes at forks 10 is 100 batches of 5 s
    assert scale.project_forks(5.0, 20.0, (0.0, 0.01), 1000, 10, cores=4) == pytest.approx(20.0 + 500.0)
    # controller bound: 1000 nodes x 2 CPU s over 4 cores is 500 s, more than 20 batches of 5 s
    assert scale.project_forks(5.0, 20.0, (0.0, 2.0), 1000, 50, cores=4) == pytest.approx(20.0 + 500.0)
    # cores are capped by forks: forks 2 uses 2 cores
    assert scale.project_forks(0.0, 0.0, (0.0, 1.0), 10, 2, cores=4) == pytest.approx(5.0)
    assert math.ceil(7 / 5) == 2 and scale.project_forks(1.0, 0.0, (0.0, 0.0), 7, 5) == 2.0


def test_report_has_every_table():
    run = {"wall_s": 30.0, "controller_cpu_s": 12.0, "host_tasks": 100, "changed": 0, "failed": 0, "hosts": 4}
    nodes = [
        {"workers": w, "hosts": w + 1, "converge": dict(run, wall_s=20 + 3 * w), "rerun_f10": dict(run, wall_s=10 + w),
         "rerun_f50": dict(run, wall_s=10 + w)}
        for w in (3, 7)
    ]  # fmt: skip
    objects = [
        {"objects": n, "each": dict(run, wall_s=5 + 0.8 * n), "all": dict(run, wall_s=5 + 0.01 * n)} for n in (25, 50)
    ]
    text = scale.report(nodes, objects, (10, 50))
    for expected in (
        "| hosts | converge s",
        "Fitted",
        "| converge | 1000 |",
        "one run per object",
        "kubespray",
        "#478",
    ):
        assert expected in text, expected
    assert "| 25 | 25.0 | 5.25 | 4.8 |" in text
