"""The batched analytic model (and the sweep that uses it) equals one prediction per point."""

import math
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddlperf.api import DEFAULTS, make_cluster, make_strategy, make_workload
from ddlperf.errors import InputError
from ddlperf.predictors import analytic_batch
from ddlperf.predictors.analytic import predict_analytic
from ddlperf.predictors.analytic_batch import batch_key, mva_one_class, predict_batch
from ddlperf.predictors.queueing import mva
from ddlperf.scenario import resolve
from ddlperf.sweep import RESULT_KEYS, _plan, _State, grid, sweep
from tests.conftest import make_workload as toy_workload

NUMBERS = RESULT_KEYS[:4]


_ZOO = {}


def reference(point, fixed):
    """``predict_analytic(resolve(...))`` for one point, built as ``ddlperf predict`` does."""
    spec = {**fixed, **point}
    try:
        if spec.get("workload") is None:  # zoo models: built once per test session
            key = (spec.get("model"), spec.get("batch_size"), spec.get("device"))
            if key not in _ZOO:
                _ZOO[key] = make_workload(*key[:1], None, *key[1:])
            workload = _ZOO[key]
        else:
            workload = make_workload(spec.get("model"), spec.get("workload"),
                                     spec.get("batch_size"), spec.get("device"))
        strategy = make_strategy(spec.get("arch", "ps"), spec.get("sync", "bsp"),
                                 spec.get("staleness"), spec.get("sharding", "round_robin"),
                                 spec.get("overlap", True), spec.get("bucket_size"))
        worker_device = spec.get("device") if spec.get("workload") is not None else None
        cluster = make_cluster(None, spec.get("workers"), spec.get("ps"),
                               spec.get("bandwidth"), spec.get("latency"),
                               spec.get("goodput"), spec.get("placement"), strategy.arch,
                               worker_device)
        return predict_analytic(resolve(workload, cluster, strategy)).summary(), None
    except InputError as exc:
        return dict.fromkeys(RESULT_KEYS), str(exc)


def assert_rows_match(rows, axes, fixed):
    points = grid(axes)
    assert len(rows) == len(points)
    for point, row in zip(points, rows):
        expected, error = reference(point, fixed)
        assert {k: row[k] for k in point} == point
        assert row["error"] == error, point
        assert row["bottleneck"] == expected["bottleneck"], (point, row, expected)
        for key in NUMBERS:
            if expected[key] is None:
                assert row[key] is None
            else:
                assert type(row[key]) is float
                assert math.isclose(row[key], expected[key], rel_tol=1e-9, abs_tol=0), (
                    point, key, row[key], expected[key])


def batched_share(axes, fixed):
    state = _State()
    planned = [_plan({**fixed, **p}, state) for p in grid(axes)]
    return sum(p is not None for p in planned) / len(planned)


# ---------------------------------------------------------------- random grids, small workloads

layers = st.lists(
    st.tuples(st.floats(1e-4, 0.05), st.floats(0.0, 0.1),
              st.lists(st.integers(1, 20_000_000), min_size=1, max_size=4)),
    min_size=1, max_size=6,
)
modes = st.sampled_from([
    {"arch": ["ps"], "sync": ["bsp"]}, {"arch": ["ps"], "sync": ["asp"]},
    {"arch": ["ps"], "sync": ["ssp"], "staleness": [0, 1, 3]},
    {"arch": ["allreduce"], "bucket_size": [1_000, 25 * 2**20]},
    {"arch": ["ps", "allreduce"], "sync": ["bsp", "asp", "ssp"], "staleness": [2]},
])
workers = st.lists(st.integers(1, 64), min_size=1, max_size=5, unique=True)
bandwidths = st.lists(
    st.one_of(st.floats(1e7, 4e11), st.sampled_from(["1Gbps", "10Gbps", "25GbE", "100Gbps"])),
    min_size=1, max_size=3, unique=True)
