"""Parameter-server training over torch.distributed (gloo, point-to-point), one rank per process.

``python -m ddlperf.measure.ps_trainer --spec FILE`` with torchrun's environment (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT); the rank table in the spec says who is a worker and who
is a PS shard (see :mod:`ddlperf.measure.trainer_common`).

Protocol per worker and iteration t:
- pull: the worker posts one ``irecv`` per (tensor, shard part) — tag = tensor index — and each
  layer waits only for its own parameters before it computes (forward order); with
  ``overlap=False`` everything is pulled before the forward pass;
- push: each gradient part is sent (``isend``, tag = ``GRAD_TAG`` + index) to its shard as soon
  as backward produces it; once every push was handed to the network the worker posts the pull
  of version t + 1.
- An iteration is timed from one forward start to the next (the forward pass starts when the
  first layer's parameters of the new version arrived: "a parameter update seen"), so its
  duration is the worker's step period. After the last iteration the worker pulls the final
  parameters: per run, N_iter pushes and N_iter + 1 pulls per worker.

A shard serves each worker from its own thread (blocking waits release the GIL). Before sending
iteration t's parameters to a worker it applies the synchronization rule:
- BSP: every worker's gradients of iteration t − 1 were received and applied (SSP with s = 0);
- SSP(s): the slowest worker has finished iteration t − 1 − s or later;
- ASP: no wait.
Updates are SGD with momentum, per tensor part, as soon as possible: BSP averages the N
gradients of a tensor and updates once all arrived; ASP/SSP apply each gradient on arrival.
Sharding follows the spec's ``parts`` (from the Scenario's placement: whole tensors for
round_robin / greedy, equal slices for even).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

import torch
import torch.distributed as dist

from ddlperf.measure.compute import make_flat, worker_compute
from ddlperf.measure.trainer_common import (
    GRAD_TAG,
    NetCounter,
    Recorder,
    Status,
    element_size,
    fault_for,
    init_group,
    maybe_fault,
    rank_table,
    run_rank,
    shard_rank,
    total_iterations,
    worker_rank,
)

# ----------------------------------------------------------------------------- worker


def run_worker(spec: dict[str, Any], me: dict[str, Any], rec: Recorder, status: Status) -> None:
    table = rank_table(spec)
    worker = spec["workers"][me["index"]]
    compute = worker_compute(spec, worker)
    parts = spec["parts"]
    shards = {k: shard_rank(table, k) for k in range(spec["shards"])}
    forward_order = spec["forward_order"]
    overlap = bool(spec["overlap"])
    size = element_size(spec["dtype"])
    payload = size * sum(n for tensor_parts in parts for (_k, _s, n) in tensor_parts)
    remote = sum(size * n for tensor_parts in parts for (k, _s, n) in tensor_parts
                 if table[shards[k]]["host"] != me["host"])
    net = NetCounter(os.environ.get("GLOO_SOCKET_IFNAME"))
    fault = fault_for(me["name"])
    first = [j for j in forward_order if spec["tensors"][j]["layer"] == spec["tensors"][
        forward_order[0]]["layer"]] if overlap else list(forward_order)

    def post_pulls() -> dict[int, list[Any]]:
        return {j: [dist.irecv(compute.tensors[j][s:s + n], src=shards[k], tag=j)
                    for (k, s, n) in parts[j]] for j in forward_order}

    def wait_works(pending: dict[int, list[Any]], indices: Any, t: int) -> float:
        works = [w for j in indices for w in pending.pop(j, ())]
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
        return time.perf_counter() - began

    init_group(spec, len(table))
    status.set("barrier")
    dist.barrier()
    # An iteration runs from one forward start to the next: the forward pass can start once
    # the first layer's parameters of the new version arrived ("a parameter update seen").
    pending = post_pulls()
    status.set("pull", 0)
    wait_works(pending, first, 0)
    start, start_wall = time.perf_counter(), time.time()
    wire0 = net.read()
    total = total_iterations(spec)
    for t in range(total):
        maybe_fault(fault, t, status)
        waited = [0.0]

        def wait_pull(indices: Any, pending: dict[int, list[Any]] = pending,
                      waited: list[float] = waited, t: int = t) -> None:
            waited[0] += wait_works(pending, indices, t)

        sends: list[Any] = []
        deferred: list[int] = []

        def send(j: int, sends: list[Any] = sends) -> None:
            grad = compute.grad(j)
            for (k, s, n) in parts[j]:
                sends.append(dist.isend(grad[s:s + n], dst=shards[k], tag=GRAD_TAG + j))

        push = send if overlap else deferred.append
        if not overlap:
            wait_pull(forward_order)
        status.set("compute", t)
        step_began = time.perf_counter()
        timings = compute.step(wait_pull, push)
        step_s = time.perf_counter() - step_began
        in_step_wait = waited[0]
        for j in deferred:
            send(j)
        wait_pull(forward_order)  # parameters no layer asked for (none, normally)
        status.set("push", t)
        push_began = time.perf_counter()
        for w in sends:
            w.wait()
        push_s = time.perf_counter() - push_began
        compute.after_step()
        pending = post_pulls()  # version t + 1 (after the last iteration: the final model)
        pull_s = wait_works(pending, first, t + 1)
        following = time.perf_counter()
        wire1 = net.read()
        wire = {} if wire0 is None or wire1 is None else {
            "wire_sent_bytes": wire1[0] - wire0[0], "wire_received_bytes": wire1[1] - wire0[1]}
        rec.write({
            "type": "iteration", "iteration": t, "start": start_wall,
            "end": start_wall + (following - start), "duration_s": following - start,
            "compute_s": max(step_s - in_step_wait, 0.0), **timings,
            "pull_wait_s": pull_s + waited[0], "push_wait_s": push_s,
            "payload_sent_bytes": payload, "payload_received_bytes": payload,
            "remote_payload_bytes": remote, "compute": compute.label, **wire,
        })
        start, start_wall, wire0 = following, start_wall + (following - start), wire1
    wait_works(pending, forward_order, total)
    status.set("barrier")
    dist.barrier()
    dist.destroy_process_group()


# ----------------------------------------------------------------------------- shard


class _Shard:
    """State of one PS shard: its tensor parts, momentum, BSP accumulators, worker clocks."""

    def __init__(self, spec: dict[str, Any], index: int) -> None:
        self.spec = spec
        self.lr = float(spec.get("lr", 0.01))
        self.momentum = float(spec.get("momentum", 0.9))
        self.workers = len(spec["workers"])
        sync, staleness = spec["sync"], spec.get("staleness")
        self.bound: int | None = (0 if sync == "bsp" else None if sync == "asp"
                                  else int(staleness or 0))
        self.average = sync == "bsp" or self.bound == 0
        # (tensor index, start, numel) this shard holds, gradient order and forward order.
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
        self.clocks = [0] * self.workers
        self.cond = threading.Condition()
        self.bytes = sum(p.numel() * p.element_size() for p in self.params.values())

    def allowed(self, t: int) -> bool:
        return self.bound is None or min(self.clocks) >= t - self.bound

    def apply(self, j: int, grad: torch.Tensor) -> None:
        with self.locks[j]:
            if self.average:
                if self.count[j] == 0:
                    self.accum[j].copy_(grad)
                else:
                    self.accum[j].add_(grad)
                self.count[j] += 1
                if self.count[j] < self.workers:
                    return
                self.count[j] = 0
                grad = self.accum[j].div_(self.workers)
            self.moment[j].mul_(self.momentum).add_(grad)
            self.params[j].add_(self.moment[j], alpha=-self.lr)

    def finished(self, worker: int) -> None:
        with self.cond:
            self.clocks[worker] += 1
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
    shard = _Shard(spec, me["index"])
    total = total_iterations(spec)
    fault = fault_for(me["name"])
    errors: list[BaseException] = []
    init_group(spec, len(table))
    status.set("barrier")
    dist.barrier()

    def serve(w: int) -> None:
        peer = worker_rank(table, w)
        name = f"w{w}"
        local = table[peer]["host"] == me["host"]
        buffers = {j: torch.empty_like(p) for j, p in shard.params.items()}
        try:
            for t in range(total + 1):  # the last round only sends the final parameters
                if w == 0:
                    maybe_fault(fault, t, status)
                began_wall, began = time.time(), time.perf_counter()
                with shard.cond:
                    if not shard.allowed(t):
                        status.set("gate", t)
                        shard.cond.wait_for(lambda t=t: shard.allowed(t) or bool(errors))
                    if errors:
                        return
                gated = time.perf_counter()
                sends = [dist.isend(shard.params[j], dst=peer, tag=j)
                         for (j, _s, _n) in shard.held_forward]
                if t == total:
                    for work in sends:
                        work.wait()
                    break
                recvs = [(j, dist.irecv(buffers[j], src=peer, tag=GRAD_TAG + j))
                         for (j, _s, _n) in shard.held]
                for work in sends:
                    work.wait()
                sent = time.perf_counter()
                update_s = 0.0
                for j, work in recvs:
                    work.wait()
                    u = time.perf_counter()
                    shard.apply(j, buffers[j])
                    update_s += time.perf_counter() - u
                shard.finished(w)
                end = time.perf_counter()
                rec.write({
                    "type": "serve", "worker": name, "iteration": t, "start": began_wall,
                    "end": began_wall + (end - began), "gate_wait_s": gated - began,
                    "send_s": sent - gated, "recv_s": end - sent - update_s,
                    "update_s": update_s, "payload_sent_bytes": shard.bytes,
                    "payload_received_bytes": shard.bytes, "local": local,
                })
        except BaseException as exc:  # surfaces in the main thread, which exits non-zero
            errors.append(exc)
            with shard.cond:
                shard.cond.notify_all()

    threads = [threading.Thread(target=serve, args=(w,), name=f"serve-w{w}", daemon=True)
               for w in range(shard.workers)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        if errors:
            raise errors[0]
        threads[0].join(0.05) if threads[0].is_alive() else time.sleep(0.05)
    if errors:
        raise errors[0]
    status.set("barrier")
    dist.barrier()
    dist.destroy_process_group()


def _body(spec: dict[str, Any], me: dict[str, Any], rec: Recorder, status: Status) -> None:
    (run_worker if me["role"] == "worker" else run_shard)(spec, me, rec, status)


def main(argv: list[str] | None = None) -> None:
    run_rank(argv, "python -m ddlperf.measure.ps_trainer", _body)


if __name__ == "__main__":
    main(sys.argv[1:])
