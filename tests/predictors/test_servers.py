"""What must hold for both predictors on multi-GPU servers and racks (issue 12).

Byte counts come from the simulator's link accounting (busy share × period × capacity = the
bytes a link moved per iteration), not from the formulas under test.
"""

from __future__ import annotations

import re

import pytest

from ddlperf.api import predict
from ddlperf.workload import zoo
from tests.conftest import make_workload

GOODPUT = 1448 / 1514
METHODS = ("analytic", "simulate")

# three layers, 14 MB of gradients: quick to simulate, several tensors to overlap
TOY = make_workload([(0.004, 0.008, [4_000_000, 2_000]), (0.003, 0.006, [6_000_000]),
                     (0.002, 0.004, [4_000_000])], update_s_per_byte=2e-10)
B = 14_002_000


def run(method: str, **kw):
    kw.setdefault("workload", TOY)
    if method == "simulate":
        kw.setdefault("iterations", 6)
        kw.setdefault("warmup", 2)
    return predict(method=method, **kw)


def link_bytes(p, name: str, rate_bps: float, goodput: float = GOODPUT) -> float:
    """Bytes per iteration through one link named ``name`` of ``rate_bps`` line rate."""
    use = next(r for r in p.resources if r.name == name)
    return use.utilization * p.iteration_time_s * rate_bps * goodput / 8


# -- a server of one GPU is a worker host ----------------------------------------------------


def _as_workers(name: str) -> str:
    """``node3 nic0 uplink`` → ``w3 uplink``, ``node3/gpu0`` → ``w3`` (one GPU per server)."""
    return re.sub(r"node(\d+)(/gpu0| nic0)?", r"w\1", name)


def _nodes_of(cluster: dict) -> dict:
    out = dict(cluster)
    out["nodes"] = [{**g, "gpus": 1} for g in out.pop("workers")]
    return out


MIXED = {"workers": [{"count": 3, "bandwidth": "1Gbps"},
                     {"name": "slow", "count": 2, "speed": 0.7, "uplink": "500Mbps"}],
         "bandwidth": "2Gbps"}
SAME_CASES = [
    pytest.param(MIXED, dict(ps=2), id="ps-mixed"),
    pytest.param(MIXED, dict(ps=2, placement="colocated", overlap=False), id="ps-colocated"),
    pytest.param(MIXED, dict(ps=1, sync="ssp", staleness=1), id="ssp"),
    pytest.param(MIXED, dict(ps=2, sync="asp", sharding="even"), id="asp"),
    pytest.param(MIXED, dict(arch="allreduce", ps=0, bucket_size="5MB"), id="ring"),
    pytest.param(MIXED, dict(arch="allreduce", ps=0, allreduce="hierarchical"), id="hier"),
    pytest.param({**MIXED, "racks": {"servers": 2, "uplink": "1Gbps"}}, dict(ps=2),
                 id="ps-racks"),
    pytest.param({"workers": [{"count": 4}], "bandwidth": "1Gbps"},
                 dict(ps=2, local_aggregation=True), id="aggregation-ignored"),
]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(("cluster", "kw"), SAME_CASES)
def test_one_gpu_servers_predict_exactly_what_workers_do(method, cluster, kw):
    a = run(method, cluster=cluster, **kw)
    b = run(method, cluster=_nodes_of(cluster), **kw)
    for key in ("iteration_time_s", "throughput_samples_per_s", "speedup",
                "scaling_efficiency"):
        assert getattr(b, key) == getattr(a, key), key
    assert b.breakdown_s == a.breakdown_s
    assert _as_workers(b.bottleneck) == a.bottleneck
    assert [(_as_workers(w.name), w.iteration_time_s, w.wait_s) for w in b.workers] == [
        (w.name, w.iteration_time_s, w.wait_s) for w in a.workers]
    assert [(_as_workers(r.name), r.busy_s) for r in b.resources] == [
        (r.name, r.busy_s) for r in a.resources]


def test_one_gpu_servers_with_jitter_simulate_like_workers():
    kw = dict(ps=2, jitter=0.1, seed=3, replications=2)
    a = run("simulate", cluster=MIXED, **kw)
    b = run("simulate", cluster=_nodes_of(MIXED), **kw)
    assert b.iteration_time_s == a.iteration_time_s
    assert b.percentiles == a.percentiles


# -- flat ring and hierarchical all-reduce -----------------------------------------------------


