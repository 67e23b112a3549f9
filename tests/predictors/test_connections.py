"""The transport's per-connection cap in both predictors (issue: TensorFlow 1.x's gRPC).

By-hand figures for the cases the analytic model describes exactly, agreement of the two
methods there to 1e-9, and what must hold everywhere: no transport (or one whose cap never
binds) predicts exactly what ddlperf predicted before, a lower cap is never faster, and a
server with local aggregation has one connection per shard, not one per GPU.
"""

from __future__ import annotations

import pytest

from ddlperf.api import predict
from tests.conftest import make_workload

GOODPUT = 1448 / 1514
METHODS = ("analytic", "simulate")
ONE = make_workload([(0.001, 0.002, [4_000_000])], update_s_per_byte=1e-9)
TOY = make_workload([(0.004, 0.008, [4_000_000, 2_000]), (0.003, 0.006, [6_000_000]),
                     (0.002, 0.004, [4_000_000])], update_s_per_byte=2e-10)


def run(method: str, **kw):
    if method == "simulate":
        kw.setdefault("iterations", 6)
        kw.setdefault("warmup", 2)
    return predict(method=method, **kw)


def resource(p, name: str):
    return next(r for r in p.resources if r.name == name)


# -- by hand ---------------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_ps_streams_move_at_the_cap_below_their_fair_share(method):
    # 4 workers, one 4 MB tensor, one shard on 1 Gbps: each stream's fair share of the
    # shard's link is 29.9 MB/s; the 20 MB/s cap binds: pull 0.2 s + α, forward 1 ms,
    # backward 2 ms, push 0.2 s + α, update 4 ms
    p = run(method, workload=ONE, workers=4, ps=1, bandwidth="1Gbps", latency="50us",
            transport="20MB/s")
    expected = 2 * (4e6 / 20e6 + 50e-6) + 0.003 + 0.004
    assert p.iteration_time_s == pytest.approx(expected, rel=1e-9)
    assert p.bottleneck == "ps0 push connection"
    assert resource(p, "ps0 push connection").busy_s == pytest.approx(0.2, rel=1e-6)


@pytest.mark.parametrize("method", METHODS)
def test_a_cap_above_every_share_changes_nothing(method):
    kw = dict(workload=TOY, workers=8, ps=2, bandwidth="10Gbps")
    plain = run(method, **kw)
    for transport in ("tcp", "rdma", "100GB/s"):
        p = run(method, transport=transport, **kw)
        assert p.iteration_time_s == pytest.approx(plain.iteration_time_s, rel=1e-12)
        assert p.bottleneck == plain.bottleneck
    assert "transport" not in plain.inputs["cluster"]
    assert not any("transport" in note for note in plain.notes)


@pytest.mark.parametrize("method", METHODS)
def test_ring_edges_between_servers_are_capped_and_those_inside_are_not(method):
    kw = dict(workload=TOY, ps=0, arch="allreduce", bucket_size="4MB", latency="20us",
              bandwidth="10Gbps")
    hosts = run(method, workers=4, transport="100MB/s", **kw)
    assert hosts.iteration_time_s > run(method, workers=4, **kw).iteration_time_s
    assert hosts.bottleneck == "ring (connection)"
    server = dict(workers=4, gpus_per_node=4, intra="PCIe4")
    one_server = run(method, transport="100MB/s", **server, **kw)
    assert one_server.iteration_time_s == run(method, **server, **kw).iteration_time_s


def test_ring_time_is_the_formula_at_the_cap():
    kw = dict(workload=TOY, ps=0, arch="allreduce", bucket_size="4MB", latency="20us",
              bandwidth="10Gbps", overlap=False)
    capped = predict(workers=4, transport="100MB/s", **kw)
    plain = predict(workers=4, **kw)
    # every bucket's 6 steps move 1/4 of it per edge: 6/4 of all 14.002 MB at the cap
    rate = 10e9 * GOODPUT / 8
    slower = 6 / 4 * 14.002e6 * (1 / 100e6 - 1 / rate)
    assert capped.iteration_time_s - plain.iteration_time_s == pytest.approx(slower, rel=1e-9)


# -- the two methods agree where the analytic model is exact ---------------------------------


