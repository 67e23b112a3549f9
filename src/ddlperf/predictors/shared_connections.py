"""One endpoint's connections sharing its link when every connection has the same cap.

That is the case the PS models meet most (identical shards: each connection's share at its
shard is the same), and it is cheaper than general water-filling: every active connection
moves at one rate, min(cap, capacity / active). :func:`equal_caps_finish` is
:func:`~ddlperf.predictors.shared_link.connections_finish` for it, computed in *virtual
time* (as generalized processor sharing is): V(t) is the bytes one active connection has
been able to send by t, so it rises at the rate of the moment, and connection k's item ready
at a with b bytes ends when V reaches max(V(a), the end of k's previous item) + b — its
finish tag. Only the rate's changes (a connection gets an item while idle, or sends its last
waiting byte) are events, and the item ends are read off the piecewise-linear V afterwards in
numpy: the event loop (:func:`_virtual_time`) is a few float operations per item, about 3x
faster than the loop that followed every item's end (the two agree to ~1e-12). Where every
item is ready at once (the first pull of a BSP pass, a push without overlap) there are no
events after the start and the finish times have a closed form: all active connections have
sent the same bytes, so connection k's item with b bytes before and including it ends when
that many bytes were sent per connection. Both take many independent problems on the same items
at once (:func:`entries_finish`: one column each, as the batched sweep has them).

:class:`ShiftedRepeats` serves a BSP fixed point: a pass whose ready times are the last
pass's shifted by one constant gets the last pass's finish times, shifted (the event loop
does not depend on where time starts). A push with overlap is always such a shift (its ready
times are backward's offsets plus the pass's start), and the pulls are once the passes have
found their period. :class:`ShiftedColumns` is the same for many columns (points) at once.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable
from dataclasses import dataclass

import numpy as np

# What may be left of an item when it counts as sent (bytes, relative to the item), in the
# loops that follow every item's end (``shared_link``).
SENT_TOLERANCE = 1e-9
# Ready times count as the last call's shifted when their differences spread by at most
# this share of the largest ready time: rounding of the same schedule shifted, no more.
SHIFT_TOLERANCE = 1e-14


@dataclass(frozen=True)
class ConnectionItems:
    """Which items each connection carries (``work`` > 0) as a list of entries, connection
    after connection and in item order within one, their bytes, and what the closed form for
    items ready at once needs (it depends on the bytes alone)."""

    shape: tuple[int, int]
    flat: np.ndarray  # the item of each entry
    on: np.ndarray  # the connection of each entry
    size: np.ndarray  # the bytes of each entry
    owner: np.ndarray | None  # per item, its one entry; None: an item on several or none
    # ready at once: the connections' totals (ascending) are where the active count drops;
    # per entry, its connection's bytes up to and including it and the segment between
    # totals it ends in
    totals: np.ndarray
    sent: np.ndarray
    segment: np.ndarray

    @classmethod
    def of(cls, work: np.ndarray) -> ConnectionItems:
        columns = [np.flatnonzero(column > 0) for column in work.T]
        flat = np.concatenate(columns) if columns else np.zeros(0, dtype=np.intp)
        on = np.repeat(np.arange(len(columns)), [len(c) for c in columns])
        size = work[flat, on]
        sent = np.concatenate([np.cumsum(work[c, k]) for k, c in enumerate(columns)]
                              ) if columns else np.zeros(0)
        totals = np.sort([np.cumsum(work[c, k])[-1] for k, c in enumerate(columns)
                          if len(c)])
        owner = None
        if np.array_equal(np.sort(flat), np.arange(work.shape[0])):
            owner = np.empty(work.shape[0], dtype=np.intp)
            owner[flat] = np.arange(len(flat))
        return cls(shape=work.shape, flat=flat, on=on, size=size, owner=owner,
                   totals=totals, sent=sent,
                   segment=np.searchsorted(totals, sent, side="left"))

    def per_item(self, entries: np.ndarray) -> np.ndarray:
        """(items, columns): the latest finish of each item's entries (−inf: on none)."""
        if self.owner is not None:
            return entries[self.owner]
        matrix = np.full((*self.shape, entries.shape[1]), -np.inf)
        matrix[self.flat, self.on] = entries
        return matrix.max(axis=1)


