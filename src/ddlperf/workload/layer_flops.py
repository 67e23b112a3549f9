"""Per-layer forward FLOPs and memory traffic of any torch model, counted on the meta device.

Why the meta device: shapes propagate without allocating or computing anything, so even
GPT-2 at 1024 tokens is counted in well under a second and no weights are needed.

Conventions (also written into ``data/zoo.json``):
- FLOPs come from ``torch.utils.flop_counter.FlopCounterMode``: **2 FLOPs per multiply-add**
  (matmul, convolution, attention); element-wise ops, norms and pooling count 0.
- A *layer* is a module that directly owns parameters (``parameters(recurse=False)``).
  Each aten op is attributed by the parameters it reads: to the innermost running module that
  owns one of them directly, else to the parameter's owning module (this catches parameters
  used by a parent's functional call, e.g. ``MultiheadAttention.out_proj``). Ops that read no
  parameter are folded into the preceding layer (or the next one if none precedes).
- ``memory_bytes`` is the sum over the layer's ops (folded ones included) of the bytes of
  every non-parameter input and output tensor, i.e. unfused kernel traffic; view ops move
  nothing. Parameter bytes are left out: the roofline adds them separately.
- A parameter shared by several modules (tied embeddings) counts once, for its first use.

Kernels (``count_layers(..., backward=True)``): every aten op that moves data is one kernel,
forward and backward alike, recorded with its operation class (:data:`KERNEL_CLASSES`), FLOPs,
bytes and output elements. Backward ops are attributed to the layer whose forward op created
the autograd node that runs them (so folded ops keep their layer in backward too). A
``convolution_backward`` is split into its two kernels: data gradient (output = input-sized)
and weight gradient. ``saved_bytes`` per layer: activation bytes autograd keeps for backward
(tensors saved by its ops, each storage once, parameters excluded).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import FlopCounterMode

FLOP_CONVENTION = (
    "torch.utils.flop_counter: 2 FLOPs per multiply-add (matmul, convolution, attention); "
    "element-wise ops, normalisation and pooling count 0; forward pass only"
)
ROOT_NAME = "root"

# ops that move no data although torch does not tag them as views (allocations, reshapes)
_NO_TRAFFIC = {
    torch.ops.aten._unsafe_view, torch.ops.aten.empty, torch.ops.aten.empty_like,
    torch.ops.aten.empty_strided, torch.ops.aten.detach, torch.ops.aten.alias,
    torch.ops.aten.lift_fresh,
}


# Operation classes of kernels (ddlperf.hardware prices each class its own way).
KERNEL_CLASSES = ("conv", "conv3x3", "conv_grouped", "conv_depthwise", "matmul", "norm",
                  "elementwise", "embedding")
_CONV_OPS = {torch.ops.aten.convolution, torch.ops.aten._convolution,
             torch.ops.aten.convolution_backward}
_MATMUL_OPS = {torch.ops.aten.mm, torch.ops.aten.addmm, torch.ops.aten.bmm,
               torch.ops.aten.baddbmm, torch.ops.aten._scaled_dot_product_efficient_attention,
               torch.ops.aten._scaled_dot_product_flash_attention,
               torch.ops.aten._scaled_dot_product_efficient_attention_backward,
               torch.ops.aten._scaled_dot_product_flash_attention_backward,
               torch.ops.aten._scaled_dot_product_cudnn_attention,
               torch.ops.aten._scaled_dot_product_cudnn_attention_backward}
_NORM_OPS = {torch.ops.aten.native_batch_norm, torch.ops.aten.native_batch_norm_backward,
             torch.ops.aten._native_batch_norm_legit,
             torch.ops.aten._native_batch_norm_legit_functional,
             torch.ops.aten.native_layer_norm, torch.ops.aten.native_layer_norm_backward,
             torch.ops.aten.native_group_norm, torch.ops.aten.native_group_norm_backward}
_EMBEDDING_OPS = {torch.ops.aten.embedding, torch.ops.aten.embedding_dense_backward}


@dataclass
class KernelCount:
    """One GPU kernel's work: pass (``f``/``b``), class, FLOPs, bytes moved, output elements."""

    pass_: str
    cls: str
    flops: float
    bytes: float
    out_elements: float


