"""Re-predicting a finished run: the measured side stays, each method's prediction equals a
direct predict of the scenario with today's models, and a matrix that no longer describes
the run is refused before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddlperf.api import predict
from ddlperf.errors import InputError
from ddlperf.validate import (
    ValidationRun,
    clean_json,
    load_results,
    plan_matrix,
    repredict,
    summarize,
)
from ddlperf.validate.compare import compare
from tests.validate.helpers import MINIMAL, fake, write


def finished_run(tmp_path: Path, matrix: Path) -> Path:
    """A results directory as validate leaves it for scenario ``a`` of MINIMAL, with a
    measured time of 1.25 s and predictions (deliberately stale) of 9 s."""
    _m, plans = plan_matrix(matrix, ["a"])
    plan = plans[0]
    info = {"name": plan.name, "index": plan.index, "note": plan.note,
            "fingerprint": plan.fingerprint, "setup": clean_json(plan.describe()),
            "inputs": {"rates": "configured", "predict_cluster": plan.cluster.to_dict()}}
    row = clean_json(compare(info, fake(1.25, kind="measurement"),
                             {"analytic": fake(9.0), "simulate": fake(9.0)}))
    out = tmp_path / "run"
    (out / "a").mkdir(parents=True)
    run = ValidationRun(out, str(matrix), [row], summarize([row]), {"rates": "configured"})
    (out / "results.json").write_text(json.dumps(run.to_dict()))
    return out


def test_predictions_are_recomputed_and_the_measurement_kept(tmp_path: Path) -> None:
    matrix = write(tmp_path, MINIMAL)
    out = finished_run(tmp_path, matrix)
    before = load_results(out)
    after = repredict(before, matrix)
    _m, plans = plan_matrix(matrix, ["a"])
    plan = plans[0]
    row = after.rows[0]
    assert row["measured"] == before.rows[0]["measured"]
    for method in ("analytic", "simulate"):
        options = {"iterations": plan.iterations, "warmup": plan.warmup, "seed": 0} \
            if method == "simulate" else {}
        direct = predict(workload=plan.workload, cluster=plan.cluster, strategy=plan.strategy,
                         method=method, **options)
        got = row["predicted"][method]
        assert got["iteration_time_s"] == pytest.approx(direct.iteration_time_s, rel=1e-12)
        assert got["error_pct"] == pytest.approx(
            100 * (direct.iteration_time_s - 1.25) / 1.25, rel=1e-9)
        assert set(got["worker_error_pct"]) == {"w0", "w1"}
        assert json.loads((out / "a" / f"predict-{method}.json").read_text())[
            "iteration_time_s"] == pytest.approx(direct.iteration_time_s)
    on_disk = json.loads((out / "results.json").read_text())
    assert on_disk["scenarios"][0]["predicted"] == clean_json(row["predicted"])
    assert on_disk["repredicted"]["ddlperf"]
    assert on_disk["summary"]["analytic"]["mape_pct"] < 100  # no longer the stale 9 s


def test_a_changed_scenario_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    matrix = write(tmp_path, MINIMAL)
    out = finished_run(tmp_path, matrix)
    text = (out / "results.json").read_text()
    changed = write(tmp_path, MINIMAL.replace("bandwidth: 200Mbps", "bandwidth: 400Mbps"),
                    "changed.yaml")
    with pytest.raises(InputError, match="scenario 'a' has changed"):
        repredict(load_results(out), changed)
    missing = write(tmp_path, MINIMAL.replace("name: a", "name: z"), "renamed.yaml")
    with pytest.raises(InputError, match="has no scenario 'a'"):
        repredict(load_results(out), missing)
    assert (out / "results.json").read_text() == text
    assert not (out / "a" / "predict-analytic.json").exists()


def test_a_run_from_before_the_interval_gets_it_from_its_records(tmp_path: Path) -> None:
    from ddlperf.measure.mean_interval import interval_from_records

    matrix = write(tmp_path, MINIMAL)
    out = finished_run(tmp_path, matrix)
    data = json.loads((out / "results.json").read_text())
    del data["scenarios"][0]["measured"]["mean_ci95_s"]  # written before it existed
    (out / "results.json").write_text(json.dumps(data))
    no_records = repredict(load_results(out), matrix)
    assert no_records.rows[0]["measured"]["mean_ci95_s"] is None
    (out / "results.json").write_text(json.dumps(data))  # as it was, without the interval
    _m, plans = plan_matrix(matrix, ["a"])
    records, start = [], 0.0
    levels = [1.0] * plans[0].warmup + [1.2, 1.2, 1.3, 1.3, 1.2, 1.2, 1.1, 1.1, 1.25, 1.25]
    for t, d in enumerate(levels):
        for name in ("w0", "w1"):
            records.append({"type": "iteration", "name": name, "role": "worker",
                            "iteration": t, "start": start, "end": start + d,
                            "duration_s": d, "compute_s": 0.2})
        start += d
    (out / "a" / "measure").mkdir()
    (out / "a" / "measure" / "records.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in records))
    after = repredict(load_results(out), matrix)
    half = interval_from_records(records, plans[0].warmup, "bsp")["half_width_s"]
    assert half > 0
    assert after.rows[0]["measured"]["mean_ci95_s"] == pytest.approx(half)
    on_disk = json.loads((out / "results.json").read_text())
    assert on_disk["scenarios"][0]["measured"]["mean_ci95_s"] == pytest.approx(half)
