"""SPECpower_ssj2008 servers as simulated nodes: true power curves and a noisy telemetry sampler.

Shared by the benchmarks (model fit, placement) and the lab's simulated node power
(lab/components/node_power.py), which sit above it. The data set is read in place from the shared
data directory (``--data``, env ``SHARED_DATA``, default ``../shared/data``); it is never copied
into the repository. SPEC and SPECpower_ssj2008 are trademarks of the Standard Performance
Evaluation Corporation; results from www.spec.org/power_ssj2008.

Sampling (documented in docs/filters.md, fixed so results are reproducible):

* utilisation: with probability 0.9 the base load 100 * Beta(2, 5) (mean 29 %, mode 20 %;
  real clusters spend most of their time at low load, Google and Alibaba traces average
  roughly 10-40 % CPU), with probability 0.1 a burst, uniform on 0..100 %. The mixture has a
  median of 28 %, 73 % of samples below 40 % and 1 % above 90 %: high-load samples are scarce
  but not absent, as on nodes that run the occasional batch job or rollout;
* 500 samples per server by default (about two hours of 15-second scrapes);
* watts = true_power(u) * (1 + 0.02 * N(0, 1)): 2 % Gaussian measurement noise;
* one ``random.Random`` per server, seeded from the run seed and the server id, so a server's
  samples do not depend on which other servers are in the run.
"""

from __future__ import annotations

import argparse
import bisect
import csv
import dataclasses
import math
import os
import pathlib
import random
from typing import NamedTuple

UTIL_POINTS = tuple(range(0, 101, 10))
DEFAULT_SEED = 20260101
NOISE_FRACTION = 0.02
UTIL_BETA = (2.0, 5.0)
BURST_FRACTION = 0.1
SAMPLES_PER_SERVER = 500
DEFAULT_DATA = pathlib.Path(__file__).resolve().parent.parent.parent / "shared" / "data"


@dataclasses.dataclass(frozen=True)
class Server:
    """One published result: identity, hardware, and average watts at 0, 10, ..., 100 % load."""

    id: str
    vendor: str
    system: str
    processor: str
    chips: int
    cores: int
    threads_per_core: int
    memory_gb: float
    published: str
    watts: tuple[float, ...]

    @property
    def name(self) -> str:
        return f"{self.vendor} {self.system}"

    @property
    def idle_w(self) -> float:
        return self.watts[0]

    @property
    def peak_w(self) -> float:
        return max(self.watts)


class SkippedRow(NamedTuple):
    """A published row that cannot be simulated, with the reason."""

    id: str
    reason: str


def _positive_int(row: dict, field: str) -> int:
    text = (row.get(field) or "").strip()
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{field} {text!r} is not an integer") from None
    if value <= 0:
        raise ValueError(f"{field} is {value}, need at least 1")
    return value


def _number(row: dict, field: str) -> float:
    text = (row.get(field) or "").strip().replace(",", "")  # thousands separators, e.g. "1,024"
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{field} {row.get(field)!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{field} is {value}, need a finite number >= 0")
    return value


def parse_server(row: dict) -> Server:
    """One CSV row as a ``Server``; ``ValueError`` saying which field is unusable and why."""
    memory = _number(row, "memory_gb")
    if memory == 0:
        raise ValueError("memory_gb is 0")
    watts = tuple(_number(row, f"watts_{u}") for u in UTIL_POINTS)
    if max(watts) <= 0:
        raise ValueError("all published watts are 0")
    return Server(
        id=row["id"],
        vendor=row.get("vendor") or "",
        system=row.get("system") or "",
        processor=row.get("processor") or "",
        chips=_positive_int(row, "chips"),
        cores=_positive_int(row, "cores"),
        threads_per_core=_positive_int(row, "threads_per_core"),
        memory_gb=memory,
        published=row.get("published") or "",
        watts=watts,
    )


def read_servers(path: pathlib.Path | str) -> tuple[list[Server], list[SkippedRow]]:
    """Read ``specpower/servers.csv`` (or the CSV file itself): usable servers, and the rows
    skipped with the server id and the reason (``memory_gb`` of ``n/a``, 0 cores, a missing or
    non-numeric power reading, ...). Never raises on a bad row; a missing column of the header
    is an error."""
    path = pathlib.Path(path)
    if path.is_dir():
        path = path / "specpower" / "servers.csv"
    servers: list[Server] = []
    skipped: list[SkippedRow] = []
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        need = {"id", "chips", "cores", "threads_per_core", "memory_gb", *(f"watts_{u}" for u in UTIL_POINTS)}
        missing = need - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path}: missing columns {sorted(missing)}")
        for line, row in enumerate(reader, start=2):
            server_id = (row.get("id") or "").strip() or f"line {line}"
            try:
                servers.append(parse_server(row))
            except ValueError as err:
                skipped.append(SkippedRow(server_id, str(err)))
    return servers, skipped


def load_servers(path: pathlib.Path | str, skipped: list | None = None) -> list[Server]:
    """The usable servers of ``read_servers``; skipped rows are appended to ``skipped`` when given."""
    servers, rows = read_servers(path)
    if skipped is not None:
        skipped.extend(rows)
    return servers


def true_power(server: Server, util: float) -> float:
    """Watts at ``util`` percent, interpolated linearly between the published points."""
    if not 0.0 <= util <= 100.0:
        raise ValueError(f"util must be within 0..100, got {util!r}")
    segment = min(bisect.bisect_right(UTIL_POINTS, util) - 1, len(UTIL_POINTS) - 2)
    lower, upper = UTIL_POINTS[segment], UTIL_POINTS[segment + 1]
    fraction = (util - lower) / (upper - lower)
    return server.watts[segment] + (server.watts[segment + 1] - server.watts[segment]) * fraction


def server_rng(server: Server, seed: int = DEFAULT_SEED) -> random.Random:
    """The fixed random stream of one server (str seeds hash deterministically in Python 3)."""
    return random.Random(f"{seed}:{server.id}")


def sample_util(rng: random.Random, burst_fraction: float = BURST_FRACTION) -> float:
    """One utilisation in percent: 100 * Beta(2, 5), or with probability 0.1 uniform (a burst)."""
    if rng.random() < burst_fraction:
        return 100.0 * rng.random()
    return 100.0 * rng.betavariate(*UTIL_BETA)


def noisy_samples(
    server: Server, count: int, seed: int = DEFAULT_SEED, burst_fraction: float = BURST_FRACTION
) -> list[dict[str, float]]:
    """``count`` telemetry samples ``{"util", "watts"}`` of ``server`` as the documented sampler draws them.

    ``burst_fraction=0`` drops the bursts (for sensitivity runs: high load is then almost never seen).
    """
    rng = server_rng(server, seed)
    samples = []
    for _sample in range(count):
        util = sample_util(rng, burst_fraction)
        watts = true_power(server, util) * (1.0 + NOISE_FRACTION * rng.gauss(0.0, 1.0))
        samples.append({"util": util, "watts": watts})
    return samples


def data_dir() -> pathlib.Path:
    """The shared data directory: env ``SHARED_DATA``, else ``../shared/data`` beside the checkout."""
    return pathlib.Path(os.environ.get("SHARED_DATA", DEFAULT_DATA))


def data_dir_argument(parser: argparse.ArgumentParser) -> None:
    """Add the ``--data`` option every benchmark takes (default: env SHARED_DATA or ../shared/data)."""
    parser.add_argument(
        "--data",
        type=pathlib.Path,
        default=data_dir(),
        help="shared data directory (default: $SHARED_DATA or ../shared/data)",
    )
