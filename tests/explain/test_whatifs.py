"""What-ifs: each number is a direct predict() of the changed scenario, same method and seed."""

from __future__ import annotations

import pytest

from ddlperf.api import predict
from ddlperf.explain import explain

SCENARIOS = [
    {"model": "resnet50", "workers": 16, "ps": 2},
    {"model": "vgg16", "workers": 8, "ps": 3, "sync": "ssp", "staleness": 2},
    {"model": "resnet50", "workers": 16, "arch": "allreduce"},
    {"model": "resnet50", "workers": 16, "gpus_per_node": 4, "intra": "PCIe3",
     "arch": "allreduce"},
    {"model": "resnet50", "workers": 16, "gpus_per_node": 4, "intra": "PCIe3", "ps": 2},
    {"model": "resnet50", "cluster": {"workers": [{"name": "fast", "count": 3},
                                                  {"name": "slow", "count": 1, "speed": 0.5}],
                                      "ps": 2}},
    {"model": "resnet50", "workers": 16, "gpus_per_node": 4, "intra": "PCIe3", "ps": 4,
     "placement": "colocated", "bandwidth": "25Gbps", "transport": "grpc-tf1"},
]


def _assert_direct(e, method, **options):
    predicted = [w for w in e.what_ifs if w.error is None]
    assert predicted
    for w in predicted:
        direct = predict(method=method, **w.kwargs, **options)
        assert w.iteration_time_s == direct.iteration_time_s, w.key
        assert w.throughput_samples_per_s == direct.throughput_samples_per_s, w.key
        assert w.bottleneck == direct.bottleneck, w.key
        base = e.prediction.throughput_samples_per_s
        assert w.gain == pytest.approx(direct.throughput_samples_per_s / base - 1, rel=1e-12)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_what_if_equals_a_direct_predict_analytic(scenario):
    e = explain("analytic", **scenario)
    _assert_direct(e, "analytic")
    gains = [w.gain for w in e.what_ifs if w.gain is not None]
    assert gains == sorted(gains, reverse=True)


@pytest.mark.slow
def test_every_what_if_equals_a_direct_predict_simulate_with_seed():
    options = {"iterations": 3, "warmup": 1, "seed": 7, "jitter": 0.05, "replications": 2}
    e = explain("simulate", model="resnet18", workers=4, ps=2, **options)
    predicted = [w for w in e.what_ifs if w.error is None]
    assert predicted
    for w in predicted:  # kwargs hold the options too: the same seed and replications
        assert {k: w.kwargs[k] for k in options} == options
    _assert_direct(e, "simulate")


def _keys(e):
    return {w.key for w in e.what_ifs}


def test_ps_what_ifs_cover_shards_sharding_link_arch_overlap_dtype_and_sync():
    e = explain(model="resnet50", workers=16, ps=2)
    assert {"ps+1", "sharding=greedy", "sharding=even", "2x-link", "allreduce", "overlap",
            "fp16-gradients", "asp", "ssp"} <= _keys(e)
    marked = {w.key for w in e.what_ifs if w.changes_convergence}
    assert marked == {"asp", "ssp"}


def test_allreduce_what_ifs_cover_buckets_and_ps_on_the_same_machines():
    e = explain(model="resnet50", workers=16, arch="allreduce")
    assert {"bucket×2", "bucket×0.5", "ps-colocated", "2x-link", "overlap"} <= _keys(e)
    ps = next(w for w in e.what_ifs if w.key == "ps-colocated")
    assert ps.kwargs["ps"] == 16 and ps.kwargs["placement"] == "colocated"


def test_servers_offer_hierarchical_all_reduce_and_local_aggregation():
    ring = explain(model="resnet50", workers=16, gpus_per_node=4, intra="PCIe3",
                   arch="allreduce")
    assert "allreduce=hierarchical" in _keys(ring)
    ps = explain(model="resnet50", workers=16, gpus_per_node=4, intra="PCIe3", ps=2)
    aggregation = next(w for w in ps.what_ifs if w.key == "local-aggregation")
    assert aggregation.kwargs["local_aggregation"] is True
    assert aggregation.gain > 0  # a server's 4 pushes become one


