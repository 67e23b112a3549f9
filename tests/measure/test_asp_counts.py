"""ASP runs whose workers have different periods: faster workers run more iterations, the
trainers honour each worker's count, and the wire check expects each worker's own volume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddlperf.api import make_cluster, make_strategy
from ddlperf.measure.asp_counts import MAX_FACTOR, asp_iteration_counts, worker_totals
from ddlperf.measure.launcher import build_spec, expected_traffic
from ddlperf.measure.records import worker_iterations
from ddlperf.measure.run import wire_check
from ddlperf.measure.trainer_common import total_iterations
from ddlperf.predictors.analytic import predict_analytic
from ddlperf.scenario import resolve
from tests.conftest import make_workload
from tests.measure.test_trainers import _run, _spec


def _scenario(sync: str = "asp", placement: str | None = None, workers: int = 3,
              speeds: list[float] | None = None):
    wl = make_workload([(0.01, 0.02, [1_000_000]), (0.02, 0.04, [2_000_000])])
    groups = None if speeds is None else {"workers": [
        {"name": f"g{i}", "count": 1, "speed": s} for i, s in enumerate(speeds)]}
    cluster = make_cluster(workers=None if groups else workers, ps=1, bandwidth="100Mbps",
                           placement=placement, config=groups)
    return resolve(wl, cluster, make_strategy(arch="ps", sync=sync,
                                              staleness=1 if sync == "ssp" else None))


def test_a_worker_faster_than_the_slowest_runs_as_many_iterations_as_fit() -> None:
    sc = _scenario(placement="colocated")  # the shard's host worker runs at compute speed
    spec = build_spec(sc, compute="emulated", iterations=20, warmup=5)
    periods = [w.iteration_time_s for w in predict_analytic(sc).workers]
    counts = asp_iteration_counts(sc, spec)
    fast = periods.index(min(periods))
    assert set(counts) == {fast}
    # ceil (at most MAX_FACTOR times the run), less warm-up
    assert counts[fast] == min(-(-25 * max(periods) // periods[fast]), MAX_FACTOR * 25) - 5
    assert counts[fast] > 20
    for index, count in counts.items():
        spec["workers"][index]["iterations"] = count
    assert total_iterations(spec, fast) == 5 + counts[fast]
    slow = next(i for i in range(3) if i != fast)
    assert total_iterations(spec) == 25 and total_iterations(spec, slow) == 25
    assert worker_totals(spec)[spec["workers"][fast]["name"]] == 5 + counts[fast]


def test_only_faster_workers_run_more() -> None:
    sc = _scenario(speeds=[1.0, 0.25])
    spec = build_spec(sc, compute="emulated", iterations=10, warmup=2)
    counts = asp_iteration_counts(sc, spec)
    assert set(counts) == {0} and 10 < counts[0] <= MAX_FACTOR * 12 - 2
    same = _scenario(workers=3)
    assert asp_iteration_counts(same, build_spec(same, compute="emulated", iterations=10,
                                                 warmup=2)) == {}


def test_a_cpu_quota_slows_a_real_compute_worker_and_the_count_is_capped() -> None:
    sc = _scenario(workers=2)
    spec = build_spec(sc, compute="real", iterations=10, warmup=2)
    assert asp_iteration_counts(sc, spec) == {}
    counts = asp_iteration_counts(sc, spec, {"w1": 0.5})
    assert set(counts) == {0} and counts[0] == 24 - 2  # twice the period: twice the run
    assert asp_iteration_counts(sc, spec, {"w1": 0.01})[0] == MAX_FACTOR * 12 - 2


def test_the_wire_check_expects_each_workers_own_iterations() -> None:
    sc = _scenario(workers=2)
    spec = build_spec(sc, compute="emulated", iterations=2, warmup=1)
    spec["workers"][0]["iterations"] = 5  # w0 runs 6 in all, w1 3
    six, three = expected_traffic(spec, pushes=6, pulls=7), expected_traffic(spec, 3, 4)
    counts = {f"{h} {d}": int(1.02 * (sum(v for w, v in six[h][d].items() if w == "w0")
                                      + sum(v for w, v in three[h][d].items() if w == "w1")))
              for h in six for d in ("uplink", "downlink")}
    zero = dict.fromkeys(counts, 0)
    assert wire_check(spec, zero, counts)["ok"]
    assert wire_check(spec, zero, counts)["iterations_counted"] == 6
    both_three = {f"{h} {d}": int(1.02 * sum(three[h][d].values()))
                  for h in three for d in ("uplink", "downlink")}
    assert not wire_check(spec, zero, both_three)["ok"]  # w0's extra iterations are missing


def test_the_ps_trainer_runs_each_workers_own_count(tmp_path: Path) -> None:
    spec = _spec(tmp_path, workers=2, sync="asp", iterations=3, warmup=1)
    spec["workers"][0]["iterations"] = 6
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    records = _run(tmp_path, spec)
    its = worker_iterations(records)
    assert [r["iteration"] for r in its["w0"]] == list(range(7))
    assert [r["iteration"] for r in its["w1"]] == list(range(4))
    serves = [r for r in records if r["type"] == "serve"]
    assert sorted(r["iteration"] for r in serves if r["worker"] == "w0") == list(range(7))
    assert sorted(r["iteration"] for r in serves if r["worker"] == "w1") == list(range(4))


@pytest.mark.parametrize("sync", ["bsp", "ssp"])
def test_waiting_strategies_keep_one_count(sync: str) -> None:
    sc = _scenario(sync=sync, speeds=[1.0, 0.3])
    assert asp_iteration_counts(sc, build_spec(sc, compute="emulated", iterations=4,
                                               warmup=1)) == {}
