"""Resolve (Workload, Cluster, Strategy) into the arrays both predictors work on.

Everything here is in base units: seconds, bytes and payload bytes/s (line rate × goodput / 8;
fabric rates / 8). Workers are kept in groups of identical machines so that a 1024-worker
homogeneous cluster costs no more to predict than a 1-worker one; servers and racks are planned
by :mod:`ddlperf.topology`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace

import numpy as np

from ddlperf import host_cpu
from ddlperf.cluster import Cluster, NodeGroup, WorkerGroup
from ddlperf.compute import KernelTable, rates, synthetic_rows
from ddlperf.errors import InputError
from ddlperf.hardware import Device, catalog
from ddlperf.memory import memory_note, worker_memory
from ddlperf.sharding import shard_matrix
from ddlperf.strategy import Strategy
from ddlperf.topology import RackPlan, Segment, plan_servers
from ddlperf.transport import Transport
from ddlperf.workload import Workload


@dataclass(frozen=True)
class GroupPlan:
    """``count`` identical workers, global indices ``first`` … ``first + count - 1``.

    They sit on ``count / gpus`` identical servers from global server ``first_server`` on
    (one-GPU hosts of a ``workers:`` cluster are servers too, named ``wN``). ``up``/``down``
    are each worker's path rate for PS traffic (its share of the links it crosses, see
    :mod:`ddlperf.topology`); ``nic_up``/``nic_down`` a server's NICs together; ``intra`` each
    GPU's fabric link per direction (None: one GPU, no fabric); ``rack``/``whole_racks`` as in
    :class:`~ddlperf.topology.Segment`. All rates payload bytes/s.
    """

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
    kind: str = "workers"  # "workers" (named wN) or "nodes" (named nodeS/gpuG)
    gpus: int = 1
    first_server: int = 0
    nics: int = 1
    nic_up: float = 0.0
    nic_down: float = 0.0
    intra: float | None = None
    rack: int | None = None
    whole_racks: int = 0
    # wall seconds a capped worker's CPU spends per byte it moves over the NIC (0: uncapped;
    # :mod:`ddlperf.host_cpu`); for the PS already in forward/backward, for rings a link
    comm_wall_s_per_byte: float = 0.0
    # the same per byte it moves over a fabric that costs host CPU (loopback TCP; 0: none)
    intra_wall_s_per_byte: float = 0.0
    # (name, first worker, workers) of the cluster's groups this one joins, in order, where
    # the cluster gave identical workers apart (``workers: [{name: a}, {name: b}]``); empty:
    # one, ``name``
    members: tuple[tuple[str, int, int], ...] = ()

    @property
    def servers(self) -> int:
        return self.count // self.gpus

    def worker_name(self, offset: int = 0) -> str:
        if self.kind == "workers":
            return f"w{self.first + offset}"
        return f"node{self.first_server + offset // self.gpus}/gpu{offset % self.gpus}"

    def server_name(self, offset: int = 0) -> str:
        """``nodeS`` (``wN`` for one-GPU hosts of a ``workers:`` cluster)."""
        if self.kind == "workers":
            return f"w{self.first + offset}"
        return f"node{self.first_server + offset}"

    def nic_name(self, direction: str, offset: int = 0) -> str:
        """``w3 uplink``; ``node1 nic0 uplink``; ``node1 nic0-1 uplink`` for 2 NICs as one link."""
        if self.kind == "workers":
            return f"{self.server_name(offset)} {direction}"
        nics = "nic0" if self.nics == 1 else f"nic0-{self.nics - 1}"
        return f"{self.server_name(offset)} {nics} {direction}"

    def intra_name(self, offset: int = 0) -> str:
        return f"{self.server_name(offset)} intra"


@dataclass(frozen=True)
class ShardPlan:
    """A PS shard: its links (payload bytes/s), update cost, and host if colocated.

    A colocated shard k lives on worker server k: ``host`` is that server's first worker
    (whose compute stream applies the shard's updates), ``host_server`` the server and
    ``host_gpus`` its workers, whose traffic to the shard does not cross the NIC.
    """

    name: str
    index: int
    host: int | None
    up: float
    down: float
    update_s_per_byte: float
    host_server: int | None = None
    host_gpus: int = 0


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
    racks: RackPlan | None = None
    memory: dict[str, dict[str, object]] = field(default_factory=dict)  # per group
    # the transport's cap on one connection, payload bytes/s (math.inf: none; see
    # ddlperf.transport for what a connection is); its per-message cost is in latency_s
    connection_cap: float = math.inf
    # the transport's cap on what one process receives over all its connections together,
    # payload bytes/s (math.inf: none): a shard's process for pushes, a worker's (a server's,
    # with local aggregation) for pulls
    receive_cap: float = math.inf
    # ASP/SSP: price every server's GPUs as moving together at its NIC rather than on phases
    # of their own (the arrangement figure of ddlperf.predictors.arrangement; never set by
    # resolve)
    gpus_together: bool = False

    @property
    def capped(self) -> bool:
        """Some connection has a cap below infinity (the transport limits streams)."""
        return math.isfinite(self.connection_cap)

    @property
    def receive_capped(self) -> bool:
        """A receiving process has a cap below infinity (the transport limits its intake)."""
        return math.isfinite(self.receive_cap)

    @property
    def worker_count(self) -> int:
        return sum(g.count for g in self.groups)

    @property
    def parameter_bytes(self) -> float:
        return float(self.tensor_bytes.sum())

    @property
    def server_count(self) -> int:
        return sum(g.servers for g in self.groups)

    @property
    def multi_gpu(self) -> bool:
        return any(g.gpus > 1 for g in self.groups)

    def worker_name(self, worker: int) -> str:
        group = self.group_of(worker)
        return group.worker_name(worker - group.first)

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


def _kernel_table(workload: Workload) -> KernelTable | None:
    """Per-sample kernel rows of every layer (given, or synthesised from FLOPs and bytes)."""
    cache = workload.derived_cache
    if "kernel_table" not in cache:
        rows = []
        for layer in workload.layers:
            if layer.kernels:
                rows.append(layer.kernels)
            elif layer.flops is not None and layer.memory_bytes is not None:
                params = float(layer.parameter_bytes)
                activations = max(layer.memory_bytes - params, 0.0) / workload.batch_size
                rows.append(synthetic_rows(getattr(layer, "type", None),
                                           layer.flops / workload.batch_size, activations,
                                           params))
            else:
                cache["kernel_table"] = None
                break
        else:
            cache["kernel_table"] = KernelTable.from_layers(rows)
    return cache["kernel_table"]


def group_compute(
    workload: Workload, device: Device | None, speed: float, batch: int, notes: list[str]
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Forward, backward, unattributed seconds and update s/byte for one worker of a group.

    A different device or batch rescales each layer's forward and backward by the ratio of
    kernel-model times (:mod:`ddlperf.compute`: per operation class, dtype, math mode, waves)
    on the two devices at the two batches — exact for zoo workloads, a per-class estimate for
    profiles (layers without kernel rows are priced by their type, FLOPs and bytes). Without
    FLOP data: the ratio of effective peaks, linear in batch size. With gradient accumulation
    (k micro-batches per synchronisation) the first k − 1 micro-batches run before the last
    one's forward and backward, so they are added to the unattributed time, which no
    communication overlaps. ``speed`` divides every time.
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
    if not same_device or batch != workload.batch_size:
        target = device or reference
        table = _kernel_table(workload)
        if target is not None and reference is not None and table is not None:
            math = workload.provenance.get("math")
            ref_f, ref_b = table.seconds(rates(reference, workload.dtype, math),
                                         workload.batch_size)
            new_f, new_b = table.seconds(rates(target, workload.dtype, math), batch)
            with np.errstate(divide="ignore", invalid="ignore"):
                fwd = np.where(ref_f > 0, fwd * new_f / ref_f, new_f)
                bwd = np.where(ref_b > 0, bwd * new_b / ref_b, new_b)
            total_ref = float(ref_f.sum() + ref_b.sum())
            overall = float(new_f.sum() + new_b.sum()) / total_ref if total_ref > 0 else 1.0
            unattributed *= overall
            update *= _stream_rate(reference) / _stream_rate(target)
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
                update *= _stream_rate(reference) / _stream_rate(device)
            if batch != workload.batch_size:
                ratio = batch / workload.batch_size
                notes.append(f"batch {batch} ≠ profiled {workload.batch_size}: times scaled × "
                             f"{ratio:.3g} (linear in batch size)")
                fwd, bwd, unattributed = fwd * ratio, bwd * ratio, unattributed * ratio
    unattributed = with_micro_batches(unattributed, float(fwd.sum() + bwd.sum()),
                                      workload.accumulation)
    result = (fwd / speed, bwd / speed, unattributed / speed, update / speed)
    cache[key] = (*result, tuple(notes))
    outer_notes.extend(notes)
    return result


def with_micro_batches(unattributed_s: float, layers_s: float, micro: int) -> float:
    """The unattributed step of an iteration of ``micro`` micro-batches: the k − 1 passes
    before the last (layers plus their own unattributed time) run inside it, between the
    forward that waits for parameters and the backward that communicates."""
    return unattributed_s + (micro - 1) * (layers_s + unattributed_s)


def micro_batch_unattributed(group: GroupPlan, micro: int) -> float:
    """One micro-batch's own unattributed seconds (the inverse of
    :func:`with_micro_batches`): what a trainer that runs every micro-batch waits per pass."""
    layers_s = float(np.sum(group.forward) + np.sum(group.backward))
    return max(0.0, (group.unattributed_s - (micro - 1) * layers_s) / micro)


def _shard_update(workload: Workload, segments: list[Segment]) -> float:
    """A shard's optimizer seconds per byte by default: the workers' own (without their
    ``speed``), i.e. the workload's rescaled to the device every worker runs on — the same
    whether that device came with the workload (``--device``) or with the cluster's worker
    entries (it moved a vgg16 job on H100s by 1.3% which way it was given). Workers on
    several devices, or a workload from a device outside the catalog, keep the workload's."""
    reference = _reference_device(workload)
    if reference is None:
        return workload.update_s_per_byte
    devices = [seg.group.source.resolved_device() or reference for seg in segments]
    if len({d.name for d in devices}) != 1:
        return workload.update_s_per_byte
    target = devices[0]
    if target.name == reference.name:
        return workload.update_s_per_byte
    return workload.update_s_per_byte * _stream_rate(reference) / _stream_rate(target)


