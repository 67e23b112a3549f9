"""The critical path of one steady-state iteration, read back from the simulator's timeline.

Every operation the simulator runs is in its timeline (:class:`~ddlperf.predictors.simulate
.tracks.TrackLog`): compute operations per worker stream, transfers per connection (pushes,
pulls, all-reduce buckets), updates per PS processor. An operation starts when the last of its
dependencies releases it, so walking back from the start of iteration t + 1 — at each
operation, to the dependency that released it last — gives the chain of operations and
transfers that set the length of iteration t. The dependencies are the simulator's rules
(:mod:`ddlperf.predictors.simulate.ps`, ``allreduce``, ``worker``):

* a compute operation follows the previous one on its stream; a forward waits for its layer's
  pulled parameters (PS), the first operation of an iteration for the last all-reduce bucket;
* a push follows the backward of its tensor's layer and the previous message on its connection;
* a PS update follows the arrival of its tensor's pushes (message end + latency α) and the
  previous update on its processor; a pull follows its tensor's update;
* an all-reduce bucket follows the previous bucket and the backward that completed it.

Time between a dependency's release and the operation's start that no rule explains (the SSP
gate, for one) is reported as ``wait``.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Any

from ddlperf.prediction import Prediction
from ddlperf.predictors.simulate.tracks import TrackLog
from ddlperf.scenario import Scenario

_PEER = re.compile(r"(?:uplink → |downlink ← )(ps\d+)$")


@dataclass(frozen=True)
class _Op:
    stream: int  # index of its record list
    index: int  # position in that list
    label: str
    start: float
    end: float
    iteration: int


@dataclass
class _Stream:
    """One record list of the timeline (shared by the tracks that show it)."""

    category: str  # compute, push, pull, update, all-reduce
    thread: str
    processes: tuple[str, ...]  # the worker side (or the shard, for updates)
    peer: str | None  # psK for pushes and pulls to a shard
    records: list[tuple[str, float, float, int]]
    ends: list[float]

    @property
    def servers(self) -> frozenset[str]:
        """Servers of its processes (``node0`` for ``node0/gpu3``; a one-GPU host itself)."""
        return frozenset(p.split("/")[0] for p in self.processes)


class _Timeline:
    """The timeline's streams, indexed for "latest record that ended by time t" queries."""

    def __init__(self, log: TrackLog) -> None:
        self.streams: list[_Stream] = []
        seen: dict[int, int] = {}
        for track in log.tracks:
            if id(track.records) in seen or not track.records:
                continue
            seen[id(track.records)] = len(self.streams)
            peer = _PEER.search(track.thread)
            self.streams.append(_Stream(track.category, track.thread, tuple(track.processes),
                                        peer.group(1) if peer else None, track.records,
                                        [r[2] for r in track.records]))
        # (stream, label) → record indices in end order, for tensor- and layer-exact lookups
        self.by_label: dict[tuple[int, str], list[int]] = {}
        for s, stream in enumerate(self.streams):
            for i, record in enumerate(stream.records):
                self.by_label.setdefault((s, _tensor_of(stream, record[0])), []).append(i)

    def op(self, s: int, i: int) -> _Op:
        label, start, end, iteration = self.streams[s].records[i]
        return _Op(s, i, label, start, end, iteration)

    def latest(self, s: int, by: float, label: str | None = None) -> _Op | None:
        """The record of stream ``s`` (with ``label``) that ended last at or before ``by``."""
        stream = self.streams[s]
        if label is None:
            i = bisect.bisect_right(stream.ends, by) - 1
            return self.op(s, i) if i >= 0 else None
        rows = self.by_label.get((s, label))
        if not rows:
            return None
        ends = [stream.ends[i] for i in rows]
        k = bisect.bisect_right(ends, by) - 1
        return self.op(s, rows[k]) if k >= 0 else None

    def previous(self, op: _Op) -> _Op | None:
        return self.op(op.stream, op.index - 1) if op.index > 0 else None


def _tensor_of(stream: _Stream, label: str) -> str:
    """The tensor (transfers, updates) or the operation (compute) a record is about."""
    if stream.category == "update" or label.startswith("update "):
        return label[len("update "):].split(" (")[0]
    return label


