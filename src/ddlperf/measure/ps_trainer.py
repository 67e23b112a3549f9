"""Parameter-server training over torch.distributed (gloo, point-to-point), one rank per process.

``python -m ddlperf.measure.ps_trainer --spec FILE`` with torchrun's environment (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT); the rank table in the spec says who is a worker and who
is a PS shard (see :mod:`ddlperf.measure.trainer_common`). Messages are ``isend``/``irecv``
with tag = tensor index (parameters) or ``GRAD_TAG`` + index (gradients), one per
(tensor, shard part); sharding follows the spec's ``parts`` (the Scenario's placement: whole
tensors for round_robin / greedy, equal slices for even).

Worker, iteration t:
- forward: each layer waits only for its own parameters of version t (forward order); with
  ``overlap=False`` all of them are waited for before the forward pass;
- once the forward pass ended the worker posts the receives of version t + 1;
- backward: each gradient part is pushed to its shard as soon as backward produces it (with
  ``overlap=False``: after backward, in gradient order);
- an iteration is timed from one forward start to the next — the forward pass starts when the
  first layer's parameters of the new version arrived, "a parameter update seen" — so its
  duration is the worker's step period. After the last iteration the worker receives the final
  parameters: per run, N_iter pushes and N_iter + 1 pulls per worker.

Shard: per worker, a receiver thread applies that worker's gradients as they arrive and a
sender thread sends it each tensor's new version as soon as the synchronization rule allows
(blocking waits release the GIL):
- BSP: tensor j of version v goes out once every worker's gradient j of iteration v − 1 was
  applied (the N gradients are averaged, one SGD step) — pulls overlap the pushes of later
  tensors, as in MXNet/BytePS-style per-key push/pull;
- ASP: once this worker's own gradient j was applied (each gradient is its own SGD step);
- SSP(s): own gradient applied and every worker's gradient j of iteration v − 1 − s applied
  (the read rule of :mod:`ddlperf.strategy`; the simulator and the analytic model use it too).
With ``overlap=False`` a version goes out only when all of the shard's tensors are ready.
Updates are SGD with momentum per tensor part, on the CPU.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from ddlperf.measure.compute import WorkerCompute, make_flat, worker_compute
from ddlperf.measure.traffic import rank_payload
from ddlperf.measure.trainer_common import (
    GRAD_TAG,
    CpuClock,
    NetCounter,
    Recorder,
    Status,
    fault_for,
    init_group,
    maybe_fault,
    micro_batches,
    rank_table,
    run_rank,
    shard_rank,
    total_iterations,
    worker_rank,
)

# ----------------------------------------------------------------------------- worker


class DirectExchange:
    """How a worker without local aggregation talks to the shards: each gradient part goes
    straight to its shard, each parameter part comes straight from it. The worker loop
    (:func:`run_worker`) calls ``begin_iteration``, ``push(j)`` as gradients become ready,
    ``finish_pushes`` after backward, ``post_pulls`` once the forward pass ended (and for
    version 0), and ``close`` at the end; :class:`~ddlperf.measure.ps_aggregation.
    AggregatingExchange` does the same with a server's reduce-scatter and all-gather."""

    def __init__(self, spec: dict[str, Any], me: dict[str, Any], compute: WorkerCompute
                 ) -> None:
        table = rank_table(spec)
        self.compute = compute
        self.parts = spec["parts"]
        self.shards = {k: shard_rank(table, k) for k in range(spec["shards"])}
        self.forward_order = spec["forward_order"]
        self.sends: list[Any] = []
        payload = rank_payload(spec, me["name"])
        self.payload, self.remote = payload["sent"], payload["remote"]

    def begin_iteration(self) -> None:
        self.sends = []

    def push(self, j: int) -> None:
        grad = self.compute.grad(j)
        for (k, s, n) in self.parts[j]:
            self.sends.append(dist.isend(grad[s:s + n], dst=self.shards[k], tag=GRAD_TAG + j))

    def finish_pushes(self) -> None:
        for work in self.sends:
            work.wait()

    def post_pulls(self) -> dict[int, list[Any]]:
        return {j: [dist.irecv(self.compute.tensors[j][s:s + n], src=self.shards[k], tag=j)
                    for (k, s, n) in self.parts[j]] for j in self.forward_order}

    def close(self) -> None:
        """Nothing runs in the background."""


def _nothing(*_args: Any) -> None:
    """A micro-batch before the last neither pushes nor posts pulls."""