def _stream_rate(device: Device) -> float:
    """Achievable memory bandwidth, bytes/s (what the optimizer step is bound by)."""
    return device.memory_bandwidth * device.achievable_bandwidth_share


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
    names, sizes, layers, _ = _tensor_arrays(workload)
    placement = np.zeros((len(names), cluster.ps.count))
    if cluster.ps.count:
        placement = _placement(workload, cluster.ps.count, strategy.sharding)
    shard_bytes = placement.sum(axis=0) if cluster.racks is not None else None
    segments, racks = plan_servers(cluster, strategy, shard_bytes)
    groups: list[GroupPlan] = []
    memory: dict[str, dict[str, object]] = {}
    first = 0
    for segment in segments:
        groups.append(_plan_group(workload, cluster, strategy, segment, first, notes))
        _check_memory(workload, segment.group.source, memory, notes)
        first += segment.servers * segment.group.gpus
    groups = join_identical(groups)
    hierarchical = strategy.arch == "allreduce" and strategy.allreduce == "hierarchical"
    if hierarchical and len({g.gpus for g in groups}) > 1:
        raise InputError("--allreduce", "hierarchical all-reduce needs the same number of "
                         "GPUs on every server", "use --allreduce ring")
    shards: list[ShardPlan] = []
    if cluster.ps.count:
        rate = cluster.goodput / 8.0
        ps_up, ps_down = cluster.ps_up() * rate, cluster.ps_down() * rate
        update = cluster.ps.update_s_per_byte
        if update is None:
            update = _shard_update(workload, segments)
        for k in range(cluster.ps.count):
            if cluster.ps.placement == "colocated":
                host = _group_of_server(groups, k)
                worker = host.first + (k - host.first_server) * host.gpus
                shards.append(ShardPlan(f"ps{k}", k, worker, host.nic_up, host.nic_down, update,
                                        k, host.gpus))
            else:
                shards.append(ShardPlan(f"ps{k}", k, None, ps_up, ps_down, update))
    transport = cluster.transport
    latency = cluster.latency
    if transport is not None:
        latency += transport.message_s
        notes.append(transport_note(transport, strategy))
    return Scenario(
        workload=workload, cluster=cluster, strategy=strategy, groups=tuple(groups),
        shards=tuple(shards), tensor_names=names, tensor_bytes=sizes, tensor_layer=layers,
        placement=placement, latency_s=latency, notes=notes, racks=racks,
        memory=memory,
        connection_cap=math.inf if transport is None else transport.cap_bytes_per_s,
        receive_cap=math.inf if transport is None else transport.receive_bytes_per_s,
    )


