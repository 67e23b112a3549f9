"""SSP(s) at the shards: the read rule of :mod:`ddlperf.strategy` (Ho et al. 2013, per
tensor) — version c of tensor j goes to a worker once its own gradient of j from iteration
c − 1 and every worker's gradients of j from iterations ≤ c − s − 1 are applied. With overlap
off the rule is applied to the whole model at once (a worker pulls when all of its tensors may
be read), as the trainer does.

A worker held by the rule waits at the shard; that hold is what the trainer records as
``gate_wait_s`` and the simulator reports as wait: per version and shard, the time the
shard's in-order sender stood still because of the bound (Σ over its tensors of
max(0, release − max(own update applied, previous release))), the longest over shards.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from statistics import NormalDist

Release = Callable[[Hashable, int, int], None]  # (key, unit, version)
Hold = Callable[[int, int, float], None]  # (unit, version, seconds held so far at one shard)


class _Key:
    """A key's state: updates applied per unit, the reads waiting, and the lowest count
    with the units at it (the count the bound is measured from). One object per key: one
    dict lookup per applied update."""

    __slots__ = ("applied", "at_lowest", "lowest", "waiting")

    def __init__(self, units: int) -> None:
        self.applied = [0] * units
        self.waiting: list[tuple[int, int, float]] = []
        self.lowest = 0
        self.at_lowest = units


class StalenessGate:
    """Per key (a tensor part at a shard, or the whole model): updates applied per unit, and
    the reads waiting for the slowest unit to catch up."""

    def __init__(self, staleness: int, units: int, release: Release, hold: Hold) -> None:
        self.staleness = staleness
        self.units = units
        self._release = release
        self._hold = hold
        self._keys: dict[Hashable, _Key] = {}
        # (unit, shard, version) → [seconds held, last release] for the in-order sender
        self._held: dict[tuple[int, Hashable, int], list[float]] = {}

    def applied(self, key: Hashable, shard: Hashable, unit: int, now: float) -> None:
        """``unit``'s next gradient of ``key`` was applied at ``now``: its read of the next
        version is requested, and every waiting read the rule now allows is released."""
        state = self._keys.get(key)
        if state is None:
            state = self._keys[key] = _Key(self.units)
        counts = state.applied
        count = counts[unit]
        counts[unit] = version = count + 1
        lowest = state.lowest
        if count != lowest or state.at_lowest != 1:  # the bound does not move
            if count == lowest:
                state.at_lowest -= 1
            if version > lowest + self.staleness:
                state.waiting.append((version, unit, now))
            else:  # every read waiting has a higher version: this one alone goes out
                self._account(unit, shard, version, now, now)
                self._release(key, unit, version)
            return
        # the last unit at the lowest count moved up: the bound moves
        waiting = state.waiting
        waiting.append((version, unit, now))
        state.lowest = version
        state.at_lowest = counts.count(version)
        low = version + self.staleness
        if all(version > low for version, _u, _t in waiting):
            return
        keep = []
        for version, u, own in waiting:
            if version > low:
                keep.append((version, u, own))
                continue
            self._account(u, shard, version, own, now)
            self._release(key, u, version)
        state.waiting = keep

    def _account(self, unit: int, shard: Hashable, version: int, own: float,
                 now: float) -> None:
        state = self._held.get((unit, shard, version))
        if state is None:
            state = self._held[(unit, shard, version)] = [0.0, -1.0]
        last = state[1]
        held = now - (own if own > last else last)
        if held > 0.0:
            state[0] += held
        state[1] = now
        if state[0] > 0.0:
            self._hold(unit, version, state[0])


# ----------------------------------------------------------------------------- steady state

PERIODS_AGREE = 0.005  # SSP steady state: every worker's mean period within 0.5% of the slowest's
WARMUP_BUDGET = 10  # extend the warm-up to at most this × (warm-up + iterations), at least …
MIN_WARMUP_LIMIT = 200  # … this many iterations; beyond it the run is reported as too short
NOISE_LEVEL = 1e-3  # with jitter: chance that workers at one rate look apart by noise alone


def warmup_limit(warmup: int, iterations: int) -> int:
    """The longest warm-up spent looking for SSP's steady state (it costs simulated time)."""
    return max(MIN_WARMUP_LIMIT, WARMUP_BUDGET * (warmup + iterations))