def run_worker(spec: dict[str, Any], me: dict[str, Any], rec: Recorder, status: Status) -> None:
    table = rank_table(spec)
    worker = spec["workers"][me["index"]]
    compute = worker_compute(spec, worker)
    if spec.get("local_aggregation"):
        from ddlperf.measure.ps_aggregation import AggregatingExchange

        exchange: DirectExchange = AggregatingExchange(spec, me, compute)
    else:
        exchange = DirectExchange(spec, me, compute)
    forward_order = spec["forward_order"]
    overlap = bool(spec["overlap"])
    micro = micro_batches(spec)
    net = NetCounter(os.environ.get("GLOO_SOCKET_IFNAME"))
    fault = fault_for(me["name"])
    first_layer = spec["tensors"][forward_order[0]]["layer"]
    first = ([j for j in forward_order if spec["tensors"][j]["layer"] == first_layer]
             if overlap else list(forward_order))

    def wait_works(pending: dict[int, list[Any]], indices: Any, t: int) -> float:
        works, got = [], []
        for j in indices:
            if j in pending:
                works += pending.pop(j)
                got.append(j)
        if not works:
            return 0.0
        began = time.perf_counter()
        blocked = not all(w.is_completed() for w in works)
        if blocked:
            status.set("pull", t)
        for w in works:
            w.wait()
        if blocked:
            status.set("compute", t)
        compute.install(got)
        return time.perf_counter() - began

    init_group(spec, len(table))
    status.set("barrier")
    dist.barrier()
    pending = exchange.post_pulls()  # version 0
    status.set("pull", 0)
    wait_works(pending, first, 0)
    start, start_wall = time.perf_counter(), time.time()
    wire0 = net.read()
    total = total_iterations(spec, me["index"])
    cpu = CpuClock()
    for t in range(total):
        maybe_fault(fault, t, status)
        waited = [0.0]
        following: dict[int, list[Any]] = {}

        def wait_pull(indices: Any, pending: dict[int, list[Any]] = pending,
                      waited: list[float] = waited, t: int = t) -> None:
            waited[0] += wait_works(pending, indices, t)

        def after_forward(pending: dict[int, list[Any]] = pending,
                          following: dict[int, list[Any]] = following, t: int = t) -> None:
            wait_works(pending, forward_order, t)  # anything no layer asked for (normally none)
            following.update(exchange.post_pulls())  # version t + 1 may arrive during backward

        deferred: list[int] = []
        exchange.begin_iteration()
        if not overlap:
            wait_pull(forward_order)
        status.set("compute", t)
        cpu_s = cpu.lap("before")
        step_began = time.perf_counter()
        # gradient accumulation: the first micro-batches wait for version t's parameters and
        # accumulate gradients; only the last one pushes and posts the next pulls
        earlier = [compute.step(wait_pull, _nothing, _nothing) for _ in range(micro - 1)]
        timings = compute.step(wait_pull, exchange.push if overlap else deferred.append,
                               after_forward)
        for part in earlier:  # forward_s / backward_s: summed over the micro-batches
            timings = {k: v + part.get(k, 0.0) for k, v in timings.items()}
        step_s = time.perf_counter() - step_began
        cpu_s.update(cpu.lap("step"))
        in_step_wait = waited[0]
        for j in deferred:
            exchange.push(j)
        status.set("push", t)
        push_began = time.perf_counter()
        exchange.finish_pushes()
        push_s = time.perf_counter() - push_began
        compute.after_step()
        pending = following
        pull_s = wait_works(pending, first, t + 1)
        now = time.perf_counter()
        cpu_s.update(cpu.lap("exchange"))
        wire1 = net.read()
        wire = {} if wire0 is None or wire1 is None else {
            "wire_sent_bytes": wire1[0] - wire0[0], "wire_received_bytes": wire1[1] - wire0[1]}
        rec.write({
            "type": "iteration", "iteration": t, "start": start_wall,
            "end": start_wall + (now - start), "duration_s": now - start,
            "compute_s": max(step_s - in_step_wait, 0.0), **timings,
            "pull_wait_s": pull_s + in_step_wait, "push_wait_s": push_s,
            "payload_sent_bytes": exchange.payload, "payload_received_bytes": exchange.payload,
            "remote_payload_bytes": exchange.remote, "compute": compute.label, **wire,
            **cpu_s,
        })
        start, start_wall, wire0 = now, start_wall + (now - start), wire1
    wait_works(pending, forward_order, total)  # the final parameters
    exchange.close()
    status.set("barrier")
    dist.barrier()
    dist.destroy_process_group()


# ----------------------------------------------------------------------------- shard


