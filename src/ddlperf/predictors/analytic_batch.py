"""The analytic model for many grid points at once (a trailing batch axis on every array).

Points that share the workload, the strategy, the PS count and the worker group (one group of
identical workers, dedicated shards, gradients ready in reverse layer order) differ only in
numbers: worker count N, link rates, latency and the PS update cost. For those, every array of
:mod:`ddlperf.predictors.analytic` gets a trailing batch axis — (J,) → (J, B), scalars → (B,) —
and each point's headline results equal ``predict_analytic(scenario).summary()`` for that point:
the same floating-point operations in the same order, so the numbers agree to the last bit (or
to a few ulps where a shortcut below drops rows whose effect is rounding only) and the
bottleneck names are the same.

Two exact shortcuts keep the arrays small:

- Shards have identical links, so shards with the same placement column have identical FIFOs
  and are computed once (``even`` sharding: one column instead of K).
- With whole tensors per (distinct) shard, each shard's FIFO is run over its own tensors only,
  padded to the longest list, instead of over all J tensors with zero-work rows: a (P, U, B)
  array with P·U ≈ J instead of (J, K, B). A zero-work row whose release time is not later than
  the next real row's cannot change any real finish time (beyond the last bit).

Everything else (several groups, colocated shards, a custom gradient order, communication CPU
on a capped host, compute noise under a barrier) is left to the
per-point model: :func:`batch_key` returns ``None`` for such scenarios. The BSP fixed point
itself (layouts, FIFOs, passes) is in :mod:`ddlperf.predictors.analytic_batch_bsp`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ddlperf.prediction import TIE_SHARE
from ddlperf.predictors.analytic_batch_bsp import Points, batch_layout, bsp_period
from ddlperf.predictors.analytic_noise import barrier_with_noise
from ddlperf.predictors.assembly import single_worker_baseline
from ddlperf.predictors.bottleneck import COMPUTE_BOUND_SHARE, SATURATED
from ddlperf.predictors.buckets import bucket_layout
from ddlperf.predictors.timeline import backward_ready, serial_finish
from ddlperf.scenario import Scenario

# Points per vectorized evaluation: bounds memory (arrays are (tensors × points)).
MAX_BATCH = 256

Summary = tuple[float, float, float, float, str]


# ---------------------------------------------------------------- eligibility and inputs


def batch_key(sc: Scenario) -> tuple[Any, ...] | None:
    """What a scenario shares with every point it can be batched with; None: not batchable.

    Points with equal keys differ only in :func:`point_values` and the worker count.
    """
    if len(sc.groups) != 1 or sc.racks is not None or sc.capped or sc.receive_capped:
        return None
    if barrier_with_noise(sc):  # the slowest draw's timeline depends on the worker count
        return None
    g = sc.groups[0]
    if g.first != 0 or g.gpus != 1 or g.nics != 1 or g.kind != "workers":
        return None
    if g.comm_wall_s_per_byte > 0:  # communication CPU on a capped host: per point
        return None
    strategy = sc.strategy
    if strategy.arch == "ps":
        if not sc.shards or any(s.host is not None for s in sc.shards):
            return None
        first = sc.shards[0]
        if any((s.up, s.down, s.update_s_per_byte) != (first.up, first.down,
                                                         first.update_s_per_byte)
               for s in sc.shards[1:]):
            return None
        if batch_layout(sc) is None:
            return None
    elif sc.shards:
        return None
    return (*_structure_key(sc), strategy.sync, strategy.staleness)


def _structure_key(sc: Scenario) -> tuple[Any, ...]:
    """:func:`batch_key` without the sync mode: what the BSP period depends on besides the
    point's numbers (so batches of several sync modes share their BSP periods). Not the
    sharding policy: policies that place the tensors alike share the placement array
    (``scenario._placement``), and all-reduce has none."""
    g = sc.groups[0]
    strategy = sc.strategy
    return (
        id(sc.workload), sc.workload.name, strategy.arch,
        strategy.overlap, strategy.step_barrier, strategy.bucket_bytes,
        len(sc.shards),
        len(sc.tensor_bytes), id(sc.placement) if sc.shards else None, g.device, g.batch_size,
        id(g.forward),
        id(g.backward), id(g.ready_offset), g.unattributed_s, g.update_s_per_byte,
        g.forward_s, g.backward_s, g.compute_s,
    )


def point_values(sc: Scenario) -> tuple[float, float, float, float, float, float]:
    """The numbers a point adds to its batch key: worker up/down, shard up/down, shard update
    seconds per byte, latency (the worker count comes separately)."""
    g = sc.groups[0]
    if sc.shards:
        s = sc.shards[0]
        return (g.up, g.down, s.up, s.down, s.update_s_per_byte, sc.latency_s)
    return (g.up, g.down, 1.0, 1.0, 0.0, sc.latency_s)


# ---------------------------------------------------------------- parameter server, BSP results


def _bsp_bottleneck(sc: Scenario, p: Points, period: np.ndarray) -> np.ndarray:
    """Index into ``_bsp_resource_names`` of the busiest resource, or -1 for "compute"."""
    g = sc.groups[0]
    hot = first_busiest(_utilization(sc, p, period, np.ones(len(p.n))))
    exposed = period - g.compute_s
    return np.where(exposed <= COMPUTE_BOUND_SHARE * period, -1, hot)


def _utilization(
    sc: Scenario, p: Points, period: np.ndarray, updates: np.ndarray
) -> np.ndarray:
    """Each resource's busy share per point, rows in ``_bsp_resource_names`` order: per shard
    its downlink and uplink (N × its bytes) and update queue (``updates`` × its bytes), then
    the worker's uplink and downlink (all bytes)."""
    shard_bytes = sc.placement.sum(axis=0)[:, None]
    volume = p.n * shard_bytes
    shards = np.stack([volume / p.sdown, volume / p.sup, updates * shard_bytes * p.supd],
                      axis=1).reshape(-1, len(p.n))
    total = sc.parameter_bytes
    return np.concatenate((shards, [total / p.gup, total / p.gdown])) / period


