import pytest
import yaml

from ddlperf.api import make_cluster, make_strategy
from ddlperf.cluster import TCP_ETHERNET_GOODPUT, Cluster, load_cluster
from ddlperf.errors import InputError
from ddlperf.strategy import DEFAULT_BUCKET_BYTES


def test_goodput_default_is_tcp_over_ethernet():
    assert pytest.approx(1448 / 1514) == TCP_ETHERNET_GOODPUT
    assert Cluster.from_dict({"workers": 2}).goodput == pytest.approx(0.956, abs=5e-4)


def test_yaml_heterogeneous_cluster(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({
        "bandwidth": "25GbE", "latency": "20us",
        "workers": [{"name": "fast", "count": 3, "device": "V100"},
                    {"name": "slow", "count": 1, "device": "K80", "uplink": "1Gbps"}],
        "ps": {"count": 2, "bandwidth": "100Gbps"},
    }))
    c = load_cluster(str(path))
    assert c.worker_count == 4 and c.heterogeneous
    assert c.bandwidth == 25e9 and c.latency == pytest.approx(20e-6)
    assert c.worker_up(c.workers[1]) == 1e9 and c.worker_down(c.workers[1]) == 25e9
    assert c.ps_up() == 100e9


def test_malformed_yaml(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("workers: [count: 3\n")
    with pytest.raises(InputError, match="not valid YAML"):
        load_cluster(str(path))


def test_unknown_yaml_key_is_named(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("workers: [{count: 2, sped: 2}]\n")
    with pytest.raises(InputError, match=r"workers\[0\]\.sped"):
        load_cluster(str(path))


def test_colocated_needs_enough_workers():
    with pytest.raises(InputError, match="colocated"):
        make_cluster(workers=2, ps=3, placement="colocated")


def test_flags_override_config_scalars():
    c = make_cluster({"workers": [{"count": 2}], "bandwidth": "1Gbps"}, bandwidth="10Gbps")
    assert c.bandwidth == 10e9


def test_workers_flag_conflicts_with_config_workers():
    with pytest.raises(InputError, match="--workers"):
        make_cluster({"workers": [{"count": 2}]}, workers=4)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"sync": "ssp"}, "add --staleness"),
     ({"sync": "ssp", "staleness": -1}, "≥ 0"),
     ({"arch": "allreduce", "sync": "asp"}, "synchronous"),
     ({"bucket_size": "0MB"}, "--bucket-size"),
     ({"sharding": "random"}, "sharding")],
)
def test_incoherent_strategy(kwargs, match):
    with pytest.raises(InputError, match=match):
        make_strategy(**kwargs)


def test_strategy_defaults():
    s = make_strategy()
    assert (s.arch, s.sync, s.sharding, s.overlap) == ("ps", "bsp", "round_robin", True)
    assert s.bucket_bytes == DEFAULT_BUCKET_BYTES == 25 * 2**20
    assert make_strategy(sync="ssp", staleness=0).effective_sync == "bsp"


# -- servers (nodes:), racks and the strategy flags on servers ----------------------------------


DGX = {"bandwidth": "25GbE", "nodes": [{"name": "dgx", "count": 4, "gpus": 8, "device": "V100",
                                        "intra": "NVLink2", "nics": 2, "bandwidth": "100Gbps"}],
       "racks": {"servers": 2, "uplink": "100Gbps"}, "ps": {"count": 2}}


def test_nodes_yaml(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(DGX))
    c = load_cluster(str(path))
    assert (c.worker_count, c.server_count, c.multi_gpu) == (32, 4, True)
    (g,) = c.servers()
    assert (g.count, g.gpus, g.nics, g.up, g.intra) == (4, 8, 2, 100e9, 1.2e12)
    assert c.racks is not None and (c.racks.servers, c.racks.down) == (2, 100e9)
    # what predictions echo in inputs.cluster reads back as the same cluster
    assert Cluster.from_dict(c.to_dict()) == c and "workers" not in c.to_dict()


def test_workers_are_one_gpu_servers_without_fabric():
    c = Cluster.from_dict({"workers": [{"count": 3, "uplink": "1Gbps"}], "bandwidth": "10Gbps"})
    (g,) = c.servers()
    assert (g.count, g.gpus, g.intra, g.nics, g.up, g.down) == (3, 1, None, 1, 1e9, 10e9)
    assert not c.multi_gpu and "nodes" not in c.to_dict()
    # a fabric given to one-GPU servers has nothing to link
    one = Cluster.from_dict({"nodes": [{"count": 2, "gpus": 1, "intra": "PCIe3"}]})
    assert one.servers()[0].intra is None