class _Shard:
    """One PS shard: its tensor parts, momentum, BSP accumulators and, per worker and tensor,
    how many of that worker's gradients were applied (``applied[w][j]``).

    The units it updates are its tensor parts (``held``: key, start, numel); every worker
    contributes to every unit (``contributors``) and exchanges all of them (``units_of``).
    With local aggregation (:class:`~ddlperf.measure.ps_aggregation.AggregatedShard`) a unit
    is one GPU slice of a part, exchanged with that GPU of every server only.
    """

    def __init__(self, spec: dict[str, Any], index: int) -> None:
        self.lr = float(spec.get("lr", 0.01))
        self.momentum = float(spec.get("momentum", 0.9))
        self.workers = len(spec["workers"])
        self.overlap = bool(spec["overlap"])
        sync, staleness = spec["sync"], spec.get("staleness")
        self.bound: int | None = (0 if sync == "bsp" else None if sync == "asp"
                                  else int(staleness or 0))
        self.average = self.bound == 0
        # (tensor index, start, numel) this shard holds: gradient order and forward order.
        self.held = [(j, s, n) for j, tensor_parts in enumerate(spec["parts"])
                     for (k, s, n) in tensor_parts if k == index]
        position = {j: i for i, j in enumerate(spec["forward_order"])}
        self.held_forward = sorted(self.held, key=lambda h: position[h[0]])
        full = _initial_values(spec)
        self.params = {j: full[j][s:s + n].clone() for (j, s, n) in self.held}
        self.moment = {j: torch.zeros_like(p) for j, p in self.params.items()}
        self.accum = {j: torch.zeros_like(p) for j, p in self.params.items()}
        self.count = dict.fromkeys(self.params, 0)
        self.locks = {j: threading.Lock() for j in self.params}
        self.tensor_of = {j: j for j in self.params}  # unit → its tensor (message tags)
        everyone = list(range(self.workers))
        self.contributors = dict.fromkeys(self.params, everyone)
        self.units_of = [self.held] * self.workers
        self.units_forward_of = [self.held_forward] * self.workers
        self.divisor = self.workers
        self._finish()

    def _finish(self) -> None:
        """State that follows from the units (also for subclasses that define their own)."""
        self.applied = [dict.fromkeys(self.params, 0) for _ in range(self.workers)]
        self.cond = threading.Condition()
        self.errors: list[BaseException] = []
        self.bytes_of = [sum(self.params[u].numel() * self.params[u].element_size()
                             for (u, _s, _n) in units) for units in self.units_of]

    def own(self, w: int, j: int, version: int) -> bool:
        return self.applied[w][j] >= version or bool(self.errors)

    def ready(self, w: int, j: int, version: int) -> bool:
        """May worker ``w`` get tensor ``j`` of ``version`` (caller holds ``cond``)?"""
        if self.errors:
            return True
        if self.applied[w][j] < version:
            return False
        return self.bound is None or min(
            self.applied[c][j] for c in self.contributors[j]) >= version - self.bound

    def apply(self, w: int, j: int, grad: torch.Tensor) -> None:
        with self.locks[j]:
            update = True
            if self.average:
                if self.count[j] == 0:
                    self.accum[j].copy_(grad)
                else:
                    self.accum[j].add_(grad)
                self.count[j] += 1
                update = self.count[j] == len(self.contributors[j])
                if update:
                    self.count[j] = 0
                    grad = self.accum[j].div_(self.divisor)
            if update:
                self.moment[j].mul_(self.momentum).add_(grad)
                self.params[j].add_(self.moment[j], alpha=-self.lr)
            with self.cond:  # counted only once the update (if any) is in the parameters
                self.applied[w][j] += 1
                self.cond.notify_all()

    def fail(self, exc: BaseException) -> None:
        with self.cond:
            self.errors.append(exc)
            self.cond.notify_all()


def _initial_values(spec: dict[str, Any]) -> list[torch.Tensor]:
    """The same initial parameters the workers start from."""
    if spec["compute"] != "real":
        return make_flat(spec, seed=0)
    from ddlperf.measure.compute import build_real

    model = build_real(spec, spec["workers"][0])[0]
    named = dict(model.named_parameters())
    return [named[t["name"]].detach().reshape(-1) for t in spec["tensors"]]


