"""Fit the architecture efficiencies in ``data/devices.json`` to ``data/calibration.json``.

Usage: ``python tools/calibrate_compute.py [--check | --strict]``. For each architecture the
parameters listed under ``fit`` are chosen, in the file's order, by least squares on log
throughput over that architecture's calibration rows (zoo model, device, batch, dtype, math →
published samples/s); the fitted values, the rows and the residuals are written into
devices.json. A ``reference`` fit is only a source for others' ``fixed`` values, not a catalog
architecture. ``--check`` exits 1 when the shipped values differ from a fresh fit. ``--strict``
prints, without writing, the fit without the rows marked ``"rule": "relaxed"`` (the same model
as a check row on another GPU of its architecture; docs/compute.md), each architecture taking
its ``strict`` variant of the spec where it has one. Deterministic (no random starts); torch-free.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "src" / "ddlperf" / "data"
BOUNDS = {"dense": (0.02, 1.0), "winograd": (1.0, 4.0), "grouped": (0.02, 1.0)}


def _set(arch: dict[str, Any], dotted: str, value: Any) -> None:
    path, name = dotted.split(".")
    arch.setdefault(path, {})[name] = value


def _get(arch: dict[str, Any], dotted: str) -> Any:
    path, name = dotted.split(".")
    return arch[path][name]


def fit_architecture(name: str, spec: dict[str, Any], rows: list[dict[str, Any]],
                     fitted: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Fitted efficiencies of one architecture (scipy least squares, log residuals)."""
    from scipy.optimize import least_squares

    from ddlperf.hardware import Architecture
    from ddlperf.workload import zoo

    arch: dict[str, Any] = {"simt": {"dense": 0.5, "winograd": 1.0}}
    if any(p.startswith("tensor") for p in spec["parameters"]):
        arch["tensor"] = {"dense": 0.5}
    for dotted, source in spec.get("fixed", {}).items():
        other, _, key = source.partition(":")  # "volta" (same key) or "volta:simt.grouped"
        if "." in dotted:
            _set(arch, dotted, _get(fitted[other], key or dotted))
        else:
            arch[dotted] = dict(fitted[other][dotted])
    params = spec["parameters"]
    tied = spec.get("tied", {})  # parameter → the fitted parameter it equals
    mine = [r for r in rows if r["architecture"] == name]

    def residuals(x: Any) -> list[float]:
        for dotted, value in zip(params, x):
            _set(arch, dotted, float(value))
        for dotted, source in tied.items():
            _set(arch, dotted, _get(arch, source))
        model = Architecture(name=name, simt=arch["simt"], tensor=arch.get("tensor"),
                             tensor_tf32=arch.get("tensor_tf32"))
        return [math.log(zoo.single_device_throughput(r["model"], r["device"], r["batch"],
                                                      r["dtype"], r["math"], model)
                         / r["samples_per_s"]) for r in mine]

    lower = [BOUNDS[p.split(".")[1]][0] for p in params]
    upper = [BOUNDS[p.split(".")[1]][1] for p in params]
    start = [1.2 if p.endswith("winograd") else 0.5 for p in params]
    result = least_squares(residuals, start, bounds=(lower, upper), x_scale="jac")
    for dotted, value in zip(params, result.x):
        _set(arch, dotted, round(float(value), 4))
    errors = residuals([_get(arch, p) for p in params])  # also sets the tied parameters
    arch["fitted"] = {
        "parameters": params,
        **({"fixed": spec["fixed"]} if spec.get("fixed") else {}),
        **({"tied": tied} if tied else {}),
        "rows": [f"{r['model']} {r['device']} b{r['batch']} {r['dtype']}: "
                 f"{100 * math.expm1(e):+.1f}%" for r, e in zip(mine, errors)],
        "by": "tools/calibrate_compute.py on data/calibration.json",
    }
    return arch


def calibrate(strict: bool = False) -> dict[str, Any]:
    """devices.json with freshly fitted architectures (``strict``: without relaxed-rule rows)."""
    devices = json.loads((DATA / "devices.json").read_text(encoding="utf-8"))
    calibration = json.loads((DATA / "calibration.json").read_text(encoding="utf-8"))
    rows = [r for r in calibration["rows"] if not (strict and r.get("rule") == "relaxed")]
    fitted: dict[str, dict[str, Any]] = {}
    for name, spec in calibration["fit"].items():  # file order: sources before their users
        spec = spec.get("strict", spec) if strict else spec
        if "copy" in spec:
            arch = {k: v for k, v in fitted[spec["copy"]].items() if k != "fitted"}
            arch["fitted"] = {"copied_from": spec["copy"], "why": spec["why"]}
        else:
            arch = fit_architecture(name, spec, rows, fitted)
        fitted[name] = arch
    references = {n for n, spec in calibration["fit"].items() if spec.get("reference")}
    for name, arch in fitted.items():
        if name in references:
            continue
        old = devices["architectures"][name]
        devices["architectures"][name] = {"description": old["description"], **arch}
    return devices


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if devices.json differs")
    parser.add_argument("--strict", action="store_true",
                        help="print the fit without relaxed-rule rows; write nothing")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))
    text = json.dumps(calibrate(strict=args.strict), indent=1) + "\n"
    path = DATA / "devices.json"
    if args.strict:
        _print(text)
        return 0
    if args.check:
        same = path.read_text(encoding="utf-8") == text
        print("devices.json is calibrated" if same else "devices.json differs; run the tool")
        return 0 if same else 1
    from ddlperf.io import write_atomic

    write_atomic(path, text)
    _print(text)
    return 0


def _print(text: str) -> None:
    for name, arch in json.loads(text)["architectures"].items():
        print(name, {k: v for k, v in arch.items() if k not in ("description", "fitted")},
              *arch["fitted"].get("rows", []), sep="\n  ")


if __name__ == "__main__":
    raise SystemExit(main())