@pytest.mark.parametrize(
    ("data", "match"),
    [({"nodes": [{"count": 2, "gpus": 0}]}, r"nodes\[0\]\.gpus"),
     ({"nodes": [{"gpus": 4, "intra": "NVlink5"}]}, "unknown fabric 'NVlink5' — did you mean"),
     ({"nodes": [{"gpus": 4}]}, "need an intra-node fabric"),
     ({"nodes": [{"nics": 0}]}, r"nodes\[0\]\.nics"),
     ({"nodes": 2, "racks": {"servers": 0, "uplink": "10Gbps"}}, r"racks\.servers"),
     ({"nodes": 2, "racks": {"servers": 2}}, r"racks\.uplink"),
     ({"nodes": 2, "workers": 2}, "either workers or nodes"),
     ({"ps": 1}, "no workers"),
     ({"nodes": [{"count": 2, "gpus": 4, "intra": "PCIe3"}], "ps": {"count": 3,
                                                                   "placement": "colocated"}},
      "worker servers")],
)
def test_bad_servers(data, match):
    with pytest.raises(InputError, match=match):
        Cluster.from_dict(data)


def test_server_flags():
    c = make_cluster(workers=32, gpus_per_node=8, intra="nvlink2", nics=2, rack_size=2,
                     rack_uplink="100Gbps")
    (g,) = c.servers()
    assert (g.count, g.gpus, g.nics, g.intra) == (4, 8, 2, 1.2e12)
    assert c.racks is not None and c.racks.uplink == 100e9
    # --intra / --nics override every node group of a file
    assert make_cluster(DGX, intra="PCIe4", nics=1).servers()[0].intra == 252e9


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"workers": 10, "gpus_per_node": 4}, "--workers: 10 workers do not fill servers of 4"),
     ({"workers": 8, "gpus_per_node": 0}, "--gpus-per-node"),
     ({"workers": 8, "gpus_per_node": 4}, "--gpus-per-node: .* add --intra"),
     ({"workers": 8, "intra": "PCIe3"}, "--intra: .* one GPU"),
     ({"workers": 8, "gpus_per_node": 4, "intra": "warp"}, "--intra: unknown fabric"),
     ({"workers": 8, "nics": 0}, "--nics"),
     ({"rack_size": 2}, "--rack-size: .* add --rack-uplink"),
     ({"rack_uplink": "1Gbps"}, "add --rack-size"),
     ({"rack_size": 0, "rack_uplink": "1Gbps"}, "--rack-size"),
     ({"config": DGX, "gpus_per_node": 4}, "--gpus-per-node: the --config file"),
     ({"config": {"workers": 4}, "intra": "PCIe3"}, "--intra: the --config file lists workers"),
     ({"config": DGX, "workers": 8}, "--workers: the --config file already lists nodes")],
)
def test_bad_server_flags(kwargs, match):
    with pytest.raises(InputError, match=match):
        make_cluster(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"sync": "asp", "local_aggregation": True}, "--local-aggregation: .* --sync bsp"),
     ({"arch": "allreduce", "allreduce": "tree"}, "--allreduce"),
     ({"sync": "asp", "step_barrier": True}, "--step-barrier: .* BSP parameter server"),
     ({"sync": "ssp", "staleness": 2, "step_barrier": True}, "--step-barrier")],
)
def test_incoherent_server_strategy(kwargs, match):
    with pytest.raises(InputError, match=match):
        make_strategy(**kwargs)


@pytest.mark.parametrize(("kwargs", "attr", "value"), [
    ({"sync": "bsp", "staleness": 2}, "staleness", None),
    ({"allreduce": "hierarchical"}, "allreduce", "ring"),
    ({"arch": "allreduce", "local_aggregation": True}, "local_aggregation", False),
    ({"arch": "allreduce", "step_barrier": True}, "step_barrier", False),
])
def test_options_that_do_not_apply_are_dropped_not_refused(kwargs, attr, value):
    """They do not change the scenario; predict says so in a note (ignored_flags)."""
    assert getattr(make_strategy(**kwargs), attr) == value


def test_server_strategy_defaults():
    s = make_strategy()
    assert (s.allreduce, s.local_aggregation) == ("ring", False)
    assert make_strategy(sync="ssp", staleness=0, local_aggregation=True).local_aggregation
    assert not s.step_barrier
    assert make_strategy(sync="ssp", staleness=0, step_barrier=True).step_barrier  # SSP(0) is BSP
