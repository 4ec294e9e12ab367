"""lab/specpower.py: the SPECpower loader, true curves and the documented noisy sampler."""

from __future__ import annotations

import statistics

import pytest

from lab import specpower


@pytest.fixture(scope="module")
def servers(shared_data):
    return specpower.load_servers(shared_data)


def test_servers_load_with_eleven_published_points(servers, shared_data):
    assert len(servers) > 100
    assert len({s.id for s in servers}) == len(servers)
    for server in servers:
        assert len(server.watts) == 11
        assert server.cores > 0 and server.chips > 0 and server.threads_per_core > 0
        assert server.peak_w == max(server.watts) > 0
    # the CSV path itself works as well as the data directory
    assert specpower.load_servers(shared_data / "specpower" / "servers.csv") == servers


def test_true_power_passes_through_the_points_and_interpolates(servers):
    server = servers[0]
    for index, util in enumerate(specpower.UTIL_POINTS):
        assert specpower.true_power(server, util) == pytest.approx(server.watts[index])
    assert specpower.true_power(server, 25.0) == pytest.approx((server.watts[2] + server.watts[3]) / 2)
    for util in (-1.0, 100.5):
        with pytest.raises(ValueError, match="within 0..100"):
            specpower.true_power(server, util)


def test_sampler_is_reproducible_and_seeded_per_server(servers):
    first, second = servers[0], servers[1]
    assert specpower.noisy_samples(first, 50) == specpower.noisy_samples(first, 50)
    assert specpower.noisy_samples(first, 50) != specpower.noisy_samples(first, 50, seed=1)
    assert [s["util"] for s in specpower.noisy_samples(first, 50)] != [
        s["util"] for s in specpower.noisy_samples(second, 50)
    ]


def test_sampler_matches_its_documentation(servers):
    server = servers[0]
    samples = specpower.noisy_samples(server, 20_000)
    utils = [s["util"] for s in samples]
    assert all(0.0 <= u <= 100.0 for u in utils)
    # skewed to low load, with scarce but present high-load bursts
    assert 25.0 < statistics.median(utils) < 31.0
    assert 0.70 < sum(u < 40.0 for u in utils) / len(utils) < 0.76
    assert 0.005 < sum(u > 90.0 for u in utils) / len(utils) < 0.015
    # 2 % Gaussian power noise around the true curve
    relative = [s["watts"] / specpower.true_power(server, s["util"]) - 1.0 for s in samples]
    assert abs(statistics.mean(relative)) < 0.001
    assert 0.019 < statistics.stdev(relative) < 0.021
