"""What a run records per worker, and when the run is warm and when it is over.

Per unit and iteration ``t``: the time the iteration started (its first operation began), the
compute seconds of its own operations, and the time it was held by other workers before it
(at its iteration gate — the all-reduce of the previous iteration — or, under SSP, by the
shards' staleness bound on the reads of version ``t``). Iteration time = mean of the step
periods ``start[t+1] − start[t]`` over the measured iterations (warm-up excluded), which equals
(span of the window) / (iterations in it), so it is exactly what throughput is made of.

The run is *warm* once every unit has started iteration ``warmup`` (link and PS accounting is
reset then) and *over* once every unit has started iteration ``warmup + iterations``; faster
workers under ASP/SSP keep going until then and are measured over all the iterations they did.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from ddlperf.predictors.simulate.engine import Engine

_LATER_AT: Final = 1024  # holds told ahead kept before the past ones are recorded


class Recorder:
    """Iteration marks, compute and gate wait per unit; stops the engine when all are done."""

    def __init__(
        self, engine: Engine, units: int, warmup: int, iterations: int,
        on_warm: Callable[[], None],
    ) -> None:
        self.engine = engine
        self.warmup = warmup
        self.last = warmup + iterations
        self.starts: list[list[float]] = [[] for _ in range(units)]
        self.gate: list[dict[int, float]] = [{} for _ in range(units)]
        self.compute: list[list[float]] = [[] for _ in range(units)]
        self.warm_at = 0.0
        self.end_at = 0.0
        self._on_warm = on_warm
        self._n = units
        self._warm = 0
        self._done = 0
        self._later: list[tuple[float, int, int, float]] = []  # holds told ahead (see held)

    def iteration_started(self, unit: int, t: int, gate_wait: float) -> None:
        now = self.engine.now
        self.starts[unit].append(now)
        if gate_wait > 0.0:
            self.gate[unit][t] = self.gate[unit].get(t, 0.0) + gate_wait
        if t == self.warmup:
            self._warm += 1
            if self._warm == self._n:
                self.warm_at = now
                self._on_warm()
        if t == self.last:
            self._done += 1
            if self._done == self._n:
                self.end_at = now
                self._record_later(now)  # the ones after now never happen
                self._later = []
                self.engine.stop()

    def held(self, unit: int, t: int, seconds: float, at: float | None = None) -> None:
        """Under SSP a shard held the reads of version ``t`` for ``seconds`` (the longest
        hold over the shards counts, as in the trainer's records); ``at``: told ahead of
        that time (a booked update's end), counted only if the run gets there."""
        if at is not None and at > self.engine.now:
            later = self._later
            later.append((at, unit, t, seconds))
            if len(later) > _LATER_AT:
                self._record_later(self.engine.now)
            return
        gate = self.gate[unit]
        gate[t] = max(gate.get(t, 0.0), seconds)

    def _record_later(self, now: float) -> None:
        """Record the holds told ahead whose time has come (before ``now``); a maximum, so
        their order does not matter."""
        keep = []
        for entry in self._later:
            if entry[0] < now:
                self.held(*entry[1:])
            else:
                keep.append(entry)
        self._later = keep

    def iteration_ended(self, unit: int, t: int, compute_s: float) -> None:
        self.compute[unit].append(compute_s)

    @property
    def finished(self) -> bool:
        return self._done == self._n
