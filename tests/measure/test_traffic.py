"""Expected payload on servers and racks: what each NIC, rack link and loopback must carry.

Worked example: a model of two tensors (4 MB + 2 MB = 1.5 M float32 elements), 2 servers ×
2 GPUs; N = 4, S = 2, G = 2, B = 6 MB.
"""

from __future__ import annotations

import pytest

from ddlperf.api import make_cluster, make_strategy
from ddlperf.measure.launcher import build_spec
from ddlperf.measure.traffic import expected_flows, host_links, link_loads, rank_payload
from ddlperf.scenario import resolve
from tests.conftest import make_workload

B = 6_000_000


@pytest.fixture
def workload():
    return make_workload([(0.01, 0.02, [4_000_000]), (0.01, 0.02, [2_000_000])])


def _spec(workload, arch="ps", ps=1, allreduce="ring", aggregation=False, **cluster):
    strategy = make_strategy(arch, "bsp", None, "round_robin", True, None, allreduce,
                             aggregation)
    c = make_cluster(None, cluster.pop("workers", 4), ps, "200Mbps", None, None, None, arch,
                     **cluster)
    return build_spec(resolve(workload, c, strategy), compute="emulated", iterations=1,
                      warmup=0)


def _totals(spec) -> dict[str, float]:
    return {k: sum(v.values()) for k, v in link_loads(spec, expected_flows(spec)).items()}


def test_ps_without_aggregation_pushes_g_times_through_each_nic(workload) -> None:
    spec = _spec(workload, gpus_per_node=2, intra="1Gbps")
    loads = _totals(spec)
    assert host_links(spec) == {"node0": "node0 nic0", "node1": "node1 nic0", "ps0": "ps0"}
    assert loads["node0 nic0 uplink"] == pytest.approx(2 * B)
    assert loads["node1 nic0 downlink"] == pytest.approx(2 * B)
    assert loads["ps0 downlink"] == pytest.approx(4 * B)
    assert "node0 intra" not in loads  # nothing crosses the fabric


def test_local_aggregation_sends_each_byte_once_and_slices_over_the_loopback(workload) -> None:
    spec = _spec(workload, gpus_per_node=2, intra="1Gbps", aggregation=True)
    loads = _totals(spec)
    assert loads["node0 nic0 uplink"] == pytest.approx(B)
    assert loads["ps0 downlink"] == pytest.approx(2 * B)
    # per GPU: reduce-scatter (G−1)/G · B out, all-gather (G−1)/G · B out
    assert loads["node0/gpu0 intra"] == pytest.approx(B)
    assert loads["node0 intra"] == pytest.approx(2 * B)
    assert rank_payload(spec, "node0/gpu1") == {"sent": pytest.approx(1.5 * B),
                                                "remote": pytest.approx(B / 2)}


def test_flat_ring_puts_one_edge_on_each_nic_and_on_each_fabric(workload) -> None:
    spec = _spec(workload, arch="allreduce", ps=0, gpus_per_node=2, intra="1Gbps")
    loads = _totals(spec)
    edge = 2 * 3 / 4 * B  # 2(N−1)/N · B
    assert loads["node0 nic0 uplink"] == pytest.approx(edge)
    assert loads["node1 nic0 downlink"] == pytest.approx(edge)
    assert loads["node0 intra"] == pytest.approx(edge)


def test_hierarchical_moves_2s_minus_1_over_s_through_each_nic(workload) -> None:
    spec = _spec(workload, arch="allreduce", ps=0, allreduce="hierarchical", gpus_per_node=2,
                 intra="1Gbps")
    loads = _totals(spec)
    assert loads["node0 nic0 uplink"] == pytest.approx(2 * 1 / 2 * B)  # 2(S−1)/S · B
    assert loads["node1/gpu1 intra"] == pytest.approx(2 * 1 / 2 * B)  # 2(G−1)/G · B


def test_racks_carry_what_leaves_them(workload) -> None:
    spec = _spec(workload, gpus_per_node=1, rack_size=2, rack_uplink="200Mbps")
    loads = _totals(spec)
    assert loads["rack0 uplink"] == pytest.approx(2 * B)  # two servers push to the core PS
    assert loads["rack1 downlink"] == pytest.approx(2 * B)  # and pull back
    ring = _spec(workload, arch="allreduce", ps=0, gpus_per_node=1, rack_size=2,
                 rack_uplink="200Mbps")
    loads = _totals(ring)
    assert loads["rack0 uplink"] == pytest.approx(2 * 3 / 4 * B)  # one ring edge leaves
