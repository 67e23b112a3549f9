"""plan: the cheapest answer meets the target when predicted directly and nothing cheaper in
the searched space does; the Pareto front; deadlines, budgets, bad input, Ctrl-C."""

from __future__ import annotations

import csv
import dataclasses

import pytest

from ddlperf.api import predict
from ddlperf.errors import InputError
from ddlperf.plan import SearchSpace, Target, plan
from ddlperf.report.rowfile import RowWriter

FIXED = {"model": "resnet50"}


def _space(table, **kwargs):
    return SearchSpace(instances=table.instances, servers=kwargs.pop("servers", range(1, 17)),
                       ps=kwargs.pop("ps", (1, 2, 4)), **kwargs)


def _all_rows(tmp_path, table, target, space):
    writer = RowWriter(tmp_path / "rows.csv", "--csv")
    result = plan(target, space, prices=table, fixed=FIXED, rows=writer, recheck=0)
    writer.close()
    with open(tmp_path / "rows.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return result, rows


def test_cheapest_meets_the_target_directly_and_nothing_cheaper_does(tmp_path, table):
    target = Target(throughput=3000)
    result, rows = _all_rows(tmp_path, table, target, _space(table))
    cheapest = result.cheapest
    direct = predict(**cheapest["kwargs"])
    assert direct.throughput_samples_per_s >= 3000
    assert direct.throughput_samples_per_s == pytest.approx(
        cheapest["throughput_samples_per_s"], rel=1e-9)
    assert len(rows) == result.total == result.evaluated
    from ddlperf.plan.space import candidates

    cheaper = 0
    for candidate, row in zip(candidates(_space(table), table), rows, strict=True):
        assert candidate.describe()["instance"] == row["instance"]
        if candidate.price_per_hour < cheapest["price_per_hour"]:
            assert row["meets"] == "False", row
            direct = predict(**candidate.kwargs(FIXED))  # predicted directly, not batched
            assert direct.throughput_samples_per_s < 3000, row
            cheaper += 1
    assert cheaper > 10
    assert result.fastest["throughput_samples_per_s"] == max(
        float(r["throughput_samples_per_s"]) for r in rows if r["meets"] == "True")


def test_batched_rows_equal_direct_predictions(table):
    from ddlperf.plan.evaluate import evaluate_family
    from ddlperf.plan.space import candidates

    space = SearchSpace(instances=[table.instances[1]], servers=[1, 3, 8], ps=[2])
    family = [c for c in candidates(space, table) if c.arch == "ps"]
    assert family[0].batchable
    for candidate, row in zip(family, evaluate_family(family, FIXED)):
        direct = predict(**candidate.kwargs(FIXED))
        assert row["throughput_samples_per_s"] == pytest.approx(
            direct.throughput_samples_per_s, rel=1e-9)
        assert row["bottleneck"] == direct.bottleneck


def test_step_barrier_candidates_are_bsp_ps_only_and_predict_as_such(table):
    from ddlperf.plan.evaluate import evaluate_family
    from ddlperf.plan.space import candidates

    space = SearchSpace(instances=[table.instances[1]], servers=[1, 4], ps=[2],
                        sync=("bsp", "asp"), step_barrier=(True, False))
    found = list(candidates(space, table))
    with_barrier = [c for c in found if c.step_barrier]
    assert with_barrier and all(c.arch == "ps" and c.sync == "bsp" for c in with_barrier)
    assert {(c.sync, c.step_barrier) for c in found if c.arch == "ps"} == {
        ("bsp", True), ("bsp", False), ("asp", False)}
    default = list(candidates(SearchSpace(instances=[table.instances[1]], servers=[1, 4],
                                          ps=[2]), table))
    assert not any(c.step_barrier for c in default)  # off unless asked for
    family = [c for c in with_barrier]
    rows = evaluate_family(family, FIXED)
    for candidate, row in zip(family, rows, strict=True):
        assert candidate.kwargs(FIXED)["step_barrier"] is True
        assert candidate.describe()["step_barrier"] is True
        direct = predict(**candidate.kwargs(FIXED))
        assert row["throughput_samples_per_s"] == pytest.approx(
            direct.throughput_samples_per_s, rel=1e-9)
    without = predict(**dataclasses.replace(family[-1], step_barrier=False).kwargs(FIXED))
    assert rows[-1]["throughput_samples_per_s"] < without.throughput_samples_per_s


def test_pareto_front_is_exactly_the_undominated_rows(tmp_path, table):
    result, rows = _all_rows(tmp_path, table, Target(throughput=1000), _space(table))
    points = [(float(r["cost"]), float(r["throughput_samples_per_s"])) for r in rows
              if r["cost"]]
    front = [(r["cost"], r["throughput_samples_per_s"]) for r in result.front]
    assert front == sorted(front)
    for c, t in front:  # nothing dominates a front point
        assert not any(c2 <= c and t2 >= t and (c2, t2) != (c, t) for c2, t2 in points)
    for c, t in points:  # every other point is dominated by one on the front
        assert any(fc <= c and ft >= t for fc, ft in front)


def test_deadline_and_budget(tmp_path, table):
    target = Target(deadline_s=3600, samples=20_000_000, budget=100)
    result, rows = _all_rows(tmp_path, table, target, _space(table))
    cheapest = result.cheapest
    assert cheapest["job_s"] <= 3600 and cheapest["cost"] <= 100
    assert cheapest["cost"] == pytest.approx(
        cheapest["price_per_hour"] * 20_000_000 / cheapest["throughput_samples_per_s"] / 3600)
    for row in rows:
        if row["cost"] and float(row["cost"]) < cheapest["cost"]:
            assert float(row["job_s"]) > 3600


def test_unreachable_target_names_the_best_reachable(table):
    with pytest.raises(InputError) as info:
        plan(Target(throughput=10_000_000), _space(table, servers=[1, 2]), prices=table,
             fixed=FIXED, recheck=0)
    text = str(info.value)
    assert text.startswith("--throughput") and "best reachable is" in text


def test_with_a_budget_the_best_reachable_is_the_fastest_within_it(table):
    space = _space(table, servers=range(1, 17))
    everything = plan(Target(throughput=1), space, prices=table, fixed=FIXED, recheck=0)
    budget = 20.0  # per hour: leaves out the fastest clusters
    assert everything.fastest["price_per_hour"] > budget
    with pytest.raises(InputError) as info:
        plan(Target(throughput=10_000_000, budget=budget), space, prices=table, fixed=FIXED,
             recheck=0)
    text = str(info.value)
    best = max((r for r in everything.front if r["price_per_hour"] <= budget),
               key=lambda r: r["throughput_samples_per_s"])
    assert f"best reachable within it is {best['throughput_samples_per_s']:,.0f} samples/s" \
        in text
    assert f"{best['servers']} × {best['instance']}" in text


def test_simulate_recheck_of_the_answers(table):
    result = plan(Target(throughput=3000), _space(table, servers=range(1, 9)), prices=table,
                  fixed=FIXED, recheck=2, simulate_options={"iterations": 3, "warmup": 1})
    assert [r["which"] for r in result.rechecks] == ["cheapest", "fastest"]
    for r in result.rechecks:
        assert r["simulate_p5"] <= r["simulate_throughput"] <= r["simulate_p95"] + 1e-9
        assert abs(r["difference"]) < 0.05  # deterministic, homogeneous: the methods agree
    assert any("p5–p95 equal the mean" in n for n in result.notes)  # and says why
    jittered = plan(Target(throughput=3000), _space(table, servers=range(1, 9)), prices=table,
                    fixed=FIXED, recheck=1, simulate_options={"iterations": 6, "warmup": 1,
                                                              "jitter": 0.1})
    spread = jittered.rechecks[0]
    assert spread["simulate_p5"] < spread["simulate_p95"]
    assert not any("p5–p95 equal" in n for n in jittered.notes)


def test_ctrl_c_keeps_what_finished(tmp_path, table):
    writer = RowWriter(tmp_path / "part.csv", "--csv")
    seen = []

    def stop_after_two(done, total):
        seen.append(done)
        if len(seen) == 2:
            raise KeyboardInterrupt

    result = plan(Target(throughput=3000), _space(table), prices=table, fixed=FIXED,
                  rows=writer, recheck=0, progress=stop_after_two)
    writer.close()
    assert result.interrupted and result.evaluated == seen[-1] < result.total
    with open(tmp_path / "part.csv", newline="") as f:
        assert len(list(csv.DictReader(f))) == result.evaluated
    assert any("interrupted" in n for n in result.notes)


def test_mixes_are_searched_on_request(table):
    space = SearchSpace(instances=table.instances[:2], servers=[4], ps=[1], mixes=True,
                        arch=("ps",))
    from ddlperf.plan.space import candidates

    mixed = [c for c in candidates(space, table) if len(c.parts) == 2]
    assert {tuple(n for _i, n in c.parts) for c in mixed} == {(1, 3), (2, 2), (3, 1)}
    result = plan(Target(throughput=100), space, prices=table, fixed=FIXED, recheck=0)
    assert result.evaluated == result.total and result.errors == 0


def test_missing_ps_hosts_is_bad_input(table):
    no_hosts = table.model_copy(update={"ps_hosts": ()})
    with pytest.raises(InputError, match="no ps_hosts"):
        plan(Target(throughput=100), _space(no_hosts), prices=no_hosts, fixed=FIXED)


def test_answers_are_the_same_whether_or_not_every_row_is_kept(tmp_path, table):
    """Without a rows file the workers send back only the rows that can be answers."""
    from ddlperf.executors import LocalExecutor

    target = Target(throughput=3000, budget=60)
    space = _space(table, servers=range(1, 25), sync=("bsp", "asp"))
    full, _rows = _all_rows(tmp_path, table, target, space)
    lean = plan(target, space, prices=table, fixed=FIXED, recheck=0,
                executor=LocalExecutor(jobs=2))

    def strip(row):
        return {k: v for k, v in row.items() if k != "kwargs"}

    for key in ("cheapest", "fastest", "best_reachable"):
        assert strip(getattr(full, key)) == strip(getattr(lean, key)), key
    assert [strip(r) for r in full.front] == [strip(r) for r in lean.front]
    assert (full.evaluated, full.errors) == (lean.evaluated, lean.errors)


def test_a_saved_plan_reads_back_as_the_same_result(table):
    """``plan --json`` holds everything its page draws (``report --plan``): read back, the
    result writes the same JSON, price table included."""
    import json

    from ddlperf.plan import PlanResult

    target = Target(deadline_s=36_000, samples=5e7, budget=900)
    result = plan(target, _space(table, servers=range(1, 9)), prices=table, fixed=FIXED,
                  recheck=0)
    saved = json.loads(json.dumps(result.to_dict()))
    assert saved["prices"]["instances"][2]["intra"] > 0  # NVLink2 in bits/s
    again = PlanResult.from_dict(saved)
    assert again.to_dict() == saved
    assert again.prices == table and again.target == target


@pytest.mark.parametrize("change", [
    lambda d: d.pop("target"), lambda d: d["prices"].pop("instances"),
    lambda d: d.update(target={"throughput_samples_per_s": "fast"}),
    lambda d: d["pareto_front"][0].pop("cost"), lambda d: d.update(candidates="many"),
    lambda d: d.update(pareto_front=3),
])
def test_a_json_that_is_not_a_saved_plan_is_one_input_error(table, change):
    from ddlperf.plan import PlanResult

    data = plan(Target(throughput=3000), _space(table, servers=range(1, 5)), prices=table,
                fixed=FIXED, recheck=0).to_dict()
    change(data)
    with pytest.raises(InputError) as info:
        PlanResult.from_dict(data)
    assert str(info.value).startswith("--plan")


def test_big_asp_answers_are_not_re_checked_and_say_why(table, monkeypatch):
    """The simulator gives every ASP/SSP worker a phase of its own: past a size that takes
    minutes, so such answers say so instead of being simulated."""
    from rich.console import Console

    from ddlperf.plan import MAX_ASYNC_RECHECK_WORKERS
    from ddlperf.report.plan_text import render

    assert MAX_ASYNC_RECHECK_WORKERS == 64
    monkeypatch.setattr("ddlperf.plan.MAX_ASYNC_RECHECK_WORKERS", 4)
    space = SearchSpace(instances=table.instances, servers=range(1, 5), ps=(1, 2),
                        arch=("ps",), sync=("asp", "ssp"), staleness=2)
    result = plan(Target(throughput=100), space, prices=table, fixed=FIXED, recheck=3,
                  simulate_options={"iterations": 3, "warmup": 1})
    by_which = {r["which"]: r for r in result.rechecks}
    fastest = by_which["fastest"]
    assert result.fastest["workers"] > 4
    assert "simulate_throughput" not in fastest
    assert fastest["skipped"].startswith(f"{fastest['sync'].upper()} with "
                                         f"{result.fastest['workers']} workers")
    assert "ddlperf predict --method simulate" in fastest["skipped"]
    small = [r for r in result.rechecks if "skipped" not in r]
    assert small and all(r["simulate_throughput"] > 0 for r in small)
    console = Console(record=True, width=200)
    render(result, console)
    assert "not simulated: " in console.export_text()
