"""``ddlperf profile`` (a Workload from a real torch model) and ``ddlperf show`` (read one).

``profile`` imports torch only once its flags are valid and ``--out`` is writable, so a bad
flag fails in milliseconds and a missing torch says which extra to install. ``show`` never
imports torch.
"""

from __future__ import annotations

import importlib
import os
import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ddlperf.cli.app import app
from ddlperf.cli.common import handle_input_errors, make_console, out_console, print_json
from ddlperf.errors import InputError, MissingExtraError
from ddlperf.io import check_writable
from ddlperf.report.fit import Col, Row, dropped_line, fit_table
from ddlperf.units import format_duration, format_size, parse_duration

if TYPE_CHECKING:
    from rich.table import Table

    from ddlperf.workload import Workload

DEFAULT_MODULE_BATCH = 32


class Optimizer(str, Enum):
    sgd = "sgd"
    adam = "adam"


@app.command("profile")
@handle_input_errors
def profile_command(
    model: Annotated[str | None, typer.Option(
        help="zoo model to build without weights (see 'ddlperf models')")] = None,
    module: Annotated[str | None, typer.Option(
        help="your model: package.module:factory, a callable returning an nn.Module "
             "(the current directory is importable)")] = None,
    input_shape: Annotated[str | None, typer.Option(
        help="per-sample input shape, e.g. 3,224,224 (required with --module; for bert_base "
             "and gpt2 a sequence length)")] = None,
    batch_size: Annotated[int | None, typer.Option(
        help=f"samples per step; default: the zoo model's, {DEFAULT_MODULE_BATCH} with "
             "--module")] = None,
    out: Annotated[Path | None, typer.Option(help="write the workload JSON here")] = None,
    analytic: Annotated[bool, typer.Option(
        help="estimate from FLOPs and bytes (meta device) with the device roofline; "
             "measures nothing")] = False,
    device: Annotated[str | None, typer.Option(
        help="measured/--calibrate: cpu or cuda[:N] (default cpu); --analytic or "
             "--step-time: catalog device or name=X,peak=..,bw=.. (default V100)")] = None,
    dtype: Annotated[str, typer.Option(help="fp32, tf32, fp16 or bf16")] = "fp32",
    calibrate: Annotated[bool, typer.Option(
        help="scale the analytic per-layer times to a measured whole step "
             "(or to --step-time)")] = False,
    step_time: Annotated[str | None, typer.Option(
        help="with --calibrate: a known step time (forward+loss+backward) on --device, "
             "e.g. 120ms; nothing is measured")] = None,
    warmup: Annotated[int, typer.Option(help="untimed steps first")] = 3,
    repetitions: Annotated[int, typer.Option(help="timed steps (median and cv)")] = 10,
    threads: Annotated[int, typer.Option(help="CPU threads torch may use")] = 1,
    optimizer: Annotated[Optimizer, typer.Option(
        help="optimizer whose step cost goes into update_s_per_byte "
             "(sgd = momentum 0.9; both are measured)")] = Optimizer.sgd,
    json_output: Annotated[bool, typer.Option("--json", help="print the workload JSON")] = False,
) -> None:
    """Profile a PyTorch model into a workload: measured here, or estimated for a device."""
    if (model is None) == (module is None):
        raise InputError("--model", "give exactly one of --model or --module",
                         "e.g. --model resnet18, or --module pkg.nets:build --input-shape 3,32,32")
    if batch_size is not None and batch_size <= 0:
        raise InputError("--batch-size", f"must be a whole number > 0, got {batch_size}")
    shape = _parse_shape(input_shape)
    if module is not None and shape is None:
        raise InputError("--input-shape", "is required with --module", "e.g. 3,224,224")
    seconds = parse_duration(step_time, "--step-time", allow_zero=False) if step_time else None
    if out is not None:
        check_writable(out, "--out")
    if model is not None:
        from ddlperf.workload import zoo

        model = zoo.info(model)["name"]  # unknown name: one line, before importing torch
    run = _import_profile()
    subject: Any = model if model is not None else _build_module(module or "")
    if model is not None and shape is None and not analytic and seconds is None:
        _say_duration(model, batch_size, device or "cpu", warmup, repetitions)
    workload = run(
        subject,
        batch_size=batch_size if (model is not None or batch_size) else DEFAULT_MODULE_BATCH,
        input_shape=shape, analytic=analytic, calibrate=calibrate, device=device, dtype=dtype,
        step_time=seconds, warmup=warmup, repetitions=repetitions, threads=threads,
        optimizer=optimizer.value,
        name=model if model is not None else (module or "").rsplit(":", 1)[-1],
    )
    if out is not None:
        workload.save(out)
    if json_output:
        print_json(workload.to_dict())
        return
    out_console().print(_summary(workload, out))


