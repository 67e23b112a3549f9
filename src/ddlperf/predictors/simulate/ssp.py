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

Release = Callable[[Hashable, int, int], None]  # (key, unit, version)
Hold = Callable[[int, int, float], None]  # (unit, version, seconds held so far at one shard)


class StalenessGate:
    """Per key (a tensor part at a shard, or the whole model): updates applied per unit, and
    the reads waiting for the slowest unit to catch up."""

    def __init__(self, staleness: int, units: int, release: Release, hold: Hold) -> None:
        self.staleness = staleness
        self.units = units
        self._release = release
        self._hold = hold
        self._applied: dict[Hashable, list[int]] = {}
        self._waiting: dict[Hashable, list[tuple[int, int, float]]] = {}
        # (unit, shard, version) → [seconds held, last release] for the in-order sender
        self._held: dict[tuple[int, Hashable, int], list[float]] = {}

    def applied(self, key: Hashable, shard: Hashable, unit: int, now: float) -> None:
        """``unit``'s next gradient of ``key`` was applied at ``now``: its read of the next
        version is requested, and every waiting read the rule now allows is released."""
        counts = self._applied.get(key)
        if counts is None:
            counts = self._applied[key] = [0] * self.units
            self._waiting[key] = []
        counts[unit] += 1
        waiting = self._waiting[key]
        waiting.append((counts[unit], unit, now))
        low = min(counts) + self.staleness
        if all(version > low for version, _u, _t in waiting):
            return
        keep = []
        for version, u, own in waiting:
            if version > low:
                keep.append((version, u, own))
                continue
            self._account(u, shard, version, own, now)
            self._release(key, u, version)
        self._waiting[key] = keep

    def _account(self, unit: int, shard: Hashable, version: int, own: float,
                 now: float) -> None:
        state = self._held.setdefault((unit, shard, version), [0.0, -1.0])
        state[0] += max(0.0, now - max(own, state[1]))
        state[1] = now
        if state[0] > 0.0:
            self._hold(unit, version, state[0])


# ----------------------------------------------------------------------------- steady state

PERIODS_AGREE = 0.005  # SSP steady state: every worker's mean period within 0.5% of the slowest's
WARMUP_BUDGET = 10  # extend the warm-up to at most this × (warm-up + iterations), at least …
MIN_WARMUP_LIMIT = 200  # … this many iterations; beyond it the run is reported as too short


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
    group: object  # workers of one group are identical


def in_steady_state(units: list[UnitRun]) -> bool:
    """Every worker at one rate, and held by the bound unless it is one of the slowest
    (identical) workers: periods that merely agree during the catch-up — a faster worker
    that gains only slowly — are not the steady state yet."""
    if spread([u.period for u in units]) > PERIODS_AGREE:
        return False
    return len({u.group for u in units if not u.held}) <= 1


def steady_warmup(run: Callable[[int], list[UnitRun]], warmup: int, staleness: int,
                  limit: int) -> tuple[int, bool, float]:
    """The warm-up (iterations) after which an SSP run is in steady state, whether it got
    there within ``limit``, and the spread of the workers' periods.

    A faster worker gains on the slowest until it is ``staleness`` iterations ahead and is
    held by the bound from then on. From a run's periods (``run(warmup)``) the iterations it
    still needs are s · p / (P − p) of the slowest's (p its period, P the slowest's); the
    warm-up grows by that until :func:`in_steady_state` (or ``limit``: the caller says the
    run is too short).
    """
    current = warmup
    while True:  # each step adds ≥ s + 1 iterations, so this ends at ``limit``
        units = run(current)
        periods = [u.period for u in units]
        if in_steady_state(units) or current >= limit:
            return current, in_steady_state(units), spread(periods)
        slowest = max(periods)
        gaining = [u for u in units if not u.held and u.period < slowest] or units
        need = max(staleness * u.period / max(slowest - u.period, 1e-4 * slowest)
                   for u in gaining)
        current = min(limit, current + staleness + 1 + math.ceil(need))
