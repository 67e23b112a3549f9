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

A heap entry is an :class:`Entry` (``time``, the unique ``seq`` that breaks ties, the callback
and its arguments), kept in a binary heap by this module's :func:`push` and :func:`pop` — the
algorithms of :mod:`heapq`, with the order (time, then seq) compared on the entries' native
fields where the simulator is compiled (a list entry compared by ``heapq`` cost two generic
comparisons per step; issue 14). The entry doubles as the cancellable handle; treat it as
opaque and pass it to :meth:`Engine.cancel`. The links' virtual clocks keep their finish tags
in the same kind of heap (:mod:`.clocks`).
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from math import inf
from typing import Any, Final

_COMPACT_MIN: Final = 256  # do not bother compacting small heaps (Final: a compiled constant)


class Entry:
    """A heap entry, ordered by ``time`` and then by ``seq`` (unique): an event (``item`` its
    callback, ``args`` its arguments) or a link clock's finish tag (``item`` the flow).
    ``item`` None: cancelled, or stale."""

    __slots__ = ("args", "item", "seq", "time")

    def __init__(self, time: float, seq: int, item: Any, args: tuple[Any, ...]) -> None:
        self.time = time
        self.seq = seq
        self.item = item
        self.args = args


#: Opaque handle of a scheduled event (its heap entry).
Handle = Entry


def before(a: Entry, b: Entry) -> bool:
    """``a`` comes before ``b`` in a heap (time, then seq)."""
    return a.time < b.time or (a.time == b.time and a.seq < b.seq)


def push(heap: list[Entry], entry: Entry) -> None:
    """:func:`heapq.heappush` for entries."""
    heap.append(entry)
    _siftdown(heap, 0, len(heap) - 1)


def pop(heap: list[Entry]) -> Entry:
    """:func:`heapq.heappop` for entries (``heap`` not empty)."""
    last = heap.pop()
    if heap:
        first = heap[0]
        heap[0] = last
        _siftup(heap, 0)
        return first
    return last


def replace(heap: list[Entry], entry: Entry) -> Entry:
    """:func:`heapq.heapreplace` for entries: pop the first, then push ``entry``."""
    first = heap[0]
    heap[0] = entry
    _siftup(heap, 0)
    return first


