"""A tiny discrete-event kernel: a clock and a heap of timed callbacks.

SimPy vocabulary, callback style: an :class:`Engine` is the *environment*; ``schedule`` puts an
*event* (a callback with its arguments) on the queue at ``now + delay``; ``run`` pops events in
time order and calls them, advancing ``now``. There are no generator *processes*: a process is
written as callbacks that schedule their continuation. Measured on 1e5 timeouts
(``benchmarks/bench_kernel.py``) this is ~1.4× faster than SimPy 4's generator processes
(~1.65 vs ~1.2 M events/s), it has no per-event objects, and the fine-grained simulator's events
(flow completions, compute ops) are plain callbacks anyway.

Ordering is deterministic: equal times run in the order they were scheduled (an insertion
counter breaks ties), so a simulation gives bit-identical results run to run.

A heap entry is a plain list ``[time, seq, callback, args]``: lists compare in C (time first, then
the unique seq), which is what makes the loop fast. The entry doubles as the cancellable handle;
treat it as opaque and pass it to :meth:`Engine.cancel`.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from heapq import heapify, heappop, heappush
from math import inf
from typing import Any, Final

#: Opaque handle of a scheduled event (the heap entry ``[time, seq, callback, args]``).
Handle = list

_TIME: Final = 0  # (Final: constants of the compiled module, see setup.py)
_SEQ: Final = 1
_CALLBACK: Final = 2
_ARGS: Final = 3
_COMPACT_MIN: Final = 256  # do not bother compacting small heaps
#: the cyclic GC's youngest-generation threshold while events run (Python's default: 700)
GC_YOUNG_THRESHOLD: Final = 100_000


class Engine:
    """Event loop: ``now`` (seconds), ``schedule``/``at`` to add events, ``run`` to process them."""

    __slots__ = ("_cancelled", "_heap", "_limit", "_seq", "now")

    def __init__(self, start: float = 0.0) -> None:
        self.now: float = float(start)
        self._heap: list[list[Any]] = []
        self._seq = 0
        self._cancelled = 0  # cancelled entries still in the heap
        self._limit = -inf  # while ``run`` runs: its ``until`` (see :meth:`advance`)

    def schedule(self, delay: float, callback: Callable[..., Any], *args: Any) -> Handle:
        """Call ``callback(*args)`` at ``now + delay`` (a SimPy *timeout*); returns its handle."""
        if not delay >= 0.0:  # also rejects NaN
            raise ValueError(f"delay must be >= 0, got {delay!r}")
        self._seq = seq = self._seq + 1
        entry = [self.now + delay, seq, callback, args]
        heappush(self._heap, entry)
        return entry

    def at(self, time: float, callback: Callable[..., Any], *args: Any) -> Handle:
        """Call ``callback(*args)`` at absolute ``time`` (>= ``now``); returns its handle."""
        if not time >= self.now:
            raise ValueError(f"time {time!r} is before now ({self.now!r})")
        self._seq = seq = self._seq + 1
        entry = [float(time), seq, callback, args]
        heappush(self._heap, entry)
        return entry

    def post(self, time: float, callback: Callable[..., Any], *args: Any) -> Handle:
        """:meth:`at` without its checks, for hot paths whose ``time`` is a float ``>= now``
        by construction (``now`` plus a non-negative duration)."""
        self._seq = seq = self._seq + 1
        entry = [time, seq, callback, args]
        heappush(self._heap, entry)
        return entry

    def advance(self, time: float) -> bool:
        """Inside a callback: if an event posted now at ``time`` (>= ``now``) would be the
        next to run, move ``now`` to ``time`` and return True, and the caller runs that event's
        work itself, in the same order as the loop would have; else False (post it).

        Next means strictly before every queued entry (a queued one at the same time was
        scheduled earlier and goes first) and before ``run``'s ``until``. Saves a heap push and
        pop for a callback that finds its own continuation next (a link's clock, see
        :func:`.clocks.finish`). Outside ``run`` always False.
        """
        heap = self._heap
        if time < self._limit and (not heap or time < heap[0][_TIME]):
            self.now = time
            return True
        return False

    def cancel(self, handle: Handle) -> None:
        """Drop a scheduled event; a no-op if it already ran or was cancelled."""
        if handle[_CALLBACK] is None:
            return
        handle[_CALLBACK] = None
        handle[_ARGS] = ()
        self._cancelled += 1
        heap = self._heap
        # Lazy deletion keeps cancel O(1); compact when dead entries dominate the heap.
        if self._cancelled > _COMPACT_MIN and 2 * self._cancelled > len(heap):
            heap[:] = [e for e in heap if e[_CALLBACK] is not None]
            heapify(heap)
            self._cancelled = 0

    @staticmethod
    def pending(handle: Handle) -> bool:
        """True while the event is scheduled and neither ran nor was cancelled."""
        return handle[_CALLBACK] is not None

    def peek(self) -> float:
        """Time of the next live event, ``inf`` if none."""
        heap = self._heap
        while heap and heap[0][_CALLBACK] is None:
            heappop(heap)
            self._cancelled -= 1
        return heap[0][_TIME] if heap else inf

    def __len__(self) -> int:
        """Number of live scheduled events."""
        return len(self._heap) - self._cancelled

    def stop(self) -> None:
        """Make ``run`` return after the current callback; later events stay queued."""
        # A sentinel that sorts before every other event at ``now`` (seq -1) and raises when run:
        # this keeps the hot loop free of a per-event "stopped?" check.
        heappush(self._heap, [self.now, -1, _halt, ()])

    def run(self, until: float | None = None) -> None:
        """Process events in time order until none remain, ``stop()`` is called, or ``until``.

        Like SimPy, ``run(until=t)`` processes the events strictly before ``t`` and leaves
        ``now == t``; events at ``t`` or later stay queued for the next ``run``.
        """
        limit = inf if until is None else float(until)
        if limit < self.now:
            raise ValueError(f"until {until!r} is before now ({self.now!r})")
        heap = self._heap
        # Each event allocates short-lived containers (its heap entry, argument tuples): with
        # the default threshold the cyclic GC scans the young ones every 700 allocations, ~8%
        # of a noisy PS run. Rarer young collections free the same garbage, a little later.
        threshold = gc.get_threshold()
        if threshold[0] < GC_YOUNG_THRESHOLD:
            gc.set_threshold(GC_YOUNG_THRESHOLD, *threshold[1:])
        self._limit = limit
        try:
            while heap:
                entry = heappop(heap)
                if entry[_TIME] >= limit:
                    heappush(heap, entry)
                    break
                callback = entry[_CALLBACK]
                if callback is None:
                    self._cancelled -= 1
                    continue
                entry[_CALLBACK] = None  # ran: a later cancel() is a no-op
                self.now = entry[_TIME]
                callback(*entry[_ARGS])
        except _Stop:
            return
        finally:
            self._limit = -inf
            gc.set_threshold(*threshold)
        if until is not None:
            self.now = limit


class _Stop(Exception):
    """Raised by the stop sentinel to leave the event loop."""


def _halt() -> None:
    raise _Stop
