"""Ring all-reduce, simulated: by hand, against analytic, symmetry shortcuts are exact."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddlperf.api import make_cluster, make_strategy, predict
from ddlperf.predictors.simulate import predict_simulate
from ddlperf.predictors.simulate.ring_paths import ring_edges
from ddlperf.predictors.simulate.units import make_units
from ddlperf.scenario import resolve
from ddlperf.workload import zoo
from tests.conftest import make_workload

GOODPUT = 1448 / 1514
B_1G = 1e9 * GOODPUT / 8


def sim(workload, **kw):
    return predict(workload=workload, method="simulate", arch="allreduce", **kw)


def test_single_bucket_by_hand():
    w = make_workload([(0.001, 0.002, [8_000_000])], update_s_per_byte=1e-9)
    p = sim(w, workers=4, bandwidth="1Gbps", latency="50us")
    # 8 ms optimizer step, 3 ms compute, then 2(N−1) = 6 steps of α + 8e6 / (4 B)
    expected = 0.008 + 0.003 + 6 * (50e-6 + 8e6 / (4 * B_1G))
    assert p.iteration_time_s == pytest.approx(expected, rel=1e-9)
    assert p.bottleneck == "ring (w0 uplink)"
    assert p.breakdown_s["compute"] == pytest.approx(0.011)
    up = next(r for r in p.resources if r.name == "w0 uplink")
    assert up.busy_s == pytest.approx(6 * 8e6 / (4 * B_1G), rel=1e-6)


def test_one_worker_needs_no_ring():
    w = make_workload([(0.001, 0.002, [8_000_000])])
    p = sim(w, workers=1)
    assert p.iteration_time_s == pytest.approx(0.003)
    assert p.bottleneck == "compute"


@pytest.mark.parametrize("n", [2, 3, 8, 16, 64])
@pytest.mark.parametrize("overlap", [False, True])
def test_agrees_with_analytic_homogeneous(n, overlap):
    w = zoo.load("resnet50", batch_size=32, device="V100")
    kw = dict(workers=n, overlap=overlap, arch="allreduce")
    a = predict(workload=w, **kw)
    s = predict(workload=w, method="simulate", **kw)
    assert s.iteration_time_s == pytest.approx(a.iteration_time_s, rel=0.02)
    assert s.bottleneck == a.bottleneck


def test_agrees_with_analytic_heterogeneous_links():
    w = make_workload([(0.01, 0.02, [3_000_000] * 3), (0.01, 0.02, [3_000_000] * 10)])
    cluster = {"workers": [{"count": 3}, {"name": "thin", "count": 2, "bandwidth": "1Gbps"}]}
    a = predict(workload=w, cluster=cluster, arch="allreduce")
    s = sim(w, cluster=cluster)
    assert s.iteration_time_s == pytest.approx(a.iteration_time_s, rel=0.02)
    assert s.bottleneck == a.bottleneck == "ring (w3 uplink)"


@pytest.mark.parametrize("cluster", [
    {"workers": [{"count": 5}]},
    {"workers": [{"count": 3}, {"count": 2, "bandwidth": "1Gbps"}, {"count": 1, "speed": 0.5}]},
    {"workers": [{"count": 1, "uplink": "2Gbps"}, {"count": 3, "downlink": "3Gbps"}]},
])
def test_coalesced_steps_equal_step_by_step(cluster):
    w = make_workload([(0.003, 0.006, [2_000_000, 30_000]), (0.002, 0.004, [5_000_000])],
                      update_s_per_byte=1e-10)
    sc = resolve(w, make_cluster(cluster, latency="20us", arch="allreduce"),
                 make_strategy(arch="allreduce", bucket_size="3MB"))
    fast = predict_simulate(sc, iterations=5, warmup=1)
    each = predict_simulate(sc, iterations=5, warmup=1, ring_steps="each")
    assert fast.iteration_time_s == pytest.approx(each.iteration_time_s, rel=1e-9)
    for a, b in zip(fast.workers, each.workers):
        assert a.iteration_time_s == pytest.approx(b.iteration_time_s, rel=1e-9)


def test_ring_edges_group_identical_pairs():
    w = make_workload([(0.001, 0.001, [1_000])])
    one = make_units(resolve(w, make_cluster({"workers": [{"count": 1024}]}, arch="allreduce"),
                             make_strategy(arch="allreduce")), individual=False)
    edges = ring_edges(one)
    assert [(e.count, e.src.index, e.dst.index) for e in edges] == [(1024, 0, 0)]
    # (two groups that differ: identical ones join into one, scenario.join_identical)
    mixed = make_units(resolve(w, make_cluster({"workers": [{"count": 3},
                                                            {"count": 2, "speed": 0.5}]},
                                               arch="allreduce"),
                               make_strategy(arch="allreduce")), individual=False)
    edges = ring_edges(mixed)
    assert sorted((e.src.index, e.dst.index, e.count) for e in edges) == [
        (0, 0, 2), (0, 1, 1), (1, 0, 1), (1, 1, 1)]
    assert sum(e.count for e in edges) == 5  # one edge per worker


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.floats(1e-4, 0.02), st.floats(1e-4, 0.04),
                          st.lists(st.integers(1_000, 3_000_000), min_size=1, max_size=3)),
                min_size=1, max_size=6),
       st.integers(1, 8), st.sampled_from(["100Mbps", "1Gbps", "10Gbps"]),
       st.integers(500_000, 30_000_000), st.booleans())
def test_overlap_never_slower(spec, n, bandwidth, bucket, mixed):
    w = make_workload(spec, update_s_per_byte=1e-10)
    cluster = ({"workers": [{"count": n - 1}, {"count": 1, "speed": 0.6,
                                                "bandwidth": "500Mbps"}]}
               if mixed and n > 1 else {"workers": [{"count": n}]})
    kw = dict(cluster=cluster, bandwidth=bandwidth, bucket_size=bucket, iterations=5)
    on = sim(w, overlap=True, **kw)
    off = sim(w, overlap=False, **kw)
    assert on.iteration_time_s <= off.iteration_time_s * (1 + 1e-9)


def test_overlap_helps():
    w = make_workload([(0.002, 0.02, [3_000_000] * 4)] * 6)
    on = sim(w, workers=8, bandwidth="1Gbps", bucket_size="6MB", overlap=True)
    off = sim(w, workers=8, bandwidth="1Gbps", bucket_size="6MB", overlap=False)
    assert on.iteration_time_s < off.iteration_time_s


def test_straggler_makes_everyone_wait():
    w = make_workload([(0.02, 0.04, [100_000])])
    p = sim(w, cluster={"workers": [{"count": 3}, {"name": "slow", "count": 1, "speed": 0.5}]})
    assert p.bottleneck == "straggler w3"
    assert p.workers[0].wait_s == pytest.approx(0.06, rel=1e-6)
    assert p.workers[3].wait_s == 0


def test_large_ring_agrees_with_analytic():
    """1024 identical workers (one weighted flow per edge class; benchmarks/ time it)."""
    w = zoo.load("resnet50", batch_size=32, device="V100")
    p = sim(w, workers=1024, iterations=10)
    a = predict(workload=w, workers=1024, arch="allreduce")
    assert p.iteration_time_s == pytest.approx(a.iteration_time_s, rel=0.02)


def test_jitter_adds_straggler_wait():
    w = make_workload([(0.01, 0.02, [100_000])] * 5)
    calm = sim(w, workers=8)
    noisy = sim(w, workers=8, jitter=0.2, iterations=30)
    # everyone waits for the slowest draw of each step: slower than the mean compute
    assert noisy.iteration_time_s > calm.iteration_time_s
    assert noisy.breakdown_s["wait"] > 0
    assert calm.breakdown_s["wait"] == 0
