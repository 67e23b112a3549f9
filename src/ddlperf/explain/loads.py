"""What each resource does in one iteration, in numbers a person can check.

The predictors report each link's and processor's busy time; this module adds what that time
is made of — bytes per iteration and the rate they move at, shard by shard, and which tensors
make one shard heavier than the others — and each worker's wait for a straggler or at the SSP
bound. Everything here is derived from the resolved scenario and the prediction, nothing new
is modelled.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ddlperf.prediction import Prediction
from ddlperf.scenario import Scenario
from ddlperf.units import format_bandwidth, format_duration, format_size

# Tensors listed behind an imbalanced shard.
TOP_TENSORS = 3
# A shard holding this much more than an even share is called imbalanced.
IMBALANCE = 1.10


@dataclass
class ResourceLoad:
    """One resource's share of the iteration; ``bytes``/``rate_bytes_per_s`` where it is a
    PS or ring link whose volume follows from the placement (None elsewhere)."""

    name: str
    busy_s: float
    utilization: float
    bytes: float | None = None
    rate_bytes_per_s: float | None = None


@dataclass
class ShardLoad:
    """A PS shard's bytes (each pushed by every remote worker and pulled back)."""

    name: str
    bytes: float
    share: float  # of all parameter bytes
    tensors: int
    top_tensors: list[dict[str, Any]] = field(default_factory=list)  # name, bytes, share


@dataclass
class WorkerWait:
    """Workers of one group: their wait per iteration and why they wait."""

    workers: str
    group: str
    count: int
    compute_s: float
    wait_s: float
    share: float  # of the iteration
    reason: str


def resource_loads(sc: Scenario, p: Prediction) -> list[ResourceLoad]:
    """The prediction's resources, busiest first, with bytes and rates where they are known."""
    volumes = _link_volumes(sc)
    out = []
    for r in p.resources:
        volume = volumes.get(r.name)
        out.append(ResourceLoad(r.name, r.busy_s, r.utilization,
                                None if volume is None else volume[0],
                                None if volume is None else volume[1]))
    return sorted(out, key=lambda r: r.utilization, reverse=True)


def _link_volumes(sc: Scenario) -> dict[str, tuple[float, float]]:
    """(bytes per iteration, payload bytes/s) of the PS shards' links and of the ring."""
    out: dict[str, tuple[float, float]] = {}
    n = sc.worker_count
    if sc.strategy.arch == "ps" and not sc.multi_gpu:
        shard_bytes = sc.placement.sum(axis=0)
        for k, shard in enumerate(sc.shards):
            senders = n - shard.host_gpus
            out[f"{shard.name} downlink"] = (float(senders * shard_bytes[k]), shard.down)
            out[f"{shard.name} uplink"] = (float(senders * shard_bytes[k]), shard.up)
    elif sc.strategy.arch == "allreduce" and not sc.multi_gpu and n > 1:
        slowest = min(sc.groups, key=lambda g: min(g.up, g.down))
        link = "uplink" if slowest.up <= slowest.down else "downlink"
        volume = 2 * (n - 1) / n * sc.parameter_bytes
        out[f"ring ({slowest.worker_name()} {link})"] = (volume, min(slowest.up, slowest.down))
    return out


def shard_loads(sc: Scenario) -> list[ShardLoad]:
    """Bytes per shard and, for each, its largest tensors (what an imbalance is made of)."""
    if not sc.shards:
        return []
    total = float(sc.placement.sum())
    out = []
    for k, shard in enumerate(sc.shards):
        column = sc.placement[:, k]
        held = np.flatnonzero(column > 0)
        biggest = held[np.argsort(-column[held], kind="stable")][:TOP_TENSORS]
        size = float(column.sum())
        out.append(ShardLoad(
            shard.name, size, size / total if total else 0.0, len(held),
            [{"name": sc.tensor_names[j], "bytes": float(column[j]),
              "share": float(column[j]) / size if size else 0.0} for j in biggest]))
    return out


def imbalance(shards: list[ShardLoad]) -> float:
    """Heaviest shard's bytes / an even share (1.0 = balanced)."""
    if not shards:
        return 1.0
    even = sum(s.bytes for s in shards) / len(shards)
    return max(s.bytes for s in shards) / even if even > 0 else 1.0


