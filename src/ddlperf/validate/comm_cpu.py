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
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

from ddlperf.workload import Workload

PHASES = ("before", "step", "exchange")


def calibrate_comm_cpu(workload: Workload, bandwidth_bps: float, compute: str = "emulated",
                       iterations: int = 8, warmup: int = 2, timeout: float = 120.0
                       ) -> dict[str, Any]:
    """Run the PS trainer with ``workload``'s tensors (one worker, one shard, links at
    ``bandwidth_bps``) and read the worker's CPU per byte moved; see the module doc."""
    from ddlperf.cluster import Cluster
    from ddlperf.measure.records import read_records
    from ddlperf.measure.run import measure
    from ddlperf.strategy import Strategy

    real = compute == "real"
    run_workload = workload if real else workload.scaled(1e-6)  # ~no compute (not 0: a rate)
    cluster = Cluster.from_dict({"workers": 1, "ps": 1, "bandwidth": bandwidth_bps})
    with tempfile.TemporaryDirectory(prefix="ddlperf-comm-cpu-") as tmp:
        measure(workload=run_workload, cluster=cluster, strategy=Strategy(arch="ps", sync="bsp"),
                compute=compute, iterations=iterations, warmup=warmup, out=Path(tmp),
                timeout=timeout, probe=False)
        records, _ = read_records(Path(tmp) / "records.jsonl")
    steady = [r for r in records if r.get("type") == "iteration" and r.get("name") == "w0"
              and r["iteration"] >= warmup]
    if not steady or any(f"{p}_process_cpu_s" not in r for r in steady for p in PHASES):
        raise RuntimeError("calibrating communication CPU: the worker recorded no CPU clock")
    worker = statistics.median(sum(r[f"{p}_process_cpu_s"] for p in PHASES) for r in steady)
    alone = 0.0
    if real:
        single = [r["compute_process_cpu_s"] for r in records if r.get("type") == "single"
                  and r["iteration"] >= 1 and "compute_process_cpu_s" in r]
        if not single:
            raise RuntimeError("calibrating communication CPU: no single-worker baseline")
        alone = statistics.median(single)
    moved = float(steady[0]["payload_sent_bytes"] + steady[0]["payload_received_bytes"])
    per_iteration = max(worker - alone, 0.0)
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
