"""Parameter server, fine-grained: per-tensor push, aggregation, update and pull as events.

Dependencies (overlap on, WFBP):

* push: when backward of a layer ends, its tensors' gradients go out at once, one message per
  (tensor, shard holding a part of it) on the worker's connection to that shard;
* aggregation: BSP updates a tensor's part once all N workers' gradients of it arrived; ASP and
  SSP update on every arrival (so N updates per tensor and iteration);
* update: on the shard's compute stream (its host's stream when colocated), FIFO;
* pull: right after the update (BSP: to every worker; ASP/SSP: to the worker that pushed), on
  the shard's connection to the worker;
* forward of a layer waits for all parts of its tensors.

Overlap off: the worker pushes everything when backward ends, and pulls everything (forward
order) once the shards holding it have applied all their updates of the iteration (BSP) or all
of its own (ASP/SSP; under SSP each shard's whole read then passes the staleness gate): a shard
answers its pulls once its own work is done (:mod:`ddlperf.predictors.shard_release`). Forward
starts when all parameters are back. That is the schedule the
analytic BSP model describes, which is why the two agree there. A step barrier (BSP) holds
every pull until every update of the iteration is done, then sends them in gradient order;
forward still starts layer by layer with overlap.

SSP(s): the shard's read rule of :mod:`.ssp` (Ho et al. 2013, per tensor): the pull of a
tensor's version c to a worker waits until every worker's gradients of it up to iteration
c − s − 1 are applied. SSP(0) is run as BSP (they are the same protocol).

A colocated shard shares its host's NIC; its updates run on the host's CPU, beside the
worker's accelerator stream (a PS server is a CPU process), as the analytic model and the
emulated cluster have them. Its host's own gradients and parameters do not cross the network.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from ddlperf.predictors.simulate.aggregation import LocalAggregation
from ddlperf.predictors.simulate.compute import Processor
from ddlperf.predictors.simulate.connection import Connection, Receiver
from ddlperf.predictors.simulate.connection_caps import ConnectionCaps
from ddlperf.predictors.simulate.engine import Engine
from ddlperf.predictors.simulate.fabric import ServerLinks, merged_pulls, server_link_shares
from ddlperf.predictors.simulate.network import Link, Network, Nic
from ddlperf.predictors.simulate.ps_worker import PSWorker
from ddlperf.predictors.simulate.record import Recorder
from ddlperf.predictors.simulate.ssp import StalenessGate
from ddlperf.predictors.simulate.tracks import TrackLog, connection_tracks
from ddlperf.predictors.simulate.units import Unit
from ddlperf.predictors.simulate.update_busy import UpdateBusy
from ddlperf.predictors.simulate.worker import unit_operations
from ddlperf.predictors.timeline import forward_order
from ddlperf.scenario import Scenario


class PSModel:
    """Builds the workers, shards, NICs and connections of one run and routes their events."""

    def __init__(
        self, sc: Scenario, units: list[Unit], engine: Engine, net: Network, recorder: Recorder,
        jitter: float | None, rngs: list[np.random.Generator] | None, log: TrackLog | None,
    ) -> None:
        self.sc = sc
        self.engine = engine
        self.net = net
        self.units, self.counts = units, [unit.count for unit in units]  # (counts: native)
        # (typed: the compiled simulator stores them natively, see setup.py)
        self.sync: str = sc.strategy.effective_sync
        self.staleness: int = sc.strategy.staleness or 0
        self.overlap: bool = sc.strategy.overlap
        self.barrier: bool = sc.strategy.step_barrier  # BSP: pulls wait for every update
        alpha = sc.latency_s
        placement = sc.placement
        self.n_tensors = n_tensors = len(sc.tensor_bytes)
        self.n_layers = len(sc.workload.layers)
        self.n_workers: int = sc.worker_count
        self.tensor_layer = [int(x) for x in sc.tensor_layer]
        self.tensor_names: tuple[str, ...] = sc.tensor_names
        # parts[j] = [(shard, bytes)] of tensor j (gradient order)
        self.parts = [[(int(k), float(placement[j, k])) for k in np.flatnonzero(placement[j] > 0)]
                      for j in range(n_tensors)]
        self.part_bytes = [[dict(parts).get(k, 0.0) for k in range(len(sc.shards))]
                           for parts in self.parts]  # [j][k]: bytes on shard k (a list: native)
        self.layer_parts = [0] * self.n_layers
        self.layer_tensors: list[list[int]] = [[] for _ in range(self.n_layers)]
        for j in range(n_tensors):
            self.layer_parts[self.tensor_layer[j]] += len(self.parts[j])
            self.layer_tensors[self.tensor_layer[j]].append(j)
        self.total_parts = sum(self.layer_parts)
        self.gradient_tensors = list(range(n_tensors))
        # overlap off: each shard's parts (BSP: its updates left this iteration; shards not
        # done per tensor), and its tensors in forward order (its pulls go out in that order)
        self.shard_parts = [0] * len(sc.shards)
        self.shard_forward: list[list[int]] = [[] for _ in sc.shards]
        for j in forward_order(sc).tolist():
            for k, _size in self.parts[j]:
                self.shard_parts[k] += 1
                self.shard_forward[k].append(j)
        self.shard_left = list(self.shard_parts)
        self.holders_left = [len(parts) for parts in self.parts]
        self.shard_update = [s.update_s_per_byte for s in sc.shards]
        self.log = log

        # Nodes: a compute stream per unit; fabric, NIC and rack links as the servers have
        # them; every shard its own update processor, dedicated shards their own NIC.
        merged = merged_pulls(sc, units)
        self.links = links = ServerLinks(sc, units, net, shared_down=merged)
        self.workers: list[PSWorker] = []
        for unit in units:
            records = None if log is None else log.add(unit.names, "compute", "compute")
            proc = Processor(engine, unit.label, records)
            ops, durations, labels = unit_operations(
                sc, unit, 0.0, jitter, None if rngs is None else rngs[unit.index])
            worker = PSWorker(engine, unit, proc, durations, ops, labels, recorder)
            worker.setup(self)
            self.workers.append(worker)
        host_unit = {u.hosts: u.index for u in units if u.hosts is not None}
        self.shard_nic: list[Nic] = []
        self.shard_proc: list[Processor] = []
        self.shard_host: list[int | None] = []
        for shard in sc.shards:
            host = host_unit.get(shard.index)
            self.shard_host.append(host)
            if host is None:
                self.shard_nic.append(net.add_nic(shard.name, shard.up, shard.down))
            else:
                self.shard_nic.append(links.host_nic(shard))
            records = None if log is None else log.add([shard.name], "update", "update")
            self.shard_proc.append(Processor(engine, shard.name, records))
        self.update_busy = UpdateBusy(len(sc.shards))

        # Connections: worker unit → shard (push) and shard → recipient (pull); none where
        # no link lies between them (a one-GPU host and its own shard). A recipient is a unit,
        # or with merged BSP pulls all units of a group (see merged_pulls). The transport's
        # cap is one more link on each connection's path.
        if merged:
            groups: dict[int, list[int]] = {}
            for unit in units:
                groups.setdefault(id(unit.group), []).append(unit.index)
            self.recipients = list(groups.values())
        else:
            self.recipients = [[unit.index] for unit in units]
        # Noisy runs (no exact ties to keep in order) book a dedicated shard's updates when a
        # gradient's last byte is sent: every gradient reaches it α later, so in that order.
        self.early = [net.local and host is None for host in self.shard_host]
        # ... and count a pulled part when its last byte is sent (the worker's forward waits
        # for its arrival; not with local aggregation, whose all-gather starts there).
        early_pulls = net.local and not sc.strategy.local_aggregation
        self.self_wake = early_pulls  # see PSWorker.gate_closed
        pulled = self._pulled_early if early_pulls else self._pulled
        pushes, pulls = _Ends(self, True), _Ends(self, False)
        self.caps = caps = ConnectionCaps(sc, net)
        self.push_conn: list[list[Connection | None]] = []
        self.pull_conn: list[list[Connection | None]] = [[] for _ in sc.shards]
        for unit in units:
            row: list[Connection | None] = []
            for shard in sc.shards:
                k = shard.index
                to_shard = links.to_shard(unit.index, shard, self.shard_nic[k])
                if not to_shard:
                    row.append(None)
                    if not merged:
                        self.pull_conn[k].append(None)
                    continue
                up = connection_tracks(log, unit, shard.name, "push")
                early = self.early[k]
                row.append(Connection(net, to_shard + caps.link(unit, shard, "push")
                                      + caps.shard_receive(shard),
                                      unit.count, alpha,
                                      self._pushed_early if early else self._pushed,
                                      f"{unit.label}→{shard.name}", up, early, pushes))
                if not merged:
                    down = connection_tracks(log, unit, shard.name, "pull")
                    from_shard = links.from_shard(unit.index, shard, self.shard_nic[k])
                    self.pull_conn[k].append(Connection(
                        net, from_shard + caps.link(unit, shard, "pull")
                        + caps.worker_receive(unit, unit.index, unit.count), unit.count,
                        alpha, pulled, f"{shard.name}→{unit.label}", down, early_pulls,
                        pulls))
            self.push_conn.append(row)
        if merged:
            for shard in sc.shards:
                for members in self.recipients:
                    first = units[members[0]]
                    count = sum(units[v].count for v in members)
                    down = None
                    for v in members:  # every worker keeps its own trace rows
                        down = connection_tracks(log, units[v], shard.name, "pull", down)
                    path = links.group_from_shard(first, self.shard_nic[shard.index])
                    self.pull_conn[shard.index].append(Connection(
                        net, path + caps.link(first, shard, "pull", copies=count)
                        + caps.worker_receive(first, ("group", members[0]), count), count,
                        alpha, pulled, f"{shard.name}→{first.group.name}", down,
                        early_pulls, pulls))
        self.local = LocalAggregation(self, alpha) if sc.strategy.local_aggregation else None
        # Noisy runs with overlap, every shard dedicated and no local aggregation: a worker's
        # backward runs as one chain whose gradients are queued on the push connections when
        # it starts, each ready at its operation's end (Connection.send_at: sent as if pushed
        # then). One event per chain instead of one per backward operation with tensors.
        ahead = (net.local and self.overlap and self.local is None and all(self.early))
        for worker in self.workers:
            worker.ahead = ahead
            worker.pushes = self._layer_pushes(worker.unit.index) if ahead else []
        # ... and under ASP a shard's update, booked at the gradient's last byte, queues its
        # pull to be sent at its end, without an event there (the busy time is counted by
        # UpdateBusy; not when tracing, whose update records are written at their ends).
        self.pull_ahead = ahead and self.sync != "bsp" and log is None
        self._at: float | None = None  # the end of the update being booked that way

        # Aggregation state.
        n = self.n_workers
        self.pending = [[n] * n_tensors for _ in sc.shards]  # BSP: gradients still expected
        self.updates_left = self.total_parts  # BSP, step barrier: updates left this iteration
        self.recorder = recorder
        self.gate = (StalenessGate(self.staleness, len(units), self._released, self._held)
                     if self.sync == "ssp" else None)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, starts: list[float] | None = None) -> None:
        """Start every worker now, or worker ``u`` ``starts[u]`` seconds from now."""
        if starts is None:
            for worker in self.workers:
                worker.start()
            return
        for worker, delay in zip(self.workers, starts, strict=True):
            self.engine.schedule(delay, worker.start)

    def on_warm(self) -> None:
        self.update_busy.warm(self.engine.now)

    # -- SSP read rule -------------------------------------------------------------------------

    def _may_read(self, j: int, k: int, u: int, t: int) -> None:
        """Worker ``u``'s own gradient of part (j, k) from iteration ``t`` is applied: its read
        of version t + 1 goes out now (ASP) or once the staleness bound allows (SSP)."""
        if self.gate is None:
            self._send_pull(j, k, u, t)
        else:
            self.gate.applied((j, k), k, u, self.engine.now)

    def _may_read_shard(self, u: int, k: int, t: int) -> None:
        """Overlap off: shard ``k`` applied all of ``u``'s own gradients of iteration ``t``
        (a shard answers a worker's pulls once its own updates are done)."""
        if self.gate is None:
            self._pull_shard(u, k, t)
        else:
            self.gate.applied(-1 - k, k, u, self.engine.now)  # an int key: shard k, whole

    def _pull_shard(self, u: int, k: int, t: int) -> None:
        """Overlap off, ASP/SSP: ``u``'s reads of shard ``k``'s tensors (forward order), each
        once every shard holding part of it let it read."""
        left = self.workers[u].read_left
        for j in self.shard_forward[k]:
            left[j] -= 1
            if left[j] == 0:
                left[j] = len(self.parts[j])
                for kk, _ in self.parts[j]:
                    self._send_pull(j, kk, u, t)

    def _released(self, key: object, u: int, version: int) -> None:
        if isinstance(key, int):  # overlap off: shard -1 - key, whole
            self._pull_shard(u, -1 - key, version - 1)
            return
        j, k = cast("tuple[int, int]", key)
        if self._at is None:
            self._send_pull(j, k, u, version - 1)
        else:
            self._pull_at(j, k, u, version - 1, self._at)

    def _held(self, u: int, version: int, seconds: float) -> None:
        self.recorder.held(u, version, seconds, self._at)

    # -- push → aggregate → update → pull -----------------------------------------------------

    def push(self, worker: PSWorker, j: int, t: int) -> None:
        u = worker.index
        if self.local is not None and self.local.applies[u]:
            self.local.gradient_ready(u, j, t)
            return
        self.push_parts(u, j, t, 1)

    def _layer_pushes(self, u: int) -> list[list[tuple[Connection, float, int, int, str]]]:
        """Per layer: unit ``u``'s gradient messages (connection, bytes, tensor, shard, name) in
        push order, for chains that queue them ahead (``ahead``: dedicated shards)."""
        row = self.push_conn[u]
        return [[(row[k], size, j, k, self.tensor_names[j])  # type: ignore[misc]
                 for j in tensors for k, size in self.parts[j]] for tensors in self.layer_tensors]

    def push_parts(self, u: int, j: int, t: int, slices: int) -> None:
        """Send unit ``u``'s gradient of tensor ``j`` (each GPU 1/``slices`` of it) to its
        shards."""
        row = self.push_conn[u]
        for k, size in self.parts[j]:
            if slices > 1:
                size /= slices
            conn = row[k]
            if conn is None:  # the colocated shard on this worker's own host
                self._arrive(j, k, u, 1, t)
            else:
                conn.send(size, (j, k, u, t), self.tensor_names[j], t)

    def _pushed(self, payload: tuple[int, int, int, int]) -> None:
        j, k, u, t = payload
        self._arrive(j, k, u, self.counts[u], t)

    def _pushed_early(self, payload: tuple[int, int, int, int], arrival: float) -> None:
        """:meth:`_pushed` told at the message's end: it arrives at ``arrival``, where the
        shard's update is booked (the same times as :meth:`_arrive` and :meth:`_update` at
        the arrival, one event fewer per gradient)."""
        j, k, u, t = payload
        if self.sync == "bsp":
            left = self.pending[k][j] - self.counts[u]
            if left > 0:
                self.pending[k][j] = left
                return
            self.pending[k][j] = self.n_workers
            u = -1
        duration = self.part_bytes[j][k] * self.shard_update[k]
        if duration <= 0.0:
            self.engine.post(arrival, self._updated, j, k, u, t, 0.0)
            return
        proc = self.shard_proc[k]
        if self.pull_ahead:  # (u >= 0: ASP or SSP) what _updated does at the end, told now
            end = proc.book(arrival, duration)
            self.update_busy.booked(k, end, duration, self.engine.now)
            if self.gate is None:
                self._pull_at(j, k, u, t, end)
            else:  # the gate sees a shard's updates in the order they end, as before
                self._at = end
                self.gate.applied((j, k), k, u, end)
                self._at = None
            return
        label = "" if proc.log is None else self._update_label(j, u)
        proc.reserve(arrival, duration, self._updated, (j, k, u, t, duration), label, t)

    def _update_label(self, j: int, u: int) -> str:
        return f"update {self.tensor_names[j]}" + (f" (w{self.units[u].first})" if u >= 0 else "")

    def _arrive(self, j: int, k: int, u: int, count: int, t: int) -> None:
        if self.sync == "bsp":
            left = self.pending[k][j] - count
            if left > 0:
                self.pending[k][j] = left
                return
            self.pending[k][j] = self.n_workers
            self._update(j, k, -1, t)
        else:
            self._update(j, k, u, t)

    def _update(self, j: int, k: int, u: int, t: int) -> None:
        duration = self.part_bytes[j][k] * self.shard_update[k]
        if duration <= 0.0:
            self._updated(j, k, u, t, 0.0)
            return
        proc = self.shard_proc[k]
        label = "" if proc.log is None else self._update_label(j, u)  # trace only
        proc.submit(duration, self._updated, (j, k, u, t, duration), label, t)

    def _updated(self, j: int, k: int, u: int, t: int, duration: float) -> None:
        self.update_busy.ended(k, self.engine.now, duration)
        if u < 0:  # BSP: every worker gets the new value
            if self.overlap and not self.barrier:
                for v in range(len(self.recipients)):
                    self._send_pull(j, k, v, t)
            elif not self.barrier:
                self.shard_left[k] -= 1
                if self.shard_left[k] == 0:
                    self.shard_left[k] = self.shard_parts[k]
                    self._shard_done(k, t)
            else:
                self.updates_left -= 1
                if self.updates_left == 0:
                    self.updates_left = self.total_parts
                    for v in range(len(self.recipients)):
                        self._pull_all(v, t)
        elif self.overlap:
            self._may_read(j, k, u, t)
        else:
            own = self.workers[u].own_left
            own[k] -= 1
            if own[k] == 0:
                self._may_read_shard(u, k, t)

    def _shard_done(self, k: int, t: int) -> None:
        """BSP, overlap off: shard ``k`` applied all its updates of iteration ``t``; the
        tensors whose shards are now all done go out to every recipient (forward order)."""
        ready: list[int] = []
        holders_left = self.holders_left
        for j in self.shard_forward[k]:
            holders_left[j] -= 1
            if holders_left[j] == 0:
                holders_left[j] = len(self.parts[j])
                ready.append(j)
        for v in range(len(self.recipients)):
            for j in ready:
                for kk, _ in self.parts[j]:
                    self._send_pull(j, kk, v, t)

    def _pull_all(self, u: int, t: int) -> None:
        """After a step barrier, every part recipient ``u`` needs, in the order the shards
        applied them (gradient order), as the analytic model's FIFOs have it. (Without overlap
        and no barrier the shards send theirs one by one: :meth:`_shard_done`.)"""
        for j in self.gradient_tensors:
            for k, _ in self.parts[j]:
                self._send_pull(j, k, u, t)

    def _send_pull(self, j: int, k: int, u: int, t: int) -> None:
        """Part (j, k) to recipient ``u`` (a unit, except with merged BSP pulls)."""
        conn = self.pull_conn[k][u]
        if conn is None:  # own host: no network
            self._got(j, u)
            return
        size = self.part_bytes[j][k]
        if self.local is not None and self.local.applies[u]:
            size /= self.units[u].group.gpus  # each GPU pulls its slice
        conn.send(size, (j, u, t), self.tensor_names[j], t)

    def _pull_at(self, j: int, k: int, u: int, t: int, ready: float) -> None:
        """:meth:`_send_pull` told ahead: it goes out at ``ready`` (see ``pull_ahead``)."""
        self.pull_conn[k][u].send_at(ready, self.part_bytes[j][k],  # type: ignore[union-attr]
                                     (j, u, t), self.tensor_names[j], t)

    def _pulled(self, payload: tuple[int, int, int]) -> None:
        j, r, t = payload
        local = self.local
        for u in self.recipients[r]:
            if local is not None and local.applies[u]:
                local.slice_pulled(u, j, t)
            else:
                self._got(j, u)

    def _pulled_early(self, payload: tuple[int, int, int], arrival: float) -> None:
        """:meth:`_pulled` told at the message's end: the parts are counted now and the
        layer's gate opens at ``arrival`` (:meth:`PSWorker.layer_ready`). If that was the
        layer's (or, overlap off, the model's) last part, a worker already waiting at that
        gate is poked at the arrival; one that is not gets there later (its chain checks the
        gate) or before the arrival, and then wakes itself (:meth:`PSWorker.gate_closed`).
        Pokes at a gate nobody waits at did nothing: 13% of the events of a noisy ASP run."""
        j, r, _t = payload
        layer = self.tensor_layer[j]
        overlap = self.overlap
        now = self.engine.now
        late: list[tuple[float, PSWorker]] = []
        for u in self.recipients[r]:
            worker = self.workers[u]
            missing = worker.missing
            missing[layer] -= 1
            worker.missing_total -= 1
            if overlap:
                if arrival > worker.ready_at[layer]:
                    worker.ready_at[layer] = arrival
                if missing[layer]:
                    continue
                ready = worker.ready_at[layer]
            else:
                if arrival > worker.ready_total:
                    worker.ready_total = arrival
                if worker.missing_total:
                    continue
                ready = worker.ready_total
            if ready <= now:
                worker.poke()
            elif worker.waiting_on(layer):
                worker.wake_at = ready
                late.append((ready, worker))
        # One event per arrival time: a merged group's workers all get the part at once.
        while late:
            ready = late[0][0]
            n = 1
            while n < len(late) and late[n][0] == ready:
                n += 1
            self.engine.post(ready, _poke_all, [worker for _, worker in late[:n]])
            del late[:n]

    def got_tensor(self, j: int, u: int) -> None:
        """Every part of tensor ``j`` is back on unit ``u`` (after the local all-gather)."""
        for _ in self.parts[j]:
            self._got(j, u)

    def _got(self, j: int, u: int) -> None:
        worker = self.workers[u]
        layer = self.tensor_layer[j]
        worker.missing[layer] -= 1
        worker.missing_total -= 1
        ready = worker.gate_opens_at(layer)
        if ready is None:
            return
        if ready > self.engine.now:  # an early-counted part is still on its way
            self.engine.post(ready, worker.poke)
        else:
            worker.poke()

    # -- accounting ----------------------------------------------------------------------------

    def utilization(self, span: float) -> list[tuple[str, float]]:
        """(resource, busy share of the measured window) for shard links/updates and the
        workers' NIC, fabric and rack links."""
        net = self.net
        out: list[tuple[str, float]] = []

        def share(link: Link) -> float:
            return net.delivered(link) / (link.capacity * link.copies * span)

        # A colocated shard's NIC is its host's: reported once, under the shard's name.
        for shard, nic in zip(self.sc.shards, self.shard_nic):
            out.append((f"{shard.name} downlink", share(nic.down)))
            out.append((f"{shard.name} uplink", share(nic.up)))
            busy = self.update_busy.seconds(shard.index, self.engine.now)
            out.append((f"{shard.name} update", busy / span))
        out += self.caps.shares(share)
        out += server_link_shares(self.units, self.links, share,
                                  skip={id(nic) for nic in self.shard_nic})
        return out


class _Ends(Receiver):
    """An early connection's messages told to the model natively: gradients (``push``) or
    parameters at their last byte."""

    __slots__ = ("model", "push")

    def __init__(self, model: PSModel, push: bool) -> None:
        self.model = model
        self.push = push

    def told(self, payload: Any, arrival: float) -> None:
        if self.push:
            self.model._pushed_early(payload, arrival)
        else:
            self.model._pulled_early(payload, arrival)


def _poke_all(workers: list[PSWorker]) -> None:
    for worker in workers:
        worker.poke()