@dataclass
class LayerCount:
    """Forward work of one layer for the whole example batch (and its kernels, if counted)."""

    name: str
    type: str
    flops: float = 0.0
    memory_bytes: float = 0.0
    tensors: list[tuple[str, int]] = field(default_factory=list)
    kernels: list[KernelCount] = field(default_factory=list)
    saved_bytes: float = 0.0


def parameter_names(model: nn.Module) -> dict[int, str]:
    """``id(parameter) → name``, first name wins (as ``named_parameters`` deduplicates)."""
    return {id(p): name for name, p in model.named_parameters()}


def layer_modules(model: nn.Module) -> dict[str, nn.Module]:
    """Modules that directly own parameters, by qualified name (root named ``root``)."""
    return {
        (name or ROOT_NAME): module
        for name, module in model.named_modules()
        if next(module.parameters(recurse=False), None) is not None
    }


def _storage_key(tensor: torch.Tensor) -> int | None:
    try:
        return tensor.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):
        return None


class _Attribution(TorchDispatchMode):
    """Sends each op's FLOP and byte counts to the layer that owns it (see module docstring)."""

    def __init__(self, model: nn.Module, counter: FlopCounterMode) -> None:
        super().__init__()
        self.counter = counter
        self.layers = layer_modules(model)
        self.owner_of: dict[int, str] = {}  # storage → canonical owning layer
        self.params_of: dict[int, set[int]] = {}  # storage → ids of parameters
        owner_by_param: dict[int, str] = {}
        for name, module in self.layers.items():
            for p in module.parameters(recurse=False):
                owner_by_param.setdefault(id(p), name)
        for p in model.parameters():
            key = _storage_key(p)
            if key is not None:
                self.owner_of.setdefault(key, owner_by_param[id(p)])
                self.params_of.setdefault(key, set()).add(id(p))
        self.direct: dict[str, set[int]] = {
            name: {id(p) for p in module.parameters(recurse=False)}
            for name, module in self.layers.items()
        }
        self.stack: list[str] = []
        self.records: dict[str, LayerCount] = {}
        self.current: str | None = None
        self.pending = [0.0, 0.0]  # flops, bytes before any layer ran
        self.pending_kernels: list[KernelCount] = []
        self.pending_saved = 0.0
        self.node_layer: dict[Any, str] = {}  # autograd node → layer that created it
        self.saved: set[int] = set()  # storages already counted as saved for backward

    def _owner(self, key: int) -> str:
        ids = self.params_of[key]
        for name in reversed(self.stack):
            if self.direct[name] & ids:
                return name
        return self.owner_of[key]

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        before = self.counter.get_total_flops()
        out = func(*args, **kwargs)
        flops = float(self.counter.get_total_flops() - before)
        moves = not (func.is_view or func.overloadpacket in _NO_TRAFFIC)
        node = torch._C._current_autograd_node()
        if node is not None:  # a backward op
            if moves:
                layer = self.node_layer.get(node) or self.current
                if layer is not None:
                    self.records[layer].kernels.extend(_kernels("b", func, args, out, flops))
            return out
        owner = None
        traffic = 0
        inputs, _ = tree_flatten((args, kwargs))
        for t in inputs:
            if not isinstance(t, torch.Tensor):
                continue
            key = _storage_key(t)
            if key in self.params_of:
                owner = owner or self._owner(key)
            elif moves:
                traffic += t.nelement() * t.element_size()
        if moves:
            outputs, _ = tree_flatten(out)
            traffic += sum(t.nelement() * t.element_size() for t in outputs
                           if isinstance(t, torch.Tensor))
        kernels = _kernels("f", func, args, out, flops) if moves else []
        self._add(owner, flops, float(traffic), kernels)
        return out

    def _add(self, owner: str | None, flops: float, traffic: float,
             kernels: list[KernelCount]) -> None:
        if owner is not None:
            if owner not in self.records:
                self.records[owner] = LayerCount(owner, type(self.layers[owner]).__name__)
            if self.current is None:  # ops before the first layer fold into it
                flops += self.pending[0]
                traffic += self.pending[1]
                kernels = self.pending_kernels + kernels
                self.records[owner].saved_bytes += self.pending_saved
            self.current = owner
        if self.current is None:
            self.pending[0] += flops
            self.pending[1] += traffic
            self.pending_kernels.extend(kernels)
            return
        record = self.records[self.current]
        record.flops += flops
        record.memory_bytes += traffic
        record.kernels.extend(kernels)

    def save(self, tensor: torch.Tensor) -> None:
        """Count a tensor autograd keeps for backward (once per storage, parameters excluded)."""
        key = _storage_key(tensor)
        if key is None or key in self.params_of or key in self.saved:
            return
        self.saved.add(key)
        size = float(tensor.untyped_storage().nbytes())
        if self.current is None:
            self.pending_saved += size
        else:
            self.records[self.current].saved_bytes += size


