"""Servers planned into segments, and the path rates PS workers see (topology.py)."""

import pytest

from ddlperf.api import make_cluster, make_strategy
from ddlperf.cluster import TCP_ETHERNET_GOODPUT as GOODPUT
from ddlperf.topology import plan_servers


def plan(shard_bytes=(10.0,), arch="ps", aggregate=False, **cluster):
    import numpy as np

    c = make_cluster(arch=arch, **cluster)
    s = make_strategy(arch=arch, local_aggregation=aggregate)
    return plan_servers(c, s, np.array(shard_bytes) if arch == "ps" else np.zeros(0))


def test_workers_are_one_segment_at_the_nic_rate():
    (seg,), racks = plan(workers=8, ps=1, bandwidth="10Gbps")
    assert racks is None
    assert (seg.first_server, seg.servers, seg.intra) == (0, 8, None)
    assert seg.up == seg.nic_up == 10e9 * GOODPUT / 8


def test_gpus_share_the_nics_and_are_capped_by_their_fabric():
    (seg,), _ = plan(workers=16, gpus_per_node=8, intra="10GB/s", nics=2, ps=1,
                     bandwidth="100Gbps")
    nic = 2 * 100e9 * GOODPUT / 8
    assert seg.nic_up == nic and seg.intra == 10e9
    assert seg.up == min(nic / 8, 10e9)  # 2 × 100 Gbps over 8 GPUs: 2.99 GB/s each


def test_whole_racks_merge_and_a_partial_rack_stays_apart():
    segments, racks = plan(workers=10, ps=1, bandwidth="10Gbps", rack_size=4,
                           rack_uplink="20Gbps")
    assert [(s.first_server, s.servers, s.whole_racks, s.rack) for s in segments] == [
        (0, 8, 2, 0), (8, 2, 0, 2)]
    assert racks is not None and racks.count == 3
    nic = 10e9 * GOODPUT / 8
    # dedicated PS on the core switch: 4 workers share a 20 Gbps uplink, 2 share the last
    assert segments[0].up == min(nic, 20e9 * GOODPUT / 8 / 4)
    assert segments[1].up == nic
    assert racks.crossing == (40.0, 40.0, 20.0)  # workers × shard bytes, per rack


def test_groups_sharing_a_rack_are_separate_segments():
    cluster = {"nodes": [{"count": 3, "gpus": 2, "intra": "PCIe3"},
                         {"name": "b", "count": 3, "gpus": 1}]}
    segments, _ = plan(config=cluster, ps=1, rack_size=4, rack_uplink="40Gbps")
    assert [(s.group.name, s.first_server, s.servers) for s in segments] == [
        ("node", 0, 3), ("b", 3, 1), ("b", 4, 2)]


def test_colocated_shards_in_one_rack_cross_no_rack_link():
    segments, racks = plan(shard_bytes=(5.0, 5.0), workers=4, ps=2, placement="colocated",
                           rack_size=4, rack_uplink="1Gbps")
    assert racks is not None and racks.crossing == (0.0,)
    assert segments[0].up == segments[0].nic_up


@pytest.mark.parametrize("aggregate", [False, True])
def test_aggregation_counts_servers_on_the_rack_link(aggregate):
    _, racks = plan(workers=8, gpus_per_node=4, intra="PCIe3", ps=1, rack_size=1,
                    rack_uplink="10Gbps", aggregate=aggregate)
    # two servers, one per rack: 4 GPUs push 10 bytes each, or the server pushes 10 once
    assert racks is not None and racks.crossing == ((10.0, 10.0) if aggregate else (40.0, 40.0))


def test_allreduce_has_no_ps_crossing():
    _, racks = plan(arch="allreduce", workers=8, ps=0, rack_size=2, rack_uplink="1Gbps")
    assert racks is not None and racks.crossing == (0.0,) * 4
