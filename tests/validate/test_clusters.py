"""The clusters handed to the predictors."""

from __future__ import annotations

import pytest

from ddlperf.cluster import Cluster
from ddlperf.validate import probed_cluster, with_worker_overrides
from ddlperf.validate.clusters import with_quotas


def test_worker_overrides_split_only_the_groups_they_touch() -> None:
    cluster = Cluster.from_dict({"bandwidth": 100e6, "workers": [
        {"name": "a", "count": 2, "speed": 2.0}, {"name": "b", "count": 2}], "ps": 1})
    out = with_worker_overrides(cluster, {3: {"speed": 0.5}})
    assert [(g.name, g.count, g.speed) for g in out.workers] == [
        ("a", 2, 2.0), ("b", 1, 1.0), ("b", 1, 0.5)]
    assert out.ps.count == 1 and out.bandwidth == 100e6


def own(up: float, down: float, up_own: bool = True, down_own: bool = True) -> dict:
    return {"uplink_bps": up, "downlink_bps": down, "uplink_own": up_own,
            "downlink_own": down_own}


def test_probed_cluster_uses_every_probe_with_goodput_one() -> None:
    cluster = Cluster.from_dict({"bandwidth": 200e6, "workers": 2, "ps": 2})
    probe = {"w0": own(190e6, 191e6), "w1": own(189e6, 192e6), "ps0": own(191e6, 190e6),
             "ps1": own(188e6, 193e6)}
    out = probed_cluster(cluster, probe)
    assert out.goodput == 1.0
    assert [(out.worker_up(g), out.worker_down(g)) for g in out.workers] == [
        (190e6, 191e6), (189e6, 192e6)]
    assert out.ps_up() == 188e6 and out.ps_down() == 190e6 and out.ps.count == 2


def test_a_probe_limited_by_its_peers_is_not_taken_as_the_links_rate() -> None:
    # A 1 Gbit PS among 100 Mbit workers: its probe reached only what the peers could take.
    cluster = Cluster.from_dict({"bandwidth": 100e6, "workers": 2,
                                 "ps": {"count": 1, "bandwidth": 1e9}})
    probe = {"w0": own(95e6, 95e6), "w1": own(95e6, 95e6),
             "ps0": own(190e6, 190e6, up_own=False, down_own=False)}
    out = probed_cluster(cluster, probe)
    assert out.ps_up() == pytest.approx(1e9 * cluster.goodput)
    assert out.ps_down() == pytest.approx(1e9 * cluster.goodput)
    assert out.worker_up(out.workers[0]) == 95e6


def test_worker_overrides_set_a_cap_and_its_communication_cpu() -> None:
    cluster = Cluster.from_dict({"bandwidth": 100e6, "workers": 2, "ps": 1})
    out = with_worker_overrides(cluster, {1: {"speed": 0.5, "cpu_cap": 0.5,
                                              "comm_cpu_s_per_byte": 1e-9}})
    assert [(g.speed, g.cpu_cap, g.comm_cpu_s_per_byte) for g in out.workers] == [
        (1.0, None, None), (0.5, 0.5, 1e-9)]


def test_quotas_on_a_server_cap_each_of_its_gpus_and_charge_its_fabric() -> None:
    # the emulated server's fabric is TCP over its loopback, timed in the session
    cluster = Cluster.from_dict({"bandwidth": 500e6, "ps": 1, "nodes": [
        {"count": 2, "gpus": 2, "intra": 1e9}]})
    speeds = {"node1/gpu0": {"speed": 0.7, "quota": 0.7},
              "node1/gpu1": {"speed": 0.7, "quota": 0.7}}
    out = with_quotas(cluster, speeds, 3e-9, 5e-9)
    assert [(g.count, g.speed, g.cpu_cap, g.comm_cpu_s_per_byte, g.intra_cpu_s_per_byte)
            for g in out.nodes] == [(1, 1.0, None, None, None), (1, 0.7, 0.7, 3e-9, 5e-9)]
    # not calibrated (no local aggregation): the fabric is not charged
    assert with_quotas(cluster, speeds, 3e-9).nodes[1].intra_cpu_s_per_byte is None
    assert out.worker_count == 4 and out.nodes[1].intra == 1e9


def test_quotas_on_workers_charge_their_nic_only() -> None:
    cluster = Cluster.from_dict({"bandwidth": 100e6, "workers": 2, "ps": 1})
    out = with_quotas(cluster, {"w1": {"speed": 0.5, "quota": 0.5}}, 1e-9)
    assert [(g.speed, g.cpu_cap, g.comm_cpu_s_per_byte) for g in out.workers] == [
        (1.0, None, None), (0.5, 0.5, 1e-9)]
