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


def steady_warmup(run: Callable[[int], list[float]], warmup: int, staleness: int,
                  limit: int) -> tuple[int, float]:
    """The warm-up (iterations) after which an SSP run is in steady state, and the spread of
    the workers' periods there.

    In steady state every worker runs at the slowest one's rate: a faster worker gains on it
    until it is ``staleness`` iterations ahead, and is held by the bound from then on. From
    the periods of a run (``run(warmup)`` → each worker's mean period) the iterations a faster
    worker still needs to get there are s · p / (P − p) of the slowest's (p its period, P the
    slowest's); the warm-up grows by that until the periods agree within 0.5% (or ``limit``
    is reached: the caller says the run is too short).
    """
    current = warmup
    while True:  # each step adds ≥ s + 1 iterations, so this ends at ``limit``
        periods = run(current)
        gap = spread(periods)
        if gap <= PERIODS_AGREE or current >= limit:
            return current, gap
        slowest = max(periods)
        need = max(staleness * p / (slowest - p) for p in periods
                   if p < slowest * (1 - PERIODS_AGREE))
        current = min(limit, current + staleness + 1 + math.ceil(need))