@app.command()
@handle_input_errors
def show(
    path: Annotated[Path, typer.Argument(help="workload JSON (from 'ddlperf profile')")],
    top: Annotated[int | None, typer.Option(
        help="only the N layers with the most time (totals still cover all)")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="print the workload JSON")] = False,
    wide: Annotated[bool, typer.Option("--wide", help="every column and whole lines, however wide the terminal")] = False,
) -> None:
    """A readable per-layer table of a workload file: time share, bytes, FLOPs, totals."""
    if top is not None and top <= 0:
        raise InputError("--top", f"must be > 0, got {top}")
    from ddlperf.workload import load_workload

    workload = load_workload(path, field=str(path))
    if json_output:
        print_json(workload.to_dict())
        return
    out = make_console(wide)
    table, dropped = layer_table(workload, top, out.width)
    out.print(table)
    hidden = dropped_line(dropped, "--wide or --json")
    for line in [*provenance_lines(workload), *([f"note: {hidden}"] if hidden else [])]:
        out.print(line)


# ---------------------------------------------------------------- helpers


def _say_duration(model: str, batch_size: int | None, device: str, warmup: int,
                  repetitions: int) -> None:
    """Say on stderr what a zoo model's profile is about to time and, on the CPU, about how
    long it takes (the catalog's CPU core roofline: an estimate, not a measurement)."""
    steps = f"{warmup + repetitions} steps ({warmup} warm-up + {repetitions} timed)"
    what = model
    estimate = ""
    if device == "cpu":
        from ddlperf.api import make_workload

        step = make_workload(model, None, batch_size, "cpu").compute_s
        estimate = (f", about {format_duration(step)} each by the catalog's CPU core: "
                    f"~{format_duration(step * (warmup + repetitions))} in all")
    print(f"… timing {what} on {device}: {steps}{estimate}", file=sys.stderr, flush=True)


