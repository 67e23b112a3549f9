"""What a worker computes: the real zoo model on CPU, or emulated device time.

**Emulated device time** stands in for accelerator compute: real tensors of the workload's sizes
(one tensor per workload tensor) and, per layer, a wait equal to the workload's forward or
backward seconds (times a random factor per iteration where the workload gives the layer a
spread: :mod:`ddlperf.measure.emulated_noise`). Gradients become ready in the workload's
gradient order at the end of their layer's backward, so communication overlaps with "compute"
exactly as on a device, and 3–5 ranks stay trustworthy on 2 cores (a wait costs no CPU).
Every record and output that uses it says "emulated device time".

**Real** compute runs the zoo model's forward/backward on the CPU (one thread per process; keep
≤ 2 computing processes on 2 cores).

Both expose the same worker interface to the PS trainer (:class:`WorkerCompute`): ``step`` runs
one forward + backward, calling ``wait_pull(indices)`` before a layer uses its parameters,
``after_forward()`` once the forward pass (and loss) ended and ``push(index)`` as soon as a
gradient is ready. Pulled parameters land in ``tensors`` (one flat tensor per workload tensor);
``install(indices)`` makes them the model's (a copy for the real model, whose backward still
needs the old values while the next version arrives). The DDP trainer uses :func:`ddp_module`.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from ddlperf.measure.emulated_noise import layer_noise
from ddlperf.measure.trainer_common import (
    EMULATED_LABEL,
    REAL_GPU_LABEL,
    REAL_LABEL,
    Recorder,
    compute_device,
    load_spec,
    micro_batches,
    single_thread,
    sleep_until,
    torch_dtype,
)

# A wait longer than this means the layer really waited for its parameters; shorter ones
# (and late wake-ups from sleep) do not move the emulated device's clock.
BLOCKED_S = 2e-4

WaitPull = Callable[[Sequence[int]], None]
Push = Callable[[int], None]
AfterForward = Callable[[], None]


def layer_tensors(spec: dict[str, Any]) -> list[list[int]]:
    """Tensor indices (gradient order numbering) owned by each layer, in forward order."""
    owned: list[list[int]] = [[] for _ in spec["layers"]]
    for j in spec["forward_order"]:
        owned[spec["tensors"][j]["layer"]].append(j)
    return owned


def make_flat(spec: dict[str, Any], seed: int = 0) -> list[torch.Tensor]:
    """One flat tensor per workload tensor (gradient order), deterministic values."""
    gen = torch.Generator().manual_seed(seed)
    dtype = torch_dtype(spec["dtype"])
    return [(torch.rand(t["numel"], generator=gen) * 0.02 - 0.01).to(dtype)
            for t in spec["tensors"]]


class WorkerCompute:
    """Interface; see the module docstring."""

    label: str
    tensors: list[torch.Tensor]  # where pulled parameters land, per tensor index (flat)

    def grad(self, j: int) -> torch.Tensor:
        raise NotImplementedError

    def install(self, indices: Sequence[int]) -> None:
        """Make the pulled ``tensors[j]`` the model's parameters (emulated: they already are)."""

    def step(self, wait_pull: WaitPull, push: Push, after_forward: AfterForward
             ) -> dict[str, float]:
        raise NotImplementedError

    def after_step(self) -> None:
        """Release gradients once they were sent."""


class EmulatedCompute(WorkerCompute):
    """Per-layer waits of the workload's seconds; gradients ready in gradient order."""

    label = EMULATED_LABEL

    def __init__(self, spec: dict[str, Any], worker: dict[str, Any]) -> None:
        self.noise = layer_noise(spec, worker)
        self.unattributed = float(worker["unattributed_s"])
        self.owned = layer_tensors(spec)
        self.tensor_layer = [t["layer"] for t in spec["tensors"]]
        self.tensors = make_flat(spec, seed=0)
        self.grads = make_flat(spec, seed=1 + worker["index"])

    def grad(self, j: int) -> torch.Tensor:
        return self.grads[j]

    def step(self, wait_pull: WaitPull, push: Push, after_forward: AfterForward
             ) -> dict[str, float]:
        forward, backward = self.noise.draw()
        # Gradient j is ready when its layer's backward ends (layers run last to first).
        layer_end, acc = [0.0] * len(backward), 0.0
        for layer in reversed(range(len(backward))):
            acc += backward[layer]
            layer_end[layer] = acc
        start = time.perf_counter()
        cursor = start  # the emulated device's clock: layers run back to back on it
        for layer, seconds in enumerate(forward):
            if self.owned[layer]:
                asked = time.perf_counter()
                wait_pull(self.owned[layer])
                now = time.perf_counter()
                if now - asked > BLOCKED_S:  # waited for parameters: the device idled
                    cursor = max(cursor, now)
            cursor += seconds
            sleep_until(cursor)
        cursor += self.unattributed
        sleep_until(cursor)
        forward_end = time.perf_counter()
        after_forward()
        backward_start = max(cursor, time.perf_counter())
        for j, layer in enumerate(self.tensor_layer):
            sleep_until(backward_start + layer_end[layer])
            push(j)
        sleep_until(backward_start + acc)
        end = time.perf_counter()
        return {"forward_s": forward_end - start, "backward_s": end - forward_end}