# what two groups may differ in and still be one class of identical workers
_PLACE_FIELDS = frozenset({"name", "first", "count", "first_server", "members"})


def join_identical(groups: list[GroupPlan]) -> list[GroupPlan]:
    """Consecutive groups of identical workers as one group.

    A cluster may list identical workers apart (``workers: [{name: a}, {name: b}]``, one
    entry per host); they are one class all the same. The predictors treat a group as one
    class: the queueing network's exact single-class solution, the lockstep of identical
    workers, the simulator's random phases and symmetry. So two identical hosts listed apart
    must predict what ``workers: 2`` predicts; ``members`` keeps their names for the output.
    """
    joined: list[GroupPlan] = []
    for group in groups:
        last = joined[-1] if joined else None
        if last is not None and _same_class(last, group) \
                and group.first == last.first + last.count \
                and group.first_server == last.first_server + last.servers:
            members = (last.members or ((last.name, last.first, last.count),)) + (
                group.members or ((group.name, group.first, group.count),))
            joined[-1] = replace(last, count=last.count + group.count, members=members)
        else:
            joined.append(group)
    return joined


def _same_class(a: GroupPlan, b: GroupPlan) -> bool:
    for f in fields(GroupPlan):
        if f.name in _PLACE_FIELDS:
            continue
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            if not np.array_equal(x, y):
                return False
        elif x != y:
            return False
    return True


