"""In-session calibration of communication CPU: a worker's host CPU seconds per byte it sends
or receives.

What is timed is the communication a PS worker of the run does: the measurement's own PS
trainer, one worker and one shard on two emulated hosts (namespaces and shaped links as the run
has them), exchanging the workload's gradient tensors. Per iteration the worker's process CPU
clock (every thread: the compute thread's ``isend`` calls and kernel send path, the receives,
installing the pulled parameters, gloo's threads) is read at phase boundaries
(:class:`~ddlperf.measure.trainer_common.CpuClock`).

- ``compute="real"``: the worker computes the zoo model as in the run, and the measurement's
  single-worker baseline (the same model alone on the same emulated host, no traffic) gives
  the compute's own CPU per step; the difference is what communicating costs the worker,
  including what it does to the compute beside it (28 MB through the caches per mobilenet_v2
  step). On this machine that is about twice the exchange alone.
- ``compute="emulated"``: ~no compute (a microsecond per layer); the worker's CPU is its
  exchange alone.

``comm_cpu_s_per_byte`` = the median over the steady iterations / the bytes pushed and pulled.
The workload's own tensor sizes fold the per-message cost in. A prediction charges it to a
CPU-capped worker (:mod:`ddlperf.host_cpu`).

An emulated server's fabric is TCP over its loopback, which :func:`calibrate_fabric_cpu`
times the same way with the server's own trainer: one server of G GPU ranks with local
aggregation and one PS shard, uncapped, the model computing as in the run. Each rank's CPU
per iteration, less the model's step alone and less its NIC bytes at ``comm_cpu_s_per_byte``,
per byte it sent and received over the loopback (its reduce-scatter and all-gather) is
``intra_cpu_s_per_byte``.

All-reduce rows time their own trainer instead (:func:`calibrate_ring_cpu`): DDP on two hosts
(the NIC figure) or on one server of G ranks (the loopback figure), uncapped, the model
computing as in the run. A ring reduces after (or beside) backward, when the compute thread is
idle or nearly so, so it does not pay what a PS worker's pushes do to the compute beside them:
on the 1 × 2 mobilenet_v2 server the PS figure (10.7 ns/byte over the loopback) made a capped
ring 26% too slow where the ring's own exchange did not bind at all.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

from ddlperf.workload import Workload

PHASES = ("before", "step", "exchange")
RING_PHASES = ("forward", "backward", "update")  # the DDP trainer's CPU laps


def calibrate_comm_cpu(workload: Workload, bandwidth_bps: float, compute: str = "emulated",
                       iterations: int = 8, warmup: int = 2, timeout: float = 120.0
                       ) -> dict[str, Any]:
    """Run the PS trainer with ``workload``'s tensors (one worker, one shard, links at
    ``bandwidth_bps``) and read the worker's CPU per byte moved; see the module doc."""
    from ddlperf.cluster import Cluster
    from ddlperf.strategy import Strategy

    cluster = Cluster.from_dict({"workers": 1, "ps": 1, "bandwidth": bandwidth_bps})
    steady, alone = _run(workload, cluster, Strategy(arch="ps", sync="bsp"), compute,
                         iterations, warmup, timeout)
    worker = statistics.median(_process_cpu(r) for r in steady)
    moved = float(steady[0]["payload_sent_bytes"] + steady[0]["payload_received_bytes"])
    per_iteration = max(worker - alone, 0.0)
    real = compute == "real"
    return {
        "comm_cpu_s_per_byte": per_iteration / moved,
        "cpu_s_per_iteration": per_iteration, "worker_cpu_s_per_iteration": worker,
        "compute_alone_cpu_s": alone, "bytes_per_iteration": moved,
        "iterations": len(steady), "tensors": len(workload.gradient_tensors),
        "compute": compute, "bandwidth_bps": bandwidth_bps,
        "how": "the PS trainer, 1 worker and 1 shard on two emulated hosts: the worker's median "
               "process CPU seconds per iteration"
               + (" minus the same model's step alone (single-worker baseline)" if real
                  else " with ~no compute")
               + " / bytes pushed and pulled",
    }