class RealCompute(WorkerCompute):
    """The zoo model on the CPU (or the rank's GPU on a CUDA host: gradients go to the PS as
    CPU copies); hooks wait for pulled parameters and push gradients."""

    label = REAL_LABEL

    def __init__(self, spec: dict[str, Any], worker: dict[str, Any], device: str = "cpu"
                 ) -> None:
        self.device = device
        if device != "cpu":
            self.label = REAL_GPU_LABEL
        self.model, self.inputs, self.target, self.loss_fn = build_real(spec, worker, device)
        named = dict(self.model.named_parameters())
        order = [t["name"] for t in spec["tensors"]]
        missing = [n for n in order if n not in named]
        if missing:
            raise RuntimeError(f"model {spec['model']} has no parameters named {missing[:3]}")
        self.params = [named[n] for n in order]
        self.tensors = [p.detach().reshape(-1).cpu().clone() for p in self.params]  # pulls
        self._wait: WaitPull = lambda _: None
        self._push: Push = lambda _: None
        index = {id(p): j for j, p in enumerate(self.params)}
        for module in self.model.modules():
            own = [index[id(p)] for p in module.parameters(recurse=False) if id(p) in index]
            if own:
                module.register_forward_pre_hook(
                    lambda _m, _a, own=own: self._wait(own))
        for j, p in enumerate(self.params):
            p.register_post_accumulate_grad_hook(lambda _p, j=j: self._push(j))

    def grad(self, j: int) -> torch.Tensor:
        grad = self.params[j].grad
        assert grad is not None
        return grad.view(-1) if self.device == "cpu" else grad.view(-1).cpu()

    def install(self, indices: Sequence[int]) -> None:
        with torch.no_grad():
            for j in indices:
                self.params[j].view(-1).copy_(self.tensors[j])

    def step(self, wait_pull: WaitPull, push: Push, after_forward: AfterForward
             ) -> dict[str, float]:
        self._wait, self._push = wait_pull, push
        start = time.perf_counter()
        output = self.model(*self.inputs)
        loss = self.loss_fn(output, self.target)
        forward_end = time.perf_counter()
        after_forward()
        loss.backward()
        end = time.perf_counter()
        return {"forward_s": forward_end - start, "backward_s": end - forward_end}

    def after_step(self) -> None:
        for p in self.params:
            p.grad = None


def build_real(spec: dict[str, Any], worker: dict[str, Any], device: str = "cpu"
               ) -> tuple[nn.Module, Any, Any, Any]:
    """The zoo model (same seed on every rank, so replicas start identical), a batch, a loss,
    on ``device``."""
    from ddlperf.workload import torch_models

    torch.manual_seed(int(spec.get("seed", 0)))
    model_spec = torch_models.spec(spec["model"])
    model = model_spec.build()
    micro_batch = worker.get("micro_batch_size", worker["batch_size"])  # accumulation
    inputs, target = torch_models.make_batch(model_spec, int(micro_batch))
    if device != "cpu":
        model = model.to(device)
        inputs = [x.to(device) for x in inputs]
        target = target.to(device)
    return model, inputs, target, torch_models.loss_function(model_spec)


def worker_compute(spec: dict[str, Any], worker: dict[str, Any]) -> WorkerCompute:
    """A PS worker's compute: the real model (on its GPU where there is one) or emulated
    device time (a wait: on the CPU everywhere)."""
    if spec["compute"] == "real":
        return RealCompute(spec, worker, compute_device(spec))
    return EmulatedCompute(spec, worker)


# ----------------------------------------------------------------------------- DDP module


class _Clock:
    """Shared deadlines of one emulated iteration (forward and backward cursors)."""

    def __init__(self) -> None:
        self.cursor = 0.0
        self.forward_start = self.forward_end = 0.0
        self.backward_start = self.backward_end = 0.0


class _EmulatedLayer(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, layer: Any, *params: torch.Tensor) -> torch.Tensor:
        clock = layer.clock
        clock.cursor += layer.forward_s  # back to back on the device: overshoot is caught up
        sleep_until(clock.cursor)
        ctx.layer = layer
        return x.clone()

    @staticmethod
    def backward(ctx: Any, grad_x: torch.Tensor) -> tuple[Any, ...]:
        layer = ctx.layer
        clock = layer.clock
        if clock.backward_start == 0.0:
            clock.backward_start = clock.cursor = max(clock.cursor, time.perf_counter())
        clock.cursor += layer.backward_s
        sleep_until(clock.cursor)
        clock.backward_end = time.perf_counter()
        return (grad_x, None, *layer.grads)


