"""Regenerate ``src/ddlperf/data/zoo.json`` from the model definitions in torch_models.py.

Usage: ``python tools/gen_zoo.py [--check]`` (needs the torch extra; a few seconds, no
downloads: every model is built on the meta device). ``--check`` exits 1 if the shipped file
differs from what would be generated.

Output is deterministic: keys sorted, one layer per line (diffs show which layer changed),
FLOPs and bytes as integers per sample.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "ddlperf" / "data" / "zoo.json"
ZOO_FORMAT = "ddlperf.zoo/2"
# Counted at two batch sizes (batch-norm needs >1 value per channel): what grows with the
# batch is per-sample work, what does not (weights, their gradients) is fixed per iteration.
COUNT_BATCHES = (2, 4)
# Kernel classes listed one by one (their output size sets how many waves of thread blocks
# they run); memory-bound classes are summed per layer, pass and class.
ONE_BY_ONE = ("conv", "conv3x3", "conv_grouped", "conv_depthwise", "matmul")


def _versions() -> dict[str, str]:
    import importlib.metadata as md

    return {pkg: md.version(pkg) for pkg in ("torch", "torchvision", "transformers")}


def _count(name: str, batch: int) -> list[Any]:
    import torch

    from ddlperf.workload import layer_flops, torch_models

    spec = torch_models.spec(name)
    with torch.device("meta"):
        model = spec.build()
    inputs, target = torch_models.make_batch(spec, batch, device="meta")
    loss = torch_models.loss_function(spec)
    return layer_flops.count_layers(model, inputs, backward=True,
                                    loss_fn=lambda output: loss(output, target))


def _split(small: float, large: float) -> tuple[int, int]:
    """(per-sample, fixed) from counts at the two batch sizes."""
    low, high = COUNT_BATCHES
    per_sample = max(0.0, (large - small) / (high - low))
    return round(per_sample), round(max(0.0, small - low * per_sample))


def kernel_rows(small: list[Any], large: list[Any]) -> list[list[Any]]:
    """``[pass, class, count, flops, bytes, fixed_bytes, out_elements]`` per kernel group.

    flops, bytes and out_elements per sample; fixed_bytes per iteration (weights and their
    gradients). Memory-bound kernels are summed per (pass, class).
    """
    if [(k.pass_, k.cls) for k in small] != [(k.pass_, k.cls) for k in large]:
        raise RuntimeError("the kernel sequence changed with the batch size")
    rows: list[list[Any]] = []
    summed: dict[tuple[str, str], list[Any]] = {}
    for a, b in zip(small, large):
        flops, _ = _split(a.flops, b.flops)
        per_sample, fixed = _split(a.bytes, b.bytes)
        out, _ = _split(a.out_elements, b.out_elements)
        if a.cls in ONE_BY_ONE:
            rows.append([a.pass_, a.cls, 1, flops, per_sample, fixed, out])
            continue
        row = summed.get((a.pass_, a.cls))
        if row is None:
            row = summed[(a.pass_, a.cls)] = [a.pass_, a.cls, 0, 0, 0, 0, 0]
            rows.append(row)
        row[2] += 1
        row[3] += flops
        row[4] += per_sample
        row[5] += fixed
    return rows


def model_entry(name: str) -> dict[str, Any]:
    """The zoo entry of one model: reference input, parameter count, per-sample layer work."""
    import torch

    from ddlperf.workload import torch_models

    spec = torch_models.spec(name)
    with torch.device("meta"):
        parameters = sum(p.numel() for p in spec.build().parameters())
    small, large = (_count(name, batch) for batch in COUNT_BATCHES)
    if [r.name for r in small] != [r.name for r in large]:
        raise RuntimeError(f"{name}: the layers changed with the batch size")
    layers = []
    for a, b in zip(small, large):
        flops, _ = _split(a.flops, b.flops)
        traffic, _ = _split(a.memory_bytes, b.memory_bytes)
        saved, _ = _split(a.saved_bytes, b.saved_bytes)
        layers.append({
            "name": a.name,
            "type": a.type,
            "flops": flops,
            "memory_bytes": traffic,
            "saved_bytes": saved,
            "tensors": [{"name": t, "bytes": size} for t, size in a.tensors],
            "kernels": kernel_rows(a.kernels, b.kernels),
        })
    return {
        "source": spec.source,
        "task": spec.task,
        "input": spec.input,
        "default_batch_size": spec.default_batch_size,
        "parameters": parameters,
        "layers": layers,
    }


def generate(names: list[str] | None = None) -> dict[str, Any]:
    from ddlperf.workload import layer_flops, torch_models

    names = names or sorted(torch_models.SPECS)
    return {
        "format": ZOO_FORMAT,
        "generated_by": "tools/gen_zoo.py",
        "versions": _versions(),
        "flop_convention": layer_flops.FLOP_CONVENTION,
        "units": (
            "per sample at the reference input; flops = forward FLOPs; memory_bytes = forward "
            "activation traffic (inputs + outputs of every op, parameters excluded); "
            "saved_bytes = activations kept for backward; kernels = [pass (f/b), class, "
            "count, flops, bytes, fixed_bytes, out_elements] for every forward and backward "
            "kernel (memory-bound classes summed), fixed_bytes per iteration, the rest per "
            "sample; bytes in float32; counted on the meta device at batches 2 and 4"
        ),
        "models": {name: model_entry(name) for name in names},
    }


def render(data: dict[str, Any]) -> str:
    """Sorted, indented JSON with each layer on its own line (keys in a fixed order)."""
    models = data["models"]
    shell = {**data, "models": {n: {**m, "layers": f"@@{n}@@"} for n, m in models.items()}}
    text = json.dumps(shell, indent=1, sort_keys=True, ensure_ascii=False)
    for name, model in models.items():
        rows = ",\n".join(
            "    " + json.dumps(layer, separators=(",", ":"))
            for layer in model["layers"]
        )
        text = text.replace(f'"@@{name}@@"', "[\n" + rows + "\n   ]")
    return text + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the shipped file differs")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))
    text = render(generate())
    if args.check:
        same = OUT.exists() and OUT.read_text(encoding="utf-8") == text
        print("zoo.json is up to date" if same else "zoo.json differs; run tools/gen_zoo.py")
        return 0 if same else 1
    from ddlperf.io import write_atomic

    write_atomic(OUT, text)
    count = len(json.loads(text)["models"])
    print(f"wrote {OUT.relative_to(ROOT)} ({len(text) / 1e3:.0f} kB, {count} models)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