SERVERS = dict(workers=16, gpus_per_node=4, intra="PCIe4", bandwidth="10Gbps", ps=0,
               arch="allreduce", latency="20us", bucket_size="4MB")


@pytest.mark.parametrize("method", METHODS)
def test_flat_ring_is_an_n_host_ring_at_the_nic_rate(method):
    ring = run(method, **SERVERS)
    hosts = run(method, workers=16, bandwidth="10Gbps", ps=0, arch="allreduce", latency="20us",
                bucket_size="4MB")
    assert ring.iteration_time_s == pytest.approx(hosts.iteration_time_s, rel=1e-9)
    assert ring.bottleneck == "ring (node0 nic0 uplink)"
    if method == "simulate":
        n = 16
        for name in ("node0 nic0 uplink", "node0 nic0 downlink"):
            assert link_bytes(ring, name, 10e9) == pytest.approx(2 * (n - 1) / n * B, rel=1e-3)


@pytest.mark.parametrize("method", METHODS)
def test_hierarchical_moves_less_through_the_nic_and_is_faster(method):
    flat = run(method, **SERVERS)
    hier = run(method, allreduce="hierarchical", **SERVERS)
    assert hier.iteration_time_s < flat.iteration_time_s
    assert hier.breakdown_s["communication_intra"] > 0
    assert flat.breakdown_s["communication_intra"] == 0  # the NIC binds every flat ring step
    if method == "simulate":
        servers = 4
        per_server = link_bytes(hier, "node0 nic0 uplink", 10e9)
        assert per_server == pytest.approx(2 * (servers - 1) / servers * B, rel=1e-3)


def test_no_gain_from_hierarchical_when_the_fabric_binds():
    # a fabric slower than a NIC's share: every GPU's fabric link moves 2(N−1)/N of the bytes
    # either way (hierarchical: 2(G−1)/G inside, 2(S−1)/(G·S) across), so the two differ
    # only by hierarchical's fewer latencies (12 steps instead of 30)
    slow = {**SERVERS, "intra": "1Gbps"}
    flat = run("analytic", **slow)
    hier = run("analytic", allreduce="hierarchical", **slow)
    assert flat.bottleneck == "ring (node0 intra)"
    assert flat.breakdown_s["communication_intra"] == flat.breakdown_s["communication"]
    buckets = 3  # 4 MB, 6 MB, 4 MB in gradient order: each closes a 4 MB bucket
    saved = buckets * (30 - 12) * 20e-6
    assert flat.iteration_time_s - hier.iteration_time_s == pytest.approx(saved, rel=1e-6)


# -- parameter server on servers ---------------------------------------------------------------


PS = dict(workers=8, gpus_per_node=4, intra="NVLink2", bandwidth="10Gbps", ps=1, latency=0,
          cluster={"workers": 1, "ps": {"count": 1, "bandwidth": "400Gbps"}})


def _ps(method, **kw):
    spec = {**PS, **kw}
    cluster = dict(spec.pop("cluster"))
    cluster.pop("workers")
    return run(method, cluster=cluster, **spec)


@pytest.mark.parametrize("method", METHODS)
def test_ps_without_aggregation_puts_g_times_the_bytes_through_each_nic(method):
    servers = _ps(method)
    hosts = _ps(method, workers=2, gpus_per_node=None, intra=None)
    assert servers.bottleneck == "node0 nic0 uplink"
    assert servers.iteration_time_s > hosts.iteration_time_s
    if method == "simulate":
        g = 4
        for name in ("node0 nic0 uplink", "node0 nic0 downlink"):
            assert link_bytes(servers, name, 10e9) == pytest.approx(g * B, rel=1e-3)
        assert link_bytes(hosts, "w0 uplink", 10e9) == pytest.approx(B, rel=1e-3)


@pytest.mark.parametrize("method", METHODS)
def test_ps_with_aggregation_is_one_gpu_servers_plus_the_reduction(method):
    agg = _ps(method, local_aggregation=True, overlap=False)
    hosts = _ps(method, workers=2, gpus_per_node=None, intra=None, overlap=False)
    g, intra = 4, 150e9  # NVLink2, bytes/s
    reduction = 2 * (g - 1) / g * B / intra  # reduce-scatter + all-gather of every tensor
    extra = agg.iteration_time_s - hosts.iteration_time_s
    assert 0 < extra <= reduction * (1 + 1e-6)
    assert agg.breakdown_s["communication_intra"] > 0
    if method == "simulate":
        assert link_bytes(agg, "node0 nic0 uplink", 10e9) == pytest.approx(B, rel=1e-3)


