"""One link shared by several FIFO streams, as TCP shares it: a fluid max-min fair server.

Each stream is ``count`` identical flows (one per worker of a group) sending their items in
order, an item once it is ready; every active flow gets an equal share of the link, at most
its own ``cap`` (the sender's link), and what a capped flow leaves goes to the others. A
stream whose items are done leaves the link to the rest — which a fixed share per stream
(count / all senders) does not: a straggler's gradients would cross at that share even after
the fast workers' pushes are over.
"""

from __future__ import annotations

import math

import numpy as np

from ddlperf.predictors.shared_connections import (
    SENT_TOLERANCE,
    ConnectionItems,
    equal_caps_finish,
)


def fair_rates(weights: list[float], caps: list[float], capacity: float) -> list[float]:
    """Per-flow rate of each active stream (``weights`` flows each): water-filling."""
    rates = [0.0] * len(weights)
    order = sorted(range(len(weights)), key=lambda i: caps[i])
    left, flows = capacity, sum(weights)
    for i in order:
        share = left / flows if flows > 0 else 0.0
        rates[i] = min(caps[i], share)
        left -= rates[i] * weights[i]
        flows -= weights[i]
    return rates


def shared_link_finish(ready: list[np.ndarray], work: np.ndarray, counts: list[float],
                       caps: list[float], capacity: float) -> list[np.ndarray]:
    """Finish time of every item of every stream (items in the same order for all streams,
    ``work`` bytes each, ``ready[s][i]`` when stream s may start item i)."""
    n = len(work)
    finish = [np.full(n, -np.inf) for _ in ready]
    streams = [s for s in range(len(ready)) if counts[s] > 0 and n]
    position = dict.fromkeys(streams, 0)
    left = {s: float(work[0]) for s in streams}
    now = min((float(ready[s][0]) for s in streams), default=0.0)
    while streams:
        active = [s for s in streams if ready[s][position[s]] <= now]
        if not active:
            now = min(float(ready[s][position[s]]) for s in streams)
            continue
        rates = fair_rates([counts[s] for s in active], [caps[s] for s in active], capacity)
        step = min((left[s] / r if r > 0 else math.inf) for s, r in zip(active, rates))
        waiting = [float(ready[s][position[s]]) for s in streams if s not in active]
        step = min([step, *(t - now for t in waiting)])
        now += step
        for s, r in zip(active, rates):
            left[s] -= r * step
            while left[s] <= SENT_TOLERANCE * max(1.0, float(work[position[s]])):
                finish[s][position[s]] = now
                position[s] += 1
                if position[s] == n:
                    streams.remove(s)
                    break
                left[s] = float(work[position[s]])
                if ready[s][position[s]] > now:
                    break
    return finish


def connections_finish(ready: np.ndarray, work: np.ndarray, caps: np.ndarray,
                       capacity: float, connections: ConnectionItems | None = None
                       ) -> np.ndarray:
    """Finish time of every (item, connection) of one endpoint's link (``work``: items ×
    connections, bytes; 0 where a connection does not carry the item) as its connections
    share it: each connection sends its items one after another in the order they become
    ready (``ready``, per item), every connection with an item ready gets an equal share of
    ``capacity``, at most its own ``caps`` (its share at the far end), and what a capped one
    leaves goes to the others. −inf where ``work`` is 0.

    A PS worker keeps one connection per shard and sends each gradient on its shard's as soon
    as it is ready, so the worker's link is shared by as many connections as have gradients
    waiting — not one FIFO, in which a small gradient for one shard would wait behind a large
    one for another, nor independent links, which the worker's link would not allow.

    An event loop over plain floats (it runs inside the BSP fixed point, per pass and
    direction): an event is an item's end or a waiting connection's next item becoming ready.
    Connections with one cap (identical shards) take the faster
    :func:`~ddlperf.predictors.shared_connections.equal_caps_finish`; ``connections``: the
    items of ``work``, if the caller keeps them.
    """
    if len(caps) and np.all(caps == caps[0]):
        items = connections if connections is not None else ConnectionItems.of(work)
        return equal_caps_finish(items, ready, float(caps[0]), capacity)
    return water_filled_finish(ready, work, caps, capacity)


def water_filled_finish(ready: np.ndarray, work: np.ndarray, caps: np.ndarray,
                        capacity: float) -> np.ndarray:
    """:func:`connections_finish` for any caps: the connections water-filled at each event."""
    count = work.shape[1]
    finish = np.full(work.shape, -np.inf)
    order = np.argsort(ready, kind="stable").tolist()
    times = ready.tolist()
    items: list[list[int]] = []  # per connection, in its sending order
    starts: list[list[float]] = []
    sizes: list[list[float]] = []
    ends: list[list[float]] = []  # what may be left of an item when it counts as sent
    for column in work.T.tolist():
        mine = [j for j in order if column[j] > 0]
        items.append(mine)
        starts.append([times[j] for j in mine])
        sizes.append([column[j] for j in mine])
        ends.append([SENT_TOLERANCE * max(1.0, column[j]) for j in mine])
    cap = [float(c) for c in caps]
    lowest_cap = min(cap)
    head = [0] * count
    left = [q[0] if q else 0.0 for q in sizes]
    pending = [k for k in range(count) if items[k]]
    now = min((starts[k][0] for k in pending), default=0.0)
    while pending:
        active = [k for k in pending if starts[k][head[k]] <= now]
        if not active:
            now = min(starts[k][head[k]] for k in pending)
            continue
        share = capacity / len(active)
        if lowest_cap >= share:  # no connection held by its cap: equal shares
            rates = [share] * len(active)
            step = min(left[k] for k in active) / share
        else:
            rates = fair_rates([1.0] * len(active), [cap[k] for k in active], capacity)
            step = min((left[k] / r if r > 0 else math.inf) for k, r in zip(active, rates))
        for k in pending:
            start = starts[k][head[k]]
            if now < start < now + step:
                step = start - now
        now += step
        for k, r in zip(active, rates):
            left[k] -= r * step
            size, end = sizes[k], ends[k]
            while left[k] <= end[head[k]]:
                finish[items[k][head[k]], k] = now
                head[k] += 1
                if head[k] == len(size):
                    pending.remove(k)
                    break
                left[k] = size[head[k]]
                if starts[k][head[k]] > now:
                    break
    return finish
