"""Predicted vs measured: one result row per scenario and the per-method summary."""

from __future__ import annotations

import math
from typing import Any

from ddlperf.prediction import Prediction

METHODS = ("analytic", "simulate")
TARGET_WORST_PCT = 10.0  # every scenario within this (the summary counts them)


def error_pct(predicted: float, measured: float) -> float:
    """Signed error of a prediction, percent of the measurement."""
    return 100.0 * (predicted - measured) / measured if measured > 0 else math.nan


def _per_worker(p: Prediction) -> dict[str, float]:
    return {w.name: float(w.iteration_time_s) for w in p.workers}


def worker_errors(predicted: dict[str, float], measured: dict[str, float]) -> dict[str, float]:
    """Per worker: the signed error of its predicted iteration time (ASP and SSP workers each
    have their own, and the scenario's mean can hide +12% next to −4%)."""
    return {name: error_pct(predicted[name], measured[name])
            for name in measured if name in predicted}


def worst_worker(errors: dict[str, float]) -> tuple[str, float] | None:
    finite = [(n, e) for n, e in errors.items() if math.isfinite(e)]
    return max(finite, key=lambda item: abs(item[1])) if finite else None


def probe_deviation(measurement: Prediction) -> float | None:
    """Largest |probed / expected − 1| over all links (expected = configured × goodput)."""
    from ddlperf.measure.probe import max_deviation

    return max_deviation(measurement.inputs.get("measure", {}).get("probe"))


def mean_ci95_s(measurement: Prediction) -> float | None:
    """Half-width of the 95% interval of the measured mean iteration time (batch means over
    consecutive blocks of iterations, :mod:`ddlperf.measure.mean_interval`), if known."""
    interval = (measurement.uncertainty or {}).get("iteration_time_s") or {}
    half = interval.get("half_width_s")
    return None if half is None else float(half)


def beyond_interval(row: dict[str, Any], method: str) -> bool | None:
    """Is the method's error larger than the measured mean's own 95% interval (None: the
    measurement has none)?"""
    half, measured = row["measured"].get("mean_ci95_s"), row["measured"]["iteration_time_s"]
    if half is None or not measured:
        return None
    return abs(row["predicted"][method]["error_pct"]) > 100.0 * half / measured


def compare(plan_info: dict[str, Any], measurement: Prediction,
            predictions: dict[str, Prediction]) -> dict[str, Any]:
    """One result row: the measurement's headline numbers and, per method, the prediction and
    its error (iteration time and throughput)."""
    pct = (measurement.percentiles or {}).get("iteration_time_s", {})
    info = measurement.inputs.get("measure", {})
    deviation = probe_deviation(measurement)
    row: dict[str, Any] = {
        **plan_info,
        "status": "ok",
        "measured": {
            "iteration_time_s": float(measurement.iteration_time_s),
            "p5_s": pct.get("p5"), "p50_s": pct.get("p50"), "p95_s": pct.get("p95"),
            "throughput_samples_per_s": float(measurement.throughput_samples_per_s),
            "bottleneck": measurement.bottleneck,
            "per_worker": _per_worker(measurement),
            "breakdown_s": dict(measurement.breakdown_s),
            "wire_ok": (info.get("wire_check") or {}).get("ok"),
            "resent_pct": ((info.get("wire_check") or {}).get("tcp") or {}).get(
                "max_resent_pct"),
            "probe_max_deviation_pct": None if deviation is None else 100 * deviation,
            "ps_update_s_per_byte": info.get("ps_update_s_per_byte"),
            "out": info.get("out"),
            "mean_ci95_s": mean_ci95_s(measurement),
        },
        "predicted": {},
    }
    for method, p in predictions.items():
        row["predicted"][method] = prediction_entry(p, measurement.iteration_time_s,
                                                    measurement.throughput_samples_per_s,
                                                    _per_worker(measurement))
    return row


def prediction_entry(p: Prediction, iteration_time_s: float, throughput: float,
                     per_worker: dict[str, float] | None = None) -> dict[str, Any]:
    """One method's prediction in a result row, with its errors against the reference
    (measured or published) iteration time and throughput, and per worker where the
    reference has per-worker times."""
    ppct = (p.percentiles or {}).get("iteration_time_s", {})
    entry = {
        "iteration_time_s": float(p.iteration_time_s),
        "p5_s": ppct.get("p5"), "p95_s": ppct.get("p95"),
        "throughput_samples_per_s": float(p.throughput_samples_per_s),
        "bottleneck": p.bottleneck,
        "per_worker": _per_worker(p),
        "breakdown_s": dict(p.breakdown_s),
        "error_pct": error_pct(p.iteration_time_s, iteration_time_s),
        "throughput_error_pct": error_pct(p.throughput_samples_per_s, throughput),
    }
    if per_worker is not None:
        entry["worker_error_pct"] = worker_errors(_per_worker(p), per_worker)
    return entry


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per method: scenarios compared, MAPE (%), worst |error| (%) and where, within 10%, and
    the worst single worker's error (``worst_worker_error_pct``, ``worst_worker``: scenario
    and worker)."""
    out: dict[str, Any] = {}
    ok = [r for r in rows if r.get("status") == "ok"]
    for method in METHODS:
        errors = [(r["name"], r["predicted"][method]["error_pct"]) for r in ok
                  if method in r.get("predicted", {})
                  and math.isfinite(r["predicted"][method]["error_pct"])]
        if not errors:
            continue
        worst = max(errors, key=lambda e: abs(e[1]))
        mape = sum(abs(e) for _n, e in errors) / len(errors)
        within = sum(1 for _n, e in errors if abs(e) <= TARGET_WORST_PCT)
        judged = [b for b in (beyond_interval(r, method) for r in ok
                              if method in r.get("predicted", {})) if b is not None]
        out[method] = {
            "scenarios": len(errors), "mape_pct": mape, "worst_abs_error_pct": abs(worst[1]),
            "worst_error_pct": worst[1], "worst_scenario": worst[0],
            "within_10pct": within, "mean_error_pct": sum(e for _n, e in errors) / len(errors),
            "with_interval": len(judged), "beyond_interval": sum(judged),
        }
        workers = [(f"{r['name']} {w}", e) for r in ok if method in r.get("predicted", {})
                   for w, e in (r["predicted"][method].get("worker_error_pct") or {}).items()]
        hardest = worst_worker(dict(workers))
        if hardest is not None:
            out[method]["worst_worker"], out[method]["worst_worker_error_pct"] = hardest
    failed = [r["name"] for r in rows if r.get("status") != "ok"]
    if failed:
        out["failed"] = failed
    return out
