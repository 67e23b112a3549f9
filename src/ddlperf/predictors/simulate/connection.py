"""A connection: messages from one node to another, back to back, each delivered α later.

Why: a worker sends its gradients for one PS shard over one TCP connection, one message after
another in the order they were produced; messages to different shards travel in parallel and
share the worker's uplink. Modelled as one network flow per busy connection (the allocation only
changes when a connection becomes busy or idle, see ``follow`` in :mod:`.network`), with the
per-message latency α added at the receiver: message k arrives at (its last byte sent) + α, so
latency is paid once per message but does not stall the pipe.

An *early* connection tells its receiver at the message's end, with the arrival time, instead
of calling it at the arrival: for receivers that only queue work behind the arrival (a shard's
updates, see :meth:`.compute.Processor.reserve`), which saves one event per message.

A message may also be queued ahead of time (:meth:`Connection.send_at`): it is sent as if
``send`` were called at its ready time (behind the messages before it, or at once on an idle
connection), so a worker can hand over the gradients of a whole chain of backward operations
when the chain starts instead of one event per operation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ddlperf.predictors.simulate.compute import OpRecord
from ddlperf.predictors.simulate.flows import checked_path
from ddlperf.predictors.simulate.network import Flow, Link, Network


class Receiver:
    """What an early connection tells at each message's end (:meth:`told`): a native call
    where the simulator is compiled, instead of a Python-level call of a bound method."""

    __slots__ = ()

    def told(self, payload: Any, arrival: float) -> None:
        raise NotImplementedError


class Message:
    """A message waiting on a connection: its size, tag and ready time, and the next one
    (the queue is a chain of these: native fields, no tuples or boxed floats per message)."""

    __slots__ = ("next", "ready", "size", "tag")

    def __init__(self, size: float, tag: Any, ready: float) -> None:
        self.size = size
        self.tag = tag
        self.ready = ready
        self.next: Message | None = None


class Connection:
    """FIFO message stream over ``links``; ``weight`` identical senders move together."""

    __slots__ = ("_deliver", "_early", "_engine", "_head", "_latency", "_links", "_net",
                 "_receiver", "_tail", "_weight", "flow", "log", "name")

    def __init__(
        self, net: Network, links: Sequence[Link], weight: float, latency: float,
        deliver: Callable[..., Any], name: str, log: list[OpRecord] | None = None,
        early: bool = False, receiver: Receiver | None = None,
    ) -> None:
        """``deliver(payload)`` at each message's arrival, or with ``early``
        ``deliver(payload, arrival)`` at the end of its last byte (``receiver.told(payload,
        arrival)`` instead, where given)."""
        self._net = net
        self._engine = net.engine
        self._links, self._weight = checked_path(links, weight)
        self._latency = latency
        self._deliver = deliver
        self._early = early
        self._receiver = receiver if early else None
        # the messages waiting, in the order of their ready times (first and last)
        self._head: Message | None = None
        self._tail: Message | None = None
        self.flow: Flow | None = None
        self.name = name
        self.log = log

    def _append(self, message: Message) -> None:
        tail = self._tail
        if tail is None:
            self._head = message
        else:
            tail.next = message
        self._tail = message

    def _pop(self) -> Message:
        head: Message = self._head  # type: ignore[assignment]  # (callers checked it)
        self._head = nxt = head.next
        if nxt is None:
            self._tail = None
        return head  # (its ``next`` is left: it is dropped once read)

    def send(self, size: float, payload: Any, label: str = "", iteration: int = -1) -> None:
        """Queue a message; ``deliver(payload)`` is called when it has arrived."""
        # A flow's tag: the payload, with the trace's label and iteration only where logged.
        tag = payload if self.log is None else (payload, label, iteration)
        if self.flow is None and self._head is None:
            self._start(size, tag)
        else:
            self._append(Message(size, tag, 0.0))  # ready: every queued message is

    def send_at(self, ready: float, size: float, payload: Any, label: str = "",
                iteration: int = -1) -> None:
        """Queue a message that is ready at ``ready`` (>= now and >= the ready time of every
        message queued before it): the same as :meth:`send` called then."""
        if self._head is None and self.flow is None:
            if ready <= self._engine.now:
                self.send(size, payload, label, iteration)
                return
            self._engine.post(ready, self._start_ready)
        self._append(Message(size, payload if self.log is None else (payload, label, iteration),
                             ready))

    def _start(self, size: float, tag: Any) -> None:
        self.flow = flow = self._net.start_checked(size, self._links, self._weight, self._ended,
                                                   tag, self._follow)
        flow.conn = self

    def _start_ready(self) -> None:
        """The first waiting message of an idle connection is ready: send it."""
        message = self._pop()
        self._start(message.size, message.tag)

    def next_message(self, flow: Flow) -> Message | None:
        """A message's last byte is sent: deliver it (α later) and hand over the next one, if
        one is ready (:func:`.clocks.finish` calls this directly)."""
        engine = self._engine
        now = engine.now
        if self.log is None:
            payload = flow.tag
        else:
            payload, label, iteration = flow.tag
            self.log.append((label, flow.start_time, now, iteration))
        if self._early:
            receiver = self._receiver
            if receiver is not None:
                receiver.told(payload, now + self._latency)
            else:
                self._deliver(payload, now + self._latency)
        elif self._latency > 0.0:
            engine.post(now + self._latency, self._deliver, payload)
        else:
            self._deliver(payload)
        head = self._head
        if head is not None and head.ready <= now:
            return self._pop()
        return None

    def _follow(self, flow: Flow) -> tuple[float, Any, float] | None:
        """:meth:`next_message` as the flow's ``follow`` hook (the per-flow network's)."""
        message = self.next_message(flow)
        return None if message is None else (message.size, message.tag, message.ready)

    def _ended(self, flow: Flow) -> None:
        self.flow = None
        head = self._head
        if head is not None:  # queued while the last message was being delivered, or not ready yet
            if head.ready > self._engine.now:
                self._engine.post(head.ready, self._start_ready)
            else:
                self._start_ready()
