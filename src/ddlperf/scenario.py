"""Resolve (Workload, Cluster, Strategy) into the arrays both predictors work on.

Everything here is in base units: seconds, bytes and payload bytes/s (line rate × goodput / 8).
Workers are kept in groups of identical machines so that a 1024-worker homogeneous cluster
costs no more to predict than a 1-worker one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ddlperf.cluster import Cluster, WorkerGroup
from ddlperf.errors import InputError
from ddlperf.hardware import Device, catalog
from ddlperf.sharding import shard_matrix
from ddlperf.strategy import Strategy
from ddlperf.workload import Workload


@dataclass(frozen=True)
class GroupPlan:
    """``count`` identical workers, global indices ``first`` … ``first + count - 1``."""

    name: str
    first: int
    count: int
    device: str | None
    batch_size: int
    forward: np.ndarray
    backward: np.ndarray
    unattributed_s: float
    update_s_per_byte: float
    up: float
    down: float
    ready_offset: np.ndarray  # per tensor (gradient order): seconds after backward starts
    forward_s: float  # totals of the arrays above, cached for speed
    backward_s: float
    compute_s: float  # forward + backward + unattributed

    def worker_name(self, offset: int = 0) -> str:
        return f"w{self.first + offset}"


@dataclass(frozen=True)
class ShardPlan:
    """A PS shard: its links (payload bytes/s), update cost, and host worker if colocated."""

    name: str
    index: int
    host: int | None
    up: float
    down: float
    update_s_per_byte: float


@dataclass
class Scenario:
    workload: Workload
    cluster: Cluster
    strategy: Strategy
    groups: tuple[GroupPlan, ...]
    shards: tuple[ShardPlan, ...]
    tensor_names: tuple[str, ...]
    tensor_bytes: np.ndarray  # gradient-ready order
    tensor_layer: np.ndarray  # owning layer index, same order
    placement: np.ndarray  # (tensors, shards) bytes, same order
    latency_s: float
    notes: list[str] = field(default_factory=list)

    @property
    def worker_count(self) -> int:
        return sum(g.count for g in self.groups)

    @property
    def parameter_bytes(self) -> float:
        return float(self.tensor_bytes.sum())

    def group_of(self, worker: int) -> GroupPlan:
        for group in self.groups:
            if group.first <= worker < group.first + group.count:
                return group
        raise IndexError(worker)


def _reference_device(workload: Workload) -> Device | None:
    if workload.device is None:
        return None
    return catalog().get(workload.device) or next(
        (d for n, d in catalog().items() if n.lower() == workload.device.lower()), None
    )


def _roofline(workload: Workload, device: Device, batch: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-layer forward/backward roofline seconds at ``batch`` (backward = 2× the work)."""
    ratio = batch / workload.batch_size
    fwd, bwd = [], []
    for layer in workload.layers:
        params = layer.parameter_bytes
        activations = max((layer.memory_bytes or 0.0) - params, 0.0) * ratio
        flops = (layer.flops or 0.0) * ratio
        fwd.append(device.layer_seconds(flops, activations + params, workload.dtype))
        bwd.append(device.layer_seconds(2 * flops, 2 * (activations + params), workload.dtype))
    return np.array(fwd), np.array(bwd)


