"""In-session calibration of communication CPU: host CPU seconds per byte sent or received.

Two emulated hosts (namespaces and shaped links as the run has them) move the workload's
gradient tensors with gloo's ``isend``/``irecv``, as a PS worker pushes and a shard receives;
each side reads its process CPU clock (every thread: the caller's kernel send path, gloo's
threads) around the rounds. On veth the receiver's network stack runs in the sender's softirq,
so which side pays is this machine's business; what counts is the sum, and one figure serves
both directions: ``comm_cpu_s_per_byte = (sender CPU + receiver CPU) / (2 × bytes)``. The
workload's own tensor sizes fold the per-message cost in. A prediction charges it to a
CPU-capped worker (:mod:`ddlperf.host_cpu`).

``python -m ddlperf.validate comm-cpu RANK MASTER_IP PORT SIZES_JSON ROUNDS`` is one side.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ddlperf.measure import cpu_precedence

PORT = 29533
WARM_ROUNDS = 1


def calibrate_comm_cpu(tensor_bytes: list[int], bandwidth_bps: float, rounds: int = 4,
                       timeout: float = 180.0) -> dict[str, Any]:
    """Time ``rounds`` transfers of the tensors between two emulated hosts whose links run at
    ``bandwidth_bps``; see the module doc."""
    from ddlperf.measure.emulated import EmulatedCluster
    from ddlperf.measure.hosts import HostSpec

    hosts = [HostSpec("a", bandwidth_bps, bandwidth_bps), HostSpec("b", bandwidth_bps,
                                                                   bandwidth_bps)]
    with tempfile.TemporaryDirectory(prefix="ddlperf-comm-cpu-") as tmp, \
            EmulatedCluster(hosts) as net:
        sizes = Path(tmp) / "sizes.json"
        sizes.write_text(json.dumps([int(b) for b in tensor_bytes]))
        env = {**os.environ, "GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1"}
        procs = []
        try:
            for rank, host in enumerate(("a", "b")):
                argv = [sys.executable, "-m", "ddlperf.validate", "comm-cpu", str(rank),
                        net.ip("a"), str(PORT), str(sizes), str(rounds)]
                procs.append(net.popen(host, argv, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True, env=env,
                                       start_new_session=True))
                cpu_precedence.claim(procs[-1].pid)
            sides = []
            for proc in procs:
                stdout, stderr = proc.communicate(timeout=timeout)
                if proc.returncode != 0:
                    tail = (stderr.strip().splitlines() or ["no output"])[-1]
                    raise RuntimeError(f"calibrating communication CPU failed: {tail}")
                sides.append(json.loads(stdout.strip().splitlines()[-1]))
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    sender, receiver = sides
    moved = float(sender["bytes"])
    return {
        "comm_cpu_s_per_byte": (sender["process_cpu_s"] + receiver["process_cpu_s"])
        / (2.0 * moved),
        "bytes": moved, "tensors": len(tensor_bytes), "rounds": rounds,
        "bandwidth_bps": bandwidth_bps, "sender": sender, "receiver": receiver,
        "how": "gloo isend/irecv of the workload's gradient tensors between two emulated "
               "hosts; (sender + receiver process CPU seconds) / (2 × bytes)",
    }


def comm_cpu_main(argv: list[str]) -> None:
    """One side of the transfer: rank 0 sends, rank 1 receives; prints its CPU (JSON)."""
    import torch
    import torch.distributed as dist

    rank, master, port, sizes_path, rounds = (int(argv[0]), argv[1], int(argv[2]), argv[3],
                                              int(argv[4]))
    torch.set_num_threads(1)
    sizes = json.loads(Path(sizes_path).read_text())
    tensors = [torch.zeros(max(1, n // 4)) for n in sizes]
    dist.init_process_group("gloo", init_method=f"tcp://{master}:{port}", rank=rank,
                            world_size=2, timeout=datetime.timedelta(seconds=120))

    def one_round() -> None:
        if rank == 0:
            works = [dist.isend(t, dst=1, tag=j) for j, t in enumerate(tensors)]
        else:
            works = [dist.irecv(t, src=0, tag=j) for j, t in enumerate(tensors)]
        for work in works:
            work.wait()

    for _ in range(WARM_ROUNDS):
        one_round()
    dist.barrier()
    cpu0, thread0, wall0 = time.process_time(), time.thread_time(), time.perf_counter()
    for _ in range(rounds):
        one_round()
    cpu, thread, wall = (time.process_time() - cpu0, time.thread_time() - thread0,
                         time.perf_counter() - wall0)
    dist.barrier()
    dist.destroy_process_group()
    moved = sum(4 * t.numel() for t in tensors) * rounds
    print(json.dumps({"rank": rank, "bytes": moved, "process_cpu_s": cpu,
                      "thread_cpu_s": thread, "wall_s": wall}), flush=True)
