"""Zoo model definitions for torch: build any zoo model without weights or downloads.

Why here and not in ``zoo.py``: building a model needs torch, and the prediction path must not
import it. ``tools/gen_zoo.py`` turns these definitions into ``data/zoo.json``; ``ddlperf
profile --model NAME`` builds the same models for measurement.

Choices (stated in the zoo data and the README):
- torchvision models are built with ``weights=None`` in training mode. ``inception_v3`` keeps
  torchvision's default ``aux_logits=True`` (the auxiliary classifier runs in training and its
  loss is added with weight 0.4) and uses ``init_weights=False`` so building is fast.
- ``bert_base`` is ``transformers.BertForPreTraining(BertConfig())`` (bert-base-uncased sizes:
  12 layers, hidden 768, vocab 30522) with both pre-training heads (masked LM over every
  position + next-sentence prediction); sequence length 128. The MLM decoder weight is tied to
  the word embeddings and counts once.
- ``gpt2`` is ``transformers.GPT2LMHeadModel(GPT2Config())`` (124M parameters), sequence length
  1024 (the model's context); the tied ``lm_head`` weight counts once (as ``transformer.wte``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from ddlperf.errors import InputError
from ddlperf.hardware import suggest

IMAGE_CLASSES = 1000


@dataclass(frozen=True)
class ModelSpec:
    """How to build one zoo model and feed it a synthetic batch."""

    name: str
    source: str
    task: str
    kind: str  # "image" | "bert" | "gpt2"
    input: dict[str, Any]
    default_batch_size: int
    builder: Callable[[], nn.Module] = field(repr=False)

    def build(self) -> nn.Module:
        """The model in training mode (random init; on the current default device)."""
        model = self.builder()
        model.train()
        return model


def _tv(name: str, **kwargs: Any) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        import torchvision

        return getattr(torchvision.models, name)(weights=None, **kwargs)

    return build


def _resnext101_32x4d() -> nn.Module:
    from torchvision.models.resnet import Bottleneck, ResNet

    return ResNet(Bottleneck, [3, 4, 23, 3], groups=32, width_per_group=4)


def _resnet_v1(depth: int) -> Callable[[], nn.Module]:
    """ResNet v1 as He et al. and TensorFlow's tf_cnn_benchmarks build it: a downsampling
    block strides in its first 1×1 convolution, not in its 3×3 one (torchvision's "v1.5"), so
    its 3×3 runs at stride 1 on the smaller map (fewer FLOPs, and a Winograd-eligible kernel)."""
    def build() -> nn.Module:
        import torchvision

        model = getattr(torchvision.models, f"resnet{depth}")(weights=None)
        for stage in (model.layer2, model.layer3, model.layer4):
            first = stage[0]
            first.conv1.stride = (2, 2)
            first.conv2.stride = (1, 1)
        return model

    return build


def _bert() -> nn.Module:
    from transformers import BertConfig, BertForPreTraining

    return BertForPreTraining(BertConfig())


def _gpt2() -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    return GPT2LMHeadModel(GPT2Config())


def _image(name: str, size: int = 224, batch: int = 32, **kwargs: Any) -> ModelSpec:
    extra = "".join(f", {k}={v!r}" for k, v in kwargs.items())
    return ModelSpec(
        name=name,
        source=f"torchvision.models.{name}(weights=None{extra})",
        task="image-classification",
        kind="image",
        input={"shape": [3, size, size]},
        default_batch_size=batch,
        builder=_tv(name, **kwargs),
    )


SPECS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        _image("alexnet"),
        _image("vgg16"),
        _image("vgg19"),
        _image("resnet18"),
        _image("resnet34"),
        _image("resnet50"),
        _image("resnet101"),
        _image("resnet152"),
        *(ModelSpec(
            name=f"resnet{depth}_v1",
            source=f"torchvision.models.resnet{depth}(weights=None) with each downsampling "
                   "block's stride moved from conv2 (3x3) to conv1 (1x1): ResNet v1 as "
                   "TensorFlow's tf_cnn_benchmarks builds it",
            task="image-classification",
            kind="image",
            input={"shape": [3, 224, 224]},
            default_batch_size=32,
            builder=_resnet_v1(depth),
        ) for depth in (50, 101, 152)),
        _image("resnext50_32x4d"),
        _image("resnext101_32x8d"),
        ModelSpec(
            name="resnext101_32x4d",
            source="torchvision.models.resnet.ResNet(Bottleneck, [3, 4, 23, 3], groups=32, "
                   "width_per_group=4)",
            task="image-classification",
            kind="image",
            input={"shape": [3, 224, 224]},
            default_batch_size=32,
            builder=_resnext101_32x4d,
        ),
        _image("inception_v3", size=299, init_weights=False),
        _image("densenet121"),
        _image("mobilenet_v2"),
        _image("efficientnet_b0"),
        _image("vit_b_16"),
        ModelSpec(
            name="bert_base",
            source="transformers.BertForPreTraining(BertConfig())",
            task="masked-lm+next-sentence",
            kind="bert",
            input={"seq_len": 128},
            default_batch_size=32,
            builder=_bert,
        ),
        ModelSpec(
            name="gpt2",
            source="transformers.GPT2LMHeadModel(GPT2Config())",
            task="causal-lm",
            kind="gpt2",
            input={"seq_len": 1024},
            default_batch_size=8,
            builder=_gpt2,
        ),
    )
}


def spec(name: str) -> ModelSpec:
    """The zoo entry ``name`` or an :class:`InputError` that suggests the nearest name."""
    found = SPECS.get(name) or SPECS.get(name.strip().lower())
    if found is None:
        raise InputError("model", f"unknown model {name!r}", suggest(name, sorted(SPECS)))
    return found


def build(name: str) -> nn.Module:
    """Build zoo model ``name`` (no weights downloaded) in training mode."""
    return spec(name).build()


def input_override(model_spec: ModelSpec, shape: tuple[int, ...] | None) -> dict[str, Any]:
    """The per-sample input description, optionally replaced by ``shape``.

    For language models a one-element shape is the sequence length.
    """
    if shape is None:
        return dict(model_spec.input)
    if model_spec.kind == "image":
        if len(shape) != 3:
            raise InputError("--input-shape", f"{model_spec.name} takes C,H,W images, got {shape}",
                             "e.g. 3,224,224")
        return {"shape": list(shape)}
    if len(shape) != 1:
        raise InputError("--input-shape", f"{model_spec.name} takes a sequence length, got {shape}",
                         "e.g. 128")
    return {"seq_len": int(shape[0])}


def make_batch(
    model_spec: ModelSpec,
    batch_size: int,
    device: str | torch.device = "cpu",
    shape: tuple[int, ...] | None = None,
    dtype: torch.dtype = torch.float32,
) -> tuple[tuple[torch.Tensor, ...], Any]:
    """Synthetic ``(inputs, target)`` for one step: random images/tokens and random labels."""
    desc = input_override(model_spec, shape)
    gen = torch.Generator().manual_seed(0)
    meta = torch.device(device).type == "meta"

    def randint(high: int, size: tuple[int, ...]) -> torch.Tensor:
        if meta:
            return torch.zeros(size, dtype=torch.long, device="meta")
        return torch.randint(0, high, size, generator=gen).to(device)

    if model_spec.kind == "image":
        size = (batch_size, *desc["shape"])
        if meta:
            images = torch.empty(size, dtype=dtype, device="meta")
        else:
            images = torch.randn(size, generator=gen).to(device=device, dtype=dtype)
        return (images,), randint(IMAGE_CLASSES, (batch_size,))
    seq = int(desc["seq_len"])
    limit = 512 if model_spec.kind == "bert" else 1024
    if seq > limit or seq < 2:
        raise InputError("--input-shape", f"{model_spec.name} takes sequences of 2..{limit} tokens,"
                         f" got {seq}")
    vocab = 30522 if model_spec.kind == "bert" else 50257
    ids = randint(vocab, (batch_size, seq))
    if model_spec.kind == "bert":
        return (ids,), (randint(vocab, (batch_size, seq)), randint(2, (batch_size,)))
    return (ids,), ids


def loss_function(model_spec: ModelSpec) -> Callable[[Any, Any], torch.Tensor]:
    """The training loss of the zoo model's task (what the profiled step backpropagates)."""
    if model_spec.kind == "image":
        return image_loss
    if model_spec.kind == "bert":
        return _bert_loss
    return _gpt2_loss


def image_loss(output: Any, target: torch.Tensor) -> torch.Tensor:
    """Cross-entropy; an auxiliary head (inception) adds 0.4 × its loss, as in its paper."""
    logits = getattr(output, "logits", output)
    aux = getattr(output, "aux_logits", None)
    loss = F.cross_entropy(logits.float(), target)
    if aux is not None:
        loss = loss + 0.4 * F.cross_entropy(aux.float(), target)
    return loss


def _bert_loss(output: Any, target: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    mlm, nsp = target
    logits = output.prediction_logits
    mlm_loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), mlm.reshape(-1))
    return mlm_loss + F.cross_entropy(output.seq_relationship_logits.float(), nsp)


def _gpt2_loss(output: Any, ids: torch.Tensor) -> torch.Tensor:
    logits = output.logits[:, :-1]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), ids[:, 1:].reshape(-1))


def default_loss(output: Any, target: Any = None) -> torch.Tensor:
    """Loss for a user's model without one: the mean of the first floating output tensor."""
    tensor = first_float_tensor(output)
    if tensor is None:
        raise InputError("model", "its output contains no floating-point tensor to backpropagate",
                         "pass loss_fn=... to ddlperf.profile")
    return tensor.float().mean()


def first_float_tensor(value: Any) -> torch.Tensor | None:
    """Depth-first search of tensors, tuples, lists, dicts and ModelOutput objects."""
    if isinstance(value, torch.Tensor):
        return value if value.is_floating_point() else None
    if isinstance(value, dict):
        items: Any = value.values()
    elif isinstance(value, (list, tuple)):
        items = value
    else:
        return None
    for item in items:
        found = first_float_tensor(item)
        if found is not None:
            return found
    return None