class _LayerInfo:
    def __init__(self, clock: _Clock, forward_s: float, backward_s: float,
                 grads: list[torch.Tensor]) -> None:
        self.clock, self.grads = clock, grads
        self.forward_s, self.backward_s = forward_s, backward_s


class EmulatedModule(nn.Module):
    """One ``nn.Parameter`` per workload tensor, registered in forward order; each layer is an
    autograd function that waits its forward/backward seconds (emulated device time) and
    returns ready-made gradients, so DDP's hooks fire in the workload's gradient order."""

    def __init__(self, spec: dict[str, Any], worker: dict[str, Any], device: str = "cpu"
                 ) -> None:
        super().__init__()
        self.clock = _Clock()
        self.unattributed = float(worker["unattributed_s"])
        values = [t.to(device) for t in make_flat(spec, seed=0)]
        grads = [t.to(device) for t in make_flat(spec, seed=1 + worker["index"])]
        self.noise = layer_noise(spec, worker)
        self.params = nn.ParameterList()
        self.layers: list[tuple[_LayerInfo, list[nn.Parameter]]] = []
        for layer, own in enumerate(layer_tensors(spec)):
            params = [nn.Parameter(values[j]) for j in own]
            for p in params:
                self.params.append(p)
            info = _LayerInfo(self.clock, float(worker["forward"][layer]),
                              float(worker["backward"][layer]), [grads[j] for j in own])
            self.layers.append((info, params))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        clock = self.clock
        clock.forward_start = clock.cursor = time.perf_counter()
        clock.backward_start = 0.0
        if self.noise.noisy:  # this iteration's layer times (the backward ones too)
            forward, backward = self.noise.draw()
            for (info, _), fwd, bwd in zip(self.layers, forward, backward):
                info.forward_s, info.backward_s = fwd, bwd
        for info, params in self.layers:
            x = _EmulatedLayer.apply(x, info, *params)
        clock.cursor += self.unattributed
        sleep_until(clock.cursor)
        clock.forward_end = time.perf_counter()
        return x


def ddp_module(spec: dict[str, Any], worker: dict[str, Any], device: str = "cpu"
               ) -> tuple[nn.Module, Callable[[nn.Module], torch.Tensor]]:
    """The model on ``device`` and a function that runs forward + loss on it (DDP wraps the
    model)."""
    if spec["compute"] == "real":
        model, inputs, target, loss_fn = build_real(spec, worker, device)
        return model, lambda m: loss_fn(m(*inputs), target)
    model = EmulatedModule(spec, worker, device)
    x0 = torch.zeros((), requires_grad=True, device=device)
    return model, lambda m: m(x0).sum()


# ----------------------------------------------------------------------------- single worker


def single_run(spec: dict[str, Any], worker_index: int, iterations: int, warmup: int,
               recorder: Recorder | None = None) -> list[float]:
    """Real compute alone (no communication): forward and backward of every micro-batch, then
    a local SGD step, per iteration."""
    worker = spec["workers"][worker_index]
    micro = micro_batches(spec)
    model, inputs, target, loss_fn = build_real(spec, worker)
    optimizer = torch.optim.SGD(model.parameters(), lr=float(spec.get("lr", 0.01)),
                                momentum=float(spec.get("momentum", 0.9)))
    durations = []
    for t in range(warmup + iterations):
        start_wall, start, cpu0 = time.time(), time.perf_counter(), time.process_time()
        for _ in range(micro):
            loss_fn(model(*inputs), target).backward()
        cpu1 = time.process_time()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        seconds = time.perf_counter() - start
        if recorder is not None:  # CPU seconds too: what a rank's step costs without traffic
            recorder.write({"type": "single", "iteration": t, "start": start_wall,
                            "end": start_wall + seconds, "compute_s": seconds,
                            "compute_process_cpu_s": cpu1 - cpu0,
                            "update_process_cpu_s": time.process_time() - cpu1,
                            "compute": REAL_LABEL})
        if t >= warmup:
            durations.append(seconds)
    return durations


def main(argv: list[str] | None = None) -> None:
    """``python -m ddlperf.measure.compute --spec FILE --single I``: prints the median step."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m ddlperf.measure.compute")
    parser.add_argument("--spec", required=True)
    parser.add_argument("--single", type=int, default=0, help="worker index")
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args(argv)
    single_thread()
    spec = load_spec(args.spec)
    recorder = Recorder(spec.get("records"), {"name": f"single-w{args.single}", "rank": -1,
                                              "role": "single"})
    durations = single_run(spec, args.single, args.iterations, args.warmup, recorder)
    recorder.close()
    print(json.dumps({"durations": durations, "median": statistics.median(durations)}))


if __name__ == "__main__":
    main(sys.argv[1:])