def worker_waits(sc: Scenario, p: Prediction) -> list[WorkerWait]:
    """Per run of identical workers: compute, wait and why (straggler, SSP bound, none)."""
    sync = sc.strategy.effective_sync if sc.strategy.arch == "ps" else "bsp"
    runs: list[WorkerWait] = []
    slowest = max(p.workers, key=lambda w: w.compute_s) if len(p.workers) else None
    for w in p.workers:
        if runs and runs[-1].group == w.group and abs(runs[-1].wait_s - w.wait_s) <= 1e-12 \
                and abs(runs[-1].compute_s - w.compute_s) <= 1e-12:
            last = runs[-1]
            last.count += 1
            last.workers = f"{last.workers.split('–')[0]}–{w.name}"
            continue
        if w.wait_s <= 0:
            reason = "no wait"
        elif sync == "ssp":
            reason = f"at the SSP bound (s={sc.strategy.staleness}): may not run further ahead"
        elif slowest is not None:
            reason = f"for the slowest worker {slowest.name} (compute " \
                     f"{format_duration(slowest.compute_s)}) every iteration"
        else:
            reason = "for slower workers"
        share = w.wait_s / w.iteration_time_s if w.iteration_time_s > 0 else 0.0
        runs.append(WorkerWait(w.name, w.group, 1, w.compute_s, w.wait_s, share, reason))
    return runs


def bottleneck_words(sc: Scenario, p: Prediction, loads: list[ResourceLoad],
                     shards: list[ShardLoad], waits: list[WorkerWait]) -> str:
    """The bottleneck as one or two sentences with the numbers behind it."""
    name = p.bottleneck
    period = p.iteration_time_s
    compute = p.breakdown_s.get("compute", 0.0)
    exposed = p.breakdown_s.get("communication", 0.0)
    if name == "compute":
        return (f"Compute-bound: {format_duration(compute)} of the "
                f"{format_duration(period)} iteration is compute; communication adds only "
                f"{format_duration(exposed)} ({_pct(exposed, period)}). Faster links will not "
                "help much; a faster device or a larger batch per worker would.")
    if name.startswith("straggler"):
        worker = name.split(" ", 1)[1]
        slow = max(p.workers, key=lambda w: w.compute_s)
        fast = min(p.workers, key=lambda w: w.compute_s)
        waited = max(waits, key=lambda w: w.wait_s) if waits else None
        text = (f"A straggler sets the pace: {worker} computes {format_duration(slow.compute_s)}"
                f" per iteration, the fastest worker {format_duration(fast.compute_s)}.")
        if waited is not None and waited.wait_s > 0:
            text += (f" {waited.workers} wait {format_duration(waited.wait_s)} "
                     f"({_pct(waited.wait_s, waited.wait_s / waited.share if waited.share else 0)}"
                     f" of their iteration) {waited.reason.split(' (')[0]}.")
        return text
    load = next((r for r in loads if r.name == name), None)
    if load is None:
        load = max(loads, key=lambda r: r.utilization) if loads else None
    if load is None:
        return f"The bottleneck is {name}."
    text = (f"The bottleneck is {load.name}: busy {_pct(load.utilization, 1)} of the "
            f"{format_duration(period)} iteration ({format_duration(load.busy_s)})")
    if load.bytes is not None and load.rate_bytes_per_s:
        text += (f", moving {format_size(load.bytes)} per iteration at "
                 f"{format_bandwidth(load.rate_bytes_per_s * 8)} of payload")
    text += "."
    if name.startswith("ps") and shards and imbalance(shards) >= IMBALANCE:
        heavy = max(shards, key=lambda s: s.bytes)
        top = heavy.top_tensors[0] if heavy.top_tensors else None
        text += (f" Shards are imbalanced: {heavy.name} holds {_pct(heavy.share, 1)} of the "
                 f"parameters ({format_size(heavy.bytes)}; an even share is "
                 f"{_pct(1, len(shards))})")
        if top is not None:
            text += f", {_pct(top['share'], 1)} of it {top['name']} ({format_size(top['bytes'])})"
        text += "."
    if exposed > 0:
        text += (f" Exposed communication: {format_duration(exposed)} "
                 f"({_pct(exposed, period)} of the iteration).")
    return text


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole > 0 else "-"


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def as_dicts(items: list[Any]) -> list[dict[str, Any]]:
    return [asdict(item) for item in items]