class _NodeMap(TorchFunctionMode):
    """Remembers which layer created each autograd node, for attributing backward ops."""

    def __init__(self, attribution: _Attribution) -> None:
        super().__init__()
        self.attribution = attribution

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        layer = self.attribution.current
        if layer is not None:
            for t in tree_flatten(out)[0]:
                node = getattr(t, "grad_fn", None) if isinstance(t, torch.Tensor) else None
                if node is not None and node not in self.attribution.node_layer:
                    self.attribution.node_layer[node] = layer
        return out


def kernel_class(func: Any, args: Any) -> str:
    """The operation class of one aten op (see :data:`KERNEL_CLASSES`)."""
    packet = func.overloadpacket
    if packet in _CONV_OPS:
        backward = packet is torch.ops.aten.convolution_backward
        weight = args[2] if backward else args[1]
        stride = args[4] if backward else args[3]
        dilation = args[6] if backward else args[5]
        groups = args[9] if backward else args[8]
        if groups > 1:
            return "conv_depthwise" if weight.shape[1] == 1 else "conv_grouped"
        kernel = tuple(weight.shape[2:])
        if kernel and all(k == 3 for k in kernel) and all(s == 1 for s in stride) \
                and all(d == 1 for d in dilation):
            return "conv3x3"
        return "conv"
    if packet in _MATMUL_OPS:
        return "matmul"
    if packet in _NORM_OPS:
        return "norm"
    if packet in _EMBEDDING_OPS:
        return "embedding"
    return "elementwise"


def _nbytes(*tensors: Any) -> float:
    return float(sum(t.nelement() * t.element_size() for t in tensors
                     if isinstance(t, torch.Tensor)))


def _kernels(pass_: str, func: Any, args: Any, out: Any, flops: float) -> list[KernelCount]:
    """The kernel(s) of one data-moving aten op; a convolution backward is two kernels."""
    cls = kernel_class(func, args)
    if func.overloadpacket is torch.ops.aten.convolution_backward:
        grad_output, inputs, weight = args[0], args[1], args[2]
        mask = args[10]
        grad_input, grad_weight, grad_bias = out
        # each part costs the forward's FLOPs; computed here because torch's counter does
        # not divide grouped convolutions' backward by the group count
        flops = 2.0 * grad_output.nelement() * math.prod(weight.shape[1:])
        kernels = []
        if mask[0]:
            kernels.append(KernelCount(pass_, cls, flops,
                                       _nbytes(grad_output, weight, grad_input),
                                       float(grad_input.nelement())))
        if mask[1]:
            # the weight gradient reduces over the batch: its output does not grow with it
            kernels.append(KernelCount(pass_, cls, flops,
                                       _nbytes(grad_output, inputs, grad_weight, grad_bias),
                                       float(grad_weight.nelement())))
        return kernels
    tensors = [t for t in tree_flatten(args)[0] if isinstance(t, torch.Tensor)]
    outputs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
    elements = float(outputs[0].nelement()) if outputs and cls != "elementwise" else 0.0
    return [KernelCount(pass_, cls, flops, _nbytes(*tensors, *outputs), elements)]


