"""The clusters handed to the predictors."""

from __future__ import annotations

from ddlperf.cluster import Cluster
from ddlperf.validate import probed_cluster, with_worker_overrides


def test_worker_overrides_split_only_the_groups_they_touch() -> None:
    cluster = Cluster.from_dict({"bandwidth": 100e6, "workers": [
        {"name": "a", "count": 2, "speed": 2.0}, {"name": "b", "count": 2}], "ps": 1})
    out = with_worker_overrides(cluster, {3: {"speed": 0.5}})
    assert [(g.name, g.count, g.speed) for g in out.workers] == [
        ("a", 2, 2.0), ("b", 1, 1.0), ("b", 1, 0.5)]
    assert out.ps.count == 1 and out.bandwidth == 100e6


def test_probed_cluster_uses_every_probe_with_goodput_one() -> None:
    cluster = Cluster.from_dict({"bandwidth": 200e6, "workers": 2, "ps": 2})
    probe = {
        "w0": {"uplink_bps": 190e6, "downlink_bps": 191e6},
        "w1": {"uplink_bps": 189e6, "downlink_bps": 192e6},
        "ps0": {"uplink_bps": 191e6, "downlink_bps": 190e6},
        "ps1": {"uplink_bps": 188e6, "downlink_bps": 193e6},
    }
    out = probed_cluster(cluster, probe)
    assert out.goodput == 1.0
    assert [(out.worker_up(g), out.worker_down(g)) for g in out.workers] == [
        (190e6, 191e6), (189e6, 192e6)]
    assert out.ps_up() == 188e6 and out.ps_down() == 190e6 and out.ps.count == 2
