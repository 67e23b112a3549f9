"""Run a matrix: per scenario, calibrate, measure, predict with both methods and compare
(see :mod:`ddlperf.validate` for the steps)."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ddlperf.errors import InputError
from ddlperf.io import write_atomic
from ddlperf.prediction import Prediction
from ddlperf.validate.calibration import calibrate_ps_update, profile_real, quota_speeds
from ddlperf.validate.clusters import (
    probed_cluster,
    quota_nic_bps,
    quota_server,
    with_ps_update,
    with_quotas,
)
from ddlperf.validate.comm_cpu import (
    calibrate_comm_cpu,
    calibrate_fabric_cpu,
    calibrate_ring_cpu,
)
from ddlperf.validate.compare import METHODS, compare, summarize
from ddlperf.validate.host_speed import HostWindow
from ddlperf.validate.matrix_file import load_matrix
from ddlperf.validate.plan import Plan, plan_matrix
from ddlperf.validate.results import (
    Progress,
    ValidationRun,
    clean_json,
    machine_info,
    prepare_out,
    previous_rows,
    previous_runtime,
    write_results,
)
from ddlperf.workload import Workload

RATES = ("configured", "probed")


def _fresh_dir(directory: Path) -> None:
    """Remove what an interrupted attempt of this scenario left (only our own files)."""
    if not directory.exists():
        return
    measure_dir = directory / "measure"
    if measure_dir.exists() and any((measure_dir / n).exists() for n in (
            "spec.json", "records.jsonl", "measurement.json")):
        shutil.rmtree(measure_dir)
    for name in ("workload.json", "predict-analytic.json", "predict-simulate.json",
                 "result.json"):
        (directory / name).unlink(missing_ok=True)


def simulate_options(plan: Plan, workload: Workload) -> dict[str, Any]:
    options: dict[str, Any] = {"iterations": plan.iterations, "warmup": plan.warmup, "seed": 0}
    noisy = any(layer.forward_cv > 0 or layer.backward_cv > 0 for layer in workload.layers)
    if noisy:
        options["replications"] = 5
    return options


def run_scenario(plan: Plan, directory: Path, *, rates: str = "configured",
                 ps_update: Callable[[], dict[str, Any]] | None = None,
                 say: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Profile (real compute), measure, predict with both methods, compare: one result row."""
    from ddlperf.api import predict
    from ddlperf.measure.run import measure

    began = time.monotonic()
    durations: dict[str, float] = {}
    load_before = _load()
    directory.mkdir(parents=True, exist_ok=True)
    _fresh_dir(directory)
    inputs: dict[str, Any] = {"rates": rates}
    workload, cluster = plan.workload, plan.cluster
    if plan.compute == "real":
        say("profiling the model on this CPU (fresh process, 1 thread)")
        t0 = time.monotonic()
        workload = profile_real(plan, directory / "workload.json")
        durations["profile_s"] = time.monotonic() - t0
        inputs["profile"] = {
            "step_s": workload.provenance.get("step_s_median"),
            "step_cv": workload.provenance.get("step_s_cv"),
            "compute_s": workload.compute_s,
            "update_s_per_byte": workload.update_s_per_byte,
        }
        inputs["ps_update_s_per_byte"] = {
            "value": workload.update_s_per_byte,
            "source": "the profile's optimizer step (SGD, momentum 0.9) on this CPU"}
    elif plan.strategy.arch == "ps" and cluster.ps.update_s_per_byte is None and ps_update:
        calibration = ps_update()
        cluster = with_ps_update(cluster, float(calibration["update_s_per_byte"]))
        inputs["ps_update_s_per_byte"] = {
            "value": calibration["update_s_per_byte"],
            "source": "calibrated on this CPU in this session: " + calibration["how"]}
    speeds: dict[str, dict[str, float]] = {}
    if plan.cpu_quota:
        say(f"timing the step under CPU quota {plan.cpu_quota}")
        t0 = time.monotonic()
        speeds = quota_speeds(plan)
        durations["quota_timing_s"] = time.monotonic() - t0
        inputs["quota"] = speeds
        server = quota_server(plan)
        ring = plan.strategy.arch == "allreduce"
        t0 = time.monotonic()
        if ring:  # the ring's own trainer: it does not pay what a PS worker's pushes do
            say("timing communication CPU (the DDP trainer, 2 hosts)")
            comm = calibrate_ring_cpu(workload, quota_nic_bps(plan), compute=plan.compute)
            comm["comm_cpu_s_per_byte"] = comm["s_per_byte"]
        else:
            say("timing communication CPU (the PS trainer, 1 worker + 1 shard)")
            comm = calibrate_comm_cpu(workload, quota_nic_bps(plan), plan.compute)
        durations["comm_cpu_timing_s"] = time.monotonic() - t0
        inputs["comm_cpu_s_per_byte"] = {
            "value": comm["comm_cpu_s_per_byte"],
            "source": "calibrated on this machine in this session: " + comm["how"],
            "calibration": comm}
        fabric = None
        if server is not None and server.gpus > 1 and ring:
            say("timing the server's loopback CPU (the DDP trainer on one server, uncapped)")
            t0 = time.monotonic()
            fabric = calibrate_ring_cpu(workload, quota_nic_bps(plan), server.gpus,
                                        float(server.intra or 0), plan.compute)
            fabric["intra_cpu_s_per_byte"] = fabric["s_per_byte"]
        elif server is not None and server.gpus > 1 and plan.strategy.local_aggregation:
            say("timing the server's loopback CPU (local aggregation, uncapped)")
            t0 = time.monotonic()
            fabric = calibrate_fabric_cpu(workload, server.gpus, float(server.intra or 0),
                                          quota_nic_bps(plan), comm["comm_cpu_s_per_byte"],
                                          plan.compute)
        if fabric is not None:
            durations["fabric_cpu_timing_s"] = time.monotonic() - t0
            inputs["intra_cpu_s_per_byte"] = {
                "value": fabric["intra_cpu_s_per_byte"],
                "source": "calibrated on this machine in this session: " + fabric["how"],
                "calibration": fabric}
    window = HostWindow.start()
    t0 = time.monotonic()
    measurement = measure(
        workload=workload, cluster=cluster, strategy=plan.strategy, compute=plan.compute,
        iterations=plan.iterations, warmup=plan.warmup, out=directory / "measure",
        timeout=plan.timeout, cpu_quota=plan.cpu_quota or None, probe=True,
        probe_seconds=plan.probe_seconds, progress=say)
    durations["measure_s"] = time.monotonic() - t0
    inputs["host"] = window.finish()  # how fast the CPU ran around it (validate.host_speed)
    predict_cluster = cluster
    if speeds:
        # a quota'd host pays its communication CPU from its quota (ddlperf.host_cpu)
        predict_cluster = with_quotas(predict_cluster, speeds,
                                      inputs["comm_cpu_s_per_byte"]["value"],
                                      (inputs.get("intra_cpu_s_per_byte") or {}).get("value"))
    probe = measurement.inputs.get("measure", {}).get("probe") or {}
    if rates == "probed":
        if not probe:
            raise InputError("--rates", "probed rates need the measurement's link probe")
        predict_cluster = probed_cluster(predict_cluster, probe)
    say("predicting (analytic, simulate)")
    t0 = time.monotonic()
    predictions: dict[str, Prediction] = {}
    for method in METHODS:
        options = simulate_options(plan, workload) if method == "simulate" else {}
        p = predict(workload=workload, cluster=predict_cluster, strategy=plan.strategy,
                    method=method, **options)
        predictions[method] = p
        write_atomic(directory / f"predict-{method}.json",
                     json.dumps(clean_json(p.to_dict()), indent=1, allow_nan=False) + "\n")
    durations["predict_s"] = time.monotonic() - t0
    durations["total_s"] = time.monotonic() - began
    inputs["predict_cluster"] = predict_cluster.to_dict()
    # the 1-minute load average before and after: another job on 2 cores skews a measurement
    inputs["load_average_1min"] = {"before": load_before, "after": _load()}
    info = {"name": plan.name, "index": plan.index, "note": plan.note,
            "fingerprint": plan.fingerprint, "setup": plan.describe(), "inputs": inputs,
            "durations_s": durations}
    row = clean_json(compare(info, measurement, predictions))
    write_atomic(directory / "result.json", json.dumps(row, indent=1, allow_nan=False) + "\n")
    return row