def heapify(heap: list[Entry]) -> None:
    """:func:`heapq.heapify` for entries."""
    for i in range(len(heap) // 2 - 1, -1, -1):
        _siftup(heap, i)


def _siftdown(heap: list[Entry], start: int, pos: int) -> None:
    # heapq's _siftdown: move the entry at ``pos`` up towards ``start`` to its place
    new = heap[pos]
    time = new.time
    seq = new.seq
    while pos > start:
        up = (pos - 1) >> 1
        parent = heap[up]
        if time < parent.time or (time == parent.time and seq < parent.seq):
            heap[pos] = parent
            pos = up
            continue
        break
    heap[pos] = new


def _siftup(heap: list[Entry], pos: int) -> None:
    # heapq's _siftup: move the smaller child up until a leaf, then sift the entry down there
    end = len(heap)
    start = pos
    new = heap[pos]
    child = pos + pos + 1  # (additions: native, where a product calls a function)
    while child < end:
        right = child + 1
        if right < end:
            a = heap[child]
            b = heap[right]
            if not (a.time < b.time or (a.time == b.time and a.seq < b.seq)):
                child = right
        heap[pos] = heap[child]
        pos = child
        child = pos + pos + 1
    heap[pos] = new
    _siftdown(heap, start, pos)


class Engine:
    """Event loop: ``now`` (seconds), ``schedule``/``at`` to add events, ``run`` to process them."""

    __slots__ = ("_cancelled", "_heap", "_limit", "_seq", "now")

    def __init__(self, start: float = 0.0) -> None:
        self.now: float = float(start)
        self._heap: list[Entry] = []
        self._seq = 0
        self._cancelled = 0  # cancelled entries still in the heap
        self._limit = -inf  # while ``run`` runs: its ``until`` (see :meth:`advance`)

    def schedule(self, delay: float, callback: Callable[..., Any], *args: Any) -> Handle:
        """Call ``callback(*args)`` at ``now + delay`` (a SimPy *timeout*); returns its handle."""
        if not delay >= 0.0:  # also rejects NaN
            raise ValueError(f"delay must be >= 0, got {delay!r}")
        self._seq = seq = self._seq + 1
        entry = Entry(self.now + delay, seq, callback, args)
        push(self._heap, entry)
        return entry

    def at(self, time: float, callback: Callable[..., Any], *args: Any) -> Handle:
        """Call ``callback(*args)`` at absolute ``time`` (>= ``now``); returns its handle."""
        if not time >= self.now:
            raise ValueError(f"time {time!r} is before now ({self.now!r})")
        self._seq = seq = self._seq + 1
        entry = Entry(float(time), seq, callback, args)
        push(self._heap, entry)
        return entry

    def post(self, time: float, callback: Callable[..., Any], *args: Any) -> Handle:
        """:meth:`at` without its checks, for hot paths whose ``time`` is a float ``>= now``
        by construction (``now`` plus a non-negative duration)."""
        self._seq = seq = self._seq + 1
        entry = Entry(time, seq, callback, args)
        push(self._heap, entry)
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
        if time < self._limit and (not heap or time < heap[0].time):
            self.now = time
            return True
        return False

    def cancel(self, handle: Handle) -> None:
        """Drop a scheduled event; a no-op if it already ran or was cancelled."""
        if handle.item is None:
            return
        handle.item = None
        handle.args = ()
        self._cancelled += 1
        heap = self._heap
        # Lazy deletion keeps cancel O(1); compact when dead entries dominate the heap.
        if self._cancelled > _COMPACT_MIN and 2 * self._cancelled > len(heap):
            heap[:] = [e for e in heap if e.item is not None]
            heapify(heap)
            self._cancelled = 0

    @staticmethod
    def pending(handle: Handle) -> bool:
        """True while the event is scheduled and neither ran nor was cancelled."""
        return handle.item is not None

    def peek(self) -> float:
        """Time of the next live event, ``inf`` if none."""
        heap = self._heap
        while heap and heap[0].item is None:
            pop(heap)
            self._cancelled -= 1
        return heap[0].time if heap else inf

    def __len__(self) -> int:
        """Number of live scheduled events."""
        return len(self._heap) - self._cancelled

    def stop(self) -> None:
        """Make ``run`` return after the current callback; later events stay queued."""
        # A sentinel that sorts before every other event at ``now`` (seq -1) and raises when run:
        # this keeps the hot loop free of a per-event "stopped?" check.
        push(self._heap, Entry(self.now, -1, _halt, ()))

    def run(self, until: float | None = None) -> None:
        """Process events in time order until none remain, ``stop()`` is called, or ``until``.

        Like SimPy, ``run(until=t)`` processes the events strictly before ``t`` and leaves
        ``now == t``; events at ``t`` or later stay queued for the next ``run``.
        """
        limit = inf if until is None else float(until)
        if limit < self.now:
            raise ValueError(f"until {until!r} is before now ({self.now!r})")
        heap = self._heap
        # The cyclic GC is off while events run: every container an event allocates (its heap
        # entry, argument tuples, messages) is freed by reference counting (a full collection
        # right after a noisy BSP, ASP, SSP or ring run found nothing unreachable), so its
        # collections there only cost time: ~3% of a noisy PS run with a young threshold of
        # 100 000 (at Python's 700, 8%), and now and then a full one over the whole process.
        enabled = gc.isenabled()
        gc.disable()
        self._limit = limit
        try:
            while heap:
                entry = pop(heap)
                if entry.time >= limit:
                    push(heap, entry)
                    break
                callback = entry.item
                if callback is None:
                    self._cancelled -= 1
                    continue
                entry.item = None  # ran: a later cancel() is a no-op
                self.now = entry.time
                callback(*entry.args)
        except _Stop:
            return
        finally:
            self._limit = -inf
            if enabled:
                gc.enable()
        if until is not None:
            self.now = limit


class _Stop(Exception):
    """Raised by the stop sentinel to leave the event loop."""


def _halt() -> None:
    raise _Stop
