"""All-reduce phases on servers by hand (rings.py)."""

import pytest

from ddlperf.api import make_cluster, make_strategy, predict
from ddlperf.predictors.rings import ring_phases
from ddlperf.scenario import resolve
from tests.conftest import make_workload

GOODPUT = 1448 / 1514
W = make_workload([(0.001, 0.002, [8_000_000])])


def phases(algorithm="ring", **cluster):
    c = make_cluster(arch="allreduce", ps=0, **cluster)
    return ring_phases(resolve(W, c, make_strategy(arch="allreduce", allreduce=algorithm)))


def test_flat_ring_runs_at_its_slowest_link():
    (p,) = phases(workers=8, gpus_per_node=4, intra="PCIe3", bandwidth="25Gbps")
    assert (p.kind, p.steps, p.parts) == ("flat", 14, 8)
    assert p.rate == 25e9 * GOODPUT / 8 and p.binding == "node0 nic0 uplink" and not p.intra
    (p,) = phases(workers=8, gpus_per_node=4, intra="1Gbps", bandwidth="25Gbps")
    assert (p.rate, p.binding, p.intra) == (1e9 / 8, "node0 intra", True)
    (p,) = phases(workers=8, gpus_per_node=4, intra="PCIe3", bandwidth="25Gbps", rack_size=1,
                  rack_uplink="10Gbps")
    assert p.binding == "rack0 uplink"  # one edge per rack link: it runs at the full uplink


def test_one_server_rings_inside_only():
    (p,) = phases(workers=4, gpus_per_node=4, intra="PCIe3")
    assert (p.steps, p.parts, p.binding) == (6, 4, "node0 intra")


def test_hierarchical_phases():
    rs, across, ag = phases("hierarchical", workers=8, gpus_per_node=4, intra="PCIe3",
                            bandwidth="25Gbps", nics=2)
    assert [p.kind for p in (rs, across, ag)] == ["inside", "across", "inside"]
    assert (rs.steps, rs.parts, rs.rate, rs.intra) == (3, 4, 126e9 / 8, True)
    assert rs == ag
    # 4 GPUs share 2 × 25 Gbps: each of the 4 rings across servers gets a quarter
    assert (across.steps, across.parts) == (2, 8)
    assert across.rate == 2 * 25e9 * GOODPUT / 8 / 4 and not across.intra


def test_hierarchical_on_one_gpu_servers_is_the_flat_ring():
    (p,) = phases("hierarchical", workers=4, bandwidth="1Gbps")
    (q,) = phases("ring", workers=4, bandwidth="1Gbps")
    assert (p.steps, p.parts, p.rate) == (q.steps, q.parts, q.rate)


def test_hierarchical_needs_equal_servers():
    cluster = {"nodes": [{"count": 2, "gpus": 4, "intra": "PCIe3"}, {"count": 1, "gpus": 2,
                                                                       "intra": "PCIe3"}]}
    with pytest.raises(Exception, match="same number of GPUs"):
        phases("hierarchical", config=cluster)


def test_hierarchical_by_hand():
    # 2 servers × 2 GPUs, one 8 MB bucket, α = 10 µs, fabric 1 GB/s, NIC 1 Gbps:
    # reduce-scatter 1 × (α + 4 MB / 1 GB/s); across 2 × (α + 2 MB / (B/2)); all-gather = RS
    nic = 1e9 * GOODPUT / 8
    expected = 2 * (10e-6 + 4e6 / 1e9) + 2 * (10e-6 + 2e6 / (nic / 2))
    p = predict(workload=W, arch="allreduce", allreduce="hierarchical", workers=4,
                gpus_per_node=2, intra="1GB/s", bandwidth="1Gbps", latency="10us", ps=0)
    assert p.iteration_time_s == pytest.approx(0.003 + expected, rel=1e-12)
    assert p.breakdown_s["communication_intra"] == pytest.approx(
        2 * (10e-6 + 4e6 / 1e9), rel=1e-12)