def group_compute(
    workload: Workload, device: Device | None, speed: float, batch: int, notes: list[str]
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Forward, backward, unattributed seconds and update s/byte for one worker of a group.

    A different device rescales each measured layer by the ratio of roofline times on the two
    devices (exact for zoo workloads, a physically grounded estimate for profiles); a different
    batch size without FLOP data scales times linearly. ``speed`` divides every time.
    """
    key = (None if device is None else (device.name, tuple(device.peak_flops.items()),
                                         device.memory_bandwidth, device.efficiency),
           speed, batch)
    cache = workload.derived_cache
    if key in cache:
        *result, own_notes = cache[key]
        notes.extend(own_notes)
        return tuple(result)  # type: ignore[return-value]
    outer_notes, notes = notes, []
    fwd, bwd = workload.forward_array, workload.backward_array
    unattributed, update = workload.unattributed_s, workload.update_s_per_byte
    reference = _reference_device(workload)
    same_device = device is None or (reference is not None and device == reference)
    has_flops = all(layer.flops is not None and layer.memory_bytes is not None
                    for layer in workload.layers)
    if not same_device or batch != workload.batch_size:
        target = device or reference
        if target is not None and reference is not None and has_flops:
            ref_f, ref_b = _roofline(workload, reference, workload.batch_size)
            new_f, new_b = _roofline(workload, target, batch)
            with np.errstate(divide="ignore", invalid="ignore"):
                fwd = np.where(ref_f > 0, fwd * new_f / ref_f, new_f)
                bwd = np.where(ref_b > 0, bwd * new_b / ref_b, new_b)
            total_ref = float(ref_f.sum() + ref_b.sum())
            overall = float(new_f.sum() + new_b.sum()) / total_ref if total_ref > 0 else 1.0
            unattributed *= overall
            update *= (reference.memory_bandwidth * reference.efficiency) / (
                target.memory_bandwidth * target.efficiency
            )
        else:
            if not same_device:
                if reference is None or device is None:
                    raise InputError(
                        "workers.device",
                        f"the workload's times are for {workload.device or 'an unnamed device'}, "
                        "which is not in the catalog, so they cannot be rescaled to another device",
                        "set a relative 'speed' for the group instead of 'device'",
                    )
                factor = (reference.peak(workload.dtype) * reference.efficiency) / (
                    device.peak(workload.dtype) * device.efficiency
                )
                notes.append(
                    f"{workload.name} has no per-layer FLOPs: {device.name} time = "
                    f"{reference.name} time × {factor:.3g} (ratio of effective peaks)"
                )
                fwd, bwd, unattributed = fwd * factor, bwd * factor, unattributed * factor
                update *= (reference.memory_bandwidth * reference.efficiency) / (
                    device.memory_bandwidth * device.efficiency
                )
            if batch != workload.batch_size:
                ratio = batch / workload.batch_size
                notes.append(f"batch {batch} ≠ profiled {workload.batch_size}: times scaled × "
                             f"{ratio:.3g} (linear in batch size)")
                fwd, bwd, unattributed = fwd * ratio, bwd * ratio, unattributed * ratio
    result = (fwd / speed, bwd / speed, unattributed / speed, update / speed)
    cache[key] = (*result, tuple(notes))
    outer_notes.extend(notes)
    return result


def _tensor_arrays(workload: Workload) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, list[int]]:
    cache = workload.derived_cache
    if "tensors" not in cache:
        names = tuple(t.name for t in workload.gradient_tensors)
        sizes = np.array([t.bytes for t in workload.gradient_tensors], dtype=float)
        layer_of = workload.tensor_layer
        layers = np.array([layer_of[n] for n in names], dtype=int)
        creation = [t.name for layer in workload.layers for t in layer.tensors]
        index = {n: i for i, n in enumerate(names)}
        creation_to_grad = [index[n] for n in creation]
        cache["tensors"] = (names, sizes, layers, creation_to_grad)
    return cache["tensors"]


def resolve(workload: Workload, cluster: Cluster, strategy: Strategy) -> Scenario:
    """Check that the three inputs fit together and expand them into per-group arrays."""
    notes: list[str] = []
    if strategy.arch == "ps" and cluster.ps.count == 0:
        raise InputError("ps", "the ps architecture needs at least one PS shard",
                         "add --ps 1 (or use --arch allreduce)")
    if strategy.arch == "allreduce" and cluster.ps.count > 0:
        raise InputError("ps", "ring all-reduce has no parameter servers",
                         "drop --ps / the ps section, or use --arch ps")
    rate = cluster.goodput / 8.0
    groups: list[GroupPlan] = []
    first = 0
    for group in cluster.workers:
        groups.append(_plan_group(workload, cluster, group, first, rate, notes))
        first += group.count
    names, sizes, layers, _ = _tensor_arrays(workload)
    shards: list[ShardPlan] = []
    placement = np.zeros((len(names), cluster.ps.count))
    if cluster.ps.count:
        placement = _placement(workload, cluster.ps.count, strategy.sharding)
        update = cluster.ps.update_s_per_byte
        if update is None:
            update = workload.update_s_per_byte
        for k in range(cluster.ps.count):
            if cluster.ps.placement == "colocated":
                host = _group_for(groups, k)
                shards.append(ShardPlan(f"ps{k}", k, k, host.up, host.down, update))
            else:
                shards.append(ShardPlan(f"ps{k}", k, None, cluster.ps_up() * rate,
                                        cluster.ps_down() * rate, update))
    return Scenario(
        workload=workload, cluster=cluster, strategy=strategy, groups=tuple(groups),
        shards=tuple(shards), tensor_names=names, tensor_bytes=sizes, tensor_layer=layers,
        placement=placement, latency_s=cluster.latency, notes=notes,
    )


def _placement(workload: Workload, shards: int, policy: str) -> np.ndarray:
    """Tensor × shard bytes in gradient order (policies work in variable-creation order)."""
    cache = workload.derived_cache
    key = ("placement", shards, policy)
    if key not in cache:
        _names, sizes, _layers, creation_to_grad = _tensor_arrays(workload)
        placement = np.zeros((len(sizes), shards))
        placement[creation_to_grad] = shard_matrix(sizes[creation_to_grad], shards, policy)  # type: ignore[arg-type]
        placement.setflags(write=False)
        cache[key] = placement
    return cache[key]


def _group_for(groups: list[GroupPlan], worker: int) -> GroupPlan:
    return next(g for g in groups if g.first <= worker < g.first + g.count)


def _plan_group(
    workload: Workload, cluster: Cluster, group: WorkerGroup, first: int, rate: float,
    notes: list[str],
) -> GroupPlan:
    device = group.resolved_device()
    batch = group.batch_size or workload.batch_size
    fwd, bwd, unattributed, update = group_compute(workload, device, group.speed, batch, notes)
    key = ("ready_offset", id(bwd))
    cache = workload.derived_cache
    if key not in cache:
        # Backward runs the layers last to first; a gradient is ready when its layer ends.
        layer_end = np.cumsum(bwd[::-1])[::-1]
        _names, _sizes, layers, _order = _tensor_arrays(workload)
        totals = (float(fwd.sum()), float(bwd.sum()))
        cache[key] = (layer_end[layers], *totals, totals[0] + totals[1] + unattributed, bwd)
    ready_offset, forward_s, backward_s, compute_s, _keep_alive = cache[key]
    return GroupPlan(
        name=group.name, first=first, count=group.count,
        device=device.name if device else workload.device, batch_size=batch,
        forward=fwd, backward=bwd, unattributed_s=unattributed, update_s_per_byte=update,
        up=cluster.worker_up(group) * rate, down=cluster.worker_down(group) * rate,
        ready_offset=ready_offset, forward_s=forward_s, backward_s=backward_s,
        compute_s=compute_s,
    )
