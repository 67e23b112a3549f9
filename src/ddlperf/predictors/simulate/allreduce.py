"""Ring all-reduce, fine-grained: buckets in gradient-ready order on one communication stream.

Each worker runs ``optimizer step, forward, backward``; a bucket (PyTorch DDP: ~25 MiB of
gradients in ready order) is ready on a worker once all its tensors' backward ended (overlap
on) or once backward ended (overlap off), and is all-reduced once every worker has it ready and
the previous bucket is done (one stream, buckets in order). The next iteration's optimizer step
waits for the last bucket.

A bucket of S bytes is 2(N−1) ring steps; in each, every worker i sends S/N bytes to worker
i+1 over (uplink_i, downlink_{i+1}) and the step ends when all have arrived (plus α). Symmetry,
both exact:

* *edges*: edges (i → i+1) whose sender and receiver belong to the same pair of worker groups
  are identical (same link capacities, each link carrying only its own edge), so they are one
  flow of weight = number of edges over links with that many copies (a ring of 1024 workers
  of one group is one flow per step, with or without compute jitter);
* *steps*: a link of the ring carries nothing but its own edge, one step after the other, so an
  edge's rate never changes during a bucket and its 2(N−1) steps take 2(N−1)·(α + S/(N·rate)).
  The default runs each edge's steps as one flow of 2(N−1)·S/N bytes with latency 2(N−1)·α;
  the slowest edge ends the bucket, as it ends every step. ``steps="each"`` simulates every
  step (a test checks both agree).
"""

from __future__ import annotations

import numpy as np

from ddlperf.predictors.analytic import buckets
from ddlperf.predictors.rings import ring_phases
from ddlperf.predictors.simulate.compute import Processor
from ddlperf.predictors.simulate.engine import Engine
from ddlperf.predictors.simulate.network import Flow, Network
from ddlperf.predictors.simulate.record import Recorder
from ddlperf.predictors.simulate.ring_paths import EdgeClass, ring_edges
from ddlperf.predictors.simulate.tracks import TrackLog
from ddlperf.predictors.simulate.units import Unit
from ddlperf.predictors.simulate.worker import BWD, Worker, unit_operations
from ddlperf.scenario import Scenario


class RingWorker(Worker):
    """A worker (unit) of the ring: its buckets become ready during backward."""

    model: RingModel

    def setup(self, model: RingModel) -> None:
        self.model = model

    def can_start(self, t: int) -> bool:
        return t <= self.model.reduced + 1

    def quiet_end(self, kind: int, layer: int) -> bool:
        # Others only see a backward that completes a bucket (the ring may start it).
        return not (kind == BWD and self.model.overlap and layer in self.model.closed_by)

    def gradients_ready(self, layer: int, t: int) -> None:
        model = self.model
        if model.overlap:
            for b in model.closed_by.get(layer, ()):
                model.bucket_ready(b)

    def backward_done(self, t: int) -> None:
        if not self.model.overlap:
            for b in range(len(self.model.bucket_bytes)):
                self.model.bucket_ready(b)


def closing_layers(layer_tensors: list[list[int]], bucket_of: list[int],
                   bucket_tensors: list[int]) -> dict[int, list[int]]:
    """Layer → buckets whose last gradient its backward produces, in the order they fill.

    Backward runs layers L−1 … 0 and a layer's tensors in order; a bucket is ready once all its
    tensors are, so which backward completes it is known before the run.
    """
    missing = list(bucket_tensors)
    closed: dict[int, list[int]] = {}
    for layer in range(len(layer_tensors) - 1, -1, -1):
        for j in layer_tensors[layer]:
            b = bucket_of[j]
            missing[b] -= 1
            if missing[b] == 0:
                closed.setdefault(layer, []).append(b)
    return closed