def equal_caps_finish(connections: ConnectionItems, ready: np.ndarray, cap: float,
                      capacity: float) -> np.ndarray:
    """Finish time of every (item, connection) (−inf where the connection does not carry the
    item): each connection sends its items in the order they become ready (``ready``, per
    item; ties in item order), every connection with an item ready moves at min(``cap``,
    ``capacity`` / those connections)."""
    finish = np.full(connections.shape, -np.inf)
    finish[connections.flat, connections.on] = entries_finish(
        connections, ready[:, None], np.array([cap]), np.array([capacity]))[:, 0]
    return finish


def entries_finish(connections: ConnectionItems, ready: np.ndarray, cap: np.ndarray,
                   capacity: np.ndarray) -> np.ndarray:
    """:func:`equal_caps_finish` of many columns at once — ``ready`` (items, columns), ``cap``
    and ``capacity`` (columns,) — as (entries, columns): the finish time of each entry of
    ``connections``. Each column is computed on its own."""
    out = np.empty((len(connections.flat), ready.shape[1]))
    if not len(connections.flat):
        return out
    times = ready[connections.flat]
    first = times.min(axis=0)
    at_once = first == times.max(axis=0)
    if at_once.all():
        return _all_ready_at_once(connections, first, cap, capacity)
    if at_once.any():
        out[:, at_once] = _all_ready_at_once(connections, first[at_once], cap[at_once],
                                             capacity[at_once])
    columns = np.flatnonzero(~at_once)
    # each column's entries in the order they become ready (ties: in entry order, so a
    # connection's items in item order)
    waiting = times[:, columns]
    orders = np.argsort(waiting, axis=0, kind="stable")
    lists = (np.take_along_axis(waiting, orders, 0).T.tolist(),
             connections.on[orders].T.tolist(), connections.size[orders].T.tolist())
    count = connections.shape[1]
    tags: list[float] = []  # every column's finish tags, column after column
    events: list[float] = []  # every column's events: time, V, the rate after it
    bounds = [0]  # where each column's events start and end
    for column, ready_in_order, on, size in zip(columns.tolist(), *lists):
        _virtual_time(ready_in_order, on, size, count, float(cap[column]),
                      float(capacity[column]), tags, events)
        bounds.append(len(events) // 3)
    finish = np.array(tags).reshape(len(columns), -1)
    at, level, after = np.fromiter(events, float, len(events)).reshape(-1, 3).T
    # the event before each tag: the last of its column whose V is below it (an item's tag
    # exceeds V at its ready time, so the column's first event's V is below every tag)
    event = np.empty(finish.shape, dtype=np.intp)
    for row, (start, end) in enumerate(itertools.pairwise(bounds)):
        event[row] = np.searchsorted(level[start:end], finish[row], side="left") + (start - 1)
    out[orders, columns] = (at[event] + (finish - level[event]) / after[event]).T
    return out


def _all_ready_at_once(connections: ConnectionItems, now: np.ndarray, cap: np.ndarray,
                       capacity: np.ndarray) -> np.ndarray:
    """Finish times (entries × columns) when every item is ready at ``now``: connection k is
    active until it has sent its total, and all active connections have sent the same bytes
    at any time."""
    totals = connections.totals
    bounds = np.concatenate(([0.0], totals))  # bytes per connection at each segment's start
    share = capacity / (len(totals) - np.arange(len(totals)))[:, None]  # (segments, columns)
    rates = np.where(cap >= share, share, cap)
    at = np.cumsum(np.concatenate((now[None, :], (totals - bounds[:-1])[:, None] / rates)),
                   axis=0)  # time at each segment's start
    segment = connections.segment
    return at[segment] + (connections.sent - bounds[segment])[:, None] / rates[segment]


def _virtual_time(times: list[float], on: list[int], sizes: list[float], count: int,
                  cap: float, capacity: float, tags: list[float], events: list[float]) -> None:
    """The finish tags of entries given in the order they become ready (``times``
    ascending, ``on`` their connections, ``sizes`` their bytes) on ``count`` connections,
    appended to ``tags``, and the events of V, appended to ``events`` (time, V, the rate
    after it, flat).

    V(t) is piecewise linear: from each event (time, V, rate) on, V rises at the rate of the
    connections then active. An entry's finish tag (its V at its end) is its connection's
    last tag (or V at its ready time, if the connection was idle) plus its bytes; a
    connection is active until V reaches its last tag (its drain, an event). Afterwards
    (:func:`entries_finish`) each tag is found on V: the event before it (the last with V
    below the tag), and the time from there at that event's rate."""
    tag = [0.0] * count  # the last finish tag of each connection
    active = [False] * count
    # (tag, connection) per active connection, as a heap; an entry whose connection got
    # another item since holds an older tag, and is updated when it comes to the top
    drains: list[tuple[float, int]] = []
    # the rate of each active connection, per count of active connections
    rates = [0.0] + [capacity / m if cap >= capacity / m else cap for m in range(1, count + 1)]
    now = v = rate = 0.0
    busy = 0  # active connections
    push, pop, replace = heapq.heappush, heapq.heappop, heapq.heapreplace
    for ready, k, size in zip(times, on, sizes):
        while busy:  # the drains up to ``ready``
            end, j = drains[0]
            if end != tag[j]:
                replace(drains, (tag[j], j))
                continue
            done = now + (end - v) / rate
            if done > ready:
                break
            pop(drains)
            active[j] = False
            busy -= 1
            now, v = done, end
            if busy:
                rate = rates[busy]
            events += (now, v, rate)
        if active[k]:
            end = tag[k] = tag[k] + size
        else:
            if busy:
                v += rate * (ready - now)
            now = ready
            active[k] = True
            busy += 1
            rate = rates[busy]
            events += (now, v, rate)
            end = tag[k] = v + size
            push(drains, (end, k))
        tags.append(end)
    while busy:  # the drains after the last item became ready
        end, j = drains[0]
        if end != tag[j]:
            replace(drains, (tag[j], j))
            continue
        pop(drains)
        busy -= 1
        now, v = now + (end - v) / rate, end
        if busy:
            rate = rates[busy]
        events += (now, v, rate)


class ShiftedRepeats:
    """Finish times per key of the last computation; ready times that are the last ones
    shifted by a constant (to rounding) get its finish times shifted instead."""

    def __init__(self) -> None:
        self._last: dict[Hashable, tuple[np.ndarray, np.ndarray]] = {}

    def finish(self, key: Hashable, ready: np.ndarray,
               compute: Callable[[], np.ndarray]) -> np.ndarray:
        last = self._last.get(key)
        if last is not None and np.all(np.isfinite(ready)):
            before, finish = last
            shift = ready - before
            scale = max(float(np.abs(ready).max()), float(np.abs(before).max()))
            if float(shift.max() - shift.min()) <= SHIFT_TOLERANCE * scale:
                return finish + float(shift[0])
        finish = compute()
        self._last[key] = (ready.copy(), finish)
        return finish


class ShiftedColumns:
    """:class:`ShiftedRepeats` of ``columns`` independent columns (a batch's points), each
    with its own last computation per key, checked all at once: the same test and the same
    shift per column."""

    def __init__(self, columns: int) -> None:
        self.columns = columns
        # per key: the last computed ready times and finish times per column, and which
        # columns have them
        self._last: dict[Hashable, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def finish(self, key: Hashable, which: np.ndarray, ready: np.ndarray,
               compute: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """Finish times (rows, len(which)) of columns ``which`` with ready times ``ready``
        (items, len(which)); ``compute(mask)``: those of the columns of ``ready`` in ``mask``
        (rows, mask.sum()), for the columns that are no shift."""
        last = self._last.get(key)
        hit = np.zeros(len(which), dtype=bool)
        if last is not None:
            before_all, finish_all, known = last
            before = before_all[:, which]
            shift = ready - before
            scale = np.maximum(np.abs(ready).max(axis=0), np.abs(before).max(axis=0))
            hit = (known[which] & np.isfinite(ready).all(axis=0)
                   & (shift.max(axis=0) - shift.min(axis=0) <= SHIFT_TOLERANCE * scale))
        if hit.all():
            return finish_all[:, which] + shift[0]
        computed = compute(~hit)
        if last is None:
            last = self._last[key] = (np.zeros((len(ready), self.columns)),
                                      np.zeros((len(computed), self.columns)),
                                      np.zeros(self.columns, dtype=bool))
        before_all, finish_all, known = last
        fresh = which[~hit]
        before_all[:, fresh] = ready[:, ~hit]
        finish_all[:, fresh] = computed
        known[fresh] = True
        if not hit.any():
            return computed
        out = np.empty((len(computed), len(which)))
        out[:, ~hit] = computed
        out[:, hit] = finish_all[:, which[hit]] + shift[0, hit]
        return out