def _load() -> float | None:
    try:
        return float(os.getloadavg()[0])
    except OSError:  # pragma: no cover - not on Linux
        return None


def validate(
    matrix: str | Path,
    *,
    out: str | Path = "validation",
    only: Iterable[str] | None = None,
    resume: bool = False,
    rates: str = "configured",
    progress: Progress | None = None,
    plot: bool = True,
) -> ValidationRun:
    """Run every scenario of ``matrix`` (or ``only`` those) and compare; see the module doc.

    ``progress`` receives dicts: ``{"event": "start"|"step"|"done"|"skip"|"failed",
    "index", "total", "name", "message", "row"}``. A scenario whose run fails (a rank crashed
    or hung, the wire check failed) is recorded with ``status: "failed"`` and the others go on;
    bad input raises :class:`InputError` before anything runs.
    """
    from ddlperf.measure.emulated import require_root
    from ddlperf.measure.launcher import RunFailed

    if rates not in RATES:
        raise InputError("--rates", f"unknown choice {rates!r}", f"use {' or '.join(RATES)}")
    _matrix_file, plans = plan_matrix(matrix, only)
    require_root()
    out_dir = prepare_out(out, resume)
    emit = progress or (lambda _e: None)
    previous = previous_rows(out_dir) if resume else {}
    prior = previous_runtime(out_dir) if resume else 0.0
    began = time.monotonic()
    meta = {"created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "rates": rates,
            "machine": machine_info(), "command": "ddlperf validate " + " ".join(
                [f"--matrix {matrix}", f"--rates {rates}"]
                + ([f"--only {','.join(only)}"] if only else []))}
    try:
        order = {e.name: i for i, e in enumerate(load_matrix(matrix).scenarios)}
    except InputError:  # pragma: no cover - already read once above
        order = {}
    calibration: dict[str, Any] = {}

    def ps_update() -> dict[str, Any]:
        if not calibration:
            calibration.update(calibrate_ps_update())
            meta["ps_update_calibration"] = dict(calibration)
        return calibration

    rows: dict[str, dict[str, Any]] = {
        n: r for n, r in previous.items() if n in order and r.get("status") == "ok"}
    run = ValidationRun(out_dir, str(matrix), [], {}, meta)

    def flush() -> None:
        run.rows = sorted(rows.values(), key=lambda r: order.get(r["name"], 1 << 30))
        run.summary = summarize(run.rows)
        meta["runtime_s"] = prior + time.monotonic() - began
        write_results(run, plot=plot)

    total = len(plans)
    for i, plan in enumerate(plans):
        base = {"index": i, "total": total, "name": plan.name}
        done = rows.get(plan.name)
        if done is not None and done.get("fingerprint") == plan.fingerprint:
            emit({**base, "event": "skip", "row": done,
                  "message": "already done (--resume)"})
            continue
        rows.pop(plan.name, None)
        emit({**base, "event": "start", "message": "starting"})
        try:
            row = run_scenario(plan, out_dir / plan.name, rates=rates, ps_update=ps_update,
                               say=lambda m, base=base: emit({**base, "event": "step",
                                                              "message": m}))
        except RunFailed as exc:
            row = {"name": plan.name, "index": plan.index, "note": plan.note,
                   "fingerprint": plan.fingerprint, "setup": plan.describe(),
                   "status": "failed", "error": str(exc)}
            rows[plan.name] = row
            flush()
            emit({**base, "event": "failed", "row": row, "message": str(exc)})
            continue
        rows[plan.name] = row
        flush()
        emit({**base, "event": "done", "row": row, "message": "done"})
    flush()
    return run
