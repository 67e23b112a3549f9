"""The flow network's data types: a :class:`Link` (or several identical ones), a :class:`Nic`
and a :class:`Flow` (or several identical sub-flows); :class:`~.network.Network` allocates their
rates and runs them (see its module for the model and the symmetry rules).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from math import isfinite
from typing import TYPE_CHECKING, Any, NamedTuple

from ddlperf.predictors.simulate.engine import Engine, Entry, Handle

if TYPE_CHECKING:
    from ddlperf.predictors.simulate.connection import Connection

__all__ = ["Flow", "FlowObserver", "FollowHook", "Link", "Nic", "checked_path"]

FlowObserver = Callable[["Flow", float, float], None]
#: ``follow(flow) -> (size, tag, ...) | None``: the next message of a back-to-back connection
FollowHook = Callable[["Flow"], "tuple[Any, ...] | None"]



def checked_path(links: Iterable[Link], weight: float) -> tuple[tuple[Link, ...], float]:
    """A flow's links as a tuple and its weight as a float, checked (distinct links, at
    least one; weight positive and finite)."""
    weight = _positive("flow weight", weight)
    path = tuple(links)
    if not path:
        raise ValueError("a flow must cross at least one link")
    if len(set(path)) != len(path):
        raise ValueError(f"a flow must not cross a link twice: {path!r}")
    return path, weight


def _positive(name: str, value: float) -> float:
    value = float(value)
    if not (value > 0.0 and isfinite(value)):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return value


class Link:
    """A directed link (or ``copies`` identical ones) with accounting for utilisation reports.

    ``bytes`` counts the payload of completed flows summed over all copies (since the last
    :meth:`Network.reset_accounting`; a flow in flight at the reset counts only the part after
    it); :meth:`Network.delivered` adds the progress of flows in flight. ``busy_time`` is the
    time it carried at least one active flow; ``saturated_time`` the time its capacity was fully
    allocated (it was a bottleneck). Both include the interval still open at ``engine.now``.
    ``capacity`` (bytes/s per copy) and ``copies`` are fixed once the link exists.
    """

    __slots__ = (
        "_bn",
        "_busy_acc",
        "_busy_since",
        "_bw",
        "_clock_event",
        "_engine",
        "_heap",
        "_load",
        "_n",
        "_rem",
        "_sat_acc",
        "_sat_since",
        "_seen",
        "_total",
        "_v",
        "_vt",
        "_w",
        "bytes",
        "capacity",
        "copies",
        "flows",
        "index",
        "level",
        "name",
    )

    def __init__(
        self, engine: Engine, index: int, capacity: float, name: str, copies: float = 1
    ) -> None:
        self._engine = engine
        self.index = index
        self.name = name
        self.capacity = _positive(f"link {name!r} capacity", capacity)
        if int(copies) != copies or copies < 1:
            raise ValueError(f"link {name!r} copies must be an integer >= 1, got {copies!r}")
        self.copies = int(copies)
        self._total = self.capacity * self.copies  # capacity of all copies together
        self.flows: dict[Flow, None] = {}  # active flows, in activation order (deterministic)
        self.bytes = 0.0
        self._busy_acc = 0.0
        self._busy_since: float | None = None
        self._sat_acc = 0.0
        self._sat_since: float | None = None
        self._load = 0.0  # Σ weight × rate of the active flows (all copies)
        self._bn: dict[Flow, None] = {}  # active flows whose bottleneck this link is
        self._rem = 0.0  # scratch for progressive filling: capacity left (all copies)
        self._w = 0.0  # scratch: weight of the flows not yet frozen
        self._n = 0  # scratch: number of flows not yet frozen
        # Virtual clock (local mode, see Network): the flows bottlenecked here all run at
        # ``level`` bytes/s per sub-flow; ``_v`` is the bytes per sub-flow such a flow has sent
        # since the clock's origin, as of time ``_vt``; ``_heap`` holds their finish tags
        # (entries: time = bytes, item = flow, None: stale), ``_clock_event`` fires at the first.
        self.level = 0.0
        self._bw = 0.0  # weight of the flows bottlenecked here (local mode)
        self._seen = 0  # scratch stamp of the quick settlement (see clocks.py)
        self._v = 0.0
        self._vt = 0.0
        self._heap: list[Entry] = []
        self._clock_event: Handle | None = None

    @property
    def busy_time(self) -> float:
        """Seconds during which at least one active flow crossed this link."""
        since = self._busy_since
        return self._busy_acc + (0.0 if since is None else self._engine.now - since)

    @property
    def saturated_time(self) -> float:
        """Seconds during which the link's capacity was fully allocated."""
        since = self._sat_since
        return self._sat_acc + (0.0 if since is None else self._engine.now - since)

    def utilisation(self, span: float) -> float:
        """Completed bytes over what the link (all copies) could carry in ``span`` seconds."""
        return self.bytes / (self.capacity * self.copies * span) if span > 0 else 0.0

    def __repr__(self) -> str:
        copies = f" x{self.copies}" if self.copies != 1 else ""
        return f"Link({self.name!r}, {self.capacity:.6g} B/s{copies})"


class Nic(NamedTuple):
    """A node's full-duplex network interface: traffic it sends uses ``up``, receives ``down``."""

    up: Link
    down: Link


class Flow:
    """``size`` bytes (per sub-flow) over ``links``; ``weight`` identical sub-flows move together.

    Times: ``submit_time`` (when started), ``start_time`` (active, after the latency),
    ``end_time`` (completed), each ``nan`` until reached. ``rate`` is bytes/s per sub-flow.
    ``tag`` is free for the caller (a trace label, the tensor, ...).
    """

    __slots__ = (
        "_bn",
        "_entry",
        "_event",
        "_last",
        "_loc",
        "_mark",
        "_nb",
        "_new",
        "_others",
        "conn",
        "end_time",
        "follow",
        "latency",
        "links",
        "on_complete",
        "rate",
        "remaining",
        "size",
        "start_time",
        "submit_time",
        "tag",
        "weight",
    )

    def __init__(
        self,
        size: float,
        links: tuple[Link, ...],
        weight: float,
        latency: float,
        on_complete: Callable[[Flow], Any] | None,
        tag: Any,
        follow: FollowHook | None = None,
    ) -> None:
        self.size = size
        self.follow = follow
        #: the connection whose messages it carries (its ``follow``, called natively)
        self.conn: Connection | None = None
        self.links = links
        self.weight = weight
        self.latency = latency
        self.on_complete = on_complete
        self.tag = tag
        self.rate = 0.0
        self.remaining = size  # bytes per sub-flow left at time ``_last``
        self.submit_time = self.start_time = self.end_time = float("nan")
        self._last = 0.0
        self._event: Handle | None = None
        self._entry: Entry | None = None  # local mode: its finish tag in ``_bn._heap``
        self._mark = 0  # reallocation stamp (frozen in the current round)
        self._loc = 0  # reallocation stamp (its rate is being recomputed)
        self._new = 0.0  # scratch: rate from the current reallocation
        self._bn: Link | None = None  # the link that limits its rate (a bottleneck)
        self._nb: Link | None = None  # scratch: bottleneck from the current reallocation
        self._others: tuple[Link, ...] = ()  # local mode: its links but ``_bn`` (set with it)

    @property
    def active(self) -> bool:
        """True from the end of the latency until completion."""
        return self.start_time == self.start_time and self.end_time != self.end_time

    def __repr__(self) -> str:
        w = f" x{self.weight:g}" if self.weight != 1 else ""
        return f"Flow({self.size:.6g} B{w}, tag={self.tag!r})"