latencies = st.lists(
    st.one_of(st.floats(0, 1e-3), st.sampled_from(["0us", "5us", "50us", "1ms"])),
    min_size=1, max_size=3, unique=True)


@settings(max_examples=30, deadline=None)  # ~40 points each, every one re-predicted alone
@given(
    layers, st.sampled_from([0.0, 1e-12, 1e-10, 1e-9]), modes, workers,
    st.lists(st.integers(1, 5), min_size=1, max_size=3, unique=True),
    st.lists(st.sampled_from(["round_robin", "greedy", "even"]), min_size=1, max_size=3,
             unique=True),
    st.lists(st.booleans(), min_size=1, max_size=2, unique=True),
    bandwidths, latencies, st.sampled_from([None, 0.5, 1.0]),
)
def test_random_grid_equals_single_predictions(
    spec, update, mode, n, ps, sharding, overlap, bandwidth, latency, goodput
):
    w = toy_workload(spec, update_s_per_byte=update)
    axes = {**mode, "workers": n, "ps": ps, "sharding": sharding, "overlap": overlap,
            "bandwidth": bandwidth, "latency": latency}
    fixed = {"workload": w} if goodput is None else {"workload": w, "goodput": goodput}
    rows = sweep(axes, **fixed)
    assert_rows_match(rows, axes, fixed)
    assert batched_share(axes, fixed) == 1.0  # every point took the batch path


@settings(max_examples=15, deadline=None)
@given(layers, workers, st.lists(st.sampled_from(["ps", "allreduce"]), min_size=1, max_size=2,
                                 unique=True))
def test_fallback_points_colocated_errors_default_workers(spec, n, arch):
    """Colocated shards, impossible points, bad values and defaults keep their rows."""
    w = toy_workload(spec, update_s_per_byte=1e-10)
    axes = {"arch": arch, "workers": [*n, None, 0], "ps": [1, 3],
            "placement": ["dedicated", "colocated", None], "sync": ["bsp", "asp"],
            "bandwidth": ["10Gbps", "fast"], "latency": ["5us", -1.0]}
    rows = sweep(axes, workload=w)
    assert_rows_match(rows, axes, {"workload": w})
    assert any(row["error"] for row in rows)


def test_unsorted_gradient_order_falls_back():
    w = toy_workload([(0.001, 0.002, [4_000_000]), (0.003, 0.006, [8_000_000, 4_000])])
    w = w.model_copy(update={"gradient_order": ("l0.t0", "l1.t1", "l1.t0")})
    axes = {"workers": [1, 4, 16], "sync": ["bsp", "asp"], "bandwidth": ["1Gbps", "10Gbps"]}
    assert batched_share(axes, {"workload": w}) == 0.0
    assert_rows_match(sweep(axes, workload=w), axes, {"workload": w})


# ---------------------------------------------------------------- resnet50


RESNET_AXES = {
    "workers": [1, 2, 3, 8, 32, 128],
    "ps": [1, 2, 4, 8],
    "bandwidth": ["1Gbps", 10e9, 100e9],
    "latency": ["5us", "50us"],
    "arch": ["ps", "allreduce"],
    "sync": ["bsp", "asp", "ssp"],
    "staleness": [2],
    "sharding": ["round_robin", "greedy", "even"],
    "overlap": [True, False],
}


def test_resnet50_grid_equals_single_predictions():
    fixed = {"model": "resnet50"}
    rows = sweep(RESNET_AXES, **fixed)
    assert_rows_match(rows, RESNET_AXES, fixed)
    assert batched_share(RESNET_AXES, fixed) == 1.0
    assert len({row["bottleneck"] for row in rows}) > 3


def test_deterministic_and_parallel_equals_serial(monkeypatch):
    monkeypatch.setattr("ddlperf.sweep.MIN_POINTS_PER_JOB", 10)
    axes = {"workers": [1, 4, 16, 64], "ps": [1, 2, 4], "bandwidth": ["1Gbps", "25Gbps"],
            "sync": ["bsp", "asp", "ssp"], "staleness": [1], "sharding": ["round_robin", "even"],
            "overlap": [True, False]}
    serial = sweep(axes, model="resnet18")
    assert sweep(axes, model="resnet18") == serial
    assert sweep(axes, jobs=2, model="resnet18") == serial
    assert sweep(axes, jobs=3, model="resnet18") == serial


