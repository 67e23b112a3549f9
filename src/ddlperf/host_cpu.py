"""Communication CPU on a CPU-capped host: what moving bytes costs a worker whose processes
may use only ``cpu_cap`` cores.

Sending and receiving over TCP takes host CPU (the kernel's send and receive paths, the
framework's communication threads): ``comm_cpu_s_per_byte`` seconds per byte. A host with
spare cores runs that next to the compute and it costs nothing here (the default). A capped
host (a cgroup quota, a VM slice) pays it from its cap, at ``comm_cpu_s_per_byte / cpu_cap``
wall seconds per byte, where that CPU really runs:

- **parameter server.** The worker pushes each gradient from its compute thread as soon as it
  is ready and receives its pulls while it computes (PS trainers do; the receive threads share
  the cap with it), so the compute stream of a capped worker is longer by the CPU of the bytes
  it moves: each layer's backward by its tensors' pushes, each layer's forward by its pulls.
  The step is then (compute CPU + communication CPU) / cap, never shorter. With local
  aggregation a GPU moves 1/G of the gradient over the NIC (the server's push and pull are
  split over its G GPUs) and sends and receives (G−1)/G of it over the intra-node fabric in
  the reduce-scatter (during backward) and again in the all-gather (during forward). A fabric
  of peer copies (NVLink, PCIe P2P) costs no host CPU (``intra_cpu_s_per_byte`` unset); one
  that is TCP through the host (an emulated server's loopback, or ranks on one host without
  a GPU fabric) costs ``intra_cpu_s_per_byte`` per byte, paid from the same cap. The sums of
  the reduce-scatter ((G−1)/G of the gradient in float adds, memory-bound) are not charged:
  a few ms per iteration where the transfers cost hundreds.
- **all-reduce.** A bucket is reduced by the framework's communication threads while the compute
  thread waits or runs backward. Per ring step a worker sends one chunk and receives one, each
  at the per-byte CPU of its path (the NIC's ``comm_cpu_s_per_byte``, a host fabric's
  ``intra_cpu_s_per_byte``), so its CPU is a link of ``cpu_cap / (s_out + s_in)`` payload
  bytes/s on both of its edges (:func:`ring_rank_rate`): the ring runs at the slowest of that
  and the network (the CPU and the wire work side by side), and only binds when the capped
  CPU is slower than the network. The per-byte figures a ring pays are its own trainer's (a
  ring reduces while the compute thread idles), smaller than a PS worker's, whose pushes run
  beside its compute (:mod:`ddlperf.validate.comm_cpu`).

A colocated shard's own updates and traffic are the PS's, not the worker's, and are not
charged here.
"""

from __future__ import annotations

import math

import numpy as np

from ddlperf.workload import Workload


