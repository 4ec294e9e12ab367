"""The benchmark end to end on the shared data, cut down: deterministic output, sane tables."""

from __future__ import annotations

import json

import numpy as np
import placement
import pytest

# A busy day of the trace, two small draws, two tie seeds, few samples: seconds, not minutes.
SMALL = [
    "--draws",
    "2",
    "--tie-seeds",
    "2",
    "--copies",
    "2",
    "--samples",
    "60",
    "--bootstrap",
    "200",
    "--start",
    "11000000",
    "--end",
    "11086400",
    "--no-chart",
]
POLICIES = {"default", "tas-power", "peaks", "ours", "ours-efficiency", "greedy-true"}


def run(shared_data, out, *extra):
    assert placement.main(["--data", str(shared_data), "--out", str(out), *SMALL, *extra]) == 0
    return json.loads((out / "placement.json").read_text()), (out / "placement.md").read_text()


def test_same_seed_same_numbers_and_bound_below_policies(shared_data, tmp_path):
    first, table = run(shared_data, tmp_path / "a")
    second = run(shared_data, tmp_path / "b")[0]
    assert first["draws"] == second["draws"]
    assert first["regimes"] == second["regimes"]
    for draw in first["draws"]:
        for regime, energies in draw["energy_kwh"].items():
            bound = energies["lower bound"]
            for policy, per_seed in energies.items():
                if policy == "lower bound":
                    continue
                assert len(per_seed) == 2  # one figure per tie seed
                if max(draw["rejected"][regime][policy]) == 0:
                    assert bound <= min(per_seed) + 1e-9, (regime, policy)
            # ours never breaks a tie at random: both seeds are the same replay
            for mine in ("ours", "ours-efficiency"):
                assert draw["random_ties"][regime][mine] == 0
                assert energies[mine][0] == energies[mine][1]
            if regime == "on":  # no powered-off node: the wake order does not matter
                assert energies["ours"] == energies["ours-efficiency"]
    for regime in ("on", "off"):
        rows = {row["policy"]: row for row in first["regimes"][regime]}
        assert set(rows) == POLICIES | {"lower bound"}
        assert rows["default"]["vs_default_pct"]["median"] == 0.0
        assert rows["greedy-true"]["gap_greedy_true_pp"]["median"] == 0.0
        assert rows["ours"]["tie_seed_spread_pp"] == 0.0
        for row in rows.values():
            low, high = row["vs_default_pct"]["ci95"]
            assert low <= row["vs_default_pct"]["median"] <= high
            assert len(row["vs_default_pct"]["per_draw"]) == 2
        # kWh are sums over draws of the tie-seed means
        total = sum(np.mean(d["energy_kwh"][regime]["peaks"]) for d in first["draws"])
        assert rows["peaks"]["energy_kwh_sum"] == pytest.approx(total)
        for mine in ("ours", "ours-efficiency"):
            others = {c["other"] for c in first["comparisons"][regime][mine]}
            assert others == POLICIES - {mine}
    assert "| policy | energy, sum of draws (kWh) | vs default, median [95 % CI] |" in table
    assert "greedy-true" in table and "oracle" not in table
    assert "NotReady" in table  # the caveat next to Peaks' powered-off figure
    assert "SPECpower_ssj2008" in table and "ATC 2023" in table
    goals = {g["goal"] for g in first["goals"]}
    assert {"off: ours below greedy-true", "on: ours below peaks", "off: ours-efficiency below tas-power"} <= goals


def test_most_allocated_on_request_and_default_runs_once_for_both_regimes(shared_data, tmp_path):
    result = run(shared_data, tmp_path / "m", "--policies", "default,most-allocated", "--draws", "1")[0]
    draw = result["draws"][0]
    assert set(draw["energy_kwh"]["on"]) == {"default", "most-allocated", "lower bound"}
    # default and most-allocated read requests only: one replay gives both regimes (same placement)
    assert draw["rejected"]["on"] == draw["rejected"]["off"]


def test_jobs_give_the_same_figures(shared_data, tmp_path):
    one = run(shared_data, tmp_path / "j1", "--policies", "default,ours")[0]
    two = run(shared_data, tmp_path / "j2", "--policies", "default,ours", "--jobs", "2")[0]
    assert one["draws"] == two["draws"]


def test_other_seed_other_clusters(shared_data, tmp_path):
    first = run(shared_data, tmp_path / "a")[0]
    other = run(shared_data, tmp_path / "c", "--seed", "7")[0]
    assert [d["servers"] for d in first["draws"]] != [d["servers"] for d in other["draws"]]


def test_copies_fill_a_larger_cluster(shared_data, tmp_path):
    one = run(shared_data, tmp_path / "a", "--copies", "1", "--policies", "default")[0]
    four = run(shared_data, tmp_path / "b", "--copies", "4", "--policies", "default")[0]
    for a, b in zip(one["draws"], four["draws"], strict=True):
        assert b["pods"] >= 4 * a["pods"]
        assert b["nodes"] > a["nodes"]


def test_unknown_policy_is_refused(shared_data, tmp_path, capsys):
    with pytest.raises(SystemExit):
        placement.main(["--data", str(shared_data), "--out", str(tmp_path), "--policies", "default,oracle"])
    assert "greedy-true" in capsys.readouterr().err


def test_bootstrap_interval_holds_the_median():
    values = [1.0, 2.0, 3.0, 4.0, 100.0]
    low, high = placement.bootstrap_median_ci(values, 2000)
    assert low <= 3.0 <= high
    assert placement.bootstrap_median_ci(values, 2000) == (low, high)  # seeded
    assert placement.bootstrap_median_ci([5.0], 10) == (5.0, 5.0)