def test_batch_path_equals_per_point_path(monkeypatch):
    axes = {"workers": [2, 8], "ps": [1, 2], "sync": ["bsp", "asp"],
            "bandwidth": ["1Gbps", "10Gbps"], "model": ["resnet18", "vgg16"]}
    batched = sweep(axes)
    monkeypatch.setattr("ddlperf.sweep.BATCH", False)
    one_by_one = sweep(axes)
    for a, b in zip(batched, one_by_one):
        assert a.keys() == b.keys() and list(a) == list(b)  # same columns, same order
        assert a["bottleneck"] == b["bottleneck"]
        for key in NUMBERS:
            assert math.isclose(a[key], b[key], rel_tol=1e-9)


def test_chunks_equal_one_batch(monkeypatch):
    workload = make_workload("resnet18")
    strategy = make_strategy(sync="asp")
    template = resolve(workload, make_cluster(workers=1, ps=2), strategy)
    assert batch_key(template) is not None
    n = list(range(1, 40))
    values = [(r, r, 2 * r, 2 * r, 1e-10, 1e-5) for r in np.geomspace(1e7, 1e10, len(n))]
    whole = predict_batch(template, n, values)
    monkeypatch.setattr(analytic_batch, "MAX_BATCH", 7)
    assert predict_batch(template, n, values) == whole


def test_ten_thousand_points_stay_small():
    # BSP with at least as many workers as shards: every point takes the batched path (the
    # points whose shard connections bind, and ASP/SSP one-worker cycles with several
    # shards, are per point, and under tracemalloc that would take minutes)
    axes = {"workers": list(range(4, 68)), "bandwidth": list(np.geomspace(1e8, 4e11, 40)),
            "latency": [0.0, 5e-6, 5e-5, 5e-4]}
    tracemalloc.start()
    try:
        rows = sweep(axes, model="resnet50", ps=4, sync="bsp")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(rows) == 64 * 40 * 4 and all(row["error"] is None for row in rows)
    assert peak < 150e6


# ---------------------------------------------------------------- pieces


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.floats(1e-6, 1.0), st.lists(st.floats(0, 0.5), min_size=4,
                                                        max_size=4), st.integers(1, 80),
                          st.lists(st.floats(0, 1.0), min_size=4, max_size=4)),
                min_size=1, max_size=12),
       st.integers(1, 4))
def test_mva_one_class_equals_mva(cases, stations):
    think = np.array([z for z, _, _, _ in cases])
    demand = np.array([d[:stations] for _, d, _, _ in cases]).T
    population = np.array([n for _, _, n, _ in cases], dtype=float)
    floor = np.array([f[:stations] for _, _, _, f in cases]).T
    got = mva_one_class(think, demand, population, floor)
    for b in range(len(cases)):
        x, _ = mva(think[b:b + 1], demand[:, b:b + 1], population[b:b + 1],
                   floor=floor[:, b:b + 1])
        assert got[b] == x[0]


def test_not_batchable_scenarios():
    w = make_workload("resnet18")
    hetero = make_cluster({"workers": [{"count": 2}, {"count": 2, "speed": 0.5}], "ps": 1})
    assert batch_key(resolve(w, hetero, make_strategy())) is None
    colocated = make_cluster(workers=4, ps=2, placement="colocated")
    assert batch_key(resolve(w, colocated, make_strategy())) is None
    assert batch_key(resolve(w, make_cluster(workers=4, ps=2), make_strategy())) is not None


