"""Which peers a link is probed with, and when a probe is the link's own rate (no root)."""

from __future__ import annotations

import pytest

from ddlperf.measure.emulated import HostSpec
from ddlperf.measure.probe import own_rate_bps, probe_peers

MBPS = 1e6


def down(host: HostSpec) -> float:
    return host.downlink_bps


def test_the_fewest_fastest_peers_that_reach_the_links_rate() -> None:
    workers = [HostSpec(f"w{i}", 100 * MBPS, 100 * MBPS) for i in range(4)]
    fast = HostSpec("x", 250 * MBPS, 250 * MBPS)
    assert [h.name for h in probe_peers(100 * MBPS, workers, down)] == ["w0"]
    assert [h.name for h in probe_peers(400 * MBPS, workers, down)] == ["w0", "w1", "w2", "w3"]
    assert [h.name for h in probe_peers(300 * MBPS, [*workers, fast], down)] == ["x", "w0"]
    # a 1 Gbit PS among four 100 Mbit workers: all of them, and still not enough
    assert len(probe_peers(1000 * MBPS, workers, down)) == 4


def test_only_a_probe_of_the_link_itself_gives_its_rate() -> None:
    entry = {"uplink_bps": 380e6, "uplink_own": True, "downlink_bps": 382e6,
             "downlink_own": False}
    assert own_rate_bps(entry, "uplink") == 380e6
    assert own_rate_bps(entry, "downlink") is None
    assert own_rate_bps({"uplink_bps": 95e6}, "uplink") is None  # an older path probe
    assert own_rate_bps(None, "uplink") is None


def test_the_largest_deviation_over_links_and_directions() -> None:
    from ddlperf.measure.probe import max_deviation

    probed = {"a": {"uplink_bps": 90.0, "uplink_expected_bps": 100.0,
                    "downlink_bps": 103.0, "downlink_expected_bps": 100.0},
              "b": {"uplink_bps": 100.0, "uplink_expected_bps": 100.0}}
    assert max_deviation(probed) == pytest.approx(0.10)
    assert max_deviation({}) is None and max_deviation(None) is None