def _bsp_resource_names(sc: Scenario) -> list[str]:
    names = []
    for shard in sc.shards:
        names += [f"{shard.name} downlink", f"{shard.name} uplink", f"{shard.name} update"]
    g = sc.groups[0]
    return [*names, f"{g.worker_name()} uplink", f"{g.worker_name()} downlink"]


# ---------------------------------------------------------------- parameter server, ASP/SSP


def mva_one_class(think: np.ndarray, demand: np.ndarray, population: np.ndarray,
                  floor: np.ndarray) -> np.ndarray:
    """Exact single-class MVA throughput per point: think (B,), demand (S, B), population (B,),
    floor (S, B) (``queueing.mva``'s: a capped flow's least time at a station).

    The recursion over n = 1 … N runs once for all points; a point leaves it after its own N
    (columns sorted by N, so the points still running are a prefix). Same arithmetic, in the
    same order, as ``queueing.mva`` with one class.
    """
    order = np.argsort(-population, kind="stable")
    counts = population[order].astype(np.int64)
    d = np.ascontiguousarray(demand[:, order])
    low = np.ascontiguousarray(floor[:, order])
    z = think[order]
    queue = np.zeros_like(d)
    throughput = np.zeros(len(counts))
    # running[n - 1]: how many points have N ≥ n
    running = np.searchsorted(-counts, -np.arange(1, int(counts[0]) + 1), side="right")
    for n, m in enumerate(running.tolist(), start=1):
        residence = np.maximum(low[:, :m], d[:, :m] * (1.0 + queue[:, :m]))
        x = n / (z[:m] + residence.sum(axis=0))
        throughput[:m] = x
        queue[:, :m] = x * residence
    out = np.empty_like(throughput)
    out[order] = throughput
    return out