AGREE = [
    pytest.param(dict(workload=ONE, workers=4, ps=2, sharding="even", bandwidth="1Gbps",
                      overlap=False, transport="20MB/s"), id="ps-even"),
    pytest.param(dict(workload=TOY, workers=8, ps=2, bandwidth="10Gbps",
                      transport="100MB/s"), id="ps-overlap"),
    pytest.param(dict(workload=TOY, cluster={"workers": [{"count": 3}, {"name": "slow",
                      "count": 2, "speed": 0.7}]}, ps=2, bandwidth="10Gbps",
                      transport="100MB/s"), id="ps-mixed"),
    pytest.param(dict(workload=ONE, workers=8, gpus_per_node=4, intra="NVLink2", ps=1,
                      bandwidth="10Gbps", transport="100MB/s"), id="ps-servers"),
    pytest.param(dict(workload=ONE, workers=8, gpus_per_node=4, intra="NVLink2", ps=1,
                      bandwidth="10Gbps", local_aggregation=True, overlap=False,
                      transport="100MB/s"), id="ps-aggregation"),
    pytest.param(dict(workload=TOY, workers=16, gpus_per_node=4, intra="PCIe4", ps=0,
                      arch="allreduce", bandwidth="10Gbps", bucket_size="4MB",
                      transport="100MB/s"), id="flat-ring"),
    pytest.param(dict(workload=TOY, workers=16, gpus_per_node=4, intra="PCIe4", ps=0,
                      arch="allreduce", allreduce="hierarchical", bandwidth="10Gbps",
                      bucket_size="4MB", transport="100MB/s"), id="hierarchical"),
]


RECEIVE = {"name": "grpc-tf1", "cap": "100MB/s", "receive": "150MB/s"}
AGREE_RECEIVE = [
    pytest.param(dict(workload=ONE, workers=4, ps=2, sharding="even", bandwidth="10Gbps",
                      overlap=False, transport=RECEIVE), id="receive-even"),
    pytest.param(dict(workload=TOY, workers=8, ps=2, bandwidth="10Gbps", transport=RECEIVE),
                 id="receive-overlap"),
    pytest.param(dict(workload=ONE, workers=8, gpus_per_node=4, intra="NVLink2", ps=1,
                      bandwidth="10Gbps", transport=RECEIVE), id="receive-servers"),
    pytest.param(dict(workload=ONE, workers=8, gpus_per_node=4, intra="NVLink2", ps=2,
                      placement="colocated", bandwidth="10Gbps", transport=RECEIVE),
                 id="receive-colocated"),
    pytest.param(dict(workload=ONE, workers=8, gpus_per_node=4, intra="NVLink2", ps=1,
                      bandwidth="10Gbps", local_aggregation=True, overlap=False,
                      transport=RECEIVE), id="receive-aggregation"),
]


@pytest.mark.parametrize("kw", AGREE + AGREE_RECEIVE)
def test_simulate_agrees_with_analytic_at_the_cap(kw):
    a = run("analytic", **kw)
    s = run("simulate", **kw)
    assert s.iteration_time_s == pytest.approx(a.iteration_time_s, rel=1e-9)
    assert s.bottleneck == a.bottleneck
    binding = "receive" if isinstance(kw["transport"], dict) else "connection"
    assert s.bottleneck.endswith(binding) or s.bottleneck == "ring (connection)"


@pytest.mark.parametrize(("transport", "bottleneck"), [
    ("100MB/s", "ps0 push connection"),
    ({"name": "rpc", "receive": "200MB/s"}, "ps0 receive"),  # the shard's process, below
])
def test_asp_with_a_cap_stays_close(transport, bottleneck):
    kw = dict(workload=TOY, workers=8, ps=2, bandwidth="10Gbps", transport=transport,
              sync="asp")
    a, s = run("analytic", **kw), run("simulate", **kw)
    assert s.iteration_time_s == pytest.approx(a.iteration_time_s, rel=0.03)
    assert a.bottleneck == s.bottleneck == bottleneck


# -- what a connection is --------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_lower_caps_are_never_faster(method):
    kw = dict(workload=TOY, workers=16, gpus_per_node=4, intra="PCIe3", ps=4,
              placement="colocated", bandwidth="25Gbps")
    times = [run(method, transport=cap, **kw).iteration_time_s
             for cap in ("5GB/s", "800MB/s", "200MB/s", "50MB/s")]
    assert times == sorted(times)
    assert times[-1] > times[0]


