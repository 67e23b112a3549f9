"""Hierarchical all-reduce as a DDP communication hook (``--allreduce hierarchical``).

Per bucket of B bytes on a server of G GPUs (the predictors' algorithm, docs/servers.md):
1. reduce-scatter inside the server: GPU g sends slice i of the bucket to the server's GPU i
   (point to point over the server's loopback, its intra-node fabric) and sums the slices
   it receives into its own slice g: (G−1)/G · B out and in per GPU;
2. all-reduce of slice g across the servers, over the ring of the servers' GPUs of local
   index g (a gloo group: 2(S−1)/S · B/G per GPU through the server's NIC);
3. all-gather inside: GPU g sends its reduced slice to every other GPU of the server.
The bucket is then divided by N (DDP averages gradients). Slices are
:func:`~ddlperf.measure.trainer_common.slice_bounds`, as the wire check counts them.

DDP calls the hook from the autograd thread as each bucket becomes ready; the hook only
queues the bucket and returns a future, and one communication thread reduces the buckets
in order (the same order on every rank), so backward goes on meanwhile, as DDP's own
asynchronous all-reduce lets it. The thread times the phases: ``intra_s`` (1 and 3) and
``inter_s`` (2), what splits a measured iteration's communication into intra- and
inter-node.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

import torch
import torch.distributed as dist

from ddlperf.measure.trainer_common import rank_table, slice_bounds

SCATTER_TAG = 1 << 24
GATHER_TAG = 1 << 25


class HierarchicalHook:
    """The hook's work (:meth:`enqueue`) and its communication thread; see the module doc."""

    def __init__(self, spec: dict[str, Any], me: dict[str, Any], rings: dict[int, Any]
                 ) -> None:
        table = rank_table(spec)
        workers = [e for e in table if e["role"] == "worker"]
        self.server = [e["rank"] for e in workers if e["host"] == me["host"]]
        self.local = self.server.index(me["rank"])
        self.ring = rings[me["local_rank"]]
        self.ring_size = sum(1 for e in workers if e["local_rank"] == me["local_rank"])
        self.world = len(workers)
        self.gpu_transport = spec.get("backend") == "nccl"
        self.times = {"intra_s": 0.0, "inter_s": 0.0}
        self._lock = threading.Lock()
        self._queue: queue.Queue[tuple[torch.Tensor, torch.futures.Future] | None] = (
            queue.Queue())
        self._thread = threading.Thread(target=self._run, name="hierarchical", daemon=True)
        self._thread.start()

    def enqueue(self, bucket: Any) -> torch.futures.Future:
        """What DDP's hook does with a ready bucket: queue it, return its future."""
        future: torch.futures.Future = torch.futures.Future()
        self._queue.put((bucket.buffer(), future))
        return future

    def take_times(self) -> dict[str, float]:
        """Seconds spent in each phase since the last call (one iteration's worth)."""
        with self._lock:
            out, self.times = self.times, {"intra_s": 0.0, "inter_s": 0.0}
        return out

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            buffer, future = item
            try:
                if buffer.is_cuda and not self.gpu_transport:  # gloo moves CPU tensors
                    host = buffer.cpu()
                    self._reduce(host)
                    buffer.copy_(host)
                else:
                    self._reduce(buffer)
            except BaseException as exc:  # surfaces in backward, which waits on the future
                future.set_exception(exc)
                continue
            future.set_result(buffer)

    def _exchange(self, buffer: torch.Tensor, bounds: list[tuple[int, int]], tag: int,
                  gather: bool) -> None:
        """Reduce-scatter (``gather=False``) or all-gather step with every other GPU.

        Every receive is posted before any send: gloo announces a posted receive to the peer
        with a message that queues behind data already being sent on the pair's one TCP
        connection, so a send posted first made the peer wait for all of it — the two
        directions of an exchange ran one after the other (seen on the emulated loopback:
        16 MB each way took 2 × 16 MB of time)."""
        lo, hi = bounds[self.local]
        receives, sends, incoming = [], [], []
        for i, peer in enumerate(self.server):
            if i == self.local:
                continue
            a, b = bounds[i]
            if gather:
                receives.append(dist.irecv(buffer[a:b], src=peer, tag=tag))
            else:
                part = torch.empty(hi - lo, dtype=buffer.dtype, device=buffer.device)
                incoming.append(part)
                receives.append(dist.irecv(part, src=peer, tag=tag))
        for i, peer in enumerate(self.server):
            if i != self.local:
                a, b = bounds[i]
                chunk = buffer[lo:hi] if gather else buffer[a:b]
                sends.append(dist.isend(chunk, dst=peer, tag=tag))
        for work in receives + sends:
            work.wait()
        for part in incoming:
            buffer[lo:hi].add_(part)

    def _reduce(self, buffer: torch.Tensor) -> None:
        gpus = len(self.server)
        bounds = [slice_bounds(buffer.numel(), i, gpus) for i in range(gpus)]
        lo, hi = bounds[self.local]
        began = time.perf_counter()
        self._exchange(buffer, bounds, SCATTER_TAG, gather=False)
        scattered = time.perf_counter()
        if self.ring_size > 1 and hi > lo:
            dist.all_reduce(buffer[lo:hi], group=self.ring)
        across = time.perf_counter()
        self._exchange(buffer, bounds, GATHER_TAG, gather=True)
        buffer.div_(self.world)
        done = time.perf_counter()
        with self._lock:
            self.times["intra_s"] += (scattered - began) + (done - across)
            self.times["inter_s"] += across - scattered