def member_runs(group: GroupPlan, first: int, count: int) -> list[tuple[str, int, int]]:
    """(group name, first worker, workers) of workers ``first`` … ``first + count - 1`` of
    ``group``, by the names the cluster gave them (:func:`join_identical`); by worker number,
    so a view that splits the group (a colocated host apart) keeps them."""
    runs = []
    for name, start, members in group.members:
        lo, hi = max(start, first), min(start + members, first + count)
        if lo < hi:
            runs.append((name, lo, hi - lo))
    return runs or [(group.name, first, count)]


def transport_note(transport: Transport, strategy: Strategy) -> str:
    """What the transport limits, and what a connection is for this architecture."""
    if strategy.arch == "ps":
        what = ("one per server and shard, each direction (local aggregation)"
                if strategy.local_aggregation else
                "one per GPU and shard, each direction")
    else:
        what = "each ring edge between servers"
    return f"transport {transport.summary()} (connections: {what})"


def _check_memory(workload: Workload, group: WorkerGroup | NodeGroup,
                  memory: dict[str, dict[str, object]], notes: list[str]) -> None:
    """Each group's memory per worker, and a note when it does not fit the device."""
    if group.name in memory:
        return
    device = group.resolved_device() or _reference_device(workload)
    batch = group.batch_size or workload.batch_size
    key = ("memory", None if device is None else device.name, batch)
    cache = workload.derived_cache
    if key not in cache:
        cache[key] = worker_memory(workload, device, batch)
    report = cache[key]
    if report is None:
        return
    memory[group.name] = report
    note = memory_note(group.name, device, report, batch) if device is not None else None
    if note is not None:
        notes.append(note)


