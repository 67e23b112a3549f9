"""Local aggregation on multi-GPU servers (``--local-aggregation``), fine-grained.

Per tensor, once every GPU of a server has its gradient: a reduce-scatter over the fabric
((G−1) steps of 1/G of the tensor, run as one message of (G−1)/G of its bytes with (G−1)
latencies, like the ring's coalesced steps), then each GPU pushes its 1/G slice of the sum to
the shards holding the tensor; the shard counts slices (N per tensor, as it counts gradients
without aggregation). Each GPU pulls its slice of the update; once all slices of the tensor are
on the server, an all-gather over the fabric gives every GPU the whole tensor.

A unit of whole servers in lockstep has all its gradients at once; units that are parts of one
server (single GPUs under jitter, a colocated shard's host GPU) wait for each other here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ddlperf.predictors.server_links import aggregates
from ddlperf.predictors.simulate.connection import Connection

if TYPE_CHECKING:
    from ddlperf.predictors.simulate.ps import PSModel


class LocalAggregation:
    """Reduce-scatter before the push and all-gather after the pull, per server and tensor."""

    def __init__(self, model: PSModel, alpha: float) -> None:
        self.model = model
        units = model.units
        sc = model.sc
        self.applies = [aggregates(sc, unit.group) for unit in units]
        self.key: list[Any] = [u.index if u.servers else ("server", u.server) for u in units]
        self.members: dict[Any, list[int]] = {}
        for unit in units:
            if self.applies[unit.index]:
                self.members.setdefault(self.key[unit.index], []).append(unit.index)
        self.workers = {key: sum(units[v].count for v in members)
                        for key, members in self.members.items()}
        self.reduce_conn: dict[int, Connection] = {}
        self.gather_conn: dict[int, Connection] = {}
        log = model.log
        for members in self.members.values():
            for v in members:
                unit = units[v]
                intra = model.links.intra[v]
                assert intra is not None  # aggregating servers have G > 1 GPUs
                latency = (unit.group.gpus - 1) * alpha
                tracks = (None, None) if log is None else (
                    log.add(unit.names, "intra reduce-scatter", "push"),
                    log.add(unit.names, "intra all-gather", "pull"))
                self.reduce_conn[v] = Connection(model.net, (intra.up, intra.down), unit.count,
                                                 latency, self._reduced,
                                                 f"{unit.label} reduce", tracks[0])
                self.gather_conn[v] = Connection(model.net, (intra.up, intra.down), unit.count,
                                                 latency, self._gathered,
                                                 f"{unit.label} gather", tracks[1])
        self._ready: dict[tuple[Any, int], int] = {}
        self._reduced_count: dict[tuple[Any, int], int] = {}
        self._pulled: dict[tuple[Any, int], int] = {}

    def _share(self, u: int, j: int) -> float:
        gpus = self.model.units[u].group.gpus
        return (gpus - 1) / gpus * float(self.model.sc.tensor_bytes[j])

    def _count(self, table: dict[tuple[Any, int], int], key: Any, j: int, add: int,
               needed: int) -> bool:
        """Add ``add`` to ``table[key, j]``; True (and reset) once it reaches ``needed``."""
        done = table.get((key, j), 0) + add
        if done < needed:
            table[(key, j)] = done
            return False
        table.pop((key, j), None)
        return True

    def gradient_ready(self, u: int, j: int, t: int) -> None:
        key = self.key[u]
        if self._count(self._ready, key, j, self.model.units[u].count, self.workers[key]):
            for v in self.members[key]:
                self.reduce_conn[v].send(self._share(v, j), (j, v, t),
                                         self.model.tensor_names[j], t)

    def _reduced(self, payload: tuple[int, int, int]) -> None:
        j, v, t = payload
        key = self.key[v]
        if self._count(self._reduced_count, key, j, 1, len(self.members[key])):
            for w in self.members[key]:
                self.model.push_parts(w, j, t, self.model.units[w].group.gpus)

    def slice_pulled(self, u: int, j: int, t: int) -> None:
        key = self.key[u]
        needed = len(self.members[key]) * len(self.model.parts[j])
        if self._count(self._pulled, key, j, 1, needed):
            for w in self.members[key]:
                self.gather_conn[w].send(self._share(w, j), (j, w),
                                         self.model.tensor_names[j], t)

    def _gathered(self, payload: tuple[int, int]) -> None:
        j, w = payload
        self.model.got_tensor(j, w)
