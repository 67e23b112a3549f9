"""In-session calibration of communication CPU: a worker's host CPU seconds per byte it sends
or receives.

What is timed is the communication path a PS worker of the run has, with nothing else on it:
the measurement's own PS trainer, one worker and one shard on two emulated hosts (namespaces and
shaped links as the run has them), exchanging the workload's gradient tensors with emulated
compute of a microsecond. Per iteration the worker's process CPU clock (every thread: the
compute thread's ``isend`` calls and kernel send path, the receives, installing the pulled
parameters, gloo's threads) is read at phase boundaries (:class:`~ddlperf.measure.
trainer_common.CpuClock`); the figure is its median over the steady iterations divided by the
bytes the worker pushed and pulled: ``comm_cpu_s_per_byte``. The workload's own tensor sizes
fold the per-message cost in. A prediction charges it to a CPU-capped worker
(:mod:`ddlperf.host_cpu`).

A bare gloo transfer of the same tensors (``isend``/``irecv`` loops, both processes' CPU
clocks) reads only about a third of it on this machine (0.9–1.1 ns per byte against the
trainer's figure): a worker's communication is more than its socket calls.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

from ddlperf.workload import Workload

PHASES = ("before", "step", "exchange")


def calibrate_comm_cpu(workload: Workload, bandwidth_bps: float, iterations: int = 8,
                       warmup: int = 2, timeout: float = 120.0) -> dict[str, Any]:
    """Run the PS trainer's exchange of ``workload``'s tensors (one worker, one shard, links at
    ``bandwidth_bps``, no compute) and read the worker's CPU per byte; see the module doc."""
    from ddlperf.cluster import Cluster
    from ddlperf.measure.records import read_records
    from ddlperf.measure.run import measure
    from ddlperf.strategy import Strategy

    quiet = workload.scaled(1e-6)  # ~no compute (zero would leave nothing to rate)
    cluster = Cluster.from_dict({"workers": 1, "ps": 1, "bandwidth": bandwidth_bps})
    with tempfile.TemporaryDirectory(prefix="ddlperf-comm-cpu-") as tmp:
        measure(workload=quiet, cluster=cluster, strategy=Strategy(arch="ps", sync="bsp"),
                compute="emulated", iterations=iterations, warmup=warmup, out=Path(tmp),
                timeout=timeout, probe=False)
        records, _ = read_records(Path(tmp) / "records.jsonl")
    steady = [r for r in records if r.get("type") == "iteration" and r.get("name") == "w0"
              and r["iteration"] >= warmup]
    if not steady or any(f"{p}_process_cpu_s" not in r for r in steady for p in PHASES):
        raise RuntimeError("calibrating communication CPU: the worker recorded no CPU clock")
    cpu = [sum(r[f"{p}_process_cpu_s"] for p in PHASES) for r in steady]
    moved = float(steady[0]["payload_sent_bytes"] + steady[0]["payload_received_bytes"])
    per_iteration = statistics.median(cpu)
    return {
        "comm_cpu_s_per_byte": per_iteration / moved,
        "cpu_s_per_iteration": per_iteration, "bytes_per_iteration": moved,
        "iterations": len(steady), "tensors": len(workload.gradient_tensors),
        "bandwidth_bps": bandwidth_bps,
        "how": "the PS trainer's exchange of the workload's tensors (1 worker, 1 shard, two "
               "emulated hosts, ~no compute): the worker's median process CPU seconds per "
               "iteration / bytes pushed and pulled",
    }
