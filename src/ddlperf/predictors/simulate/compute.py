"""A compute stream: one operation at a time, first come first served.

A worker's device runs its forward/backward kernels in order; a PS shard applies updates one
after another; a colocated shard's updates queue on its host's stream between the worker's own
kernels. One small FIFO server covers all three.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from ddlperf.predictors.simulate.engine import Engine

#: trace record of one operation: (label, start, end, iteration)
OpRecord = tuple[str, float, float, int]


class Processor:
    """FIFO server on the engine's clock with an optional operation log (for the trace)."""

    __slots__ = ("_engine", "_free", "_queue", "_started", "busy", "log", "name")

    def __init__(self, engine: Engine, name: str, log: list[OpRecord] | None = None) -> None:
        self._engine = engine
        self.name = name
        self.log = log
        self.busy = False
        self._queue: deque[tuple[float, Callable[..., Any], tuple[Any, ...], str, int]] = deque()
        self._started = 0.0
        self._free = 0.0  # reserve(): when the last reserved job ends

    def submit(
        self, duration: float, done: Callable[..., Any], args: tuple[Any, ...] = (),
        label: str = "", iteration: int = -1,
    ) -> None:
        """Run ``duration`` seconds of work once the stream is free, then call ``done(*args)``."""
        if self.busy:
            self._queue.append((duration, done, args, label, iteration))
        else:
            self._run(duration, done, args, label, iteration)

    def _run(self, duration: float, done: Callable[..., Any], args: tuple[Any, ...],
             label: str, iteration: int) -> None:
        self.busy = True
        engine = self._engine
        self._started = now = engine.now
        engine.post(now + duration, self._finish, done, args, label, iteration)

    def reserve(
        self, arrival: float, duration: float, done: Callable[..., Any], args: tuple[Any, ...],
        label: str = "", iteration: int = -1,
    ) -> None:
        """Book a job that arrives at ``arrival`` (>= now) and call ``done(*args)`` when it ends.

        For a stream whose every job is booked this way, in the order of their arrivals (a
        shard's updates when every gradient reaches it over a connection with the same
        latency, told when its last byte is sent): FIFO with known durations, so each job's
        end is max(arrival, previous end) + duration, the same floats as :meth:`submit` at
        the arrival, one event per job and no queue.
        """
        free = self._free
        start = free if free > arrival else arrival
        self._free = end = start + duration
        self._engine.post(end, self._finish_reserved, start, done, args, label, iteration)

    def book(self, arrival: float, duration: float) -> float:
        """:meth:`reserve` without the event: the end of a job arriving at ``arrival``, for
        a caller that does its work itself (the same floats as :meth:`reserve`)."""
        free = self._free
        self._free = end = (free if free > arrival else arrival) + duration
        return end

    def _finish_reserved(self, start: float, done: Callable[..., Any], args: tuple[Any, ...],
                         label: str, iteration: int) -> None:
        if self.log is not None:
            self.log.append((label, start, self._engine.now, iteration))
        done(*args)

    def run_chain(self, end: float, done: Callable[[], Any],
                  records: list[OpRecord] | None) -> None:
        """Run several back-to-back operations as one busy period ending at absolute ``end``.

        Only for a stream that nobody else submits to (a worker's own device): nothing could
        queue between the operations, so one event at the end is exact. ``records`` (their
        trace records, computed by the caller) go to the log when the chain ends.
        """
        self.busy = True
        self._started = self._engine.now
        self._engine.at(end, self._finish_chain, done, records)

    def _finish_chain(self, done: Callable[[], Any], records: list[OpRecord] | None) -> None:
        if self.log is not None and records:
            self.log.extend(records)
        self.busy = False
        if self._queue:
            self._run(*self._queue.popleft())
        done()

    def _finish(self, done: Callable[..., Any], args: tuple[Any, ...], label: str,
                iteration: int) -> None:
        if self.log is not None:
            self.log.append((label, self._started, self._engine.now, iteration))
        self.busy = False
        if self._queue:  # queued work goes first: what ``done`` submits waits its turn
            self._run(*self._queue.popleft())
        done(*args)
