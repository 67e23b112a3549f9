"""Local mode of the flow network: rates as levels of per-link virtual clocks, and one-link
settlements of a single change.

Why (issue 14): in a noisy PS run a connection that starts or stops on a shard's link changes
the rate of every flow limited there (20–60 of them). Recomputing those flows one by one and
moving one completion event per flow cost half of the run. Here:

* **Virtual clocks.** The flows limited by the same link ("its bottleneck flows") all run at
  its fair level, so they send in step: a flow's finish tag is the reading of the link's
  clock (bytes per sub-flow sent at the level since the clock's origin) at which it is done,
  and the link has one event, at its smallest tag (processor-sharing virtual time). A level
  change moves that one event; a flow's bytes left are its tag minus the clock.
* **One-link settlements.** A single flow that starts or ends usually changes only the level
  of one link (a shard's link: its bottleneck flows share what the others leave). When the
  conditions of :func:`quick_start` / :func:`quick_end` hold, that level *is* the max-min
  allocation (unique), so it is set without a fill; otherwise nothing is touched and
  :class:`~.network.Network` refills the flows on the changed links and checks the result
  (:func:`unfair_links`), widening the refill to the links where the check failed, and
  falling back to the whole component, as before, when that does not settle it either.

Only runs with noise use this mode: the clock arithmetic rounds differently from per-flow
bookkeeping, and noiseless runs keep bit-identical ties between identical workers.
"""

from __future__ import annotations

from math import inf
from typing import TYPE_CHECKING, Any

from ddlperf.predictors.simulate.engine import Entry, before, pop, push, replace
from ddlperf.predictors.simulate.maxmin import SATURATED, TIE

if TYPE_CHECKING:
    from ddlperf.predictors.simulate.network import Flow, Link, Network


def finish(net: Network, link: Link) -> None:
    """Clock event of ``link``: the flow with the smallest finish tag has sent everything;
    its next message (``follow``) ends when the clock has moved that many bytes more.

    While the link's next tag would be the engine's next event anyway, it is run here
    (:meth:`.engine.Engine.advance`, inlined): the same order, without a heap push and pop
    each."""
    engine = net.engine
    queued = engine._heap  # (advance's test, inlined: one call less per message)
    until = engine._limit
    heap = link._heap
    while True:
        link._clock_event = None
        entry = heap[0]
        while entry.item is None:
            pop(heap)
            entry = heap[0]
        flow: Flow = entry.item
        done = entry.time  # exactly: that flow has nothing left
        link._v = done
        link._vt = now = engine.now
        more = False
        size = 0.0
        tag: Any = None
        conn = flow.conn
        if conn is not None:  # (a connection's follow, called natively)
            message = conn.next_message(flow)
            if message is not None:
                more = True
                size = message.size
                tag = message.tag
        elif flow.follow is not None:
            nxt = flow.follow(flow)
            if nxt is not None:
                more = True
                size = nxt[0]
                tag = nxt[1]
        top = heap[0] is entry  # (follow leaves the link's tags alone; if not, mark it stale)
        if not top:
            entry.item = None
        if not more:
            if top:
                pop(heap)
            net._end(flow)
        else:
            net._next_message(flow, size, tag)
            net._tags = seq = net._tags + 1
            if top:  # the finished tag's entry takes the next one (it is the flow's
                # ``_entry``); one sift instead of a pop and a push, or none: an entry that
                # precedes both children of the root is where replace would leave it
                # (same layout; ASP: ~2/3 of the next messages, short ones)
                entry.time = done + size
                entry.seq = seq
                n = len(heap)
                if not ((n < 2 or before(entry, heap[1])) and (n < 3 or before(entry, heap[2]))):
                    replace(heap, entry)
            else:
                flow._entry = entry = Entry(done + size, seq, flow, ())
                push(heap, entry)
        while heap and heap[0].item is None:
            pop(heap)
        if not heap:
            return
        first = heap[0].time
        left = first - done  # the clock reads ``done``
        at = now + left / link.level if left > 0.0 else now
        if at < until and (not queued or at < queued[0].time):
            engine.now = at
        else:
            link._clock_event = engine.post(at, finish, net, link)
            return