def spread(periods: list[float]) -> float:
    """How far the fastest worker's mean period is below the slowest's (a share)."""
    slowest = max(periods)
    return 1.0 - min(periods) / slowest if slowest > 0 else 0.0


@dataclass(frozen=True)
class UnitRun:
    """One worker's figures over a run's measured window."""

    period: float  # mean step period, s
    held: bool  # the staleness bound held it in the window
    group: Hashable  # its class: workers that would run in lockstep without jitter or ASP/SSP
    noise: float = 0.0  # standard error of ``period`` that the jitter alone gives, s


def by_class(units: list[UnitRun]) -> list[UnitRun]:
    """One figure per class of identical workers: the mean of its workers' periods, held if
    every one of them was, and the standard error of that mean.

    Why classes, not workers: the catch-up that the steady state waits for is between
    workers of different speeds. Identical workers run at one rate by symmetry, and their
    windows differ only by where each is in its rotation through the shards' queues: 16
    identical workers under SSP(2), no jitter, differ by 4.0% after 3 warm-up iterations and
    still by 1.5% after 230, and none was ever held (a real 1.5% gain would have put one
    3.4 iterations ahead), so no warm-up makes single workers agree.
    """
    members: dict[Hashable, list[UnitRun]] = {}
    for u in units:
        members.setdefault(u.group, []).append(u)
    return [UnitRun(sum(m.period for m in ms) / len(ms), all(m.held for m in ms), key,
                    math.sqrt(sum(m.noise ** 2 for m in ms)) / len(ms))
            for key, ms in members.items()]


def periods_agree(classes: list[UnitRun]) -> bool:
    """The classes run at one rate: their mean periods are within ``PERIODS_AGREE`` of the
    slowest's, or — with jitter — within what the noise of the window explains.

    With jitter a window's mean period is a sample mean: classes at exactly one rate differ
    by about their standard errors whatever the warm-up (only more measured iterations
    shrink them), so a fixed 0.5% may never be met. Then one common rate must lie within z
    standard errors of every class's mean, z two-sided at ``NOISE_LEVEL`` over all classes
    (Bonferroni): max(pᵢ − z·seᵢ) ≤ min(pᵢ + z·seᵢ).
    """
    if spread([c.period for c in classes]) <= PERIODS_AGREE:
        return True
    z = NormalDist().inv_cdf(1.0 - NOISE_LEVEL / (2 * len(classes)))
    return (max(c.period - z * c.noise for c in classes)
            <= min(c.period + z * c.noise for c in classes))


def in_steady_state(units: list[UnitRun]) -> bool:
    """Every class of identical workers at one rate, and held by the bound unless it is the
    slowest: periods that merely agree during the catch-up — a faster worker that gains
    only slowly — are not the steady state yet."""
    classes = by_class(units)
    return periods_agree(classes) and sum(not c.held for c in classes) <= 1


def steady_warmup(run: Callable[[int], list[UnitRun]], warmup: int, staleness: int,
                  limit: int) -> tuple[int, bool, float]:
    """The warm-up (iterations) after which an SSP run is in steady state, whether it got
    there within ``limit``, and the spread of the classes' periods.

    A faster class gains on the slowest until it is ``staleness`` iterations ahead and is
    held by the bound from then on. From a run's periods (``run(warmup)``) the iterations it
    still needs are s · p / (P − p) of the slowest's (p its period, P the slowest's); the
    warm-up grows by that until :func:`in_steady_state` (or ``limit``: the caller says the
    run is too short).
    """
    current = warmup
    while True:  # each step adds ≥ s + 1 iterations, so this ends at ``limit``
        units = run(current)
        classes = by_class(units)
        periods = [c.period for c in classes]
        steady = in_steady_state(units)
        if steady or current >= limit:
            return current, steady, spread(periods)
        slowest = max(periods)
        faster = [c for c in classes if c.period < slowest]
        # a faster class not held yet; else one held but still gaining (it was held only
        # late in the window)
        gaining = [c for c in faster if not c.held] or faster or classes
        need = max(staleness * c.period / max(slowest - c.period, 1e-4 * slowest)
                   for c in gaining)
        current = min(limit, current + staleness + 1 + math.ceil(need))