def run_shard(spec: dict[str, Any], me: dict[str, Any], rec: Recorder, status: Status) -> None:
    table = rank_table(spec)
    if spec.get("local_aggregation"):
        from ddlperf.measure.ps_aggregation import AggregatedShard

        shard: _Shard = AggregatedShard(spec, me["index"])
    else:
        shard = _Shard(spec, me["index"])
    fault = fault_for(me["name"])
    received: list[dict[int, dict[str, float]]] = [{} for _ in range(shard.workers)]
    init_group(spec, len(table))
    status.set("barrier")
    dist.barrier()

    def receiver(w: int) -> None:
        peer = worker_rank(table, w)
        buffers = {j: torch.empty_like(p) for j, p in shard.params.items()}
        for t in range(total_iterations(spec, w)):
            recvs = [(j, dist.irecv(buffers[j], src=peer, tag=GRAD_TAG + shard.tensor_of[j]))
                     for (j, _s, _n) in shard.units_of[w]]
            began = time.perf_counter()
            update_s = 0.0
            for j, work in recvs:
                if not work.is_completed():
                    status.set("recv", t)
                work.wait()
                u = time.perf_counter()
                shard.apply(w, j, buffers[j])
                update_s += time.perf_counter() - u
            with shard.cond:  # the sender writes this iteration's serve record with them
                received[w][t] = {"recv_s": time.perf_counter() - began - update_s,
                                  "update_s": update_s}
                shard.cond.notify_all()

    def sender(w: int) -> None:
        peer = worker_rank(table, w)
        local = table[peer]["host"] == me["host"]
        works = [dist.isend(shard.params[j], dst=peer, tag=shard.tensor_of[j])
                 for (j, _s, _n) in shard.units_forward_of[w]]  # version 0
        for work in works:
            work.wait()
        for version in range(1, total_iterations(spec, w) + 1):
            if w == 0:
                maybe_fault(fault, version - 1, status)
            began_wall, began = time.time(), time.perf_counter()
            gate = 0.0
            works = []
            with shard.cond:
                if not shard.overlap:  # a whole version at once, when every tensor is ready
                    shard.cond.wait_for(lambda v=version: all(
                        shard.own(w, j, v) for (j, _s, _n) in shard.units_of[w]))
                    g = time.perf_counter()
                    if not all(shard.ready(w, j, version) for (j, _s, _n) in shard.units_of[w]):
                        status.set("gate", version - 1)
                    shard.cond.wait_for(lambda v=version: all(
                        shard.ready(w, j, v) for (j, _s, _n) in shard.units_of[w]))
                    gate += time.perf_counter() - g
            for (j, _s, _n) in shard.units_of[w]:
                with shard.cond:
                    shard.cond.wait_for(lambda j=j, v=version: shard.own(w, j, v))
                    if not shard.ready(w, j, version):
                        g = time.perf_counter()
                        status.set("gate", version - 1)
                        shard.cond.wait_for(lambda j=j, v=version: shard.ready(w, j, v))
                        gate += time.perf_counter() - g
                if shard.errors:
                    return
                works.append(dist.isend(shard.params[j], dst=peer, tag=shard.tensor_of[j]))
            sent = time.perf_counter()
            for work in works:
                work.wait()
            end = time.perf_counter()
            with shard.cond:
                # Every gradient of the iteration is applied (own), but the receiver thread
                # may not have stored its timings yet: without them the record would lack
                # recv_s and update_s (seen once, it failed the run's summary).
                shard.cond.wait_for(lambda v=version: (v - 1) in received[w]
                                    or bool(shard.errors))
                stats = received[w].pop(version - 1, {})
            rec.write({
                "type": "serve", "worker": spec["workers"][w]["name"], "iteration": version - 1,
                "start": began_wall, "end": began_wall + (end - began), "gate_wait_s": gate,
                "send_s": end - sent, **stats, "payload_sent_bytes": shard.bytes_of[w],
                "payload_received_bytes": shard.bytes_of[w], "local": local,
            })

    def guarded(body: Callable[[int], None], w: int) -> None:
        try:
            body(w)
        except BaseException as exc:  # surfaces in the main thread, which exits non-zero
            shard.fail(exc)

    threads = [threading.Thread(target=guarded, args=(body, w), name=f"{body.__name__}-w{w}",
                                daemon=True)
               for w in range(shard.workers) for body in (receiver, sender)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        if shard.errors:
            raise shard.errors[0]
        time.sleep(0.05)
    if shard.errors:
        raise shard.errors[0]
    status.set("barrier")
    dist.barrier()
    dist.destroy_process_group()


def _body(spec: dict[str, Any], me: dict[str, Any], rec: Recorder, status: Status) -> None:
    (run_worker if me["role"] == "worker" else run_shard)(spec, me, rec, status)


def main(argv: list[str] | None = None) -> None:
    run_rank(argv, "python -m ddlperf.measure.ps_trainer", _body)


if __name__ == "__main__":
    main(sys.argv[1:])