def wake(net: Network, link: Link) -> None:
    """Schedule ``link``'s clock event at its first finish tag (none is pending)."""
    heap = link._heap
    while heap and heap[0].item is None:
        pop(heap)
    if heap:
        engine = net.engine
        now = engine.now
        level = link.level
        first = heap[0].time
        left = first - link._v - level * (now - link._vt)
        link._clock_event = engine.post(now + left / level if left > 0.0 else now,
                                        finish, net, link)


def bytes_left(flow: Flow, now: float) -> float:
    """Bytes per sub-flow ``flow`` has still to send at ``now``."""
    entry = flow._entry
    if entry is None:
        return flow.remaining  # not allocated yet
    link: Link = flow._bn  # type: ignore[assignment]
    left = entry.time - link._v - link.level * (now - link._vt)
    return left if left > 0.0 else 0.0


def apply_levels(net: Network, flows: dict[Flow, None], links: dict[Link, None],
                 now: float) -> None:
    """New rates from a fill (``flow._new``, ``flow._nb``) as levels of the bottleneck links'
    clocks; a flow whose bottleneck moves takes its bytes left from the old clock to the new.
    Every flow's ``rate`` stays its bottleneck's level."""
    for lk in links:  # clocks to ``now`` at the old levels
        lk._v += lk.level * (now - lk._vt)
        lk._vt = now
    changed: dict[Link, None] = {}
    for flow in flows:
        link: Link = flow._nb  # type: ignore[assignment]  # (set by the fill)
        old = flow._bn
        if link is not old:
            if old is None:
                left = flow.remaining  # newly active
            else:
                del old._bn[flow]
                old._bw -= flow.weight
                entry: Entry = flow._entry  # type: ignore[assignment]
                left = entry.time - old._v
                if left < 0.0:
                    left = 0.0
                entry.item = None
                changed[old] = None
            link._bn[flow] = None
            link._bw += flow.weight
            flow._bn = link
            flow._others = tuple([x for x in flow.links if x is not link])
            _tag(net, link, flow, left)
            changed[link] = None
        if link.level != flow._new:
            link.level = flow._new
            changed[link] = None
    for lk in changed:
        level = lk.level
        for flow in lk._bn:
            flow.rate = level
        _rewake(net, lk)


def quick_start(net: Network, flow: Flow) -> bool:
    """Settle one new flow by one link's level, if that is the max-min allocation.

    The flow joins the bottleneck flows of one link L, which all move to L's new fair level;
    nothing else changes. That is max-min fair (every flow limited by a saturated link on
    which no flow is faster) when: the flow's other links take its rate and limit nobody; no
    flow on L outside its bottleneck set is faster than the new level; and the other links of
    L's bottleneck flows limit nobody (the capacity those flows give up there would otherwise
    go to someone). Else False, and nothing changed.
    """
    w = flow.weight
    links = flow.links
    limit: Link | None = None
    for link in links:
        if link._bn:
            if limit is not None:
                return False
            limit = link
    if limit is None:
        level = inf
        for link in links:
            free = (link._total - link._load) / w
            if free < level:
                level = free
                limit = link
        if not level > 0.0:
            return False
        weight = 0.0
    else:
        weight = limit._bw
        level = (limit._total - limit._load + weight * limit.level) / (weight + w)
    lim: Link = limit  # type: ignore[assignment]  # (set above: level > 0)
    need = w * level * (1.0 + TIE)
    for link in links:
        if link is not lim and link._total - link._load < need:
            return False
    top = level * (1.0 + TIE)
    for other in lim.flows:
        if other._bn is lim:
            for link in other._others:
                if link._bn:
                    return False
        elif other.rate > top and other is not flow:
            return False
    now = net.engine.now
    lim._v += lim.level * (now - lim._vt)
    lim._vt = now
    drop = lim.level - level
    for other in lim._bn:
        other.rate = level
        used = other.weight * drop
        for link in other._others:
            link._load -= used
            if link._sat_since is not None:
                saturation(link, now)
    lim.level = level
    lim._load += w * level - weight * drop
    lim._bn[flow] = None
    lim._bw += w
    flow._bn = lim
    flow._others = tuple([x for x in links if x is not lim])
    flow.rate = level
    _tag(net, lim, flow, flow.remaining)
    used = w * level
    for link in links:
        if link is not lim:
            link._load += used
        saturation(link, now)
    _rewake(net, lim)
    return True