def ps_charged_compute(workload: Workload, forward: np.ndarray, backward: np.ndarray,
                       tensor_layer: np.ndarray, tensor_bytes: np.ndarray,
                       wall_s_per_byte: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-layer forward and backward with the CPU of the layer's pulls and pushes added:
    ``wall_s_per_byte`` × the layer's gradient bytes on each (the worker's share of them
    over the NIC already folded in)."""
    if wall_s_per_byte <= 0:
        return forward, backward
    cache = workload.derived_cache
    key = ("comm_cpu", id(forward), id(backward), wall_s_per_byte)
    if key not in cache:
        per_layer = np.bincount(tensor_layer, weights=tensor_bytes,
                                minlength=len(forward)) * wall_s_per_byte
        charged = (forward + per_layer, backward + per_layer)
        for array in charged:
            array.setflags(write=False)
        # the originals stay referenced so that their ids stay theirs while cached
        cache[key] = (*charged, forward, backward)
    fwd, bwd, _f, _b = cache[key]
    return fwd, bwd


def ps_bytes_per_gradient_byte(gpus: int, local_aggregation: bool) -> tuple[float, float]:
    """Bytes a PS worker sends or receives per gradient byte, once on the way out (its push,
    its reduce-scatter) and once on the way in (its pull, its all-gather): (over the NIC,
    over the fabric). Without local aggregation every GPU pushes and pulls it all."""
    if not local_aggregation or gpus <= 1:
        return 1.0, 0.0
    return 1.0 / gpus, 2.0 * (gpus - 1) / gpus


def ring_edge_rate(wall_s_per_byte: float) -> float:
    """Payload bytes/s that a capped worker's CPU allows on each of its ring edges (one chunk
    out and one in per step); ``math.inf`` when nothing is charged."""
    return math.inf if wall_s_per_byte <= 0 else 1.0 / (2.0 * wall_s_per_byte)


def ring_rank_rate(nic_wall_s_per_byte: float, intra_wall_s_per_byte: float, gpus: int,
                   phase: str, servers: int) -> float:
    """Payload bytes/s that the slowest capped rank of a group allows each of its ring edges in
    ``phase`` (``flat``, ``inside``, ``across``; :mod:`ddlperf.predictors.rings`).

    Per step a rank sends one chunk and receives one, each at the per-byte CPU of the path it
    takes, so its CPU moves both edges at ``1 / (w_out + w_in)``. In a flat ring over several
    servers a one-GPU server's rank has two NIC edges, a two-GPU server's ranks one NIC edge
    and one fabric edge each, and with three or more GPUs the middle ranks two fabric edges;
    a ring inside one server, and the inside phases of a hierarchical all-reduce, use only the
    fabric, its across phase only the NICs. ``math.inf`` when nothing is charged.
    """
    nic, intra = nic_wall_s_per_byte, intra_wall_s_per_byte
    if phase == "across":
        pairs = [(nic, nic)]
    elif phase == "inside" or servers <= 1:
        pairs = [(intra, intra)]
    elif gpus == 1:
        pairs = [(nic, nic)]
    elif gpus == 2:
        pairs = [(nic, intra)]
    else:
        pairs = [(nic, intra), (intra, intra)]
    slowest = max(out + into for out, into in pairs)
    return math.inf if slowest <= 0 else 1.0 / slowest


def ps_note(name: str, cpu_cap: float, comm_cpu_s_per_byte: float, moved_bytes: float,
            intra_cpu_s_per_byte: float = 0.0, intra_bytes: float = 0.0) -> str:
    """What the cap costs each worker of a PS group per iteration, for the notes."""
    cpu = moved_bytes * comm_cpu_s_per_byte
    intra_cpu = intra_bytes * intra_cpu_s_per_byte
    fabric = (f" + {intra_bytes / 1e6:.3g} MB over the fabric × {intra_cpu_s_per_byte:.3g} "
              "s/byte" if intra_cpu > 0 else "")
    return (f"{name}: communication CPU {(cpu + intra_cpu) * 1e3:.3g} ms per iteration "
            f"({moved_bytes / 1e6:.3g} MB over the NIC × {comm_cpu_s_per_byte:.3g} s/byte"
            f"{fabric}) on a {cpu_cap:g}-core cap: {(cpu + intra_cpu) / cpu_cap * 1e3:.3g} ms "
            "more compute per worker")


def ring_note(name: str, cpu_cap: float, comm_cpu_s_per_byte: float,
              intra_cpu_s_per_byte: float = 0.0) -> str:
    """The rates a capped group's CPU allows a ring edge, for the notes: over the NIC (one
    chunk out and one in per step) and, where the fabric costs host CPU, over the fabric."""
    parts = []
    if comm_cpu_s_per_byte > 0:
        rate = ring_edge_rate(comm_cpu_s_per_byte / cpu_cap)
        parts.append(f"{rate / 1e6:.3g} MB/s per edge over the NIC "
                     f"({comm_cpu_s_per_byte:.3g} s/byte)")
    if intra_cpu_s_per_byte > 0:
        rate = ring_edge_rate(intra_cpu_s_per_byte / cpu_cap)
        parts.append(f"{rate / 1e6:.3g} MB/s per edge inside the server "
                     f"({intra_cpu_s_per_byte:.3g} s/byte)")
    return (f"{name}: communication CPU on a {cpu_cap:g}-core cap moves at most "
            + " and ".join(parts))
