"""Units of identical workers on servers (units.py) and the links they share (fabric.py)."""

from ddlperf.api import make_cluster, make_strategy
from ddlperf.predictors.simulate.engine import Engine
from ddlperf.predictors.simulate.fabric import ServerLinks
from ddlperf.predictors.simulate.network import Network
from ddlperf.predictors.simulate.units import make_units
from ddlperf.scenario import resolve
from tests.conftest import make_workload

W = make_workload([(0.001, 0.002, [1_000_000])])


def scenario(**kw):
    strategy = make_strategy(**{k: kw.pop(k) for k in ("arch",) if k in kw})
    return resolve(W, make_cluster(arch=strategy.arch, **kw), strategy)


def test_identical_servers_are_one_unit():
    sc = scenario(workers=512, gpus_per_node=8, intra="NVLink2", ps=8)
    (unit,) = make_units(sc, individual=False)
    assert (unit.count, unit.servers, unit.label) == (512, 64, "node0–node63")
    links = ServerLinks(sc, [unit], Network(Engine()))
    assert links.nic[0].up.copies == 64 and links.intra[0].up.copies == 512  # type: ignore[union-attr]


def test_individual_gpus_share_their_servers_nic():
    sc = scenario(workers=8, gpus_per_node=4, intra="PCIe3", ps=1)
    units = make_units(sc, individual=True)
    assert [u.servers for u in units] == [0] * 8
    assert [u.label for u in units[:2]] == ["node0/gpu0", "node0/gpu1"]
    links = ServerLinks(sc, units, Network(Engine()))
    assert len({id(n) for n in links.nic}) == 2  # one NIC object per server
    assert links.nic[0] is links.nic[3] and links.nic[3] is not links.nic[4]
    assert len({id(i) for i in links.intra}) == 8


def test_a_colocated_host_gpu_is_its_own_unit_on_its_servers_nic():
    sc = scenario(workers=12, gpus_per_node=4, intra="PCIe3", ps=1, placement="colocated")
    units = make_units(sc, individual=False)
    assert [(u.first, u.count, u.hosts, u.servers) for u in units] == [
        (0, 1, 0, 0), (1, 3, None, 0), (4, 8, None, 2)]
    links = ServerLinks(sc, units, Network(Engine()))
    assert links.nic[0] is links.nic[1] and links.nic[2].up.copies == 2
    shard = sc.shards[0]
    nic = links.host_nic(shard)
    # its own server's GPUs reach the shard over their fabric links only; others via NICs
    assert links.to_shard(1, shard, nic) == (links.intra[1].up,)  # type: ignore[union-attr]
    assert links.to_shard(2, shard, nic) == (links.intra[2].up, links.nic[2].up, nic.down)  # type: ignore[union-attr]


def test_rack_links_on_the_path_to_a_dedicated_shard():
    sc = scenario(workers=8, ps=1, rack_size=4, rack_uplink="10Gbps")
    (unit,) = make_units(sc, individual=False)
    net = Network(Engine())
    links = ServerLinks(sc, [unit], net)
    shard_nic = net.add_nic("ps0", 1.0)
    path = links.to_shard(0, sc.shards[0], shard_nic)
    rack = links.rack[0]
    assert rack is not None and rack.up.copies == 2  # two whole racks in lockstep
    assert path == (links.nic[0].up, rack.up, shard_nic.down)
    assert links.from_shard(0, sc.shards[0], shard_nic) == (shard_nic.up, rack.down,
                                                             links.nic[0].down)


def test_one_gpu_hosts_have_no_fabric_link():
    sc = scenario(workers=4, ps=1, placement="colocated")
    units = make_units(sc, individual=False)
    links = ServerLinks(sc, units, Network(Engine()))
    assert links.intra == [None, None]
    assert links.to_shard(0, sc.shards[0], links.host_nic(sc.shards[0])) == ()
