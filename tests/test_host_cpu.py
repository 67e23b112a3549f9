"""Communication CPU on a CPU-capped host, in both predictors (ddlperf.host_cpu)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import ddlperf.cli  # noqa: F401  (registers the commands)
from ddlperf.api import predict
from ddlperf.cli.app import app
from ddlperf.cluster import Cluster
from ddlperf.host_cpu import ring_edge_rate, ring_rank_rate
from ddlperf.predictors.analytic_batch import batch_key
from ddlperf.scenario import resolve
from ddlperf.strategy import Strategy
from tests.conftest import assert_one_line_error, make_workload

METHODS = ("analytic", "simulate")
# Two layers, 0.6 s of compute, 4 MB of gradients; at 100 Gbit the network is ~nothing.
LAYERS = [(0.1, 0.2, [1_000_000]), (0.1, 0.2, [2_000_000, 1_000_000])]
GRADIENT_BYTES = 4_000_000
CAP, PER_BYTE = 0.5, 1e-8


def cluster(arch: str, slow: dict, bandwidth: str = "100Gbps", **top) -> Cluster:
    return Cluster.from_dict({
        "workers": [{"name": "fast", "count": 1}, {"name": "slow", "count": 1, **slow}],
        "bandwidth": bandwidth, "latency": 0, **({"ps": 1} if arch == "ps" else {}), **top})


def iteration(arch: str, slow: dict, method: str, **kw) -> float:
    wl = make_workload(LAYERS)
    strategy = Strategy.model_validate({"arch": arch, **kw.pop("strategy", {})})
    return predict(workload=wl, cluster=cluster(arch, slow, **kw), strategy=strategy,
                   method=method).iteration_time_s


@pytest.mark.parametrize("arch", ["ps", "allreduce"])
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("slow", [{}, {"cpu_cap": CAP}, {"comm_cpu_s_per_byte": PER_BYTE}])
def test_no_effect_unless_capped_and_charged(arch, method, slow):
    # uncapped: the communication CPU runs on other cores; capped at 0 s/byte: nothing to pay
    assert iteration(arch, slow, method) == iteration(arch, {}, method)


def test_uncharged_clusters_write_nothing_new():
    # a cluster's dict (inputs echoed, validate's fingerprints) is what it was before the fields
    data = cluster("ps", {}).to_dict()
    assert all("cpu_cap" not in g and "comm_cpu_s_per_byte" not in g for g in data["workers"])


@pytest.mark.parametrize("method", METHODS)
def test_capped_ps_worker_computes_longer_by_its_bytes_cpu(method):
    # compute-bound BSP: the capped worker pushes and pulls 4 MB each, 8 MB × 1e-8 s/byte =
    # 0.08 s of CPU at half a core = 0.16 s more compute, exactly; the iteration follows it
    # (the last push after backward, 0.3 ms at 100 Gbit, is exposed either way)
    charge = 2 * GRADIENT_BYTES * PER_BYTE / CAP
    wl = make_workload(LAYERS)
    strategy = Strategy.model_validate({"arch": "ps"})
    base = predict(workload=wl, cluster=cluster("ps", {}), strategy=strategy, method=method)
    capped = predict(workload=wl, strategy=strategy, method=method, cluster=cluster(
        "ps", {"cpu_cap": CAP, "comm_cpu_s_per_byte": PER_BYTE}))
    assert capped.workers[1].compute_s - base.workers[1].compute_s == pytest.approx(
        charge, rel=1e-9)
    assert capped.workers[0].compute_s == base.workers[0].compute_s
    assert capped.iteration_time_s - base.iteration_time_s == pytest.approx(charge, rel=1e-3)


def test_methods_agree_exactly_on_a_capped_bsp_worker():
    slow = {"cpu_cap": CAP, "comm_cpu_s_per_byte": PER_BYTE}
    analytic, simulate = (iteration("ps", slow, m) for m in METHODS)
    assert simulate == pytest.approx(analytic, rel=1e-9)


def test_ps_charge_lands_on_each_layers_forward_and_backward():
    wl = make_workload(LAYERS)
    sc = resolve(wl, cluster("ps", {"cpu_cap": CAP, "comm_cpu_s_per_byte": PER_BYTE}),
                 Strategy.model_validate({"arch": "ps"}))
    fast, slow = sc.groups
    per_layer = [1e6 * PER_BYTE / CAP, 3e6 * PER_BYTE / CAP]
    assert (slow.forward - fast.forward).tolist() == pytest.approx(per_layer, rel=1e-12)
    assert (slow.backward - fast.backward).tolist() == pytest.approx(per_layer, rel=1e-12)
    assert any("slow: communication CPU 80 ms" in n for n in sc.notes)


def test_local_aggregation_charges_each_gpu_its_share_of_the_nic_traffic():
    wl = make_workload(LAYERS)
    nodes = Cluster.from_dict({"nodes": [{"count": 2, "gpus": 2, "intra": "NVLink2",
                                          "cpu_cap": CAP, "comm_cpu_s_per_byte": PER_BYTE}],
                               "bandwidth": "100Gbps", "ps": 1})
    plain = Cluster.from_dict({"nodes": [{"count": 2, "gpus": 2, "intra": "NVLink2"}],
                               "bandwidth": "100Gbps", "ps": 1})
    strategy = Strategy.model_validate({"arch": "ps", "local_aggregation": True})
    added = (resolve(wl, nodes, strategy).groups[0].compute_s
             - resolve(wl, plain, strategy).groups[0].compute_s)
    assert added == pytest.approx(2 * GRADIENT_BYTES / 2 * PER_BYTE / CAP, rel=1e-9)


@pytest.mark.parametrize("method", METHODS)
def test_capped_cpu_paces_the_ring_when_slower_than_the_network(method):
    # one 4 MB bucket after backward, 2 workers: 2 steps of 2 MB at the CPU's 25 MB/s per
    # edge (0.5 core / (2 × 1e-8 s/byte)) = 0.16 s after 0.6 s of compute (no latency)
    assert ring_edge_rate(PER_BYTE / CAP) == pytest.approx(25e6)
    capped = iteration("allreduce", {"cpu_cap": CAP, "comm_cpu_s_per_byte": PER_BYTE}, method)
    assert capped == pytest.approx(0.6 + 2 * (GRADIENT_BYTES / 2) / 25e6, rel=1e-9)


@pytest.mark.parametrize("method", METHODS)
def test_ring_cpu_faster_than_the_network_changes_nothing(method):
    # at 100 Mbit the network moves 12 MB/s per edge; a 25 MB/s CPU does not bind (the CPU
    # works beside the wire)
    slow = {"cpu_cap": CAP, "comm_cpu_s_per_byte": PER_BYTE}
    assert iteration("allreduce", slow, method, bandwidth="100Mbps") == pytest.approx(
        iteration("allreduce", {}, method, bandwidth="100Mbps"), rel=1e-12)


def server_ring(method: str, allreduce: str, count: int, gpus: int, group: dict) -> float:
    wl = make_workload(LAYERS)
    nodes = Cluster.from_dict({"nodes": [{"count": count, "gpus": gpus, "intra": "100Gbps",
                                          **group}], "bandwidth": "100Gbps", "latency": 0})
    strategy = Strategy.model_validate({"arch": "allreduce", "allreduce": allreduce})
    return predict(workload=wl, cluster=nodes, strategy=strategy,
                   method=method).iteration_time_s


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("allreduce", ["ring", "hierarchical"])
def test_a_fabric_that_costs_host_cpu_paces_a_capped_servers_ring(method, allreduce):
    # one server of 2 GPUs: every edge is loopback; each rank sends one 2 MB chunk and
    # receives one per step at 1e-8 s/byte on 0.5 core: 25 MB/s; 2 steps after 0.6 s
    capped = {"cpu_cap": CAP, "intra_cpu_s_per_byte": PER_BYTE}
    expected = 0.6 + 2 * (GRADIENT_BYTES / 2) / 25e6
    assert server_ring(method, allreduce, 1, 2, capped) == pytest.approx(expected, rel=1e-9)
    # uncapped, or capped with a fabric of peer copies: the 100 Gbit fabric is ~nothing
    for group in ({"intra_cpu_s_per_byte": PER_BYTE}, {"cpu_cap": CAP}):
        assert server_ring(method, allreduce, 1, 2, group) < 0.6 + 0.01


def test_ring_rank_rate_takes_each_ranks_two_edges():
    nic, intra = 1e-9, 4e-9
    assert ring_rank_rate(nic, intra, 1, "flat", 4) == pytest.approx(1 / (2 * nic))
    # two GPUs per server: every rank has one NIC edge and one fabric edge
    assert ring_rank_rate(nic, intra, 2, "flat", 4) == pytest.approx(1 / (nic + intra))
    # more GPUs: the middle ranks have two fabric edges
    assert ring_rank_rate(nic, intra, 4, "flat", 4) == pytest.approx(1 / (2 * intra))
    assert ring_rank_rate(nic, intra, 4, "flat", 1) == pytest.approx(1 / (2 * intra))
    assert ring_rank_rate(nic, intra, 4, "inside", 4) == pytest.approx(1 / (2 * intra))
    assert ring_rank_rate(nic, intra, 4, "across", 4) == pytest.approx(1 / (2 * nic))
    # a fabric of peer copies costs nothing: a two-GPU rank pays only its NIC edge
    assert ring_rank_rate(nic, 0.0, 2, "flat", 4) == pytest.approx(1 / nic)
    assert ring_rank_rate(0.0, 0.0, 2, "flat", 4) == float("inf")


@pytest.mark.parametrize("method", METHODS)
def test_flat_ring_over_two_gpu_servers_pays_one_nic_and_one_fabric_edge(method):
    # 2 servers × 2 GPUs, 4 ranks: 6 steps of 1 MB; every rank sends over one path and
    # receives over the other: 1 / ((1e-8 + 3e-8) / 0.5) = 12.5 MB/s
    capped = {"cpu_cap": CAP, "comm_cpu_s_per_byte": PER_BYTE,
              "intra_cpu_s_per_byte": 3 * PER_BYTE}
    expected = 0.6 + 6 * (GRADIENT_BYTES / 4) / 12.5e6
    assert server_ring(method, "ring", 2, 2, capped) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("sync", ["asp", "ssp"])
def test_async_methods_agree_on_a_capped_worker(sync):
    slow = {"cpu_cap": CAP, "comm_cpu_s_per_byte": PER_BYTE}
    extra = {"staleness": 1} if sync == "ssp" else {}
    times = [iteration("ps", slow, m, strategy={"sync": sync, **extra}) for m in METHODS]
    plain = [iteration("ps", {}, m, strategy={"sync": sync, **extra}) for m in METHODS]
    assert times[0] > plain[0] and times[1] > plain[1]
    assert times[0] == pytest.approx(times[1], rel=0.02)


def test_batched_analytic_path_leaves_charged_points_to_the_scalar_model():
    wl = make_workload(LAYERS)
    strategy = Strategy.model_validate({"arch": "ps"})
    one = {"workers": [{"count": 2}], "bandwidth": "10Gbps", "ps": 1}
    assert batch_key(resolve(wl, Cluster.from_dict(one), strategy)) is not None
    one["workers"][0].update(cpu_cap=CAP, comm_cpu_s_per_byte=PER_BYTE)
    assert batch_key(resolve(wl, Cluster.from_dict(one), strategy)) is None


@pytest.mark.parametrize(("group", "field"), [
    ("{count: 2, comm_cpu_s_per_byte: -1e-9}", "comm_cpu_s_per_byte"),
    ("{count: 2, cpu_cap: 0}", "cpu_cap")])
def test_bad_values_are_one_line_exit_2(tmp_path, group, field):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"workers: [{group}]\nps: 1\n")
    assert_one_line_error(CliRunner().invoke(app, ["predict", "--config", str(cfg)]), field)


def _server(fabric_cpu: dict, ps: int = 1) -> Cluster:
    return Cluster.from_dict({"nodes": [{"count": 1, "gpus": 2, "intra": "1Gbps",
                                         **fabric_cpu}], "bandwidth": "100Gbps", "ps": ps,
                              "latency": 0})


AGGREGATE = Strategy.model_validate({"arch": "ps", "local_aggregation": True})


def test_fabric_cpu_charges_the_reduce_scatter_and_all_gather_bytes():
    # 2 GPUs: each moves 1/2 of the gradient over the NIC each way and sends + receives 1/2
    # of it over the fabric in the reduce-scatter (backward) and in the all-gather (forward)
    wl = make_workload(LAYERS)
    plain = resolve(wl, _server({}), AGGREGATE).groups[0]
    capped = resolve(wl, _server({"cpu_cap": CAP, "comm_cpu_s_per_byte": PER_BYTE,
                                  "intra_cpu_s_per_byte": 2 * PER_BYTE}), AGGREGATE)
    per_gradient_byte = (0.5 * PER_BYTE + 1.0 * 2 * PER_BYTE) / CAP
    layer_bytes = [1e6, 3e6]
    for got, base in ((capped.groups[0].forward, plain.forward),
                      (capped.groups[0].backward, plain.backward)):
        assert (got - base).tolist() == pytest.approx(
            [b * per_gradient_byte for b in layer_bytes], rel=1e-12)
    assert any("8 MB over the fabric" in n for n in capped.notes)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("fabric_cpu", [
    {"intra_cpu_s_per_byte": PER_BYTE},  # uncapped: other cores pay it
    {"cpu_cap": CAP},  # capped, a fabric of peer copies: no host CPU
])
def test_fabric_cpu_needs_a_cap_and_a_figure(method, fabric_cpu):
    wl = make_workload(LAYERS)
    times = [predict(workload=wl, cluster=_server(c), strategy=AGGREGATE, method=method)
             .iteration_time_s for c in ({}, fabric_cpu)]
    assert times[1] == times[0]


def test_fabric_cpu_is_charged_only_with_local_aggregation():
    # without it a PS worker on a server moves nothing over the fabric
    wl = make_workload(LAYERS)
    strategy = Strategy.model_validate({"arch": "ps"})
    plain = resolve(wl, _server({"cpu_cap": CAP, "comm_cpu_s_per_byte": PER_BYTE}), strategy)
    both = resolve(wl, _server({"cpu_cap": CAP, "comm_cpu_s_per_byte": PER_BYTE,
                                "intra_cpu_s_per_byte": PER_BYTE}), strategy)
    assert both.groups[0].compute_s == plain.groups[0].compute_s


def test_methods_agree_on_a_capped_aggregating_server():
    wl = make_workload(LAYERS)
    cluster = _server({"cpu_cap": CAP, "comm_cpu_s_per_byte": PER_BYTE,
                       "intra_cpu_s_per_byte": PER_BYTE})
    analytic, simulate = (predict(workload=wl, cluster=cluster, strategy=AGGREGATE,
                                  method=m).iteration_time_s for m in METHODS)
    assert simulate == pytest.approx(analytic, rel=1e-6)
    # compute-bound: the step is (compute + communication CPU) / cap-paced compute
    charge = 2 * GRADIENT_BYTES * (0.5 + 1.0) * PER_BYTE / CAP
    base = predict(workload=wl, cluster=_server({}), strategy=AGGREGATE, method="analytic")
    assert analytic - base.iteration_time_s == pytest.approx(charge, rel=1e-2)


def test_all_reduce_notes_what_the_fabric_cpu_allows():
    wl = make_workload(LAYERS)
    sc = resolve(wl, _server({"cpu_cap": CAP, "intra_cpu_s_per_byte": PER_BYTE}, ps=0),
                 Strategy.model_validate({"arch": "allreduce"}))
    assert any("25 MB/s per edge inside the server" in n for n in sc.notes)


def test_bad_fabric_cpu_is_one_line(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("nodes: [{count: 1, gpus: 2, intra: 1Gbps, intra_cpu_s_per_byte: -1}]\n")
    result = CliRunner().invoke(app, ["predict", "--config", str(path), "--model", "resnet18"])
    assert_one_line_error(result, "intra_cpu_s_per_byte")
