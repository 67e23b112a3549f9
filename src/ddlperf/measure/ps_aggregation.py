"""Parameter server with local aggregation on servers of G GPUs (``--local-aggregation``).

The predictors' algorithm (docs/servers.md), per tensor of a server:
1. reduce-scatter over the server's fabric (its loopback here): once GPU g's gradient is
   ready it sends every other GPU i of the server slice i of it
   (:func:`~ddlperf.measure.trainer_common.slice_bounds`) and sums the slices it receives
   into its own slice g;
2. GPU g pushes that summed slice, cut at the shard parts' boundaries
   (:func:`~ddlperf.measure.trainer_common.aggregation_pieces`), to the shards: the server's
   NIC carries each gradient byte once, not G times;
3. it pulls its slice's pieces of the update, and
4. sends the slice to every other GPU of the server (all-gather), receiving theirs.
A shard updates a slice piece once the GPU of that local index on every server has pushed
it, dividing the sum by N (all GPUs): the same averaged SGD step as without aggregation.

Receives are posted before the sends they answer (reduce-scatter receives at the start of an
iteration, pulls and all-gather receives after the forward pass): gloo announces a posted
receive with a message that queues behind data on the pair's one connection.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

import torch
import torch.distributed as dist

from ddlperf.measure.compute import WorkerCompute
from ddlperf.measure.ps_trainer import GRAD_TAG, DirectExchange, _Shard
from ddlperf.measure.trainer_common import aggregation_pieces, rank_table, slice_bounds

SCATTER_TAG = 1 << 22
GATHER_TAG = 1 << 23


class AggregatingExchange(DirectExchange):
    """A worker's side of local aggregation (see the module docstring).

    Two helper threads keep the compute thread free: the aggregator sums each tensor's
    reduce-scattered slices and pushes them, in gradient order; the gatherer sends each
    pulled slice to the server's other GPUs, in forward order.
    """

    def __init__(self, spec: dict[str, Any], me: dict[str, Any], compute: WorkerCompute
                 ) -> None:
        super().__init__(spec, me, compute)
        table = rank_table(spec)
        info = spec["workers"][me["index"]]
        self.gpus, self.local = int(info["gpus"]), int(info["local"])
        self.peers = [(e["local_rank"], e["rank"]) for e in table
                      if e["role"] == "worker" and e["host"] == me["host"]
                      and e["rank"] != me["rank"]]
        numel = [int(t["numel"]) for t in spec["tensors"]]
        self.bounds = [[slice_bounds(n, g, self.gpus) for g in range(self.gpus)] for n in numel]
        self.pieces = [aggregation_pieces(parts, numel[j], self.local, self.gpus)
                       for j, parts in enumerate(spec["parts"])]
        dtype = compute.tensors[0].dtype
        own = [b[self.local] for b in self.bounds]
        self.incoming = [{g: torch.empty(hi - lo, dtype=dtype) for g, _r in self.peers}
                         for (lo, hi) in own]
        self.scatter: dict[int, list[Any]] = {}
        self.gather_sends: list[Any] = []
        self.errors: list[BaseException] = []
        self._pushed: queue.Queue[int | None] = queue.Queue()
        self._pulled: queue.Queue[dict[int, Any] | None] = queue.Queue()
        self._lock = threading.Lock()
        self._done = threading.Event()  # the aggregator pushed this iteration's gradients
        self._gathered = threading.Event()  # the gatherer sent the last version's slices
        self._gathered.set()
        self._threads = [threading.Thread(target=self._guard, args=(body,), daemon=True,
                                          name=body.__name__)
                         for body in (self._aggregate, self._gather)]
        for thread in self._threads:
            thread.start()

    # ------------------------------------------------------------------ pushes

    def begin_iteration(self) -> None:
        self.sends = []
        self._done = threading.Event()
        self.scatter = {j: [dist.irecv(self.incoming[j][g], src=rank, tag=SCATTER_TAG + j)
                            for g, rank in self.peers]
                        for j in range(len(self.bounds))}

    def push(self, j: int) -> None:
        grad = self.compute.grad(j)
        works = [dist.isend(grad[a:b], dst=rank, tag=SCATTER_TAG + j)
                 for g, rank in self.peers for (a, b) in [self.bounds[j][g]]]
        with self._lock:
            self.sends += works
        self._pushed.put(j)

    def finish_pushes(self) -> None:
        self._pushed.put(None)  # the aggregator says when it has pushed everything
        self._done.wait()
        self._raise()
        with self._lock:
            works = list(self.sends)
        for work in works:
            work.wait()

    def _aggregate(self) -> None:
        while True:
            while (j := self._pushed.get()) is not None:
                lo, hi = self.bounds[j][self.local]
                for work in self.scatter.pop(j):
                    work.wait()
                summed = self.compute.grad(j)[lo:hi].clone()
                for part in self.incoming[j].values():
                    summed.add_(part)
                works = [dist.isend(summed[a - lo:a - lo + n], dst=self.shards[k],
                                    tag=GRAD_TAG + j) for (k, a, n) in self.pieces[j]]
                with self._lock:
                    self.sends += works
            self._done.set()

    # ------------------------------------------------------------------ pulls

    def post_pulls(self) -> dict[int, list[Any]]:
        self._gathered.wait()  # the last all-gather reads these buffers: let it finish
        self._raise()
        for work in self.gather_sends:
            work.wait()
        self.gather_sends = []
        self._gathered = threading.Event()
        tensors = self.compute.tensors
        own, pending = {}, {}
        for j in self.forward_order:
            # only the gatherer waits for the own pieces (a gloo receive completes one wait)
            arrived = _Arrived()
            own[j] = ([dist.irecv(tensors[j][a:a + n], src=self.shards[k], tag=j)
                       for (k, a, n) in self.pieces[j]], arrived)
            pending[j] = [arrived] + [
                dist.irecv(tensors[j][a:b], src=rank, tag=GATHER_TAG + j)
                for g, rank in self.peers for (a, b) in [self.bounds[j][g]]]
        self._pulled.put(own)
        return pending

    def _gather(self) -> None:
        while (own := self._pulled.get()) is not None:
            for j in self.forward_order:
                works, arrived = own[j]
                for work in works:
                    work.wait()
                arrived.set()
                lo, hi = self.bounds[j][self.local]
                self.gather_sends += [dist.isend(self.compute.tensors[j][lo:hi], dst=rank,
                                                 tag=GATHER_TAG + j) for _g, rank in self.peers]
            self._gathered.set()

    # ------------------------------------------------------------------ life cycle

    def _guard(self, body: Any) -> None:
        try:
            body()
        except BaseException as exc:  # raised on the worker's thread at the next push wait
            self.errors.append(exc)
            self._done.set()
            self._gathered.set()

    def _raise(self) -> None:
        if self.errors:
            raise self.errors[0]

    def close(self) -> None:
        self._pulled.put(None)
        self._pushed.put(None)  # after the last finish_pushes: nothing left to push
        self._threads[1].join(timeout=60)
        for work in self.gather_sends:
            work.wait()
        self._raise()


class _Arrived(threading.Event):
    """Stands for a tensor's own pieces in the worker's pending pulls: set by the gatherer
    once they arrived (gloo's ``Work.wait`` consumes the completion, so two threads must not
    wait on one receive)."""

    def is_completed(self) -> bool:
        return self.is_set()


class AggregatedShard(_Shard):
    """A shard whose units are the GPU slices of its parts: unit (j, g) is exchanged with the
    GPU of local index g on every server and updated once all of them pushed it."""

    def __init__(self, spec: dict[str, Any], index: int) -> None:
        super().__init__(spec, index)
        parts = {j: (s, n) for (j, s, n) in self.held}
        values = self.params
        workers = spec["workers"]
        position = {j: i for i, j in enumerate(spec["forward_order"])}
        self.params, self.tensor_of, self.contributors = {}, {}, {}
        units_of: list[list[tuple[Any, int, int]]] = []
        by_local: dict[tuple[int, int], list[tuple[Any, int, int]]] = {}
        for w, info in enumerate(workers):
            key = (int(info["local"]), int(info["gpus"]))
            if key not in by_local:
                units = []
                for j, (s, n) in parts.items():
                    numel = int(spec["tensors"][j]["numel"])
                    for (_k, a, m) in aggregation_pieces([(index, s, n)], numel, *key):
                        unit = (j, key[0])
                        units.append((unit, a, m))
                        self.params[unit] = values[j][a - s:a - s + m].clone()
                        self.tensor_of[unit] = j
                by_local[key] = units
            units_of.append(by_local[key])
            for (unit, _a, _m) in by_local[key]:
                self.contributors.setdefault(unit, []).append(w)
        self.units_of = units_of
        self.units_forward_of = [sorted(units, key=lambda u: position[u[0][0]])
                                 for units in units_of]
        self.held = [u for units in by_local.values() for u in units]
        self.moment = {u: torch.zeros_like(p) for u, p in self.params.items()}
        self.accum = {u: torch.zeros_like(p) for u, p in self.params.items()}
        self.count = dict.fromkeys(self.params, 0)
        self.locks = {u: threading.Lock() for u in self.params}
        self.divisor = len(workers)
        self._finish()