class RingModel:
    """Builds the workers and the ring of one run and drives the bucket stream."""

    def __init__(
        self, sc: Scenario, units: list[Unit], engine: Engine, net: Network, recorder: Recorder,
        jitter: float | None, rngs: list[np.random.Generator] | None, log: TrackLog | None,
        steps: str = "coalesced",
    ) -> None:
        if steps not in ("coalesced", "each"):
            raise ValueError(f"steps must be 'coalesced' or 'each', got {steps!r}")
        self.sc = sc
        self.engine = engine
        self.net = net
        self.units = units
        self.overlap = sc.strategy.overlap
        self.steps = steps
        self.n = sc.worker_count
        self.alpha = sc.latency_s
        cache = sc.workload.derived_cache
        key = ("buckets", sc.strategy.bucket_bytes)
        if key not in cache:
            cache[key] = buckets(sc.tensor_bytes, sc.strategy.bucket_bytes)
        groups = cache[key]
        self.bucket_bytes = [float(sc.tensor_bytes[b].sum()) for b in groups]
        self.bucket_tensors = [len(b) for b in groups]
        self.bucket_of = [0] * len(sc.tensor_bytes)
        for b, members in enumerate(groups):
            for j in members:
                self.bucket_of[int(j)] = b
        self.layer_tensors: list[list[int]] = [[] for _ in sc.workload.layers]
        for j, layer in enumerate(sc.tensor_layer):
            self.layer_tensors[int(layer)].append(j)
        self.closed_by = closing_layers(self.layer_tensors, self.bucket_of, self.bucket_tensors)
        total = float(sc.tensor_bytes.sum())

        self.workers: list[RingWorker] = []
        for unit in units:
            records = None if log is None else log.add(unit.names, "compute", "compute")
            proc = Processor(engine, unit.label, records)
            ops, durations, labels = unit_operations(
                sc, unit, total * unit.group.update_s_per_byte, jitter,
                None if rngs is None else rngs[unit.index])
            worker = RingWorker(engine, unit, proc, durations, ops, labels, recorder)
            worker.setup(self)
            self.workers.append(worker)

        # Each phase's edge classes, each with its own links (see .ring_paths); the fabric
        # rings of reduce-scatter and all-gather are the same edges, so they share links.
        self.phases = ring_phases(sc)
        kinds = [phase.kind for phase in self.phases]
        built: dict[str, list[EdgeClass]] = {}
        self.phase_edges: list[list[EdgeClass]] = []
        self._physical: dict[str, float] = {}  # resource → capacity of all its links
        for kind in kinds:
            if kind not in built:
                built[kind] = ring_edges(units, sc.racks, kind, sc.connection_cap)
                self._add_links(built[kind], log)
            self.phase_edges.append(built[kind])
        self.edges = [e for kind in built for e in built[kind]]

        self.reduced = -1  # last iteration whose buckets are all reduced
        self._ready = [0] * len(self.bucket_bytes)  # units that have bucket b ready
        self._next = 0  # next bucket to reduce
        self._busy = False
        self._left = 0  # edge flows (or steps) of the current bucket still running
        self._step = 0

    def _add_links(self, edges: list[EdgeClass], log: TrackLog | None) -> None:
        capacity: dict[str, float] = {}
        for e in edges:
            e.links = tuple(self.net.add_link(rate, name, e.count) for rate, name in e.hops)
            for rate, name in e.hops:
                capacity[name] = capacity.get(name, 0.0) + rate * e.count
            if log is not None:
                if e.kind == "intra" or e.src.group.kind == "workers":
                    where, up, down = "", e.senders, e.receivers
                else:  # leaving the server: a row on the server's NIC
                    where = "nic "
                    up = sorted({n.split("/")[0] for n in e.senders})
                    down = sorted({n.split("/")[0] for n in e.receivers})
                thread = "intra" if e.kind == "intra" else "uplink"
                e.records = log.add(up, f"{where}{thread} → ring", "all-reduce")
                log.add(down, f"{where}{'intra' if e.kind == 'intra' else 'downlink'} ← ring",
                        "all-reduce", e.records)
        for name, total in capacity.items():
            self._physical[name] = max(self._physical.get(name, 0.0), total)

    def start(self) -> None:
        for worker in self.workers:
            worker.start()

    def on_warm(self) -> None:
        pass

    # -- bucket stream -------------------------------------------------------------------------

    def bucket_ready(self, b: int) -> None:
        self._ready[b] += 1
        self._try_next()

    def _try_next(self) -> None:
        b = self._next
        if self._busy or self._ready[b] < len(self.units):
            return
        self._busy = True
        if not self.phases:
            self._bucket_done()
            return
        self._phase = 0
        self._step = 0
        self._launch(b)

    def _launch(self, b: int) -> None:
        phase = self.phases[self._phase]
        chunk = self.bucket_bytes[b] / phase.parts
        if self.steps == "coalesced":
            size, latency = phase.steps * chunk, phase.steps * self.alpha
        else:
            size, latency = chunk, self.alpha
        edges = self.phase_edges[self._phase]
        self._left = len(edges)
        label = f"all-reduce bucket {b} ({phase.steps} steps)"
        for e in edges:
            self.net.start(size, e.links, latency=latency, weight=e.count,
                           on_complete=self._edge_done, tag=(e, label))

    def _edge_done(self, flow: Flow) -> None:
        edge, label = flow.tag
        if edge.records is not None:
            edge.records.append((label, flow.submit_time, self.engine.now, self.reduced + 1))
        self._left -= 1
        if self._left:
            return
        self._step += 1
        if self.steps == "each" and self._step < self.phases[self._phase].steps:
            self._launch(self._next)
            return
        self._phase += 1
        self._step = 0
        if self._phase < len(self.phases):
            self._launch(self._next)
            return
        self._bucket_done()

    def _bucket_done(self) -> None:
        self._busy = False
        self._ready[self._next] = 0
        self._next += 1
        if self._next == len(self.bucket_bytes):
            self._next = 0
            self.reduced += 1
            for worker in self.workers:
                worker.poke()
            return
        self._try_next()

    # -- accounting ----------------------------------------------------------------------------

    def utilization(self, span: float) -> list[tuple[str, float]]:
        """Busy share of every link the rings cross, by resource name (each unit's first
        worker's, or first server's, uplink and downlink first, as the analytic model lists
        them)."""
        if not self.edges:
            return []
        delivered: dict[str, float] = {}
        for e in self.edges:
            for link in e.links:
                delivered[link.name] = delivered.get(link.name, 0.0) + self.net.delivered(link)
        first = []
        for unit in self.units:
            g = unit.group
            offset = unit.server - g.first_server
            first += [g.nic_name("uplink", offset), g.nic_name("downlink", offset)]
        order = [n for n in dict.fromkeys(first) if n in delivered]
        order += [n for n in delivered if n not in order]
        return [(name, delivered[name] / (self._physical[name] * span)) for name in order]