def _parse_shape(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        shape = tuple(int(part) for part in text.replace("x", ",").split(",") if part.strip())
    except ValueError:
        shape = ()
    if not shape or any(s <= 0 for s in shape):
        raise InputError("--input-shape", f"cannot read {text!r}",
                         "give positive sizes separated by commas, e.g. 3,224,224")
    return shape


def _import_profile() -> Any:
    try:
        import torch  # noqa: F401
    except ModuleNotFoundError as exc:
        raise MissingExtraError("ddlperf profile", "torch", exc.name or "torch") from None
    from ddlperf.workload.profile import profile

    return profile


def _build_module(spec: str) -> Any:
    """``package.module:factory`` → the nn.Module the factory returns."""
    import torch

    path, sep, attr = spec.partition(":")
    if not sep or not path or not attr:
        raise InputError("--module", f"cannot read {spec!r}", "write package.module:factory")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        mod = importlib.import_module(path)
    except Exception as exc:
        raise InputError("--module", f"cannot import {path!r}: {type(exc).__name__}: {exc}",
                         "check the module path (the current directory is on sys.path)") from None
    factory = getattr(mod, attr, None)
    if factory is None or not callable(factory):
        raise InputError("--module", f"{path!r} has no callable {attr!r}",
                         "name a function or class that returns an nn.Module")
    try:
        built = factory()
    except Exception as exc:
        raise InputError("--module", f"{spec}() failed: {type(exc).__name__}: {exc}") from None
    if not isinstance(built, torch.nn.Module):
        raise InputError("--module", f"{spec}() returned {type(built).__name__}, "
                         "not a torch.nn.Module")
    return built


def _summary(workload: Workload, out: Path | None) -> str:
    prov = workload.provenance
    parts = [f"{workload.name}: batch {workload.batch_size}, {len(workload.layers)} layers, "
             f"{format_size(workload.parameter_bytes)} parameters, "
             f"{prov.get('method', '?')} on {workload.device}"]
    parts.append(f"compute {format_duration(workload.compute_s)} per step")
    if "step_s_cv" in prov:
        parts.append(f"step cv {100 * prov['step_s_cv']:.1f}%")
    if workload.unattributed_s:
        parts.append(f"unattributed {format_duration(workload.unattributed_s)}")
    text = ", ".join(parts)
    return text + (f"\nwrote {out}" if out is not None else "")


def layer_table(workload: Workload, top: int | None = None,
                width: int = 80) -> tuple[Table, list[str]]:
    """Per-layer rows (forward order) and totals; ``top`` keeps the N most expensive layers.
    Fits ``width``: the least useful columns go first; the headers dropped are returned."""
    total = workload.compute_s
    rows = list(enumerate(workload.layers))
    if top is not None and top < len(rows):
        keep = sorted(rows, key=lambda r: -(r[1].forward_s + r[1].backward_s))[:top]
        rows = sorted(keep, key=lambda r: r[0])
    columns = [Col("#", drop=2), Col("layer", "left", wrap=True), Col("fwd ms"), Col("bwd ms"),
               Col("cv %", drop=1), Col("share %"), Col("params"), Col("GFLOPs", drop=3)]
    cells: list[list[str] | Row] = []
    for i, layer in rows:
        cv = f"{100 * layer.forward_cv:.0f}/{100 * layer.backward_cv:.0f}" \
            if layer.forward_cv or layer.backward_cv else ""
        cells.append([
            str(i), layer.name, f"{1e3 * layer.forward_s:.3f}", f"{1e3 * layer.backward_s:.3f}",
            cv, _share(layer.forward_s + layer.backward_s, total),
            format_size(layer.parameter_bytes) if layer.tensors else "-",
            f"{layer.flops / 1e9:.3f}" if layer.flops is not None else "-",
        ])
    cells.append(Row(["", "unattributed (loss, autograd, hooks)", "", "", "",
                      _share(workload.unattributed_s, total), "", ""], end_section=True))
    flops = workload.flops
    cells.append(Row([
        "", f"total ({len(workload.layers)} layers)",
        f"{1e3 * float(workload.forward_array.sum()):.3f}",
        f"{1e3 * float(workload.backward_array.sum()):.3f}", "", "100.0",
        format_size(workload.parameter_bytes), f"{flops / 1e9:.3f}" if flops is not None else "-",
    ], style="bold"))
    title = (f"{workload.name} — batch {workload.batch_size}, {workload.dtype}, device "
             f"{workload.device or '?'} ({workload.provenance.get('method', '?')})")
    return fit_table(columns, cells, width, title)


def _share(seconds: float, total: float) -> str:
    return f"{100 * seconds / total:.1f}" if total > 0 else "-"


def provenance_lines(workload: Workload) -> list[str]:
    """Totals and where the numbers came from, one fact per line."""
    prov = dict(workload.provenance)
    lines = [
        f"compute per step: {format_duration(workload.compute_s)} "
        f"(forward {format_duration(float(workload.forward_array.sum()))}, backward "
        f"{format_duration(float(workload.backward_array.sum()))}, unattributed "
        f"{format_duration(workload.unattributed_s)})",
        f"parameters: {format_size(workload.parameter_bytes)} in "
        f"{sum(len(layer.tensors) for layer in workload.layers)} tensors; optimizer step "
        f"{format_duration(workload.update_s_per_byte * workload.parameter_bytes)} "
        f"({workload.update_s_per_byte:.3g} s/byte, {prov.get('optimizer', 'sgd')})",
    ]
    if "step_s_median" in prov:
        cv = prov.get("step_s_cv")
        lines.append(f"measured step: {format_duration(prov['step_s_median'])}"
                     + (f" (cv {100 * cv:.1f}%)" if cv is not None else ""))
    keys = ("source", "method", "model", "device", "cpu_model", "gpu_model", "threads", "torch",
            "warmup", "repetitions", "calibration_factor", "unattributed_clamped")
    facts = [f"{k}={prov[k]}" for k in keys if k in prov]
    if facts:
        lines.append("provenance: " + ", ".join(facts))
    return lines