def calibrate_fabric_cpu(workload: Workload, gpus: int, intra_bps: float, bandwidth_bps: float,
                         nic_s_per_byte: float, compute: str = "emulated", iterations: int = 8,
                         warmup: int = 2, timeout: float = 120.0) -> dict[str, Any]:
    """Run the PS trainer with local aggregation on one uncapped server of ``gpus`` ranks
    (fabric ``intra_bps``, NIC and PS at ``bandwidth_bps``) and read each rank's CPU per byte
    it moved over the loopback; see the module doc."""
    from ddlperf.cluster import Cluster
    from ddlperf.strategy import Strategy

    cluster = Cluster.from_dict({"nodes": [{"count": 1, "gpus": gpus, "intra": intra_bps}],
                                 "ps": 1, "bandwidth": bandwidth_bps})
    steady, alone = _run(workload, cluster, Strategy(arch="ps", sync="bsp",
                                                     local_aggregation=True),
                         compute, iterations, warmup, timeout)
    per_rank = []
    for name in sorted({r["name"] for r in steady}):
        mine = [r for r in steady if r["name"] == name]
        nic = 2.0 * float(mine[0]["remote_payload_bytes"])  # its push out, its pull in
        intra = float(mine[0]["payload_sent_bytes"] + mine[0]["payload_received_bytes"]) - nic
        cpu = statistics.median(_process_cpu(r) for r in mine)
        per_rank.append((cpu, nic, intra))
    cpu = statistics.median(c for c, _n, _i in per_rank)
    nic = statistics.median(n for _c, n, _i in per_rank)
    intra = statistics.median(i for _c, _n, i in per_rank)
    fabric = max(cpu - alone - nic * nic_s_per_byte, 0.0)
    return {
        "intra_cpu_s_per_byte": fabric / intra, "cpu_s_per_iteration": fabric,
        "rank_cpu_s_per_iteration": cpu, "compute_alone_cpu_s": alone,
        "nic_bytes_per_iteration": nic, "nic_cpu_s_per_byte": nic_s_per_byte,
        "intra_bytes_per_iteration": intra, "gpus": gpus, "intra_bps": intra_bps,
        "iterations": len(steady) // gpus, "compute": compute,
        "how": f"the PS trainer with local aggregation on one uncapped server of {gpus} GPU "
               "ranks and one shard: each rank's median process CPU seconds per iteration "
               + ("minus the same model's step alone (single-worker baseline) " if
                  compute == "real" else "with ~no compute ")
               + "minus its NIC bytes × comm_cpu_s_per_byte, per byte over the loopback",
    }


def calibrate_ring_cpu(workload: Workload, bandwidth_bps: float, gpus: int = 1,
                       intra_bps: float | None = None, compute: str = "emulated",
                       iterations: int = 8, warmup: int = 2, timeout: float = 120.0
                       ) -> dict[str, Any]:
    """Run the DDP trainer uncapped, two hosts at ``bandwidth_bps`` (``gpus`` 1) or one server
    of ``gpus`` ranks over its loopback at ``intra_bps``, and read each rank's CPU per byte it
    sent and received in the all-reduce; see the module doc."""
    from ddlperf.cluster import Cluster
    from ddlperf.strategy import Strategy

    server = gpus > 1
    cluster = Cluster.from_dict(
        {"nodes": [{"count": 1, "gpus": gpus, "intra": intra_bps}], "bandwidth": bandwidth_bps}
        if server else {"workers": 2, "bandwidth": bandwidth_bps})
    steady, alone = _run(workload, cluster, Strategy(arch="allreduce"), compute, iterations,
                         warmup, timeout, RING_PHASES)
    rank = statistics.median(_process_cpu(r, RING_PHASES) for r in steady)
    moved = float(steady[0]["payload_sent_bytes"] + steady[0]["payload_received_bytes"])
    per_iteration = max(rank - alone, 0.0)
    path = f"one server of {gpus} ranks over its loopback" if server else "two emulated hosts"
    return {
        "s_per_byte": per_iteration / moved, "cpu_s_per_iteration": per_iteration,
        "rank_cpu_s_per_iteration": rank, "compute_alone_cpu_s": alone,
        "bytes_per_iteration": moved, "iterations": len(steady) // (gpus if server else 2),
        "compute": compute, "bandwidth_bps": bandwidth_bps, "intra_bps": intra_bps,
        "gpus": gpus,
        "how": f"the DDP trainer on {path}, uncapped: each rank's median process CPU seconds "
               "per iteration"
               + (" minus the same model's step alone (single-worker baseline)"
                  if compute == "real" else " with ~no compute")
               + " / bytes it sent and received in the all-reduce",
    }


def _run(workload: Workload, cluster: Any, strategy: Any, compute: str, iterations: int,
         warmup: int, timeout: float, phases: tuple[str, ...] = PHASES
         ) -> tuple[list[dict[str, Any]], float]:
    """Measure ``cluster`` with ``strategy`` and return the workers' steady iteration records
    and the model's step alone (CPU s; 0 with emulated compute, which runs ~no compute)."""
    from ddlperf.measure.records import read_records
    from ddlperf.measure.run import measure

    real = compute == "real"
    run_workload = workload if real else workload.scaled(1e-6)  # ~no compute (not 0: a rate)
    with tempfile.TemporaryDirectory(prefix="ddlperf-comm-cpu-") as tmp:
        measure(workload=run_workload, cluster=cluster, strategy=strategy,
                compute=compute, iterations=iterations, warmup=warmup, out=Path(tmp),
                timeout=timeout, probe=False)
        records, _ = read_records(Path(tmp) / "records.jsonl")
    steady = [r for r in records if r.get("type") == "iteration" and r.get("role") == "worker"
              and r["iteration"] >= warmup]
    if not steady or any(f"{p}_process_cpu_s" not in r for r in steady for p in phases):
        raise RuntimeError("calibrating communication CPU: the workers recorded no CPU clock")
    alone = 0.0
    if real:
        single = [r["compute_process_cpu_s"] for r in records if r.get("type") == "single"
                  and r["iteration"] >= 1 and "compute_process_cpu_s" in r]
        if not single:
            raise RuntimeError("calibrating communication CPU: no single-worker baseline")
        alone = statistics.median(single)
    return steady, alone


def _process_cpu(record: dict[str, Any], phases: tuple[str, ...] = PHASES) -> float:
    return sum(record[f"{p}_process_cpu_s"] for p in phases)
