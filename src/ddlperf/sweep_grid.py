"""The grid of a sweep: its axes, the product of their values made valid scenarios, and the
checks of what a sweep is given (split from :mod:`ddlperf.sweep`, which predicts the points)."""

from __future__ import annotations

import itertools
import operator
import warnings
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any

from ddlperf.api import SIMULATE_OPTIONS
from ddlperf.errors import InputError

AXES = ("model", "batch_size", "device", "dtype", "math", "grad_dtype", "accumulation",
        "workers", "ps", "placement", "arch", "sync",
        "staleness", "sharding", "overlap", "bucket_size", "bandwidth", "latency", "goodput",
        "gpus_per_node", "intra", "nics", "rack_size", "rack_uplink", "allreduce",
        "local_aggregation", "step_barrier", "transport")
# The simulate options a sweep passes to every point's simulation; the others (``trace``,
# ``timeline``, a prediction's own ``jobs``) describe one run, not a grid of them.
SWEEP_SIMULATE_OPTIONS = ("iterations", "warmup", "seed", "replications", "jitter")


def grid(axes: dict[str, Sequence[Any]], fixed: Collection[str] = ()) -> list[dict[str, Any]]:
    """Cartesian product of the axes, normalised so every point is a valid scenario.

    All-reduce has no PS (``ps``, swept or in ``fixed``, becomes 0) nor local aggregation, the
    all-reduce algorithm only applies to all-reduce, the step barrier only to a BSP PS,
    staleness only to SSP and a fabric only to servers of more than one GPU; points that
    become identical after that are kept once, in first-seen order.
    """
    return list(iter_grid(axes, fixed))


def iter_grid(axes: dict[str, Sequence[Any]], fixed: Collection[str] = ()
              ) -> Iterator[dict[str, Any]]:
    """:func:`grid` one point at a time (a grid of millions is never held in memory).

    Repeated axis values are dropped up front. Normalisation overrides some axes of a point
    (``ps`` of an all-reduce point, ``staleness`` of a BSP one, …); which ones depends only on
    values it never changes (the architecture, the GPUs per server, the sync mode after
    normalisation), so a point's duplicates are exactly the points that differ from it on its
    overridden axes only. The first of them in grid order has the first value of each such
    axis: that one is kept, and nothing needs remembering.
    """
    check_axes(axes)
    names = list(axes)
    distinct = [list({_hashable(v): v for v in axes[n]}.values()) for n in names]
    firsts = [values[0] for values in distinct]  # an axis lists each object once
    # The rule's outcome per (arch, gpus_per_node, sync) objects: the overrides in the order
    # _normalise applies them, and the axes that must hold their first value.
    decide = _decider([i for i, name in enumerate(names) if name in _DECIDING])
    rules: dict[Any, tuple[list[tuple[str, Any]], list[int]]] = {}
    for values in itertools.product(*distinct):
        decided = decide(values)
        rule = rules.get(decided)
        if rule is None:
            probe = dict(zip(names, values))
            overridden = _normalise(probe, fixed)
            rule = rules[decided] = ([(k, v) for k, v in probe.items() if k in overridden],
                                     [i for i, name in enumerate(names) if name in overridden])
        overrides, first_only = rule
        if not first_only or all(values[i] is firsts[i] for i in first_only):
            point = dict(zip(names, values))
            if overrides:
                point.update(overrides)
            yield point


def _decider(positions: list[int]) -> Callable[[tuple[Any, ...]], Any]:
    """The identities of a point's values at ``positions`` (a grid lists each object once)."""
    if len(positions) > 1:
        pick = operator.itemgetter(*positions)
        return lambda values: tuple(map(id, pick(values)))
    if positions:
        position = positions[0]
        return lambda values: id(values[position])
    return lambda values: None


# The values _normalise's rules depend on (it never overrides arch or gpus_per_node, and
# overrides sync only as a function of arch).
_DECIDING = ("arch", "gpus_per_node", "sync")


def check_axes(axes: dict[str, Sequence[Any]]) -> None:
    """Every axis is a scenario parameter with at least one value."""
    for name, values in axes.items():
        if name not in AXES:
            raise InputError(f"sweep axis {name!r}", "is not a scenario parameter",
                             f"use one of {', '.join(AXES)}")
        if not values:
            raise InputError(f"sweep axis {name!r}", "has no values", "give at least one")


def check_fixed(fixed: dict[str, Any], method: str) -> None:
    """The fixed keywords are :func:`ddlperf.api.predict`'s (a misspelt one is a TypeError
    with a suggestion, as there, not a silent default) and the simulate options a grid can
    take; with the analytic method simulate options have no effect (a warning)."""
    from ddlperf.api import reject_unknown_keywords

    per_run = sorted(set(fixed) & (set(SIMULATE_OPTIONS) - set(SWEEP_SIMULATE_OPTIONS)))
    if per_run:
        raise InputError(f"sweep option {per_run[0]!r}", "describes one simulation, not a grid",
                         "use predict(..., method='simulate') for one point")
    reject_unknown_keywords("sweep", fixed, SWEEP_SIMULATE_OPTIONS)
    given = [k for k in SWEEP_SIMULATE_OPTIONS if fixed.get(k) is not None]
    if given and method != "simulate":
        warnings.warn(f"sweep: {', '.join(given)} only apply to method='simulate'; the "
                      f"{method} method ignores them", stacklevel=3)
    if given:
        from ddlperf.predictors.simulate.runner import check_options

        check_options(*(fixed.get(k) for k in SWEEP_SIMULATE_OPTIONS), None, None)


def _normalise(point: dict[str, Any], fixed: Collection[str]) -> set[str]:
    """Make ``point`` a valid scenario (see :func:`grid`); the keys a rule overrode."""
    overridden: set[str] = set()

    def override(key: str, value: Any) -> None:
        point[key] = value
        overridden.add(key)

    if point.get("arch") == "allreduce":  # synchronous and without parameter servers
        if "ps" in point or "ps" in fixed:  # a fixed PS count is for the PS rows
            override("ps", 0)
        if "sync" in point:
            override("sync", "bsp")
        if "local_aggregation" in point:
            override("local_aggregation", False)
    elif "allreduce" in point:
        override("allreduce", "ring")
    if point.get("step_barrier") and (point.get("arch", "ps") != "ps"
                                      or point.get("sync", "bsp") != "bsp"):
        override("step_barrier", False)  # a barrier of the BSP parameter server only
    if "intra" in point and point.get("gpus_per_node") in (None, 1):
        override("intra", None)
    if "staleness" in point and point.get("sync", "bsp") != "ssp":
        override("staleness", None)
    return overridden


def _hashable(value: Any, pinned: dict[int, Any] | None = None) -> Any:
    """``value`` itself as a cache key, or its identity (a Workload or dict is not hashable);
    such a value is kept in ``pinned``, so that its id stays its own while the key lives."""
    try:
        hash(value)
    except TypeError:
        if pinned is not None:
            pinned[id(value)] = value
        return (type(value), id(value))
    return value
