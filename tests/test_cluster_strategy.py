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
    [({"sync": "bsp", "staleness": 2}, "only applies to --sync ssp"),
     ({"sync": "ssp"}, "add --staleness"),
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