def count_layers(
    model: nn.Module, inputs: tuple[Any, ...], kwargs: dict[str, Any] | None = None,
    *, backward: bool = False, loss_fn: Any = None,
) -> list[LayerCount]:
    """Per-layer forward FLOPs, memory traffic and owned tensors, in execution order.

    ``model`` and ``inputs`` should live on the meta device (any device works, but meta is
    free). Counts are for the whole batch in ``inputs``; divide by its size for per-sample.
    ``backward=True`` also runs the backward pass of ``loss_fn(output)`` (default: the sum of
    the first floating output) and records every kernel and the saved activations.
    """
    counter = FlopCounterMode(display=False)
    mode = _Attribution(model, counter)
    handles = []
    for name, module in mode.layers.items():
        handles.append(module.register_forward_pre_hook(_push(mode, name)))
        handles.append(module.register_forward_hook(_pop(mode), always_call=True))
    try:
        if backward:
            with torch.enable_grad(), counter, mode, _NodeMap(mode), \
                    torch.autograd.graph.saved_tensors_hooks(_packer(mode), lambda t: t):
                output = model(*inputs, **(kwargs or {}))
                loss = loss_fn(output) if loss_fn is not None else _default_loss(output)
            with counter, mode:
                loss.backward()
        else:
            with torch.no_grad(), counter, mode:
                model(*inputs, **(kwargs or {}))
    finally:
        for handle in handles:
            handle.remove()
    return _with_tensors(model, mode)


def _packer(mode: _Attribution) -> Any:
    def pack(tensor: torch.Tensor) -> torch.Tensor:
        mode.save(tensor)
        return tensor

    return pack


def _default_loss(output: Any) -> torch.Tensor:
    for t in tree_flatten(output)[0]:
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            return t.float().sum()
    raise ValueError("the model's output has no floating-point tensor to backpropagate")


def _push(mode: _Attribution, name: str) -> Any:
    def hook(module: nn.Module, args: Any) -> None:
        mode.stack.append(name)

    return hook


def _pop(mode: _Attribution) -> Any:
    def hook(module: nn.Module, args: Any, output: Any) -> None:
        mode.stack.pop()

    return hook


def _with_tensors(model: nn.Module, mode: _Attribution) -> list[LayerCount]:
    """Give each parameter to the first layer (in execution order) that owns it directly.

    Parameters no op touched (unused modules) go to their nearest counted ancestor, else to a
    zero-work layer at the end: they still exist and still have (zero) gradients to exchange.
    """
    names = parameter_names(model)
    records = list(mode.records.values())
    assigned: set[int] = set()
    for record in records:
        for p in mode.layers[record.name].parameters(recurse=False):
            if id(p) not in assigned:
                assigned.add(id(p))
                record.tensors.append((names[id(p)], p.nelement() * p.element_size()))
    for name, module in mode.layers.items():
        left = [p for p in module.parameters(recurse=False) if id(p) not in assigned]
        if not left:
            continue
        target = _ancestor(name, mode.records)
        if target is None:
            target = LayerCount(name, type(module).__name__)
            mode.records[name] = target
            records.append(target)
        for p in left:
            assigned.add(id(p))
            target.tensors.append((names[id(p)], p.nelement() * p.element_size()))
    return records


def _ancestor(name: str, records: dict[str, LayerCount]) -> LayerCount | None:
    parts = name.split(".")
    for i in range(len(parts) - 1, 0, -1):
        found = records.get(".".join(parts[:i]))
        if found is not None:
            return found
    return records.get(ROOT_NAME) if name != ROOT_NAME else None
