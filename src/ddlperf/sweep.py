"""Sweeps: predict every point of a grid of scenarios (workers × PS × bandwidth × …).

Points are independent, so a large grid is split across processes (``jobs``). Workloads are
built once per (model, batch, device) and reused: the predictors cache everything that depends
only on the workload. With the analytic method, points that differ only in numbers (worker
count, bandwidth, latency, goodput) are evaluated together by
:mod:`ddlperf.predictors.analytic_batch` (same rows as one prediction per point, tens of
thousands of points per second); the others (cluster files, colocated shards, mixed workers,
errors) are predicted one by one.
"""

from __future__ import annotations

import itertools
import os
import threading
import uuid
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ddlperf.api import (
    DEFAULTS,
    METHODS,
    make_cluster,
    make_strategy,
    make_workload,
    worker_defaults,
)
from ddlperf.errors import InputError
from ddlperf.result_keys import LOCKSTEP_KEY, OUTPUT_KEYS, RESULT_KEYS
from ddlperf.scenario import resolve
from ddlperf.sweep_grid import (  # noqa: F401  (the grid's names, as ddlperf.sweep gave them)
    AXES,
    SWEEP_SIMULATE_OPTIONS,
    _hashable,
    _normalise,
    check_axes,
    check_fixed,
    grid,
    iter_grid,
)
from ddlperf.units import ImplausibleValueWarning

# Server, rack and transport fields (make_cluster's keywords): such points take the
# per-point path.
SERVER_FIELDS = ("gpus_per_node", "intra", "nics", "rack_size", "rack_uplink", "transport")
_STRATEGY_KEYS = ("arch", "sync", "staleness", "sharding", "overlap", "bucket_size",
                  "allreduce", "local_aggregation", "step_barrier")
# Below this many points a process pool costs more than it saves (points predicted one by one,
# ~1 ms each; also the floor for an explicit ``jobs``).
MIN_POINTS_PER_JOB = 200
# The same for the batched analytic path (~20,000 points per CPU second): a pool of 2 takes
# ~90 ms to start and each process builds its own templates and sends its rows back (~25% more
# CPU), so on 2 cores one process is faster up to ~5,000 points (benchmarks/bench_analytic.py).
MIN_BATCHED_POINTS_PER_JOB = 3_000
# Evaluate the analytic model for many points at once (predictors.analytic_batch); False:
# one prediction per point (kept for tests and comparisons).
BATCH = True


def _predict_points(
    points: Sequence[dict[str, Any]], fixed: dict[str, Any], method: str,
    sweep_id: str | None = None,
) -> list[dict[str, Any]]:
    """Rows for ``points``: batched where points differ only in numbers, else one by one.

    Chunks of the same sweep (``sweep_id``) that run in this process share its caches.
    ``fixed`` may hold simulate options (:data:`SWEEP_SIMULATE_OPTIONS`): every simulated
    point gets them.
    """
    options = {k: fixed[k] for k in SWEEP_SIMULATE_OPTIONS if fixed.get(k) is not None}
    fixed = {k: v for k, v in fixed.items() if k not in SWEEP_SIMULATE_OPTIONS}
    state = _state_for(sweep_id)
    rows: list[dict[str, Any] | None] = [None] * len(points)
    batches: dict[tuple[Any, ...], tuple[Any, list[int], list[int], list[tuple[float, ...]]]] = {}
    by_identity: dict[int, Any] = {}  # the keys live in state.templates meanwhile
    batched = method == "analytic" and BATCH
    check = 0  # the next point at which the caches may be full (a point adds at most
    # _ENTRIES_PER_POINT entries, so counting them at every point is not needed)
    for i, point in enumerate(points):
        spec = {**fixed, **point}
        if i == check:
            if state.full():  # start the caches again; the batch identities go with them
                state.clear()
                by_identity.clear()
            check = i + 1 + (MAX_CACHED - _ENTRIES_PER_POINT - state.size()) // _ENTRIES_PER_POINT
        planned = _plan(spec, state) if batched else None
        if planned is None:
            rows[i] = _predict_one(point, spec, method, state, options)
            continue
        key, template, workers, values = planned
        batch = by_identity.get(id(key))  # a template's key is one shared object
        if batch is None:
            batch = batches.get(key)
            if batch is None:
                batch = batches[key] = (template, [], [], [])
            by_identity[id(key)] = batch
        batch[1].append(i)
        batch[2].append(workers)
        batch[3].append(values)
    if batches:
        for i, row in _predict_batched(list(batches.values()), points, fixed, state):
            rows[i] = row
    return rows  # type: ignore[return-value]