def critical_path(sc: Scenario, p: Prediction, log: TrackLog) -> dict[str, Any] | None:
    """The critical path of the middle measured iteration on the slowest worker (see the
    module docstring); None when the timeline holds too few iterations."""
    tl = _Timeline(log)
    worker = max(p.workers, key=lambda w: w.iteration_time_s).name
    compute = next((s for s, st in enumerate(tl.streams)
                    if st.category == "compute" and worker in st.processes), None)
    if compute is None:
        return None
    options = p.inputs.get("simulate", {})
    warmup, iterations = int(options.get("warmup", 0)), int(options.get("iterations", 1))
    t = warmup + max(iterations - 1, 0) // 2
    records = tl.streams[compute].records
    firsts = {}
    for i, record in enumerate(records):
        firsts.setdefault(record[3], i)
    if t not in firsts or t + 1 not in firsts:
        return None
    begin = records[firsts[t]][1]
    end = records[firsts[t + 1]][1]
    rules = _Rules(sc, tl)
    chain: list[tuple[_Op | None, float, float, str]] = []  # (op, start, end, kind)
    op = tl.op(compute, firsts[t + 1])
    for _ in range(1_000_000):
        pred, release, delay = rules.predecessor(op)
        if op.start > max(release, begin):
            chain.append((None, max(release, begin), op.start, "wait"))
        if pred is None or release <= begin:
            break
        if delay > 0:
            chain.append((None, max(pred.end, begin), release, "latency"))
        if pred.end <= begin:
            break
        chain.append((pred, max(pred.start, begin), pred.end, rules.kind(pred)))
        if pred.start <= begin:
            break
        op = pred
    chain.reverse()
    segments = _merge(tl, chain, begin)
    by_kind: dict[str, float] = {}
    for segment in segments:
        by_kind[segment["kind"]] = by_kind.get(segment["kind"], 0.0) + segment["duration_s"]
    return {
        "worker": worker, "iteration": t, "start_s": begin, "length_s": end - begin,
        "by_kind_s": by_kind, "segments": segments,
    }