def test_doubling_the_bottleneck_link_doubles_only_that_link():
    e = explain(model="resnet50", workers=16, ps=2)
    assert e.prediction.bottleneck.startswith("ps")
    w = next(w for w in e.what_ifs if w.key == "2x-link")
    cluster = w.kwargs["cluster"]
    assert cluster["ps"]["uplink"] == cluster["ps"]["downlink"] == 2 * 10e9
    assert cluster["bandwidth"] == 10e9  # the workers' links as they were
    assert all(w.kwargs[k] is None for k in ("workers", "ps", "bandwidth"))


def test_a_transport_bound_scenario_doubles_the_cap_only():
    # grpc-tf1 without its receive cap: the connections bind
    e = explain(**{**SCENARIOS[-1], "transport": {"name": "grpc-tf1", "receive": None}})
    assert e.prediction.bottleneck == "ps0 push connection"
    w = next(w for w in e.what_ifs if w.key == "2x-link")
    assert w.kwargs["cluster"]["transport"] == {"name": "grpc-tf1", "cap": 3.2e9,
                                                "receive": None}
    assert w.kwargs["cluster"]["bandwidth"] == 25e9 and w.kwargs["transport"] is None
    assert w.how == "--transport 400MB/s" and w.gain > 0
    # with it, the cap is named in a form that keeps the receive cap
    e = explain(**{**SCENARIOS[-1], "transport": {"name": "grpc-tf1", "receive": "1TB/s"}})
    w = next(w for w in e.what_ifs if w.key == "2x-link")
    assert w.how == "transport: {name: grpc-tf1, cap: 400MB/s}"


def test_a_receive_bound_scenario_doubles_the_receive_cap_only():
    # 16 one-GPU workers into one shard: the shard's process takes in 16 streams
    e = explain(model="resnet50", workers=16, ps=1, bandwidth="100Gbps",
                transport={"name": "grpc-tf1", "cap": "2GB/s"})
    assert e.prediction.bottleneck == "ps0 receive"
    w = next(w for w in e.what_ifs if w.key == "2x-link")
    assert w.kwargs["cluster"]["transport"] == {"name": "grpc-tf1", "cap": 16e9,
                                                "receive": 14.4e9}
    assert w.how == "transport: {name: grpc-tf1, receive: 1.8GB/s}" and w.gain > 0


def test_slowest_worker_dropped_or_replaced():
    e = explain(**SCENARIOS[-2])
    drop = next(w for w in e.what_ifs if w.key == "drop-slowest")
    replace = next(w for w in e.what_ifs if w.key == "replace-slowest")
    assert [g["count"] for g in drop.kwargs["cluster"]["workers"]] == [3]
    assert [g["count"] for g in replace.kwargs["cluster"]["workers"]] == [4]
    assert drop.gain > 0 and replace.gain > drop.gain  # the straggler set the pace


def test_asynchronous_base_offers_bsp_marked_as_changing_convergence():
    e = explain(model="vgg16", workers=8, ps=2, sync="asp")
    bsp = next(w for w in e.what_ifs if w.key == "bsp")
    assert bsp.changes_convergence and bsp.kwargs["sync"] == "bsp"


def test_workload_files_get_no_dtype_what_if(tmp_path):
    from ddlperf.workload import zoo

    path = tmp_path / "w.json"
    zoo.load("resnet18").save(path)
    e = explain(workload=path, workers=4, ps=1)
    assert "fp16-gradients" not in _keys(e)


def test_json_is_plain_data():
    import json

    e = explain(model="resnet50", workers=16, ps=2)
    data = json.loads(json.dumps(e.to_dict(), allow_nan=False))
    assert data["what_ifs"][0]["gain"] >= data["what_ifs"][-1]["gain"]
    assert {"prediction", "bottleneck", "resources", "shards", "waits", "critical_path",
            "what_ifs", "trust"} <= set(data)
