"""Ring edges of each all-reduce phase on servers, grouped into classes (ring_paths.py)."""

import pytest

from ddlperf.api import make_cluster, make_strategy
from ddlperf.predictors.simulate.ring_paths import ring_edges
from ddlperf.predictors.simulate.units import make_units
from ddlperf.scenario import resolve
from tests.conftest import make_workload

W = make_workload([(0.001, 0.002, [1_000_000])])


def units_of(individual=False, **kw):
    sc = resolve(W, make_cluster(arch="allreduce", ps=0, **kw), make_strategy(arch="allreduce"))
    return sc, make_units(sc, individual=individual)


def summary(edges):
    return sorted((e.src.index, e.dst.index, e.kind, e.count) for e in edges)


def test_flat_ring_on_servers():
    sc, units = units_of(workers=16, gpus_per_node=4, intra="PCIe3", rack_size=2,
                         rack_uplink="10Gbps")
    edges = ring_edges(units, sc.racks, "flat")
    # 4 servers × 3 edges inside, 2 between servers of a rack, 2 between racks (incl. wrap)
    assert summary(edges) == [(0, 0, "intra", 12), (0, 0, "nic", 2), (0, 0, "rack", 2)]
    rack = next(e for e in edges if e.kind == "rack")
    assert [name for _, name in rack.hops] == [
        "node0 intra", "node0 nic0 uplink", "rack0 uplink", "rack0 downlink",
        "node0 nic0 downlink", "node0 intra"]
    assert sum(e.count for e in edges) == 16  # one edge per worker


def test_phases_of_hierarchical():
    sc, units = units_of(workers=8, gpus_per_node=4, intra="PCIe3", nics=2)
    inside = ring_edges(units, sc.racks, "inside")
    across = ring_edges(units, sc.racks, "across")
    assert summary(inside) == [(0, 0, "intra", 8)]
    assert summary(across) == [(0, 0, "nic", 8)]
    nic = sc.groups[0].nic_up
    # each NIC direction carries its server's 4 rings: a quarter each
    assert across[0].hops[1] == (nic / 4, "node0 nic0-1 uplink")


def test_individual_gpus_keep_their_group_classes():
    # Units of one GPU each (compute noise) do not split the network's classes: edges between
    # the same pair of groups over the same kind of path are one flow (issue 14).
    _sc, units = units_of(individual=True, workers=4, gpus_per_node=2, intra="PCIe3")
    assert len(units) == 4
    assert summary(ring_edges(units, None, "across")) == [(0, 2, "nic", 4)]
    assert summary(ring_edges(units, None, "inside")) == [(0, 1, "intra", 4)]
    sc = resolve(W, make_cluster({"workers": [{"count": 3}, {"count": 2, "speed": 0.5}]},
                                 arch="allreduce", ps=0), make_strategy(arch="allreduce"))
    mixed = make_units(sc, individual=True)
    assert summary(ring_edges(mixed, None, "flat")) == [
        (0, 1, "nic", 2), (2, 3, "nic", 1), (3, 4, "nic", 1), (4, 0, "nic", 1)]


def test_unknown_phase():
    _sc, units = units_of(workers=2)
    with pytest.raises(ValueError, match="phase"):
        ring_edges(units, None, "tree")
