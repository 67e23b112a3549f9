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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
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


@dataclass
class LayerCount:
    """Forward work of one layer for the whole example batch."""

    name: str
    type: str
    flops: float = 0.0
    memory_bytes: float = 0.0
    tensors: list[tuple[str, int]] = field(default_factory=list)


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
        owner = None
        traffic = 0
        moves = not (func.is_view or func.overloadpacket in _NO_TRAFFIC)
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
        self._add(owner, flops, float(traffic))
        return out

    def _add(self, owner: str | None, flops: float, traffic: float) -> None:
        if owner is not None:
            if owner not in self.records:
                self.records[owner] = LayerCount(owner, type(self.layers[owner]).__name__)
            if self.current is None:  # ops before the first layer fold into it
                flops += self.pending[0]
                traffic += self.pending[1]
            self.current = owner
        if self.current is None:
            self.pending[0] += flops
            self.pending[1] += traffic
            return
        record = self.records[self.current]
        record.flops += flops
        record.memory_bytes += traffic


def count_layers(
    model: nn.Module, inputs: tuple[Any, ...], kwargs: dict[str, Any] | None = None
) -> list[LayerCount]:
    """Per-layer forward FLOPs, memory traffic and owned tensors, in execution order.

    ``model`` and ``inputs`` should live on the meta device (any device works, but meta is
    free). Counts are for the whole batch in ``inputs``; divide by its size for per-sample.
    """
    counter = FlopCounterMode(display=False)
    mode = _Attribution(model, counter)
    handles = []
    for name, module in mode.layers.items():
        handles.append(module.register_forward_pre_hook(_push(mode, name)))
        handles.append(module.register_forward_hook(_pop(mode), always_call=True))
    try:
        with torch.no_grad(), counter, mode:
            model(*inputs, **(kwargs or {}))
    finally:
        for handle in handles:
            handle.remove()
    return _with_tensors(model, mode)


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
