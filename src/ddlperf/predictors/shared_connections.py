"""One endpoint's connections sharing its link when every connection has the same cap.

That is the case the PS models meet most (identical shards: each connection's share at its
shard is the same), and it is cheaper than general water-filling: every active connection
moves at one rate, min(cap, capacity / active). :func:`equal_caps_finish` is
:func:`~ddlperf.predictors.shared_link.connections_finish` for it — the same event loop (the
same comparisons and floating-point operations, so the same finish times to a few ulps) with
the bookkeeping that made it slow taken out: connections waiting for their next item sit in a
sorted list instead of being searched at every event, and each connection's items are listed
once per placement (:class:`ConnectionItems`). Where every item is ready at once (the first
pull of a BSP pass, a push without overlap) there are no waits at all and the finish times
have a closed form: all active connections have sent the same bytes, so connection k's item
with b bytes before and including it ends when that many bytes were sent per connection.

:class:`ShiftedRepeats` serves a BSP fixed point: a pass whose ready times are the last
pass's shifted by one constant gets the last pass's finish times, shifted (the event loop
does not depend on where time starts). A push with overlap is always such a shift (its ready
times are backward's offsets plus the pass's start), and the pulls are once the passes have
found their period.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Hashable
from dataclasses import dataclass

import numpy as np

# What may be left of an item when it counts as sent (bytes, relative to the item).
SENT_TOLERANCE = 1e-9
# Ready times count as the last call's shifted when their differences spread by at most
# this share of the largest ready time: rounding of the same schedule shifted, no more.
SHIFT_TOLERANCE = 1e-14


@dataclass(frozen=True)
class ConnectionItems:
    """Which items each connection carries (``work`` > 0), in item order, their bytes, and
    what the closed form for items ready at once needs (it depends on the bytes alone)."""

    shape: tuple[int, int]
    columns: tuple[np.ndarray, ...]  # per connection, its items
    sizes: tuple[np.ndarray, ...]  # their bytes
    flat: np.ndarray  # every connection's items, one connection after the other
    on: np.ndarray  # the connection of each entry of ``flat``
    later: np.ndarray  # (len(flat) - 1,): the next entry of ``flat`` is on the same connection
    size_lists: tuple[list[float], ...]  # ``sizes`` as floats, for the event loop
    # ready at once: the connections' totals (ascending) are where the active count drops;
    # per entry of ``flat``, its connection's bytes up to and including it and the segment
    # between totals it ends in
    totals: list[float]
    sent: np.ndarray
    segment: np.ndarray

    @classmethod
    def of(cls, work: np.ndarray) -> ConnectionItems:
        columns = tuple(np.flatnonzero(column > 0) for column in work.T)
        flat = np.concatenate(columns) if columns else np.zeros(0, dtype=np.intp)
        on = np.repeat(np.arange(len(columns)), [len(c) for c in columns])
        later = on[1:] == on[:-1]
        sizes = tuple(work[c, k] for k, c in enumerate(columns))
        sent = np.concatenate([np.cumsum(s) for s in sizes]) if columns else np.zeros(0)
        totals = np.sort([s[-1] for s in np.split(sent, np.cumsum([len(c) for c in columns]))
                          if len(s)])
        return cls(shape=work.shape, columns=columns, sizes=sizes, flat=flat, on=on,
                   later=later, size_lists=tuple(s.tolist() for s in sizes),
                   totals=totals.tolist(), sent=sent,
                   segment=np.searchsorted(totals, sent, side="left"))


def equal_caps_finish(connections: ConnectionItems, ready: np.ndarray, cap: float,
                      capacity: float) -> np.ndarray:
    """Finish time of every (item, connection) (−inf where the connection does not carry the
    item): each connection sends its items in the order they become ready (``ready``, per
    item; ties in item order), every connection with an item ready moves at min(``cap``,
    ``capacity`` / those connections)."""
    finish = np.full(connections.shape, -np.inf)
    if not len(connections.flat):
        return finish
    times = ready[connections.flat]
    if times.min() == times.max():
        finish[connections.flat, connections.on] = _all_ready_at_once(
            connections, float(times[0]), cap, capacity)
        return finish
    columns, sizes = connections.columns, connections.size_lists
    if not np.all((times[1:] >= times[:-1]) | ~connections.later):  # not in item order
        orders = [np.argsort(ready[c], kind="stable") for c in columns]
        columns = tuple(c[o] for c, o in zip(columns, orders))
        sizes = tuple(s[o].tolist() for s, o in zip(connections.sizes, orders))
    ends = _event_loop([ready[c].tolist() for c in columns], sizes, cap, capacity)
    finish[np.concatenate(columns), connections.on] = list(itertools.chain.from_iterable(ends))
    return finish


def _rate(cap: float, capacity: float, active: int) -> float:
    share = capacity / active
    return share if cap >= share else cap


def _all_ready_at_once(connections: ConnectionItems, now: float, cap: float,
                       capacity: float) -> np.ndarray:
    """Finish times (entries of ``connections.flat``) when every item is ready at ``now``:
    connection k is active until it has sent its total, and all active connections have
    sent the same bytes at any time."""
    totals = connections.totals
    bounds, rates, at = [0.0], [], [now]  # per segment: bytes at its start, rate, time
    for i, total in enumerate(totals):
        rates.append(_rate(cap, capacity, len(totals) - i))
        at.append(at[-1] + (total - bounds[-1]) / rates[-1])
        bounds.append(total)
    segment = connections.segment
    return (np.array(at)[segment]
            + (connections.sent - np.array(bounds)[segment]) / np.array(rates)[segment])


def _event_loop(starts: list[list[float]], sizes: list[list[float]], cap: float,
                capacity: float) -> list[list[float]]:
    """The event loop of ``connections_finish`` with one cap: an event is an item's end or a
    waiting connection's next item becoming ready."""
    count = len(sizes)
    head = [0] * count
    left = [size[0] if size else 0.0 for size in sizes]
    ends = [[SENT_TOLERANCE * max(1.0, s) for s in size] for size in sizes]
    out: list[list[float]] = [[] for _ in range(count)]
    waiting = sorted((start[0], k) for k, start in enumerate(starts) if start)
    active: list[int] = []
    now = waiting[0][0] if waiting else 0.0
    while active or waiting:
        while waiting and waiting[0][0] <= now:
            active.append(waiting.pop(0)[1])
        if not active:
            now = waiting[0][0]
            continue
        rate = _rate(cap, capacity, len(active))
        step = min([left[k] for k in active]) / rate
        if waiting and waiting[0][0] < now + step:
            step = waiting[0][0] - now
        now += step
        moved = rate * step
        still = []
        for k in active:
            rest = left[k] - moved
            h, end = head[k], ends[k]
            if rest <= end[h]:
                start, size, mine = starts[k], sizes[k], out[k]
                while rest <= end[h]:
                    mine.append(now)
                    h += 1
                    if h == len(end) or start[h] > now:
                        break
                    rest = size[h]
                head[k] = h
                if h == len(end):
                    continue
                if start[h] > now:
                    left[k] = size[h]
                    bisect.insort(waiting, (start[h], k))
                    continue
            left[k] = rest
            still.append(k)
        active = still
    return out


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