# -- racks ---------------------------------------------------------------------------------------


RACKED = dict(workers=8, gpus_per_node=2, intra="NVLink2", bandwidth="10Gbps", latency=0,
              overlap=False, rack_size=2)


def _comm(p) -> float:
    return p.iteration_time_s - p.breakdown_s["compute"]


@pytest.mark.parametrize("method", METHODS)
def test_two_to_one_oversubscription_doubles_cross_rack_transfers(method):
    # 2 servers × 10 Gbps per rack; PS on the core switch: every byte crosses the uplink
    cluster = {"ps": {"count": 1, "bandwidth": "400Gbps", "update_s_per_byte": 0}}
    full = run(method, cluster=cluster, rack_uplink="20Gbps", **RACKED)
    half = run(method, cluster=cluster, rack_uplink="10Gbps", **RACKED)
    assert _comm(half) == pytest.approx(2 * _comm(full), rel=1e-6)
    assert half.bottleneck.startswith("rack")


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("kw", [dict(arch="allreduce", ps=0),
                                dict(arch="allreduce", ps=0, allreduce="hierarchical"),
                                dict(ps=2, placement="colocated")])
def test_oversubscription_does_nothing_inside_one_rack(method, kw):
    one_rack = {**RACKED, "workers": 4}
    fast = run(method, rack_uplink="20Gbps", **one_rack, **kw)
    slow = run(method, rack_uplink="1Gbps", **one_rack, **kw)
    none = run(method, **{k: v for k, v in one_rack.items() if k != "rack_size"}, **kw)
    assert slow.iteration_time_s == fast.iteration_time_s == none.iteration_time_s


# -- simulate agrees with analytic where analytic is exact ------------------------------------


AGREE = [
    pytest.param(dict(**SERVERS), id="flat-ring"),
    pytest.param(dict(**SERVERS, allreduce="hierarchical"), id="hierarchical"),
    pytest.param(dict(SERVERS, nics=2, intra="NVLink2"), id="ring-2nics"),
    pytest.param(dict(SERVERS, rack_size=2, rack_uplink="5Gbps", allreduce="hierarchical"),
                 id="hierarchical-racks"),
    pytest.param(dict(workers=16, gpus_per_node=4, intra="NVLink2", ps=2, bandwidth="10Gbps"),
                 id="ps"),
    pytest.param(dict(workers=16, gpus_per_node=4, intra="NVLink2", ps=2, bandwidth="10Gbps",
                      overlap=False), id="ps-no-overlap"),
    pytest.param(dict(workers=16, gpus_per_node=4, intra="NVLink2", ps=2, bandwidth="10Gbps",
                      local_aggregation=True), id="ps-aggregation"),
    pytest.param(dict(workers=16, gpus_per_node=4, intra="NVLink2", ps=2, bandwidth="10Gbps",
                      rack_size=2, rack_uplink="10Gbps"), id="ps-racks"),
]


@pytest.mark.parametrize("kw", AGREE)
def test_simulate_agrees_with_analytic(kw):
    a = run("analytic", **kw)
    s = run("simulate", **kw)
    assert s.iteration_time_s == pytest.approx(a.iteration_time_s, rel=0.02)
    assert s.breakdown_s["communication_intra"] == pytest.approx(
        a.breakdown_s["communication_intra"], rel=0.05, abs=1e-6)


def test_simulate_agrees_on_a_dgx_pod():
    w = zoo.load("resnet50", batch_size=32, device="V100")
    kw = dict(workload=w, workers=64, gpus_per_node=8, intra="NVLink2", bandwidth="100Gbps",
              arch="allreduce", ps=0)
    for algorithm in ("ring", "hierarchical"):
        a = predict(allreduce=algorithm, **kw)
        s = predict(allreduce=algorithm, method="simulate", iterations=5, **kw)
        assert s.iteration_time_s == pytest.approx(a.iteration_time_s, rel=1e-6)
        assert s.bottleneck == a.bottleneck


