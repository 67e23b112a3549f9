"""Flow-level network: flows share links max-min fairly, recomputed when a flow starts or ends.

Why flow level: packet simulation is far too slow for a what-if tool, and with per-sender fair
queueing (our emulated testbed) or long TCP flows the steady rates are close to the max-min fair
allocation. A :class:`Flow` moves ``size`` bytes over a tuple of :class:`Link` s; its rate is the
progressive-filling (water-filling) share; the network schedules each flow's completion on the
:class:`~ddlperf.predictors.simulate.engine.Engine` and reschedules it when the rate changes.

Symmetry, so that 1024-worker rings stay cheap:

* ``Flow.weight`` = k: the flow stands for k identical sub-flows. Each sub-flow gets ``rate``;
  together they consume ``k * rate`` of every link they cross.
* ``Link.copies`` = m: the link stands for m identical links (say, the uplinks of m identical
  workers). Its total capacity is ``m * capacity`` and the load on it is shared evenly among the
  copies. A ring step of N identical workers is thus one flow of weight N over an uplink and a
  downlink with ``copies=N`` each, and it gets the same rate as N separate flows would.

Cost: changes at the same instant are batched into one reallocation (run as a zero-delay event),
and only the connected component (links and flows reachable from the changed links) is
recomputed, in pure Python: faster than numpy for the tens of flows a component usually holds
(see ``benchmarks/bench_kernel.py``). :func:`max_min_rates` is a dense numpy reference of the
same allocation, used by the tests as an independent oracle. Noisy runs use the *local mode*
(:mod:`.clocks`): a single start or end is settled on one link when that is exact, else only
the changed links' flows are refilled, and completions come from one virtual clock per
bottleneck link instead of one event per flow.

Units: bytes and bytes per second (goodput, already applied by the caller), seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from math import inf, isfinite
from typing import Any, Final

from ddlperf.predictors.simulate.clocks import (
    apply_levels,
    bytes_left,
    quick_end,
    quick_start,
    unfair_links,
)
from ddlperf.predictors.simulate.engine import Engine
from ddlperf.predictors.simulate.flows import (
    Flow,
    FlowObserver,
    FollowHook,
    Link,
    Nic,
    _positive,
    checked_path,
)
from ddlperf.predictors.simulate.maxmin import SATURATED as _SATURATED
from ddlperf.predictors.simulate.maxmin import TIE as _TIE
from ddlperf.predictors.simulate.maxmin import max_min_dense, max_min_rates

#: local mode: refills with the links where the check failed added, before the component
WIDEN: Final = 3

__all__ = ["Flow", "Link", "Network", "Nic", "max_min_dense", "max_min_rates"]

class Network:
    """Links plus the active flows on them; rates are max-min fair, updated on every change."""

    def __init__(self, engine: Engine, observer: FlowObserver | None = None,
                 local: bool = False) -> None:
        self.engine = engine
        #: local mode: try the local reallocation first (see :meth:`_reallocate`) and time
        #: completions by one virtual clock per bottleneck link (see :meth:`_apply_clocked`);
        #: off: always the whole component and one event per flow, which keeps bit-identical
        #: ties between identical flows in noiseless runs
        self.local = local
        self.links: list[Link] = []
        #: called as ``observer(flow, start_time, end_time)`` when a flow completes
        self.observer = observer
        self.flows_completed = 0
        self.reallocations = 0
        self.local_misses = 0  # reallocations the local step could not settle (see _reallocate)
        self.widened = 0  # ... of which a wider local fill settled (the rest: the component)
        self._n_active = 0
        self._dirty: dict[Link, None] = {}  # links whose flow set changed since the last realloc
        self._realloc_pending = False
        self._stamp = 0
        self._mark = 0
        self._tags = 0  # finish tags handed out (their tie-breaking order)
        #: local mode: flows started (None) or ended (their last bottleneck) since the last
        #: reallocation, in order; each may be settled by moving one link's level (clocks.py)
        self._changes: list[tuple[Flow, Link | None]] = []
        self.quick = 0  # reallocations settled that way

    # -- topology -------------------------------------------------------------------------------

    def add_link(self, capacity: float, name: str | None = None, copies: int = 1) -> Link:
        """A link of ``capacity`` bytes/s (per copy); ``copies`` > 1 for symmetric aggregates."""
        index = len(self.links)
        link = Link(self.engine, index, capacity, name or f"link{index}", copies)
        self.links.append(link)
        return link

    def add_nic(self, name: str, up: float, down: float | None = None, copies: int = 1) -> Nic:
        """A full-duplex NIC: ``name.up`` and ``name.down`` links (``down`` defaults to ``up``)."""
        return Nic(
            self.add_link(up, f"{name}.up", copies),
            self.add_link(up if down is None else down, f"{name}.down", copies),
        )

    # -- flows ----------------------------------------------------------------------------------

    @property
    def active_flows(self) -> int:
        """Flows past their latency and not yet complete."""
        return self._n_active

    def start(
        self,
        size: float,
        links: Sequence[Link],
        *,
        latency: float = 0.0,
        weight: float = 1.0,
        on_complete: Callable[[Flow], Any] | None = None,
        tag: Any = None,
        follow: FollowHook | None = None,
    ) -> Flow:
        """Start a flow now; it becomes active after ``latency`` and calls ``on_complete(flow)``.

        ``links`` must be distinct. The completion time is ``latency + size / rate`` when the rate
        stays constant.

        ``follow`` makes the flow a connection that sends messages back to back: when a message
        ends, ``follow(flow)`` is called first (``flow.tag``/``size``/``start_time`` still describe
        the finished message) and returns ``(size, tag, ...)`` of the next message, or ``None``
        to end the flow normally (then ``observer`` and ``on_complete`` run as usual). A
        continued flow keeps its links and weight, so the max-min allocation is unchanged and
        no reallocation runs; ``observer`` is called once per message.
        """
        size = _positive("flow size", size)
        path, weight = checked_path(links, weight)
        latency = float(latency)
        if not (latency >= 0.0 and isfinite(latency)):
            raise ValueError(f"flow latency must be a finite number >= 0, got {latency!r}")
        flow = Flow(size, path, weight, latency, on_complete, tag, follow)
        flow.submit_time = self.engine.now
        if latency > 0.0:
            self.engine.schedule(latency, self._activate, flow)
        else:
            self._activate(flow)
        return flow

    def start_checked(self, size: float, path: tuple[Link, ...], weight: float,
                      on_complete: Callable[[Flow], Any] | None, tag: Any,
                      follow: FollowHook | None) -> Flow:
        """:meth:`start` without latency, for a caller that checked its ``path`` and
        ``weight`` once (:func:`checked_path`; a connection, for its every message)."""
        if type(size) is not float or not (size > 0.0 and size < inf):
            size = _positive("flow size", size)
        flow = Flow(size, path, weight, 0.0, on_complete, tag, follow)
        flow.submit_time = self.engine.now
        self._activate(flow)
        return flow

    def _activate(self, flow: Flow) -> None:
        now = self.engine.now
        flow.start_time = flow._last = now
        self._n_active += 1
        dirty = self._dirty
        for link in flow.links:
            if not link.flows:
                link._busy_since = now
            link.flows[flow] = None
            dirty[link] = None
        if self.local:
            self._changes.append((flow, None))
        if not self._realloc_pending:
            self._realloc_pending = True
            self.engine.post(now, self._reallocate)

    def _complete(self, flow: Flow) -> None:
        if flow.follow is not None:
            nxt = flow.follow(flow)
            if nxt is not None:
                self._continue(flow, nxt[0], nxt[1])
                return
        self._end(flow)

    def _end(self, flow: Flow) -> None:
        """``flow`` has sent everything and has no next message: take it off its links."""
        now = self.engine.now
        flow._event = flow._entry = None
        flow.remaining = 0.0
        used = flow.weight * flow.rate
        flow.rate = 0.0
        flow.end_time = now
        if self.local:
            self._changes.append((flow, flow._bn))
            if flow._bn is not None:
                flow._bn._bw -= flow.weight
        if flow._bn is not None:
            del flow._bn._bn[flow]
            flow._bn = None
        self._n_active -= 1
        self.flows_completed += 1
        moved = flow.weight * flow.size
        dirty = self._dirty
        for link in flow.links:
            flows = link.flows
            del flows[flow]
            link._load -= used
            link.bytes += moved
            if not flows:
                link._busy_acc += now - link._busy_since  # type: ignore[operator]
                link._busy_since = None
            dirty[link] = None
        if not self._realloc_pending:
            self._realloc_pending = True
            self.engine.post(now, self._reallocate)
        if self.observer is not None:
            self.observer(flow, flow.start_time, now)
        if flow.on_complete is not None:
            flow.on_complete(flow)

    def _continue(self, flow: Flow, size: float, tag: Any) -> None:
        """End the current message of a ``follow`` flow and start its next one in place,
        with a completion event at its rate (the local mode's clocks tag it instead,
        :func:`.clocks.finish`)."""
        self._next_message(flow, size, tag)
        flow._event = self.engine.post(flow._last + size / flow.rate, self._complete, flow)

    def _next_message(self, flow: Flow, size: float, tag: Any) -> None:
        """Account for the message of ``flow`` that just ended (bytes on its links, the
        observer) and make ``size`` bytes tagged ``tag`` its current message, from now."""
        if not (size > 0.0 and size < inf):
            size = _positive("flow size", size)  # raises
        now = self.engine.now
        self.flows_completed += 1
        moved = flow.weight * flow.size
        for link in flow.links:
            link.bytes += moved
        if self.observer is not None:
            self.observer(flow, flow.start_time, now)
        flow.size = flow.remaining = size
        flow.tag = tag
        flow.submit_time = flow.start_time = flow._last = now

    # -- allocation -----------------------------------------------------------------------------

    def _reallocate(self) -> None:
        """New max-min rates after flows started or ended on the changed ("dirty") links.

        Local mode: each change in turn on one link where exact (:func:`.clocks.quick_start`,
        :func:`.clocks.quick_end`); then locally: recompute only the flows on the dirty links,
        against what the other flows leave of each link, and check the result is max-min fair
        for the whole network (every flow limited by a saturated link on which no flow is
        faster, see :func:`.clocks.unfair_links`). The max-min fair allocation is unique, so
        a local result that passes is the allocation. When the change reaches further (a flow
        that speeds up takes capacity another flow was limited by), the fill is run again with
        the links where the check failed added (up to ``WIDEN`` times), and only then over the
        whole connected component, as always before (and always outside local mode).
        """
        self._realloc_pending = False
        self.reallocations += 1
        if self.local:
            # One change after another from a max-min state stays one; the first that does
            # not settle on one link leaves the rest to the local fill (their flows are on
            # the dirty links, pending as before).
            changes = self._changes
            self._changes = []
            for flow, link in changes:
                if not (quick_start(self, flow) if link is None else quick_end(self, flow, link)):
                    break
            else:
                self._dirty = {}
                self.quick += 1
                return
        seeds = self._dirty
        self._dirty = {}
        self._stamp = stamp = self._stamp + 1
        if not self.local:
            flows, links = self._component(seeds, stamp)
            if flows:
                self._fill(links, stamp)
            self._apply(flows, links)
            return
        flows, links = self._local(seeds, stamp)
        if flows:
            self._fill(links, stamp)
            bad = unfair_links(flows, seeds, stamp)
            if bad:
                self.local_misses += 1
                for _ in range(WIDEN):
                    # Refill with the links where the check failed added (their flows too).
                    seeds = {**seeds, **bad}
                    flows, links = self._local(seeds, stamp)
                    self._fill(links, stamp)
                    bad = unfair_links(flows, seeds, stamp)
                    if not bad:
                        self.widened += 1
                        break
                else:
                    flows, links = self._component(seeds, stamp)
                    self._fill(links, stamp)
        for link in seeds:
            if link not in links:
                links[link] = None  # emptied: nothing to allocate, but saturation to close
                link._rem = link._total
        self._apply(flows, links)

    def _local(self, seeds: dict[Link, None],
               stamp: int) -> tuple[dict[Flow, None], dict[Link, None]]:
        """The flows on ``seeds`` and their links, set up for a fill against what the other
        flows leave of each link."""
        flows: dict[Flow, None] = {}
        for link in seeds:
            for flow in link.flows:
                flows[flow] = None
        links: dict[Link, None] = {}
        for flow in flows:
            flow._loc = stamp
            for link in flow.links:
                if link not in links:
                    links[link] = None
                    link._rem = link._total - link._load
                    link._w = 0.0
                    link._n = 0
        for flow in flows:
            w = flow.weight
            used = w * flow.rate
            for link in flow.links:
                link._rem += used
                link._w += w
                link._n += 1
        return flows, links

    def _component(self, seeds: dict[Link, None],
                   stamp: int) -> tuple[dict[Flow, None], dict[Link, None]]:
        """Links and flows reachable from ``seeds``, set up for a fill from scratch."""
        links: dict[Link, None] = dict(seeds)
        flows: dict[Flow, None] = {}
        stack = [link for link in seeds if link.flows]
        while stack:
            for flow in stack.pop().flows:
                if flow not in flows:
                    flows[flow] = None
                    flow._loc = stamp
                    for other in flow.links:
                        if other not in links:
                            links[other] = None
                            stack.append(other)
        for link in links:
            link._rem = link._total
            link._n = len(link.flows)
            w = 0.0
            for flow in link.flows:
                w += flow.weight
            link._w = w
        return flows, links

    def _fill(self, links: Iterable[Link], stamp: int) -> None:
        """Water-filling of the flows stamped ``_loc == stamp`` on ``links`` (``_rem``, ``_w``,
        ``_n`` set up: capacity left for them, their weight and number): raise their rates
        together; the link with the lowest fair level (capacity left / weight of unfrozen
        flows) saturates first and freezes its flows, which it records as their bottleneck."""
        self._mark = mark = self._mark + 1
        live = [link for link in links if link._n > 0]
        while live:
            best = inf
            for link in live:
                level = link._rem / link._w
                if level < best:
                    best = level
            tie = best * (1.0 + _TIE)
            for link in [link for link in live if link._rem / link._w <= tie]:
                for flow in link.flows:
                    if flow._loc == stamp and flow._mark != mark:
                        flow._mark = mark
                        flow._new = best
                        flow._nb = link
                        w = flow.weight
                        used = w * best
                        for other in flow.links:
                            other._rem -= used
                            other._w -= w
                            other._n -= 1
            live = [link for link in live if link._n > 0]

    def _apply(self, flows: dict[Flow, None], links: dict[Link, None]) -> None:
        """Record loads and saturation of ``links``; give ``flows`` their new rates and move
        their completion events where the rate changed."""
        engine = self.engine
        now = engine.now
        for link in links:
            rem = link._rem
            link._load = link._total - rem
            if link.flows and rem <= _SATURATED * link._total:
                if link._sat_since is None:
                    link._sat_since = now
            elif link._sat_since is not None:
                link._sat_acc += now - link._sat_since
                link._sat_since = None
        if self.local:
            apply_levels(self, flows, links, now)
            return
        cancel = engine.cancel
        at = engine.post
        complete = self._complete
        for flow in flows:
            bottleneck = flow._nb
            if bottleneck is not flow._bn:
                if flow._bn is not None:
                    del flow._bn._bn[flow]
                bottleneck._bn[flow] = None  # type: ignore[union-attr]
                flow._bn = bottleneck  # (``_others`` is read only in local mode)
            new = flow._new
            old = flow.rate
            if new == old:
                continue
            if old > 0.0:
                remaining = flow.remaining - old * (now - flow._last)
                flow.remaining = remaining = remaining if remaining > 0.0 else 0.0
            else:
                remaining = flow.remaining
            flow._last = now
            flow.rate = new
            if flow._event is not None:
                cancel(flow._event)
            flow._event = at(now + remaining / new, complete, flow)

    def delivered(self, link: Link) -> float:
        """Bytes over ``link`` (all copies) so far: completed flows plus progress of active ones."""
        now = self.engine.now
        if self.local:
            return link.bytes + sum(f.weight * (f.size - bytes_left(f, now)) for f in link.flows)
        return link.bytes + sum(
            f.weight * (f.size - f.remaining + f.rate * (now - f._last)) for f in link.flows
        )

    def reset_accounting(self) -> None:
        """Zero every link's bytes, busy and saturated time from ``now`` (to drop a warm-up)."""
        now = self.engine.now
        for link in self.links:
            link.bytes = 0.0
            link.bytes = -self.delivered(link)  # in-flight bytes before now are not counted
            link._busy_acc = link._sat_acc = 0.0
            if link._busy_since is not None:
                link._busy_since = now
            if link._sat_since is not None:
                link._sat_since = now

    def sent(self, flow: Flow) -> float:
        """Bytes per sub-flow delivered so far (for progress queries mid-flight)."""
        if flow.end_time == flow.end_time:
            return flow.size
        if self.local:
            return flow.size - bytes_left(flow, self.engine.now)
        return flow.size - flow.remaining + flow.rate * (self.engine.now - flow._last)
