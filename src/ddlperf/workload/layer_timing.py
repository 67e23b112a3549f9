"""Layer times of one training step from module and tensor hooks.

How layer times are measured (and the limits of it):
- A layer is a module that directly owns parameters, as in :mod:`layer_flops`. Forward:
  timestamps at every layer's forward pre-hook and forward hook. Each interval between two
  timestamps belongs to the layer of the earlier one, so parameter-free ops (ReLU, pooling,
  residual adds) are folded into the preceding layer; ops before the first layer fold into it.
- Backward: timestamps when the gradient w.r.t. a layer's output arrives (tensor hook set in
  the forward hook: the layer's backward starts), when its parameters' gradients are
  accumulated (``register_post_accumulate_grad_hook``, which also gives the gradient-ready
  order) and when the gradient w.r.t. its input is ready (its backward ended). Intervals after
  the first two belong to the layer; after the third to the layer that preceded it in the
  forward pass (whose folded ops run next).
- Unattributed: the loss forward, the loss backward and the backward of parameter-free ops
  after the last layer, hook overhead. ``unattributed_s = median step − Σ layer medians``, so
  Σ layers + unattributed = the measured step by construction; if the difference is negative
  (noise), it is clamped to 0 and ``provenance.unattributed_clamped`` says so.
- Autograd runs backward ops in dependency order, not layer by layer, for branches (Inception,
  DenseNet, residual shortcuts): layer boundaries there are approximate; totals are not.
- Each hook costs a few microseconds; on CUDA every hook synchronises the device, which removes
  the overlap between kernel launch and execution: trust layers of ≥ 1 ms.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_flatten

from ddlperf.workload import layer_flops
from ddlperf.workload.profile_inputs import Subject


def synchronizer(where: torch.device) -> Callable[[], None]:
    if where.type == "cuda":
        return lambda: torch.cuda.synchronize(where)
    return lambda: None


@dataclass
class HookedStep:
    """Timestamps of one hooked step."""

    start: float = 0.0
    forward_end: float = 0.0
    backward_start: float = 0.0
    end: float = 0.0
    events: list[tuple[float, str, str]] = field(default_factory=list)  # (t, kind, layer)
    grad_order: list[str] = field(default_factory=list)


class LayerRecorder:
    """Module and tensor hooks that timestamp layer boundaries (see the module docstring)."""

    def __init__(self, model: nn.Module, owner_of_param: dict[int, tuple[str, str]],
                 where: torch.device) -> None:
        self.sync = synchronizer(where)
        self.step = HookedStep()
        self.handles: list[Any] = []
        for name, module in layer_flops.layer_modules(model).items():
            self.handles.append(module.register_forward_pre_hook(self._pre(name)))
            self.handles.append(module.register_forward_hook(self._post(name)))
        for p in model.parameters():
            if p.requires_grad and id(p) in owner_of_param:
                layer, tensor = owner_of_param[id(p)]
                self.handles.append(p.register_post_accumulate_grad_hook(self._acc(layer, tensor)))

    def mark(self, kind: str, layer: str) -> None:
        self.sync()
        self.step.events.append((time.perf_counter(), kind, layer))

    def _pre(self, name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: Any) -> None:
            self.mark("pre", name)
            for t in tree_flatten(args)[0]:
                if isinstance(t, torch.Tensor) and t.requires_grad:
                    t.register_hook(lambda grad: self.mark("in_grad", name))

        return hook

    def _post(self, name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            self.mark("post", name)
            for t in tree_flatten(output)[0]:
                if isinstance(t, torch.Tensor) and t.requires_grad:
                    t.register_hook(lambda grad: self.mark("out_grad", name))

        return hook

    def _acc(self, layer: str, tensor: str) -> Callable[[torch.Tensor], None]:
        def hook(param: torch.Tensor) -> None:
            self.mark("param", layer)
            self.step.grad_order.append(tensor)

        return hook

    def run(self, subject: Subject) -> HookedStep:
        self.step = HookedStep()
        step = self.step
        subject.model.zero_grad(set_to_none=True)
        self.sync()
        step.start = time.perf_counter()
        output = subject.model(*subject.inputs)
        self.sync()
        step.forward_end = time.perf_counter()
        loss = subject.loss_fn(output, subject.target)
        self.sync()
        step.backward_start = time.perf_counter()
        loss.backward()
        self.sync()
        step.end = time.perf_counter()
        return step

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()


def attribute(step: HookedStep) -> tuple[dict[str, float], dict[str, float], float]:
    """Split one step's wall time into per-layer forward, backward and unattributed seconds."""
    forward: dict[str, float] = {}
    backward: dict[str, float] = {}
    fwd = [event for event in step.events if event[1] in ("pre", "post")]
    bwd = [(t, kind, layer) for t, kind, layer in step.events
           if kind not in ("pre", "post")]
    prev_of: dict[str, str] = {}
    unattributed = step.backward_start - step.forward_end  # the loss
    if fwd:
        forward[fwd[0][2]] = fwd[0][0] - step.start
        ends = [t for t, _, _ in fwd[1:]] + [step.forward_end]
        for (t, _, layer), t_next in zip(fwd, ends, strict=True):
            forward[layer] = forward.get(layer, 0.0) + t_next - t
        for (_, _, before), (_, kind, layer) in pairwise(fwd):
            if kind == "pre" and layer != before:
                prev_of.setdefault(layer, before)
    else:
        unattributed += step.forward_end - step.start
    if bwd:
        unattributed += bwd[0][0] - step.backward_start
        ends = [t for t, _, _ in bwd[1:]] + [step.end]
        for (t, kind, layer), t_next in zip(bwd, ends, strict=True):
            owner = prev_of.get(layer, layer) if kind == "in_grad" else layer
            backward[owner] = backward.get(owner, 0.0) + t_next - t
    else:
        unattributed += step.end - step.backward_start
    return forward, backward, unattributed
