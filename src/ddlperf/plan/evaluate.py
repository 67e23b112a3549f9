"""Predict candidates with the analytic model: a family at once where the batched path applies.

Candidates of one family differ only in their server count. For one-GPU, one-NIC servers that
is exactly what :mod:`ddlperf.predictors.analytic_batch` evaluates together (the same numbers
as one prediction per point); every other family is predicted point by point with
:func:`ddlperf.api.predict`. Either way a row holds the candidate's columns and the headline
results, or the one-line reason it cannot be predicted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ddlperf.errors import InputError
from ddlperf.plan.space import Candidate

RESULT_KEYS = ("iteration_time_s", "throughput_samples_per_s", "speedup", "scaling_efficiency",
               "bottleneck")


# predict() keywords that only build the workload (done once per process and device)
WORKLOAD_KEYS = ("model", "workload", "batch_size", "device", "dtype", "math", "grad_dtype",
                 "accumulation")
_WORKLOADS: dict[tuple[Any, ...], Any] = {}


def _shared_workload(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` with the workload built once per process: the same Workload object for every
    candidate on a device, so the predictors' per-workload caches are reused. Equal to building
    it per call (the cluster's device is the workload's, so nothing is rescaled)."""
    from ddlperf import api

    if kwargs.get("workload") is not None:
        return kwargs
    key = tuple(repr(kwargs.get(k)) for k in WORKLOAD_KEYS)
    if key not in _WORKLOADS:
        _WORKLOADS[key] = api.make_workload(**{k: kwargs[k] for k in WORKLOAD_KEYS
                                               if kwargs.get(k) is not None})
    rest = {k: v for k, v in kwargs.items() if k not in WORKLOAD_KEYS}
    return {**rest, "workload": _WORKLOADS[key]}


def evaluate_family(family: Sequence[Candidate], fixed: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows for the candidates of one family, in order."""
    from ddlperf import api

    first = family[0]
    if first.batchable and len(family) > 1:
        batched = _batched(family, fixed)
        if batched is not None:
            return batched
    rows = []
    for candidate in family:
        row = candidate.describe()
        try:
            row.update(api.predict(**_shared_workload(candidate.kwargs(fixed))).summary())
            row["error"] = None
        except InputError as exc:
            row.update(dict.fromkeys(RESULT_KEYS))
            row["error"] = str(exc)
        rows.append(row)
    return rows


def _batched(family: Sequence[Candidate], fixed: dict[str, Any]) -> list[dict[str, Any]] | None:
    from ddlperf import api
    from ddlperf.predictors.analytic_batch import batch_key, point_values, predict_batch

    try:
        template = api.scenario(**_shared_workload(family[0].kwargs(fixed, servers=1)))
    except InputError:
        return None
    if batch_key(template) is None:
        return None
    values = point_values(template)
    results = predict_batch(template, [c.servers for c in family], [values] * len(family))
    rows = []
    for candidate, result in zip(family, results):
        row = candidate.describe()
        row.update(zip(RESULT_KEYS, result))
        row["error"] = None
        rows.append(row)
    return rows


def evaluate_chunk(family: Sequence[Candidate], fixed: dict[str, Any], target: Any,
                   keep_all: bool) -> tuple[list[tuple[int, dict[str, Any]]], int]:
    """Rows of one chunk with the target's measures, as (position, row) pairs, and the number
    of rows that could not be predicted. Unless ``keep_all`` (every row goes to a file), only
    the rows that can be an answer come back: the chunk's cheapest and fastest that meet the
    target, its fastest overall and its own Pareto front — the search's answers are among
    them, and far fewer rows cross between processes."""
    from ddlperf.plan.pareto import Front

    rows = evaluate_family(family, fixed)
    errors = 0
    for row in rows:
        if row.get("error"):
            errors += 1
        else:
            row.update(target.measures(row))
    if keep_all:
        return list(enumerate(rows)), errors
    keep: set[int] = set()
    front = Front()
    ok = [(i, r) for i, r in enumerate(rows) if not r.get("error")]
    meeting = [(i, r) for i, r in ok if r["meets"]]
    speed = "throughput_samples_per_s"
    if ok:
        from ddlperf.plan import reach_key

        keep.add(max(ok, key=lambda ir: reach_key(ir[1]))[0])
    if meeting:
        keep.add(min(meeting, key=lambda ir: (ir[1]["cost"], -ir[1][speed]))[0])
        keep.add(min(meeting, key=lambda ir: (-ir[1][speed], ir[1]["cost"]))[0])
    for i, row in ok:
        if row.get("within_budget", True):
            front.add(row["cost"], row[speed], lambda i=i: {"i": i})
    keep.update(entry["i"] for entry in front.rows())
    return [(i, rows[i]) for i in sorted(keep)], errors