Batch = tuple[Any, list[int], list[int], list[tuple[float, ...]]]


def _predict_batched(
    batches: list[Batch], points: Sequence[dict[str, Any]], fixed: dict[str, Any],
    state: _State,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(point index, row) of every batched point. ASP/SSP batches get their lockstep figure
    from the BSP periods their cap computes anyway (the same as the job with ``sync=bsp``:
    its period does not depend on the sync mode); where lockstep itself cannot be batched
    (compute noise under BSP's barrier) the figure is computed point by point, as a single
    prediction computes it."""
    from ddlperf.predictors.analytic_batch import batch_key, predict_batches_and_bsp
    from ddlperf.predictors.arrangement import (
        above_prediction,
        lockstep_scenario,
        lockstep_strategy,
    )

    summaries, bsp_periods = predict_batches_and_bsp(
        [(template, workers, values) for template, _i, workers, values in batches])
    for n, (template, indices, workers, _v) in enumerate(batches):
        locks = lockstep_strategy(template.strategy) and max(workers) >= 2
        batched = locks and batch_key(lockstep_scenario(template)) is not None
        for k, (i, result) in enumerate(zip(indices, summaries[n])):
            figure = None
            if locks and workers[k] >= 2:
                # one group of identical workers: SSP runs as ASP exactly where it is not
                # capped at BSP's period, so the rule is the same for both
                figure = (above_prediction(float(bsp_periods[n][k]), result[0]) if batched
                          else _lockstep_one({**fixed, **points[i]}, state, result[0]))
            yield i, {**points[i], **dict(zip(RESULT_KEYS, result)), LOCKSTEP_KEY: figure,
                      "error": None}


# Cache entries (templates, clusters, workloads, …) a process keeps for one sweep; when they
# reach this many, the caches start again, so a sweep of millions of points streams in
# bounded memory: about 1.3 KB per template (its scenario, key and values shared where they
# can be), so at most ~25 MB; a 100,000-point grid with 12,480 templates fits.
MAX_CACHED = 20_000


class _State:
    """One sweep's caches in this process: workloads, strategies, template clusters and
    scenarios. Values that cannot be hashed are keyed by identity and held in ``pinned``
    (so that no other object takes their id while the key lives)."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.workloads: dict[tuple[Any, ...], Any] = {}
        self.strategies: dict[tuple[Any, ...], Any] = {}
        self.templates: dict[tuple[Any, ...], Any] = {}
        self.clusters: dict[tuple[Any, ...], Any] = {}
        # (workload, strategy, cluster keywords) per template without its rates; None: error
        self.shapes: dict[tuple[Any, ...], Any] = {}
        # batchable templates: (batch key, scenario) per workload, strategy and cluster
        # without its rates; point values per workload and cluster
        self.layouts: dict[tuple[Any, ...], tuple[tuple[Any, ...], Any]] = {}
        self.links: dict[tuple[Any, ...], tuple[float, ...]] = {}
        self.pinned: dict[int, Any] = {}

    def size(self) -> int:
        """Entries in all the caches."""
        return sum(map(len, (self.workloads, self.strategies, self.templates, self.clusters,
                             self.shapes, self.layouts, self.links, self.pinned)))

    def full(self) -> bool:
        """No room left for the entries of one more point."""
        return self.size() + _ENTRIES_PER_POINT > MAX_CACHED


# The most cache entries one point adds: its template, cluster, shape, layout, links,
# workload, strategy and the values it pins (a workload, a dict).
_ENTRIES_PER_POINT = 16


# The caches of the sweep this thread of this process worked for last (``sweep_id``, ``state``).
_LAST = threading.local()


def _state_for(sweep_id: str | None) -> _State:
    """The caches of sweep ``sweep_id`` in this process (new ones for another sweep, and
    always for None): a sweep's later chunks reuse its templates; another sweep may mean
    different files behind the same names, so it starts afresh."""
    if sweep_id is None:
        return _State()
    if getattr(_LAST, "sweep_id", None) != sweep_id:
        _LAST.sweep_id, _LAST.state = sweep_id, _State()
    return _LAST.state


def _workload_key(spec: dict[str, Any], pinned: dict[int, Any]) -> tuple[Any, ...]:
    return (spec.get("model"), _hashable(spec.get("workload"), pinned), spec.get("batch_size"),
            spec.get("device"), *(spec.get(k) for k in _COMPUTE_FIELDS))


def _strategy_key(spec: dict[str, Any], pinned: dict[int, Any]) -> tuple[Any, ...]:
    return tuple(_hashable(spec.get(k), pinned) for k in _STRATEGY_KEYS)


def _workload_and_strategy(spec: dict[str, Any], state: _State) -> tuple[Any, Any]:
    wkey = _workload_key(spec, state.pinned)
    if wkey not in state.workloads:
        state.workloads[wkey] = make_workload(spec.get("model"), spec.get("workload"),
                                              spec.get("batch_size"), spec.get("device"),
                                              *(spec.get(k) for k in _COMPUTE_FIELDS))
    skey = _strategy_key(spec, state.pinned)
    if skey not in state.strategies:
        state.strategies[skey] = make_strategy(
            spec.get("arch", "ps"), spec.get("sync", "bsp"), spec.get("staleness"),
            spec.get("sharding", "round_robin"), spec.get("overlap", True),
            spec.get("bucket_size"), spec.get("allreduce") or "ring",
            bool(spec.get("local_aggregation")), bool(spec.get("step_barrier")))
    return state.workloads[wkey], state.strategies[skey]


def _plan(
    spec: dict[str, Any], state: _State
) -> tuple[tuple[Any, ...], Any, int, tuple[float, ...]] | None:
    """(batch key, template scenario, worker count, point values), or None: predict alone.

    A point's cluster differs from a one-worker template cluster only in the worker count when
    there is no cluster file, the shards are dedicated and the count is a positive int; every
    other input (units, errors, defaults) goes through the same ``make_*``/``resolve`` calls
    as a single prediction, once per distinct template. Anything unusual (errors included)
    returns None, so that point takes the per-point path and gets exactly its row.
    """
    if spec.get("cluster") is not None or spec.get("placement", "dedicated") not in (
            None, "dedicated"):
        return None
    workers = spec.get("workers")
    if workers is None:
        workers = DEFAULTS["workers"]
    elif type(workers) is not int or workers <= 0:
        return None
    # Everything but the worker count picks the template (a sweep builds every spec with its
    # keys in the same order, so equal points give equal tuples).
    rest = spec.copy()
    rest.pop("workers", None)
    tkey = (tuple(rest.items()), tuple(map(type, rest.values())))
    try:
        template = state.templates.get(tkey, _MISSING)
    except TypeError:  # an unhashable value (a Workload, a dict)
        tkey = (tuple((k, _hashable(v, state.pinned)) for k, v in rest.items()), tkey[1])
        template = state.templates.get(tkey, _MISSING)
    if template is _MISSING:
        template = state.templates[tkey] = _template(spec, state)
    if template is None:
        return None
    key, scenario, point_values = template
    return key, scenario, workers, point_values


_COMPUTE_FIELDS = ("dtype", "math", "grad_dtype", "accumulation")
_RATE_FIELDS = ("bandwidth", "latency", "goodput")
_MISSING = object()


def _template(
    spec: dict[str, Any], state: _State
) -> tuple[tuple[Any, ...], Any, tuple[float, ...]] | None:
    from ddlperf.predictors.analytic_batch import batch_key, point_values

    if any(spec.get(f) is not None for f in SERVER_FIELDS):
        return None  # servers and racks: the per-point path
    # Templates that differ only in rates share their workload, strategy and keywords (whose
    # errors do not depend on rates either).
    shape_key = tuple((k, _hashable(v, state.pinned), type(v)) for k, v in spec.items()
                      if k not in _RATE_FIELDS and k != "workers")
    shape = state.shapes.get(shape_key, _MISSING)
    if shape is _MISSING:
        try:
            shape = (*_workload_and_strategy(spec, state), _cluster_keywords(spec))
        except InputError:
            shape = None
        state.shapes[shape_key] = shape
    if shape is None:
        return None
    workload, strategy, keywords = shape
    try:
        fields = (spec.get("ps"), spec.get("bandwidth"), spec.get("latency"),
                  spec.get("goodput"), spec.get("placement"), strategy.arch)
        ckey = (fields, tuple(map(type, fields)), tuple(keywords.items()))
        if ckey not in state.clusters:
            state.clusters[ckey] = make_cluster(None, 1, *fields, **keywords)
        cluster = state.clusters[ckey]
        # A batchable point's batch key does not depend on the link rates, latency or goodput,
        # and its point values depend on the cluster and workload only (not the strategy):
        # when both are known from other templates, resolving this one adds nothing.
        layout = (id(workload), id(strategy), fields[0], fields[4], fields[5], ckey[1][0],
                  ckey[1][4], ckey[2])
        links = (id(workload), id(cluster))
        known, values = state.layouts.get(layout), state.links.get(links)
        if known is not None and values is not None:
            return (*known, values)
        scenario = resolve(workload, cluster, strategy)
    except InputError:
        return None
    key = batch_key(scenario)
    if key is None:
        return None
    values = point_values(scenario)
    state.layouts.setdefault(layout, (key, scenario))
    state.links.setdefault(links, values)
    return key, scenario, values


def _cluster_keywords(spec: dict[str, Any]) -> dict[str, Any]:
    """Servers, racks and the workers' device/batch for a workload file (see api)."""
    keywords = {k: spec[k] for k in SERVER_FIELDS if spec.get(k) is not None}
    keywords.update(worker_defaults(spec.get("workload"), spec.get("batch_size"),
                                    spec.get("device")))
    return keywords


def _scenario(spec: dict[str, Any], state: _State) -> Any:
    """The resolved scenario of one point (InputError where it is impossible)."""
    workload, strategy = _workload_and_strategy(spec, state)
    cluster = make_cluster(spec.get("cluster"), spec.get("workers"), spec.get("ps"),
                           spec.get("bandwidth"), spec.get("latency"),
                           spec.get("goodput"), spec.get("placement"), strategy.arch,
                           **_cluster_keywords(spec))
    return resolve(workload, cluster, strategy)


def _lockstep_one(spec: dict[str, Any], state: _State, iteration_s: float) -> float | None:
    """One point's lockstep figure, as a single prediction computes it."""
    from ddlperf.predictors.arrangement import lockstep_figure

    return lockstep_figure(_scenario(spec, state), iteration_s)


def _predict_one(
    point: dict[str, Any], spec: dict[str, Any], method: str, state: _State,
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One point's row; ``options``: the simulate options (``iterations``, ``seed``, …)."""
    from ddlperf.predictors.arrangement import lockstep_figure

    row: dict[str, Any] = dict(point)
    try:
        scenario = _scenario(spec, state)
        if method == "simulate":
            from ddlperf.predictors.simulate import predict_simulate

            prediction = predict_simulate(scenario, **(options or {}))
        else:
            from ddlperf.predictors.analytic import predict_analytic

            prediction = predict_analytic(scenario)
        row.update(prediction.summary())
        row[LOCKSTEP_KEY] = lockstep_figure(scenario, prediction)
        row["error"] = None
    except InputError as exc:
        row.update(dict.fromkeys(OUTPUT_KEYS))
        row["error"] = str(exc)
    return row


def _chunk(
    args: tuple[list[dict[str, Any]], dict[str, Any], str, str],
) -> tuple[list[dict[str, Any]], list[str]]:
    """One process's rows, and the implausible-value warnings it met (the parent re-issues
    them, so that they reach the caller once, not once per process)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ImplausibleValueWarning)
        rows = _predict_points(*args)
    return rows, [str(w.message) for w in caught
                  if issubclass(w.category, ImplausibleValueWarning)]


def sweep(
    axes: dict[str, Sequence[Any]],
    *,
    method: str = "analytic",
    jobs: int | None = 1,
    **fixed: Any,
) -> list[dict[str, Any]]:
    """Predict every point of ``axes`` (a product grid); ``fixed`` holds the other parameters
    (the keywords of :func:`ddlperf.api.predict`: ``model``, ``workload``, ``cluster``, …).

    Returns one row per point: the point's values, the headline results (``RESULT_KEYS``) and
    ``error`` (``None``, or the one-line reason a point is impossible, e.g. colocated shards
    without enough workers). ``jobs=None`` uses every core. For grids too big to hold, or to
    run on a Ray or Dask cluster, use :func:`iter_sweep`.
    """
    from ddlperf.executors import Executor, LocalExecutor

    if jobs is not None and jobs < 1:
        raise InputError("--jobs", f"must be ≥ 1, got {jobs}")
    per_job = MIN_POINTS_PER_JOB
    if jobs is None:
        jobs, per_job = os.cpu_count() or 1, min_points_per_job(axes, method, **fixed)
    chunk = CHUNK_POINTS
    if jobs > 1:  # one process takes the chunks as they come: no need to count the grid
        total = count_points(axes, **fixed)
        jobs = min(jobs, max(1, total // per_job))
        chunk = max(1, min(CHUNK_POINTS, -(-total // jobs)))
    else:
        check_axes(axes)  # the same error first as when counting
    executor = LocalExecutor(jobs) if jobs > 1 else Executor()
    with executor:
        return [row for rows in iter_sweep(axes, method=method, executor=executor,
                                           chunk_points=chunk, **fixed) for row in rows]


# Points per chunk of work: enough for large batches, few enough to stream and balance.
CHUNK_POINTS = 4096


def min_points_per_job(axes: dict[str, Sequence[Any]], method: str, **fixed: Any) -> int:
    """Points each process needs to pay for its start-up when the number of processes is ours
    to choose: many more on the batched analytic path than one by one (servers, racks,
    cluster files and colocated shards take the per-point path)."""
    if method != "analytic" or not BATCH or fixed.get("cluster") is not None:
        return MIN_POINTS_PER_JOB
    for name in (*SERVER_FIELDS, "placement"):
        values = [*axes.get(name, ()), fixed.get(name)]
        if any(v is not None and not (name == "placement" and v == "dedicated")
               for v in values):
            return MIN_POINTS_PER_JOB
    return MIN_BATCHED_POINTS_PER_JOB


def count_points(axes: dict[str, Sequence[Any]], **fixed: Any) -> int:
    """How many rows a sweep of ``axes`` has (normalised duplicates dropped)."""
    names = {k for k, v in fixed.items() if v is not None}
    return sum(1 for _ in iter_grid(axes, names))


def iter_sweep(
    axes: dict[str, Sequence[Any]],
    *,
    method: str = "analytic",
    executor: Any = None,
    chunk_points: int = CHUNK_POINTS,
    progress: Callable[[int], None] | None = None,
    **fixed: Any,
) -> Iterator[list[dict[str, Any]]]:
    """The rows of :func:`sweep`, chunk by chunk in grid order, as the ``executor``
    (:mod:`ddlperf.executors`; default: this process) finishes them — nothing but the chunks
    in flight is held. ``progress(rows_done)`` is called after each chunk. Implausible-value
    warnings from the workers are issued once each, here."""
    from ddlperf.executors import Executor, map_grouped

    if method not in METHODS:
        raise InputError("--method", f"unknown method {method!r}", f"use one of {METHODS}")
    if "config" in fixed:  # the name before it matched predict(cluster=…)
        fixed["cluster"] = fixed.pop("config")
    check_fixed(fixed, method)
    names = {k for k, v in fixed.items() if v is not None and k not in SWEEP_SIMULATE_OPTIONS}
    check_axes(axes)  # before anything runs
    if "model" not in axes and fixed.get("workload") is None:
        fixed.setdefault("model", DEFAULTS["model"])
    executor = executor or Executor()
    points = iter_grid(axes, names)

    sweep_id = uuid.uuid4().hex  # a process's chunks of this sweep share its caches

    def chunks() -> Iterator[tuple[list[dict[str, Any]], dict[str, Any], str, str]]:
        while True:
            part = list(itertools.islice(points, chunk_points))
            if not part:
                return
            yield part, fixed, method, sweep_id

    warned: set[str] = set()
    done = 0
    for rows, messages in map_grouped(executor, _chunk, ((c,) for c in chunks())):
        for message in messages:
            if message not in warned:
                warned.add(message)
                warnings.warn(message, ImplausibleValueWarning, stacklevel=2)
        done += len(rows)
        if progress is not None:
            progress(done)
        yield rows

