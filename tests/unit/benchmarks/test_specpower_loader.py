"""The SPECpower loader skips unusable published rows, naming the server and the reason."""

from __future__ import annotations

import pytest

from lab import specpower as _specpower

HEADER = "id,vendor,system,processor,chips,cores,threads_per_core,memory_gb,published," + ",".join(
    f"watts_{u}" for u in range(0, 101, 10)
)
WATTS = ",".join(str(100 + 10 * k) for k in range(11))


def row(server_id, chips="2", cores="32", threads="2", memory="256", watts=WATTS):
    return f'{server_id},Vendor,"System, 2U",CPU X,{chips},{cores},{threads},"{memory}",Jan-2024,{watts}'


def write(tmp_path, *rows):
    path = tmp_path / "servers.csv"
    path.write_text("\n".join([HEADER, *rows]) + "\n")
    return path


def test_unusable_rows_are_skipped_with_id_and_reason(tmp_path):
    path = write(
        tmp_path,
        row("good-1"),
        row("na-memory", memory="n/a"),
        row("zero-cores", cores="0"),
        row("blank-threads", threads=""),
        row("negative-chips", chips="-1"),
        row("bad-watts", watts=WATTS.replace("150", "n/a")),
        row("missing-watts", watts=",".join(WATTS.split(",")[:10]) + ","),
        row("infinite-watts", watts=WATTS.replace("160", "inf")),
        row("zero-memory", memory="0"),
        row("good-2", memory="1,024"),
    )
    servers, skipped = _specpower.read_servers(path)
    assert [s.id for s in servers] == ["good-1", "good-2"]
    assert servers[1].memory_gb == 1024.0 and servers[0].cores == 32
    reasons = dict(skipped)
    assert list(reasons) == [
        "na-memory",
        "zero-cores",
        "blank-threads",
        "negative-chips",
        "bad-watts",
        "missing-watts",
        "infinite-watts",
        "zero-memory",
    ]
    assert "memory_gb 'n/a' is not a number" in reasons["na-memory"]
    assert "cores is 0" in reasons["zero-cores"]
    assert "threads_per_core '' is not an integer" in reasons["blank-threads"]
    assert "chips is -1" in reasons["negative-chips"]
    assert "watts_50" in reasons["bad-watts"]
    assert "watts_100" in reasons["missing-watts"]
    assert "watts_60" in reasons["infinite-watts"]


def test_load_servers_reports_skipped_rows_and_never_raises_on_them(tmp_path):
    path = write(tmp_path, row("ok"), row("bad", memory="n/a"), "short-row,Vendor")
    skipped = []
    servers = _specpower.load_servers(path, skipped)
    assert [s.id for s in servers] == ["ok"]
    assert [s.id for s in skipped] == ["bad", "short-row"]
    assert _specpower.load_servers(path) == servers  # without the list: same servers, no error


def test_a_missing_column_is_an_error(tmp_path):
    path = tmp_path / "servers.csv"
    path.write_text("id,cores\nx,4\n")
    with pytest.raises(ValueError, match="missing columns"):
        _specpower.read_servers(path)


def test_shared_data_loads_without_skips(shared_data):
    servers, skipped = _specpower.read_servers(shared_data)
    assert len(servers) > 400 and skipped == []