class _Rules:
    """Which records an operation waits for (the simulator's dependencies, by stream)."""

    def __init__(self, sc: Scenario, tl: _Timeline) -> None:
        self.tl = tl
        self.alpha = sc.latency_s
        self.overlap = sc.strategy.overlap
        self.layer_tensors = {layer.name: [t.name for t in layer.tensors]
                              for layer in sc.workload.layers}
        self.tensor_layer = {t.name: layer.name for layer in sc.workload.layers
                             for t in layer.tensors}
        self.last_layer = sc.workload.layers[0].name  # backward ends with the first layer
        streams = tl.streams
        gpus = {g.server_name(s): g.gpus for g in sc.groups for s in range(g.servers)}
        # a message is delivered this long after its last byte: α per message to or from a
        # shard, (G − 1)·α for a reduce-scatter or all-gather inside a server of G GPUs
        self.delay = [0.0 if st.category not in ("push", "pull") else self.alpha if st.peer
                      else (max(gpus.get(p, 1) for p in st.servers) - 1) * self.alpha
                      for st in streams]
        self.compute_of = {p: s for s, st in enumerate(streams) if st.category == "compute"
                           for p in st.processes}
        self.updates_of: dict[str, list[int]] = {}
        for s, st in enumerate(streams):
            if st.category == "update":
                self.updates_of.setdefault(st.processes[0], []).append(s)
            elif st.category == "compute":  # a colocated shard updates on its host's stream
                for shard in sc.shards:
                    if shard.host is not None and sc.worker_name(shard.host) in st.processes:
                        self.updates_of.setdefault(shard.name, []).append(s)

    def kind(self, op: _Op) -> str:
        stream = self.tl.streams[op.stream]
        if stream.category == "compute" and op.label.startswith("update "):
            return "update"
        return stream.category

    def predecessor(self, op: _Op) -> tuple[_Op | None, float, float]:
        """The dependency that released ``op`` last, when it did and the delay after its end
        (α for a message, else 0); (None, −inf, 0) if there is none."""
        tl = self.tl
        stream = tl.streams[op.stream]
        eps = 1e-12 * max(1.0, op.start)
        best: tuple[_Op | None, float, float] = (None, float("-inf"), 0.0)

        def consider(candidate: _Op | None, delay: float = 0.0) -> None:
            nonlocal best
            if candidate is not None and candidate.end + delay > best[1]:
                best = (candidate, candidate.end + delay, delay)

        consider(tl.previous(op))
        kind = self.kind(op)
        by = op.start + eps
        related = [(t, st) for t, st in enumerate(tl.streams)
                   if t != op.stream and st.servers & stream.servers]
        if kind == "compute":
            if op.label.startswith("forward "):
                tensors = self.layer_tensors.get(op.label[len("forward "):], [])
                for t, st in related:
                    if st.category != "pull":
                        continue
                    delay = self.delay[t]
                    for tensor in tensors if self.overlap else [None]:
                        consider(tl.latest(t, by - delay, tensor), delay)
            for t, st in related:
                if st.category == "all-reduce":
                    consider(tl.latest(t, by))
        elif kind == "push":
            layer = self.tensor_layer.get(op.label)
            wanted = f"backward {layer if self.overlap and layer else self.last_layer}"
            for t, st in related:
                if st.category == "compute":
                    consider(tl.latest(t, by, wanted))
                elif st.category == "push" and st.peer is None:  # summed inside the server
                    consider(tl.latest(t, by - self.delay[t], op.label), self.delay[t])
        elif kind == "update":
            shard = stream.processes[0] if stream.category == "update" else None
            tensor = op.label[len("update "):].split(" (")[0]
            for t, st in enumerate(tl.streams):
                if st.category == "push" and st.peer is not None and (
                        shard is None or st.peer == shard):
                    consider(tl.latest(t, by - self.delay[t], tensor), self.delay[t])
        elif kind == "pull":
            if stream.peer is not None:
                for t in self.updates_of.get(stream.peer, []):
                    consider(tl.latest(t, by, op.label))
            else:  # spread inside the server after its pull arrived
                for t, st in related:
                    if st.category == "pull" and st.peer is not None:
                        consider(tl.latest(t, by - self.delay[t], op.label), self.delay[t])
        elif kind == "all-reduce":
            for t, st in enumerate(tl.streams):
                if st.category in ("compute", "all-reduce") and t != op.stream:
                    consider(tl.latest(t, by))
        if best[1] > op.start:  # rounding: released at its start
            return best[0], op.start, max(op.start - best[0].end, 0.0) if best[0] else 0.0
        return best


def _merge(tl: _Timeline, chain: list[tuple[_Op | None, float, float, str]],
           begin: float) -> list[dict[str, Any]]:
    """Consecutive operations of one stream and kind as one segment (times from ``begin``)."""
    out: list[dict[str, Any]] = []
    for op, start, end, kind in chain:
        where = _where(tl, op) if op is not None else ""
        track = "" if op is None else (
            f"{_span(tl.streams[op.stream].processes)} {tl.streams[op.stream].thread}")
        label = op.label if op is not None else ("message latency α" if kind == "latency"
                                                 else "waiting (no operation on the path)")
        last = out[-1] if out else None
        if last is not None and last["kind"] == kind and last["where"] == where:
            last["duration_s"] += end - start
            last["operations"] += 1
            last["last"] = label
            continue
        out.append({"kind": kind, "where": where, "track": track, "first": label, "last": label,
                    "operations": 1, "start_s": start - begin, "duration_s": end - start})
    for segment in out:
        segment["what"] = (segment["first"] if segment["operations"] == 1 else
                           f"{segment['first']} … {segment['last']}")
        del segment["first"], segment["last"]
    return out


def _where(tl: _Timeline, op: _Op) -> str:
    stream = tl.streams[op.stream]
    workers = _span(stream.processes)
    if stream.category in ("push", "pull") and stream.peer is None:
        return f"{workers} {stream.thread}"
    if stream.category == "push":
        return f"{workers} → {stream.peer}"
    if stream.category == "pull":
        return f"{stream.peer} → {workers}"
    if stream.category == "all-reduce":
        return "ring"
    return workers


def _span(processes: tuple[str, ...]) -> str:
    return processes[0] if len(processes) == 1 else f"{processes[0]}–{processes[-1]}"
