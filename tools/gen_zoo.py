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
ZOO_FORMAT = "ddlperf.zoo/1"
COUNT_BATCH = 2  # counted at batch 2 (batch-norm needs >1 value per channel), divided by 2


def _versions() -> dict[str, str]:
    import importlib.metadata as md

    return {pkg: md.version(pkg) for pkg in ("torch", "torchvision", "transformers")}


def model_entry(name: str) -> dict[str, Any]:
    """The zoo entry of one model: reference input, parameter count, per-sample layer work."""
    import torch

    from ddlperf.workload import layer_flops, torch_models

    spec = torch_models.spec(name)
    with torch.device("meta"):
        model = spec.build()
    inputs, _ = torch_models.make_batch(spec, COUNT_BATCH, device="meta")
    records = layer_flops.count_layers(model, inputs)
    layers = [
        {
            "name": r.name,
            "type": r.type,
            "flops": round(r.flops / COUNT_BATCH),
            "memory_bytes": round(r.memory_bytes / COUNT_BATCH),
            "tensors": [{"name": t, "bytes": b} for t, b in r.tensors],
        }
        for r in records
    ]
    return {
        "source": spec.source,
        "task": spec.task,
        "input": spec.input,
        "default_batch_size": spec.default_batch_size,
        "parameters": sum(p.numel() for p in model.parameters()),
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
            "activation traffic (inputs + outputs of every op, parameters excluded); tensor "
            "bytes in float32; counted on the meta device at batch 2 and divided by 2"
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
