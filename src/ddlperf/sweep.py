"""Sweeps: predict every point of a grid of scenarios (workers × PS × bandwidth × …).

Points are independent, so a large grid is split across processes (``jobs``). Workloads are
built once per (model, batch, device) and reused: the predictors cache everything that depends
only on the workload, which is what makes thousands of predictions per second possible.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Sequence
from multiprocessing import get_context
from typing import Any

from ddlperf.api import DEFAULTS, METHODS, make_cluster, make_strategy, make_workload
from ddlperf.errors import InputError
from ddlperf.scenario import resolve

AXES = ("model", "batch_size", "device", "workers", "ps", "placement", "arch", "sync",
        "staleness", "sharding", "overlap", "bucket_size", "bandwidth", "latency", "goodput")
RESULT_KEYS = ("iteration_time_s", "throughput_samples_per_s", "speedup", "scaling_efficiency",
               "bottleneck")
# Below this many points a process pool costs more than it saves.
MIN_POINTS_PER_JOB = 200


def grid(axes: dict[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Cartesian product of the axes, normalised so every point is a valid scenario.

    All-reduce has no PS (``ps`` becomes 0) and staleness only applies to SSP; points that
    become identical after that are kept once, in first-seen order.
    """
    for name, values in axes.items():
        if name not in AXES:
            raise InputError(f"sweep axis {name!r}", "is not a scenario parameter",
                             f"use one of {', '.join(AXES)}")
        if not values:
            raise InputError(f"sweep axis {name!r}", "has no values", "give at least one")
    names = list(axes)
    seen: set[tuple[Any, ...]] = set()
    points = []
    for values in itertools.product(*(axes[n] for n in names)):
        point = dict(zip(names, values))
        if point.get("arch") == "allreduce":  # synchronous and without parameter servers
            point["ps"] = 0
            if "sync" in point:
                point["sync"] = "bsp"
        if "staleness" in point and point.get("sync", "bsp") != "ssp":
            point["staleness"] = None
        key = tuple(point.get(n) for n in names)
        if key not in seen:
            seen.add(key)
            points.append(point)
    return points


def _predict_points(
    points: Sequence[dict[str, Any]], fixed: dict[str, Any], method: str
) -> list[dict[str, Any]]:
    workloads: dict[tuple[Any, ...], Any] = {}
    strategies: dict[tuple[Any, ...], Any] = {}
    rows = []
    for point in points:
        spec = {**fixed, **point}
        row: dict[str, Any] = dict(point)
        try:
            wkey = (spec.get("model"), spec.get("workload"), spec.get("batch_size"),
                    spec.get("device"))
            if wkey not in workloads:
                workloads[wkey] = make_workload(spec.get("model"), spec.get("workload"),
                                                spec.get("batch_size"), spec.get("device"))
            skey = tuple(spec.get(k) for k in ("arch", "sync", "staleness", "sharding",
                                               "overlap", "bucket_size"))
            if skey not in strategies:
                strategies[skey] = make_strategy(
                    spec.get("arch", "ps"), spec.get("sync", "bsp"), spec.get("staleness"),
                    spec.get("sharding", "round_robin"), spec.get("overlap", True),
                    spec.get("bucket_size"))
            strategy = strategies[skey]
            worker_device = spec.get("device") if spec.get("workload") is not None else None
            cluster = make_cluster(spec.get("config"), spec.get("workers"), spec.get("ps"),
                                   spec.get("bandwidth"), spec.get("latency"),
                                   spec.get("goodput"), spec.get("placement"), strategy.arch,
                                   worker_device)
            scenario = resolve(workloads[wkey], cluster, strategy)
            if method == "simulate":
                from ddlperf.predictors.simulate import predict_simulate

                prediction = predict_simulate(scenario)
            else:
                from ddlperf.predictors.analytic import predict_analytic

                prediction = predict_analytic(scenario)
            row.update(prediction.summary())
            row["error"] = None
        except InputError as exc:
            row.update(dict.fromkeys(RESULT_KEYS))
            row["error"] = str(exc)
        rows.append(row)
    return rows


def _chunk(args: tuple[list[dict[str, Any]], dict[str, Any], str]) -> list[dict[str, Any]]:
    return _predict_points(*args)


def sweep(
    axes: dict[str, Sequence[Any]],
    *,
    method: str = "analytic",
    jobs: int | None = 1,
    **fixed: Any,
) -> list[dict[str, Any]]:
    """Predict every point of ``axes`` (a product grid); ``fixed`` holds the other parameters.

    Returns one row per point: the point's values, the headline results (``RESULT_KEYS``) and
    ``error`` (``None``, or the one-line reason a point is impossible, e.g. colocated shards
    without enough workers). ``jobs=None`` uses every core.
    """
    if method not in METHODS:
        raise InputError("--method", f"unknown method {method!r}", f"use one of {METHODS}")
    points = grid(axes)
    if "model" not in axes and fixed.get("workload") is None:
        fixed.setdefault("model", DEFAULTS["model"])
    jobs = os.cpu_count() or 1 if jobs is None else jobs
    if jobs < 1:
        raise InputError("--jobs", f"must be ≥ 1, got {jobs}")
    jobs = min(jobs, max(1, len(points) // MIN_POINTS_PER_JOB))
    if jobs == 1:
        return _predict_points(points, fixed, method)
    size = -(-len(points) // jobs)
    chunks = [(points[i:i + size], fixed, method) for i in range(0, len(points), size)]
    with get_context("fork").Pool(jobs) as pool:
        parts = pool.map(_chunk, chunks)
    return [row for part in parts for row in part]


def columns(rows: Iterable[dict[str, Any]]) -> list[str]:
    """Column order for tables and CSV: the axes in given order, then the results."""
    cols: list[str] = []
    for row in rows:
        for key in row:
            if key not in cols and key not in RESULT_KEYS and key != "error":
                cols.append(key)
    return [*cols, *RESULT_KEYS, "error"]
