"""Ring all-reduce training with PyTorch DistributedDataParallel over gloo, one rank per process.

``python -m ddlperf.measure.ddp_trainer --spec FILE`` with torchrun's environment.

- Buckets: ``bucket_cap_mb = bucket_bytes / 2**20`` (the Strategy's bucket size); with
  ``overlap=False`` a single bucket holding every gradient, so the all-reduce starts only when
  backward has ended.
- Replicas start identical from the same seed (``init_sync=False``: no start-up broadcast) and
  buffers are not broadcast each step (``broadcast_buffers=False``), so the only traffic is the
  gradient all-reduce: 2(N−1)/N × S bytes per worker per iteration each way.
- Emulated compute: the optimizer step is emulated device time too (parameter bytes × the
  workload's update seconds per byte); real compute runs SGD with momentum.
- Servers: ranks are ordered server by server, so gloo's ring (rank r sends to r + 1) is the
  flat ring the predictors model; ``allreduce: hierarchical`` replaces DDP's all-reduce by
  :class:`~ddlperf.measure.hierarchical.HierarchicalHook` (its phase times go into the
  records as ``allreduce_intra_s`` / ``allreduce_inter_s``).
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from ddlperf.measure.compute import ddp_module
from ddlperf.measure.hierarchical import HierarchicalHook
from ddlperf.measure.traffic import rank_payload
from ddlperf.measure.trainer_common import (
    EMULATED_LABEL,
    REAL_GPU_LABEL,
    REAL_LABEL,
    CpuClock,
    NetCounter,
    Recorder,
    Status,
    compute_device,
    fault_for,
    init_group,
    maybe_fault,
    micro_batches,
    rank_table,
    run_rank,
    synchronize,
    total_iterations,
)


def _body(spec: dict[str, Any], me: dict[str, Any], rec: Recorder, status: Status) -> None:
    table = rank_table(spec)
    n = len(table)
    worker = spec["workers"][me["index"]]
    device = compute_device(spec)
    model, forward_loss = ddp_module(spec, worker, device)
    params = [p for p in model.parameters() if p.requires_grad]
    size = sum(p.numel() * p.element_size() for p in params)
    emulated = spec["compute"] != "real"
    bucket = float(spec["bucket_bytes"]) if spec["overlap"] else float(size + 1)
    rings = init_group(spec, n)
    # broadcast_buffers=False is deprecated in favour of forward_sync_buffers, which would
    # still broadcast buffers at start-up; keep the old flag (no start-up traffic) quietly.
    warnings.filterwarnings("ignore", message=".*broadcast_buffers.*", category=FutureWarning)
    on_gpu = device.startswith("cuda")
    ddp = DistributedDataParallel(model, bucket_cap_mb=bucket / 2**20, init_sync=False,
                                  broadcast_buffers=False, gradient_as_bucket_view=True,
                                  device_ids=[device] if on_gpu else None)
    hook = None
    if rings and worker.get("gpus", 1) > 1:
        hook = HierarchicalHook(spec, me, rings)
        # a lambda: DDP rejects a hook whose annotations are not its own (strings here)
        ddp.register_comm_hook(None, lambda _state, bucket: hook.enqueue(bucket))
    update_s = size * float(worker.get("update_s_per_byte", 0.0))
    optimizer = None if emulated else torch.optim.SGD(
        model.parameters(), lr=float(spec.get("lr", 0.01)), momentum=float(spec.get("momentum",
                                                                                     0.9)))
    state = {"ready": 0, "last": 0.0, "t": 0}
    micro = micro_batches(spec)

    def on_ready(_p: torch.Tensor) -> None:
        state["ready"] += 1
        state["last"] = time.perf_counter()
        if state["ready"] == len(params):
            status.set("allreduce", state["t"])

    for p in params:
        p.register_post_accumulate_grad_hook(on_ready)
    payload = rank_payload(spec, me["name"])
    net = NetCounter(os.environ.get("GLOO_SOCKET_IFNAME"))
    fault = fault_for(me["name"])
    status.set("barrier")
    dist.barrier()
    cpu = CpuClock()
    for t in range(total_iterations(spec)):
        maybe_fault(fault, t, status)
        state.update(ready=0, last=0.0, t=t)
        status.set("compute", t)
        start_wall, start = time.time(), time.perf_counter()
        wire0 = net.read()
        cpu.lap("between")
        for _ in range(micro - 1):  # gradient accumulation: no all-reduce but after the last
            with ddp.no_sync():
                forward_loss(ddp).backward()
            synchronize(device)
            state.update(ready=0, last=0.0)
            status.set("compute", t)
        loss = forward_loss(ddp)
        synchronize(device)
        forward_end = time.perf_counter()
        cpu_s = cpu.lap("forward")
        loss.backward()  # returns once DDP's last bucket is all-reduced
        synchronize(device)
        backward_end = time.perf_counter()
        cpu_s.update(cpu.lap("backward"))
        grads_ready = state["last"] or backward_end
        status.set("compute", t)
        if optimizer is not None:
            optimizer.step()
            optimizer.zero_grad(set_to_none=False)
        elif update_s > 0:
            time.sleep(update_s)
        synchronize(device)
        end = time.perf_counter()
        cpu_s.update(cpu.lap("update"))
        wire1 = net.read()
        wire = {} if wire0 is None or wire1 is None else {
            "wire_sent_bytes": wire1[0] - wire0[0], "wire_received_bytes": wire1[1] - wire0[1]}
        compute_s = (grads_ready - start) + (end - backward_end)
        phases = {} if hook is None else {
            f"allreduce_{k}": v for k, v in hook.take_times().items()}
        rec.write({
            "type": "iteration", "iteration": t, "start": start_wall,
            "end": start_wall + (end - start), "duration_s": end - start,
            "compute_s": compute_s, "forward_s": forward_end - start,
            "backward_s": grads_ready - forward_end, "update_s": end - backward_end,
            "allreduce_exposed_s": backward_end - grads_ready,
            "payload_sent_bytes": payload["sent"], "payload_received_bytes": payload["sent"],
            "remote_payload_bytes": payload["remote"],
            "compute": EMULATED_LABEL if emulated else (REAL_GPU_LABEL if on_gpu else REAL_LABEL),
            "device": device, **wire, **phases, **cpu_s,
        })
    if hook is not None:
        hook.close()
    status.set("barrier")
    dist.barrier()
    dist.destroy_process_group()


def main(argv: list[str] | None = None) -> None:
    run_rank(argv, "python -m ddlperf.measure.ddp_trainer", _body)


if __name__ == "__main__":
    main(sys.argv[1:])