def test_cluster_file_points_take_the_per_point_path(monkeypatch):
    config = {"workers": [{"count": 3}, {"count": 2, "speed": 0.5}], "ps": 2}
    axes = {"bandwidth": ["1Gbps", "10Gbps"], "sync": ["bsp", "asp"]}
    assert batched_share(axes, {"cluster": config, "model": "resnet18"}) == 0.0
    batched = sweep(axes, cluster=config, model="resnet18")
    monkeypatch.setattr("ddlperf.sweep.BATCH", False)
    assert sweep(axes, cluster=config, model="resnet18") == batched
    assert sweep(axes, config=config, model="resnet18") == batched  # the older keyword


@pytest.mark.parametrize("workers", [None, DEFAULTS["workers"]])
def test_default_worker_count(workers):
    point = {} if workers is None else {"workers": workers}
    rows = sweep({"bandwidth": ["1Gbps", "10Gbps"]}, **point)
    expected = [reference({"bandwidth": b}, {"model": DEFAULTS["model"], **point})[0]
                for b in ("1Gbps", "10Gbps")]
    for row, exp in zip(rows, expected):
        assert row["iteration_time_s"] == pytest.approx(exp["iteration_time_s"], rel=1e-12)


def test_resnet50_benchmark_grid_is_fully_batched():
    axes = {"workers": [1, 2, 4, 8, 16, 32, 64, 128], "ps": [1, 2, 4, 8],
            "bandwidth": [1e9, 10e9, 25e9, 40e9, 100e9, 200e9], "sync": ["bsp", "asp"],
            "sharding": ["round_robin", "greedy"], "overlap": [True, False]}
    fixed = {"model": "resnet50"}
    assert batched_share(axes, fixed) == 1.0
    assert len(grid(axes)) == 1536


@pytest.mark.parametrize("overlap", [True, False])
@pytest.mark.parametrize("ps_rate", [3.0, 1.0, 0.5])
def test_a_shard_faster_than_the_workers_batched_equals_one_prediction(overlap, ps_rate):
    workload = make_workload("resnet18")
    strategy = make_strategy(sync="asp", overlap=overlap)
    points = []
    for n in (1, 2, 3, 4, 9):
        cluster = make_cluster({"bandwidth": 1e9, "workers": [{"count": n}],
                                "ps": {"count": 2, "bandwidth": ps_rate * 1e9}})
        points.append(resolve(workload, cluster, strategy))
    template = points[0]
    assert batch_key(template) is not None
    rows = predict_batch(template, [sc.worker_count for sc in points],
                         [analytic_batch.point_values(sc) for sc in points])
    for sc, row in zip(points, rows):
        expected = predict_analytic(sc).summary()
        for key, value in zip(RESULT_KEYS, row):
            if key in NUMBERS:
                assert math.isclose(value, expected[key], rel_tol=1e-9), (key, sc.worker_count)


def test_shardings_that_place_alike_share_one_batch():
    # one shard: every policy puts every tensor on it, so the scenarios share the placement
    # array and one batch key (one BSP period per point); two shards: round robin and greedy
    # place resnet50 differently and stay apart. The shared batch gives each point its own
    # single prediction.
    w = make_workload("resnet50")
    scenarios = {(ps, sharding): resolve(w, make_cluster(workers=2, ps=ps, bandwidth=1e9),
                                         make_strategy(sharding=sharding))
                 for ps in (1, 2) for sharding in ("round_robin", "greedy")}
    one = scenarios[1, "round_robin"], scenarios[1, "greedy"]
    two = scenarios[2, "round_robin"], scenarios[2, "greedy"]
    assert one[0].placement is one[1].placement and batch_key(one[0]) == batch_key(one[1])
    assert two[0].placement is not two[1].placement
    assert batch_key(two[0]) != batch_key(two[1])
    axes = {"workers": [1, 3], "ps": [1], "sharding": ["round_robin", "greedy"],
            "bandwidth": [1e9, 1e10], "sync": ["bsp", "asp"]}
    assert_rows_match(sweep(axes, model="resnet50"), axes, {"model": "resnet50"})
