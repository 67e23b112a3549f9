"""Every table at 80 and 160 columns (a pipe is 80): it fits, and no number is cut."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ddlperf.cli  # noqa: F401  (registers the commands)
from ddlperf.api import predict
from ddlperf.cli.app import app
from ddlperf.units import format_duration

runner = CliRunner()
MIXED = ("workers:\n  - {name: fast, count: 6, device: V100}\n"
         "  - {name: slow, count: 2, device: K80, batch_size: 16}\nps: 2\n")
WORKLOAD = {
    "format": "ddlperf.workload/1", "name": "deep", "batch_size": 32, "device": "V100",
    "provenance": {"source": "profile", "method": "measured", "torch": "2.4.0",
                   "cpu_model": "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz with a long name"},
    "layers": [{"name": f"features.denseblock{i}.denselayer{i}.conv{i}", "forward_s": 0.0123,
                "backward_s": 0.0246, "flops": 1.5e9, "memory_bytes": 2e7, "forward_cv": 0.05,
                "backward_cv": 0.07, "tensors": [{"name": f"l{i}.w", "bytes": 123_456_789}]}
               for i in range(4)],
}


def run(columns: int, *args: str) -> str:
    result = runner.invoke(app, list(args), env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.stdout


def check_fits(text: str, columns: int) -> None:
    assert max(len(line) for line in text.splitlines()) <= columns, text
    assert "…" not in text, text


@pytest.mark.parametrize("columns", [80, 160])
def test_predict(columns: int, tmp_path: Path) -> None:
    cfg = tmp_path / "mixed.yaml"
    cfg.write_text(MIXED)
    out = run(columns, "predict", "--config", str(cfg))
    check_fits(out, columns)
    p = predict(cluster=cfg)
    for w in (p.workers[0], p.workers[-1]):
        for number in (format_duration(w.iteration_time_s), f"{w.throughput_samples_per_s:,.1f}",
                       format_duration(w.compute_s), format_duration(w.wait_s)):
            assert number in out
    assert ("group" in out.split("workers")[1].splitlines()[1]) == (columns == 160)


@pytest.mark.parametrize("columns", [80, 160])
def test_models(columns: int) -> None:
    out = run(columns, "models")
    check_fits(out, columns)
    assert "138,357,544" in out and "efficientnet_b0" in out
    assert "source" not in out.splitlines()[1]  # sources: --wide / --json
    assert "--wide or --json" in out


@pytest.mark.parametrize("columns", [80, 160])
def test_devices_is_short(columns: int) -> None:
    out = run(columns, "devices")
    check_fits(out, columns)
    assert len(out.splitlines()) < 25
    assert "4.37TFLOP/s" in out and "1.555TB/s" in out
    assert "datasheet" in run(columns, "devices", "--wide")


@pytest.mark.parametrize("columns", [80, 160])
def test_transports(columns: int) -> None:
    out = run(columns, "transports")
    check_fits(out, columns)
    assert "200MB/s" in out and "800MB/s" in out
    assert "tensorflow/tensorflow#6116" in run(columns, "transports", "--wide")


@pytest.mark.parametrize("columns", [80, 160])
def test_show(columns: int, tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    path.write_text(json.dumps(WORKLOAD))
    out = run(columns, "show", str(path))
    check_fits(out, columns)
    assert "12.300" in out and "24.600" in out and "123.5MB" in out
    assert "conv3" in out  # a long layer name wraps, it is not cut
