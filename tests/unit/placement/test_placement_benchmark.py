"""The benchmark end to end on the shared data, cut down: deterministic output, sane tables."""

from __future__ import annotations

import json

import placement

# A busy day of the trace, one small draw, few samples: seconds, not minutes.
SMALL = ["--draws", "2", "--samples", "60", "--start", "11000000", "--end", "11086400", "--no-chart"]


def run(shared_data, out):
    assert placement.main(["--data", str(shared_data), "--out", str(out), *SMALL]) == 0
    return json.loads((out / "placement.json").read_text()), (out / "placement.md").read_text()


def test_same_seed_same_numbers_and_bound_below_policies(shared_data, tmp_path):
    first, table = run(shared_data, tmp_path / "a")
    second = run(shared_data, tmp_path / "b")[0]
    assert first["draws"] == second["draws"]
    assert first["regimes"] == second["regimes"]
    for draw in first["draws"]:
        for regime, energies in draw["energy_kwh"].items():
            bound = energies["lower bound"]
            for policy, energy in energies.items():
                if draw["rejected"][regime].get(policy, 0) == 0:
                    assert bound <= energy + 1e-9, (regime, policy)
    for regime in ("on", "off"):
        rows = {row["policy"]: row for row in first["regimes"][regime]}
        assert set(rows) == {"default", "most-allocated", "tas-power", "peaks", "ours", "oracle", "lower bound"}
        assert rows["default"]["vs_default_pct"] == 0.0
        assert rows["oracle"]["gap_oracle_pp"] == 0.0
    assert "| policy | energy (kWh) | vs default |" in table
    assert "SPECpower_ssj2008" in table and "ATC 2023" in table


def test_other_seed_other_clusters(shared_data, tmp_path):
    first = run(shared_data, tmp_path / "a")[0]
    out = tmp_path / "c"
    assert placement.main(["--data", str(shared_data), "--out", str(out), "--seed", "7", *SMALL]) == 0
    other = json.loads((out / "placement.json").read_text())
    assert [d["servers"] for d in first["draws"]] != [d["servers"] for d in other["draws"]]