def _placement(workload: Workload, shards: int, policy: str) -> np.ndarray:
    """Tensor × shard bytes in gradient order (policies work in variable-creation order).

    Policies that place the tensors alike (every policy with one shard) get the same array,
    so that whatever is cached per placement (the batched sweep's BSP periods) is shared."""
    cache = workload.derived_cache
    key = ("placement", shards, policy)
    if key not in cache:
        _names, sizes, _layers, creation_to_grad = _tensor_arrays(workload)
        placement = np.zeros((len(sizes), shards))
        placement[creation_to_grad] = shard_matrix(sizes[creation_to_grad], shards, policy)  # type: ignore[arg-type]
        placement.setflags(write=False)
        for other in [v for k, v in cache.items() if isinstance(k, tuple) and len(k) == 3
                      and k[:2] == ("placement", shards)]:
            if np.array_equal(other, placement):
                placement = other
                break
        cache[key] = placement
    return cache[key]


def _group_of_server(groups: list[GroupPlan], server: int) -> GroupPlan:
    return next(g for g in groups if g.first_server <= server < g.first_server + g.servers)


def _plan_group(
    workload: Workload, cluster: Cluster, strategy: Strategy, segment: Segment, first: int,
    notes: list[str],
) -> GroupPlan:
    group = segment.group.source
    device = group.resolved_device()
    batch = group.batch_size or workload.batch_size
    fwd, bwd, unattributed, update = group_compute(workload, device, group.speed, batch, notes)
    per_byte = group.comm_cpu_wall_s_per_byte
    if per_byte > 0 or getattr(group, "intra_cpu_wall_s_per_byte", 0.0) > 0:
        fwd, bwd = _charge_comm_cpu(workload, strategy, segment, fwd, bwd, notes)
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
        name=group.name, first=first, count=segment.servers * segment.group.gpus,
        device=device.name if device else workload.device,
        batch_size=batch * workload.accumulation,
        forward=fwd, backward=bwd, unattributed_s=unattributed, update_s_per_byte=update,
        up=segment.up, down=segment.down,
        ready_offset=ready_offset, forward_s=forward_s, backward_s=backward_s,
        compute_s=compute_s, kind="nodes" if cluster.nodes else "workers",
        gpus=segment.group.gpus, first_server=segment.first_server, nics=segment.group.nics,
        nic_up=segment.nic_up, nic_down=segment.nic_down, intra=segment.intra,
        rack=segment.rack, whole_racks=segment.whole_racks, comm_wall_s_per_byte=per_byte,
        intra_wall_s_per_byte=getattr(group, "intra_cpu_wall_s_per_byte", 0.0),
    )


def _charge_comm_cpu(workload: Workload, strategy: Strategy, segment: Segment,
                     fwd: np.ndarray, bwd: np.ndarray, notes: list[str],
                     ) -> tuple[np.ndarray, np.ndarray]:
    """A capped group's communication CPU (:mod:`ddlperf.host_cpu`): on the PS, each layer's
    pushes and pulls over the NIC (and with local aggregation its reduce-scatter and
    all-gather over a fabric that costs host CPU) lengthen its backward and forward; rings
    take it as a link."""
    group = segment.group.source
    cap = group.cpu_cap
    assert cap is not None
    _names, sizes, layers, _order = _tensor_arrays(workload)
    gpus = segment.group.gpus
    nic_per_byte = group.comm_cpu_s_per_byte or 0.0
    intra_per_byte = getattr(group, "intra_cpu_s_per_byte", None) or 0.0
    if strategy.arch == "ps":
        nic, intra = host_cpu.ps_bytes_per_gradient_byte(
            gpus, strategy.local_aggregation and gpus > 1)
        cpu_per_byte = nic * nic_per_byte + intra * intra_per_byte
        fwd, bwd = host_cpu.ps_charged_compute(workload, fwd, bwd, layers, sizes,
                                               cpu_per_byte / cap)
        notes.append(host_cpu.ps_note(group.name, cap, nic_per_byte, 2.0 * nic * float(
            sizes.sum()), intra_per_byte, 2.0 * intra * float(sizes.sum())))
    else:
        notes.append(host_cpu.ring_note(group.name, cap, nic_per_byte,
                                        intra_per_byte if gpus > 1 else 0.0))
    return fwd, bwd
