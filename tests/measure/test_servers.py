"""A scenario on servers as emulated hosts: rates, loopbacks, racks; what is refused; which
measurements split communication into intra- and inter-node."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ddlperf.api import make_cluster, make_strategy
from ddlperf.errors import InputError
from ddlperf.measure import servers
from ddlperf.measure.launcher import build_spec
from ddlperf.measure.trainer_common import rank_table
from ddlperf.scenario import resolve
from tests.conftest import make_workload

MBPS = 1e6


def _scenario(arch="ps", ps=1, allreduce="ring", **cluster):
    workload = make_workload([(0.01, 0.02, [1_000_000])])
    strategy = make_strategy(arch, "bsp", None, "round_robin", True, None, allreduce, False)
    c = make_cluster(None, cluster.pop("workers", 4), ps, cluster.pop("bandwidth", "200Mbps"),
                     None, None, cluster.pop("placement", None), arch, **cluster)
    return resolve(workload, c, strategy)


def test_a_server_is_one_host_with_its_nics_loopback_and_rack() -> None:
    sc = _scenario(gpus_per_node=2, intra="1Gbps", nics=2, rack_size=1, rack_uplink="300Mbps")
    spec = build_spec(sc, compute="emulated", iterations=1, warmup=0)
    hosts = {h.name: h for h in servers.host_specs(sc, rank_table(spec), {})}
    assert list(hosts) == ["node0", "node1", "ps0"]
    node = hosts["node1"]
    assert (node.uplink_bps, node.intra_bps, node.ranks, node.rack) == (400 * MBPS, 1e9, 2, 1)
    assert hosts["ps0"].rack is None and hosts["ps0"].intra_bps is None
    assert [r.uplink_bps for r in servers.rack_specs(sc)] == [300 * MBPS] * 2


@pytest.mark.parametrize("cluster,needles", [
    ({"gpus_per_node": 2, "intra": "PCIe3"}, ["more than this machine", "use intra: 2Gbps"]),
    ({"gpus_per_node": 2, "intra": "1Gbps", "placement": "colocated"}, ["dedicated"]),
    ({"gpus_per_node": 2, "intra": "1Gbps", "nics": 4, "bandwidth": "1Gbps"}, ["4 NICs"]),
    ({"rack_size": 2, "rack_uplink": "5Gbps"}, ["rack uplink"]),
])
def test_what_the_emulation_cannot_build_is_refused(cluster: dict, needles: list[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(servers.os, "cpu_count", lambda: 2)
    with pytest.raises(InputError) as info:
        servers.check_emulatable(_scenario(**cluster))
    for needle in needles:
        assert needle in str(info.value)


def _measured(communication: float) -> SimpleNamespace:
    return SimpleNamespace(breakdown_s={"communication": communication}, notes=[])


def test_communication_is_split_only_where_it_is_measured() -> None:
    ps = build_spec(_scenario(gpus_per_node=2, intra="1Gbps"), compute="emulated",
                    iterations=1, warmup=0)
    m = _measured(0.4)
    servers.split_communication(m, ps, [])
    assert m.breakdown_s["communication_intra"] == 0.0  # nothing crosses the loopback
    hier = build_spec(_scenario(arch="allreduce", ps=0, allreduce="hierarchical",
                                gpus_per_node=2, intra="1Gbps"), compute="emulated",
                      iterations=1, warmup=0)
    records = [{"type": "iteration", "iteration": 0, "allreduce_intra_s": 0.1,
                "allreduce_inter_s": 0.3}]
    m = _measured(0.4)
    servers.split_communication(m, hier, records)
    assert m.breakdown_s["communication_intra"] == pytest.approx(0.1)
    ring = build_spec(_scenario(arch="allreduce", ps=0, gpus_per_node=2, intra="1Gbps"),
                      compute="emulated", iterations=1, warmup=0)
    m = _measured(0.4)
    servers.split_communication(m, ring, [])
    assert "communication_intra" not in m.breakdown_s and "not split" in m.notes[0]