def quick_end(net: Network, flow: Flow, limit: Link) -> bool:
    """Settle one ended flow by raising its bottleneck ``limit``'s level, if that is the
    max-min allocation: the flow's other links limit nobody (the capacity it gave up there
    would go to someone), and the other links of ``limit``'s bottleneck flows limit nobody and
    take their higher rate. Else False, and nothing changed (see :func:`quick_start`)."""
    for link in flow.links:
        if link._bn and link is not limit:
            return False
    now = net.engine.now
    block = limit._bn
    if block:
        rise = (limit._total - limit._load) / limit._bw
        net._mark = mark = net._mark + 1
        for other in block:
            used = other.weight * rise
            for link in other._others:
                if link._bn:
                    return False
                if link._seen != mark:
                    link._seen = mark
                    link._rem = link._total - link._load
                link._rem -= used
                if link._rem < 0.0:
                    return False
        limit._v += limit.level * (now - limit._vt)
        limit._vt = now
        limit.level = level = limit.level + rise
        for other in block:
            other.rate = level
            used = other.weight * rise
            for link in other._others:
                link._load += used
                if link._total - link._load <= SATURATED * link._total:
                    saturation(link, now)
        limit._load += limit._bw * rise
        _rewake(net, limit)
    for link in flow.links:
        saturation(link, now)
    return True


def saturation(link: Link, now: float) -> None:
    """Open or close ``link``'s saturated interval after its load changed."""
    if link.flows and link._total - link._load <= SATURATED * link._total:
        if link._sat_since is None:
            link._sat_since = now
    elif link._sat_since is not None:
        link._sat_acc += now - link._sat_since
        link._sat_since = None


def _tag(net: Network, link: Link, flow: Flow, left: float) -> None:
    """Give ``flow`` (now limited by ``link``, whose clock reads ``now``) its finish tag."""
    net._tags = seq = net._tags + 1
    entry = Entry(link._v + left, seq, flow, ())
    push(link._heap, entry)
    flow._entry = entry


def _rewake(net: Network, link: Link) -> None:
    """Move ``link``'s clock event to its first finish tag at its current level."""
    if link._clock_event is not None:
        net.engine.cancel(link._clock_event)
        link._clock_event = None
    wake(net, link)


def unfair_links(flows: dict[Flow, None], seeds: dict[Link, None],
                 stamp: int) -> dict[Link, None]:
    """Where the local fill is not max-min fair network-wide (empty: it is). Flows off the
    local links kept their rates and limits; what can break: a recomputed flow whose new
    bottleneck also carries a faster flow that was not recomputed, or a flow limited by a
    link whose load changed and that is no longer saturated or now carries a faster
    recomputed flow. Returned: those links (refilling their flows too may settle it)."""
    bad: dict[Link, None] = {}
    touched: dict[Link, None] = dict(seeds)  # links whose load may have changed
    for flow in flows:
        new = flow._new
        link = flow._nb
        if new != flow.rate:
            for lk in flow.links:
                touched[lk] = None
        elif link is flow._bn:
            continue  # same rate, same bottleneck, on which nobody else got faster
        if link in seeds or link in bad:
            continue  # every flow there was recomputed
        limit = new * (1.0 + TIE)
        for other in link.flows:  # type: ignore[union-attr]
            if other._loc != stamp and other.rate > limit:
                bad[link] = None  # type: ignore[index]
                break
    for lk in touched:
        if lk in bad:
            continue
        top = -1.0
        for other in lk._bn:
            if other._loc == stamp:
                continue
            if lk._rem > SATURATED * lk._total:
                bad[lk] = None
                break
            if top < 0.0:
                top = max([f._new for f in lk.flows if f._loc == stamp], default=0.0)
            if top > other.rate * (1.0 + TIE):
                bad[lk] = None
                break
    return bad