def test_asp_gpus_of_one_server_move_on_phases_of_their_own():
    # 2 servers × 2 GPUs behind 200 Mbit NICs, one 400 Mbit shard (the dev matrix's
    # fresh-srv-ps-asp-2x2): GPUs that have parted use the NIC whole while the other one
    # computes, so ASP runs faster than BSP's lockstep (measured: 0.67-0.71 s parted against
    # 0.84 s together), in both predictors alike
    workload = make_workload([(0.01, 0.02, [1_000_000])] * 8, update_s_per_byte=5e-10)
    cluster = {"bandwidth": "200Mbps", "latency": "50us",
               "nodes": {"count": 2, "gpus": 2, "intra": "1Gbps"},
               "ps": {"count": 1, "bandwidth": "400Mbps"}}
    asp = predict(workload=workload, cluster=cluster, sync="asp")
    bsp = predict(workload=workload, cluster=cluster)
    assert asp.iteration_time_s < 0.9 * bsp.iteration_time_s
    simulated = predict(workload=workload, cluster=cluster, sync="asp", method="simulate",
                        iterations=20)
    assert asp.iteration_time_s == pytest.approx(simulated.iteration_time_s, rel=0.02)




@pytest.mark.parametrize("gpus,servers", [(2, 4), (1, 4)])
def test_asp_workers_meet_at_their_racks_uplink_as_customers_of_their_own(gpus, servers):
    # racks of 2 servers behind a 150 Mbit uplink (below the NICs): each worker's pushes
    # cross it while the others compute, so the analytic model queues them there rather than
    # giving each its share of it (which was +18% against the simulator with servers of 2
    # GPUs, +15% with one GPU each)
    workload = make_workload([(0.01, 0.02, [1_000_000])] * 8, update_s_per_byte=5e-10)
    cluster = {"bandwidth": "200Mbps", "latency": "50us",
               "nodes": {"count": servers, "gpus": gpus, "intra": "1Gbps"},
               "ps": {"count": 1, "bandwidth": "1Gbps"},
               "racks": {"servers": 2, "uplink": "150Mbps"}}
    asp = predict(workload=workload, cluster=cluster, sync="asp")
    simulated = predict(workload=workload, cluster=cluster, sync="asp", method="simulate",
                        iterations=30)
    assert asp.iteration_time_s == pytest.approx(simulated.iteration_time_s, rel=0.04)


@pytest.mark.parametrize("sync", ["asp", "ssp"])
@pytest.mark.parametrize("cluster", [
    # two 100 Gbit one-GPU hosts on a 10 Gbit shard (was +5.0% with the rack)
    {"workers": [{"count": 2, "bandwidth": "100Gbps"}], "ps": {"count": 1, "bandwidth": "10Gbps"}},
    # colocated shards on mixed servers, the rack holding all of them (was +22%)
    {"nodes": [{"name": "a", "count": 2, "gpus": 4, "nics": 2, "bandwidth": "100Gbps",
                "intra": "150GB/s"},
               {"name": "b", "count": 2, "gpus": 4, "bandwidth": "1Gbps", "intra": "PCIe3"}],
     "ps": {"count": 2, "placement": "colocated"}},
])
def test_a_rack_link_that_cannot_bind_changes_nothing(sync, cluster):
    """A rack uplink at least as fast as all its servers' NICs together carries whatever they
    send without holding anyone back (or carries nothing: every shard in the rack)."""
    kw = dict(model="resnet50", sync=sync, staleness=1 if sync == "ssp" else None)
    bare = predict(cluster=cluster, **kw)
    for servers, uplink in ((1, "1Tbps"), (4, "1Tbps"), (4, "2Tbps")):
        racked = predict(cluster={**cluster, "racks": {"servers": servers, "uplink": uplink}},
                         **kw)
        assert racked.iteration_time_s == pytest.approx(bare.iteration_time_s, rel=1e-9)
        assert racked.throughput_samples_per_s == pytest.approx(
            bare.throughput_samples_per_s, rel=1e-9)


@pytest.mark.parametrize("sync", ["asp", "ssp"])
def test_identical_hosts_listed_apart_in_racks_predict_alike(sync):
    """Three identical hosts in racks of one, given as one entry or as 2 + 1 (racks keep them
    apart as groups): one class of customers either way (was 4.2% apart, bert_base)."""
    host = {"gpus": 1, "nics": 2, "bandwidth": "25Gbps"}
    racks = {"servers": 1, "uplink": "40Gbps"}
    kw = dict(model="bert_base", sync=sync, staleness=1 if sync == "ssp" else None)
    one = predict(cluster={"nodes": [{"name": "a", "count": 3, **host}], "racks": racks,
                           "ps": 4}, **kw)
    two = predict(cluster={"nodes": [{"name": "a", "count": 2, **host},
                                     {"name": "b", "count": 1, **host}], "racks": racks,
                           "ps": 4}, **kw)
    assert two.iteration_time_s == pytest.approx(one.iteration_time_s, rel=1e-9)