def test_local_aggregation_gives_a_server_one_connection_per_shard():
    # 2 servers × 4 GPUs, a dedicated shard on a fast link: without aggregation each GPU has
    # its own 100 MB/s connection (8 streams); with it, each server one (2 streams) that its
    # 4 slices share, so the push takes 4 MB / 100 MB/s either way per stream of bytes
    kw = dict(workload=ONE, workers=8, gpus_per_node=4, intra="NVLink2", bandwidth="100Gbps",
              latency=0, overlap=False, transport="100MB/s",
              cluster={"ps": {"count": 1, "bandwidth": "400Gbps", "update_s_per_byte": 0}})
    for method in METHODS:
        per_gpu = run(method, **kw)
        per_server = run(method, local_aggregation=True, **kw)
        # both move the model at the cap once each way; aggregation adds the fabric steps
        assert per_gpu.iteration_time_s == pytest.approx(2 * 4e6 / 100e6 + 0.003, rel=1e-9)
        assert per_server.iteration_time_s > per_gpu.iteration_time_s
        assert per_server.iteration_time_s < per_gpu.iteration_time_s * 1.01
    s = run("simulate", local_aggregation=True, **kw)
    push = resource(s, "ps0 push connection")
    assert push.busy_s == pytest.approx(4e6 / 100e6, rel=1e-6)  # a server's whole tensor


def test_gpus_reach_their_own_servers_shard_over_a_capped_connection():
    # one server of 4 GPUs hosting the only shard: no NIC is crossed, yet each GPU's stream
    # goes through the transport (TensorFlow's gRPC over loopback)
    kw = dict(workload=ONE, workers=4, gpus_per_node=4, intra="NVLink2", ps=1,
              placement="colocated", latency=0, overlap=False)
    for method in METHODS:
        plain = run(method, **kw)
        capped = run(method, transport="100MB/s", **kw)
        # pull and push 4 MB at 100 MB/s, forward + backward 3 ms, update 4 MB × 1 ns
        assert capped.iteration_time_s == pytest.approx(2 * 0.04 + 0.003 + 0.004, rel=1e-9)
        assert plain.iteration_time_s < 0.04
        assert capped.bottleneck == "ps0 push connection"


def test_message_cost_is_added_to_every_messages_latency():
    kw = dict(workload=TOY, workers=4, ps=1, bandwidth="1Gbps", latency="50us")
    for method in METHODS:
        base = run(method, **kw)
        slow = run(method, transport={"name": "rpc", "message": "50us"}, **kw)
        doubled = run(method, **{**kw, "latency": "100us"})
        assert slow.iteration_time_s == pytest.approx(doubled.iteration_time_s, rel=1e-12)
        assert slow.iteration_time_s > base.iteration_time_s


# -- the per-process receive cap -------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_a_shards_process_takes_in_every_push_at_its_receive_cap(method):
    # 4 workers, one 4 MB tensor, one shard on 1 Gbps, each process taking in 40 MB/s: the
    # shard's process receives 4 × 4 MB in 0.4 s; each worker pulls its 4 MB at its share of
    # the shard's link (29.9 MB/s, below 40): 4 MB / 29.9 MB/s, plus α each way
    p = run(method, workload=ONE, workers=4, ps=1, bandwidth="1Gbps", latency="50us",
            transport={"name": "rpc", "receive": "40MB/s"})
    share = 1e9 * GOODPUT / 8 / 4
    expected = 4 * 4e6 / 40e6 + 4e6 / share + 2 * 50e-6 + 0.003 + 0.004
    assert p.iteration_time_s == pytest.approx(expected, rel=1e-9)
    assert p.bottleneck == "ps0 receive"
    assert resource(p, "ps0 receive").busy_s == pytest.approx(0.4, rel=1e-6)


@pytest.mark.parametrize("method", METHODS)
def test_a_workers_process_takes_in_every_pull_at_its_receive_cap(method):
    # 2 workers, two 4 MB tensors on two dedicated shards on fast links: each worker's process
    # pulls 8 MB from both shards at 40 MB/s together; each shard's process takes in 2 × 4 MB
    wl = make_workload([(0.001, 0.002, [4_000_000, 4_000_000])], update_s_per_byte=0)
    p = run(method, workload=wl, workers=2, ps=2, sharding="even", bandwidth="100Gbps",
            latency=0, overlap=False, transport={"name": "rpc", "receive": "40MB/s"})
    assert p.iteration_time_s == pytest.approx(8e6 / 40e6 + 0.003 + 8e6 / 40e6, rel=1e-9)


@pytest.mark.parametrize("method", METHODS)
def test_lower_receive_caps_are_never_faster_and_a_high_one_changes_nothing(method):
    kw = dict(workload=TOY, workers=16, gpus_per_node=4, intra="PCIe3", ps=4,
              placement="colocated", bandwidth="25Gbps")
    plain = run(method, transport="200MB/s", **kw)
    times = [run(method, transport={"name": "rpc", "cap": "200MB/s", "receive": cap},
                 **kw).iteration_time_s for cap in ("1TB/s", "2GB/s", "400MB/s", "100MB/s")]
    assert times == sorted(times)
    assert times[0] == pytest.approx(plain.iteration_time_s, rel=1e-12)
    assert times[-1] > times[0]
