"""The private cap link of each PS connection (connection_caps.py): who owns one, how many
copies it stands for, and that it caps exactly one connection's stream."""

import pytest

from ddlperf.api import make_cluster, make_strategy, predict
from ddlperf.predictors.simulate.connection_caps import ConnectionCaps
from ddlperf.predictors.simulate.engine import Engine
from ddlperf.predictors.simulate.network import Network
from ddlperf.predictors.simulate.units import make_units
from ddlperf.scenario import resolve
from tests.conftest import make_workload

W = make_workload([(0.001, 0.002, [1_000_000])])


def scenario(local_aggregation: bool = False, **kw):
    strategy = make_strategy(local_aggregation=local_aggregation)
    return resolve(W, make_cluster(**kw), strategy)


def test_no_cap_no_link():
    sc = scenario(workers=4, ps=1)
    caps = ConnectionCaps(sc, Network(Engine()))
    (unit,) = make_units(sc, individual=False)
    assert caps.link(unit, sc.shards[0], "push") == ()
    assert caps.shares(lambda link: 1.0) == []


def test_every_gpu_owns_its_connection_without_aggregation():
    sc = scenario(workers=16, gpus_per_node=4, intra="PCIe3", ps=2, transport="200MB/s")
    (unit,) = make_units(sc, individual=False)
    caps = ConnectionCaps(sc, Network(Engine()))
    (link,) = caps.link(unit, sc.shards[1], "pull")
    assert (link.name, link.copies, link.capacity) == ("ps1 pull connection", 16, 200e6)


def test_a_server_owns_one_connection_per_shard_with_aggregation():
    sc = scenario(True, workers=16, gpus_per_node=4, intra="PCIe3", ps=2, transport="200MB/s")
    (unit,) = make_units(sc, individual=False)
    caps = ConnectionCaps(sc, Network(Engine()))
    (link,) = caps.link(unit, sc.shards[0], "push")
    assert link.copies == 4  # the 4 servers, each shared by its 4 GPUs' slices


def test_parts_of_one_server_share_its_connection():
    sc = scenario(True, workers=8, gpus_per_node=4, intra="PCIe3", ps=1, transport="200MB/s")
    units = make_units(sc, individual=True)
    caps = ConnectionCaps(sc, Network(Engine()))
    links = [caps.link(u, sc.shards[0], "push")[0] for u in units]
    assert len({id(link) for link in links}) == 2  # one per server
    assert links[0] is links[3] and links[3] is not links[4]
    assert caps.link(units[0], sc.shards[0], "pull")[0] is not links[0]  # its own direction


def test_the_busiest_connection_is_reported_per_shard_and_direction():
    p = predict(workload=W, workers=4, ps=2, sharding="even", bandwidth="10Gbps",
                transport="10MB/s", method="simulate", iterations=4, warmup=1, overlap=False)
    names = [r.name for r in p.resources]
    for k in (0, 1):
        assert f"ps{k} push connection" in names and f"ps{k} pull connection" in names
    push = next(r for r in p.resources if r.name == "ps0 push connection")
    assert push.busy_s == pytest.approx(0.5e6 / 10e6, rel=1e-6)  # half the tensor at the cap
