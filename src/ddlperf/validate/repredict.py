"""Re-predict a finished validation run with today's models.

A dev-matrix run takes most of an hour of emulated training on this machine, and its
measurements do not depend on the predictors. When a model changes, the honest check is the
same measurements against the new predictions, so the measured side stays exactly what was
run (times, per-worker times, probes, calibrations, the cluster the predictors were given)
and only each method's prediction and error are recomputed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ddlperf.errors import InputError
from ddlperf.io import write_atomic
from ddlperf.validate.compare import METHODS, prediction_entry, summarize
from ddlperf.validate.plan import Plan, plan_matrix
from ddlperf.validate.results import Progress, ValidationRun, clean_json, write_results
from ddlperf.workload import Workload


def _same_setup(plan: Plan, recorded: dict[str, Any]) -> bool:
    """The matrix still describes the scenario that was run (keys both versions know)."""
    now = clean_json(plan.describe())
    return all(now[key] == value for key, value in recorded.items() if key in now)


def _workload(plan: Plan, directory: Path) -> Workload:
    if plan.compute != "real":
        return plan.workload
    path = directory / "workload.json"
    if not path.exists():
        raise InputError("--results", f"scenario {plan.name!r} has no profile at {str(path)!r}",
                         "re-predict in the run's own directory (it holds the profiles)")
    return Workload.from_dict(json.loads(path.read_text()), field=str(path))


def _recorded_interval(plan: Plan, directory: Path) -> float | None:
    """The measured mean's 95% half-width, from the run's own per-iteration records."""
    from ddlperf.measure.mean_interval import interval_from_records

    path = directory / "measure" / "records.jsonl"
    if not path.is_file():
        return None
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    sync = plan.strategy.sync if plan.strategy.arch == "ps" else None
    random = plan.compute == "emulated" and any(
        layer.forward_cv > 0 or layer.backward_cv > 0 for layer in plan.workload.layers)
    interval = interval_from_records(records, plan.warmup, sync, random)
    return None if interval is None else float(interval["half_width_s"])


def _predict_row(plan: Plan, row: dict[str, Any], directory: Path
                 ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The row with new predictions, and each method's full prediction (for its JSON file)."""
    from ddlperf.api import predict
    from ddlperf.cluster import Cluster
    from ddlperf.validate.run import simulate_options

    workload = _workload(plan, directory)
    cluster = Cluster.from_dict(row["inputs"]["predict_cluster"],
                                field=f"{plan.name}: inputs.predict_cluster")
    measured = row["measured"]
    if "mean_ci95_s" not in measured:  # a run from before the interval was recorded
        measured = {**measured, "mean_ci95_s": _recorded_interval(plan, directory)}
        row = {**row, "measured": measured}
    predicted: dict[str, Any] = {}
    full: dict[str, Any] = {}
    for method in METHODS:
        options = simulate_options(plan, workload) if method == "simulate" else {}
        p = predict(workload=workload, cluster=cluster, strategy=plan.strategy, method=method,
                    **options)
        full[method] = clean_json(p.to_dict())
        predicted[method] = prediction_entry(
            p, float(measured["iteration_time_s"]),
            float(measured["throughput_samples_per_s"]), measured.get("per_worker") or {})
    return clean_json({**row, "predicted": predicted}), full


def repredict(run: ValidationRun, matrix: str | Path,
              progress: Progress | None = None) -> ValidationRun:
    """Recompute both methods' predictions of every finished scenario of ``run`` and rewrite
    its results (``results.json``/``.csv``/``validation.png`` and each scenario's
    ``predict-<method>.json``). Everything is predicted before anything is written, so bad
    input or an error leaves the run as it was."""
    import ddlperf

    _matrix_file, plans = plan_matrix(matrix)
    by_name = {plan.name: plan for plan in plans}
    emit = progress or (lambda _e: None)
    ok = [row for row in run.rows if row.get("status") == "ok"]
    for row in ok:
        plan = by_name.get(row["name"])
        if plan is None:
            raise InputError("--matrix", f"has no scenario {row['name']!r} of the results",
                             "give the matrix file the run was made from")
        if not _same_setup(plan, row.get("setup") or {}):
            raise InputError("--matrix", f"scenario {row['name']!r} has changed since it was "
                             "run", f"measure it again: ddlperf validate --only {row['name']}")
    new_rows: list[dict[str, Any]] = []
    files: list[tuple[Path, dict[str, Any]]] = []
    for i, row in enumerate(run.rows):
        if row.get("status") != "ok":
            new_rows.append(row)
            continue
        emit({"event": "start", "index": i, "total": len(run.rows), "name": row["name"]})
        directory = run.out / row["name"]
        new_row, full = _predict_row(by_name[row["name"]], row, directory)
        new_rows.append(new_row)
        if directory.is_dir():
            files += [(directory / f"predict-{m}.json", p) for m, p in full.items()]
        emit({"event": "done", "index": i, "total": len(run.rows), "name": row["name"],
              "row": new_row})
    meta = {**run.meta, "repredicted": {"at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                        "ddlperf": ddlperf.__version__}}
    result = ValidationRun(run.out, run.matrix, new_rows, summarize(new_rows), meta)
    for path, data in files:
        write_atomic(path, json.dumps(data, indent=1, allow_nan=False) + "\n")
    write_results(result)
    return result