def _async_demand(
    sc: Scenario, p: Points, alone: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``analytic_ps_async.ps_async``'s network for one group: think (B,), demand (S, B),
    floor (S, B) (one GPU per server here: the worker's own link caps its flows).

    ``alone``: with overlap, the BSP period of one worker alone with each point's numbers.
    """
    g = sc.groups[0]
    total = float(sc.tensor_bytes.sum())
    shard_bytes = sc.placement.sum(axis=0)
    # parts[k, i]: shard k's downlink, uplink, update demand (dedicated: no local traffic);
    # the shards work in parallel: per part the busiest shard's demand is the station
    shard_bytes = shard_bytes[:, None]
    parts = np.stack([shard_bytes / p.sdown, shard_bytes / p.sup, shard_bytes * p.supd],
                     axis=1)  # (K, 3, B)
    per_part = parts.max(axis=0)  # (3, B)
    # the busiest shard holds the most bytes (every shard has the point's rates)
    biggest = float(shard_bytes.max())
    floors = np.stack([biggest / p.gup, biggest / p.gdown, np.zeros(len(p.n))])  # (3, B)
    if sc.strategy.overlap:
        assert alone is not None
        demand = per_part.max(axis=0)[None, :]  # one station, the largest
        floor = floors.max(axis=0)[None, :]
        think = np.maximum(alone - np.maximum(floor[0], demand[0]), 0.0)
    else:
        demand, floor = per_part, floors
        visit = np.maximum(floors, per_part)
        think = (g.compute_s + 2 * p.alpha + np.maximum(0.0, total / p.gup - visit[0])
                 + np.maximum(0.0, total / p.gdown - visit[1]))
    return think, demand, floor


def _async_finish(
    sc: Scenario, p: Points, throughput: np.ndarray, bsp: np.ndarray | None
) -> tuple[np.ndarray, list[str]]:
    """``analytic_ps_async.ps_async`` (with the BSP period ``bsp``: one group, one rate, never
    slower than BSP; SSP's ``ps_ssp`` alike) from the network's throughput: periods (B,) and
    the bottleneck names."""
    g = sc.groups[0]
    points = len(p.n)
    periods = p.n / throughput
    capped = np.zeros(points, dtype=bool)
    if bsp is not None:  # one group, one rate: BSP's schedule where it is faster
        capped = periods >= bsp
        periods = np.where(capped, bsp, periods)
    # ``analytic_ps_async.async_resources`` (or, capped, the BSP resources: one update per tensor)
    utilization = _utilization(sc, p, periods, np.where(capped, 1.0, p.n))
    hot = first_busiest(utilization)
    hot_u = np.take_along_axis(utilization, hot[None, :], axis=0)[0]
    compute = (hot_u < SATURATED) & (g.compute_s >= periods - g.compute_s)
    all_names = _bsp_resource_names(sc)
    names = ["compute" if c else all_names[h] for c, h in zip(compute.tolist(), hot.tolist())]
    return periods, names


def _mva_together(
    networks: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]
) -> list[np.ndarray]:
    """:func:`mva_one_class` of several batches' (think, demand, floor, population) in one
    recursion: demands and floors are padded to the most stations with zero rows (a
    zero-demand station adds exactly 0 to every residence sum), and each column is computed
    on its own."""
    if not networks:
        return []
    stations = max(demand.shape[0] for _z, demand, _f, _n in networks)

    def pad(rows: np.ndarray) -> np.ndarray:
        return np.concatenate((rows, np.zeros((stations - len(rows), rows.shape[1]))))

    throughput = mva_one_class(np.concatenate([z for z, _d, _f, _n in networks]),
                               np.concatenate([pad(d) for _z, d, _f, _n in networks], axis=1),
                               np.concatenate([n for _z, _d, _f, n in networks]),
                               np.concatenate([pad(f) for _z, _d, f, _n in networks], axis=1))
    bounds = np.cumsum([0, *(len(n) for _z, _d, _f, n in networks)])
    return [throughput[a:b] for a, b in itertools.pairwise(bounds)]


def first_busiest(utilization: np.ndarray) -> np.ndarray:
    """``prediction.busiest`` per point (rows in canonical order): the first row within
    ``TIE_SHARE`` of the highest utilization."""
    top = utilization.max(axis=0)
    return np.argmax(utilization >= top * (1 - TIE_SHARE), axis=0)


# ---------------------------------------------------------------- ring all-reduce


def _allreduce(sc: Scenario, p: Points) -> tuple[np.ndarray, list[str]]:
    g = sc.groups[0]
    last, bucket_bytes = bucket_layout(sc)
    update = float(sc.tensor_bytes.sum()) * g.update_s_per_byte
    tensor_ready, backward_end = backward_ready(sc, g, g.forward_s + g.unattributed_s)
    bucket_ready = tensor_ready[last] if sc.strategy.overlap else np.full(len(last),
                                                                           backward_end)
    ready = update + bucket_ready
    end_all = max(0.0, update + backward_end)
    compute = g.compute_s + update
    rate = np.minimum(p.gup, p.gdown)
    n = p.n
    step = 2 * (n - 1) * (p.alpha + bucket_bytes[:, None] / (n * rate))
    step = np.where(n <= 1, 0.0, step)
    period = np.maximum(serial_finish(ready[:, None], step)[-1], end_all)
    exposed = period - compute
    names = [
        "compute" if e <= COMPUTE_BOUND_SHARE * t
        else f"ring ({g.worker_name()} {'uplink' if up <= down else 'downlink'})"
        for e, t, up, down in zip(exposed.tolist(), period.tolist(), p.gup.tolist(),
                                  p.gdown.tolist())
    ]
    return period, names


# ---------------------------------------------------------------- assembly


class _BspPeriods:
    """BSP periods that a set of batches needs, each computed once per structure
    (:func:`_structure_key`) and distinct point (the same numbers, bit for bit): a BSP and an
    ASP batch of the same points share them, and so do the one-worker points an overlapping
    ASP/SSP batch needs for its think time. Every column of the batched model is computed on
    its own, so a point's period does not depend on the points it is computed with."""

    def __init__(self) -> None:
        self._wanted: dict[tuple[Any, ...], tuple[Scenario, list[np.ndarray]]] = {}
        self._periods: dict[tuple[Any, ...], np.ndarray] = {}

    def want(self, sc: Scenario, p: Points) -> tuple[tuple[Any, ...], int, int]:
        """A handle for :meth:`get`: the structure and where the points' rows start and end."""
        key = _structure_key(sc)
        entry = self._wanted.get(key)
        if entry is None:
            entry = self._wanted[key] = (sc, [])
        rows = entry[1]
        start = sum(len(r) for r in rows)
        rows.append(p.rows())
        return key, start, start + len(p.n)

    def run(self) -> None:
        for key, (sc, parts) in self._wanted.items():
            lay = batch_layout(sc)
            assert lay is not None
            table = np.concatenate(parts)
            # distinct rows, compared as bytes (bit for bit)
            as_bytes = table.view(np.dtype((np.void, table.itemsize * table.shape[1])))[:, 0]
            _, first, where = np.unique(as_bytes, return_index=True, return_inverse=True)
            distinct = table[first]
            periods = np.empty(len(distinct))
            for start in range(0, len(distinct), MAX_BATCH):
                part = distinct[start:start + MAX_BATCH]
                p = Points(*(np.ascontiguousarray(part[:, f]) for f in range(part.shape[1])))
                periods[start:start + MAX_BATCH] = bsp_period(sc, lay, p)
            self._periods[key] = periods[where.reshape(-1)]

    def get(self, handle: tuple[tuple[Any, ...], int, int]) -> np.ndarray:
        key, start, end = handle
        return self._periods[key][start:end]


def predict_batch(
    template: Scenario, workers: Sequence[int], values: Sequence[Sequence[float]]
) -> list[Summary]:
    """Headline results (``Prediction.summary()`` values, in ``RESULT_KEYS`` order) per point.

    ``template`` is any scenario of the batch (its :func:`batch_key` is not None); point i has
    ``workers[i]`` workers and :func:`point_values` equal to ``values[i]``.
    """
    return predict_batches([(template, workers, values)])[0]


def predict_batches(
    batches: Sequence[tuple[Scenario, Sequence[int], Sequence[Sequence[float]]]]
) -> list[list[Summary]]:
    """:func:`predict_batch` of several batches at once: the BSP periods they share are
    computed once, and their ASP/SSP networks run through one MVA recursion."""
    return predict_batches_and_bsp(batches)[0]


def predict_batches_and_bsp(
    batches: Sequence[tuple[Scenario, Sequence[int], Sequence[Sequence[float]]]]
) -> tuple[list[list[Summary]], list[np.ndarray | None]]:
    """:func:`predict_batches`, and each parameter-server batch's BSP period per point (its
    points in lockstep, which ASP and SSP need for their cap anyway; None for all-reduce)."""
    bsp = _BspPeriods()
    plans = []
    for sc, workers, values in batches:
        p = Points.of(workers, values)
        full = solo = None
        sync = sc.strategy.effective_sync if sc.strategy.arch == "ps" else None
        if sync is not None:  # ASP and SSP of one group are capped at BSP's period
            full = bsp.want(sc, p)
        if sync in ("asp", "ssp") and sc.strategy.overlap:
            solo = bsp.want(sc, p.solo())
        plans.append((sc, p, sync, full, solo))
    bsp.run()
    asynchronous = [i for i, plan in enumerate(plans) if plan[2] in ("asp", "ssp")]
    networks = []
    for i in asynchronous:
        sc, p, _sync, _full, solo = plans[i]
        networks.append((*_async_demand(sc, p, None if solo is None else bsp.get(solo)), p.n))
    throughputs = dict(zip(asynchronous, _mva_together(networks)))
    out: list[list[Summary]] = []
    lockstep: list[np.ndarray | None] = []
    for i, (sc, p, sync, full, _solo) in enumerate(plans):
        if sync is None:
            period, names = _allreduce_chunked(sc, p)
        elif i in throughputs:
            period, names = _async_finish(sc, p, throughputs[i],
                                          None if full is None else bsp.get(full))
        else:
            period = bsp.get(full)
            hot = _bsp_bottleneck(sc, p, period).tolist()
            all_names = _bsp_resource_names(sc)
            names = ["compute" if h < 0 else all_names[h] for h in hot]
        out.append(_summaries(sc, p, period, names))
        lockstep.append(None if full is None else bsp.get(full))
    return out, lockstep


def _allreduce_chunked(sc: Scenario, p: Points) -> tuple[np.ndarray, list[str]]:
    """:func:`_allreduce` in chunks of ``MAX_BATCH`` points (its arrays are buckets × points)."""
    periods, names = [], []
    for start in range(0, len(p.n), MAX_BATCH):
        period, chunk_names = _allreduce(sc, p.take(slice(start, start + MAX_BATCH)))
        periods.append(period)
        names += chunk_names
    return np.concatenate(periods), names


def _summaries(sc: Scenario, p: Points, period: np.ndarray, names: list[str]) -> list[Summary]:
    g = sc.groups[0]
    n = p.n
    iteration = period * n / n
    throughput = g.batch_size / period * n
    single, _ = single_worker_baseline(sc)
    rate = float(single["throughput_samples_per_s"])  # type: ignore[arg-type]
    speedup = throughput / rate
    efficiency = throughput / (rate * n)
    return list(zip(iteration.tolist(), throughput.tolist(), speedup.tolist(),
                    efficiency.tolist(), names))
