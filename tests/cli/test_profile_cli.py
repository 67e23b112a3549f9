"""``ddlperf profile`` and ``ddlperf show`` from the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ddlperf.cli  # noqa: F401  (registers the command modules)
from ddlperf.cli.app import app
from ddlperf.workload import load_workload, zoo

SRC = Path(zoo.__file__).resolve().parents[2]
NETS = """
from torch import nn


def build():
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))


def broken():
    raise RuntimeError("no")


def not_a_model():
    return 42
"""

runner = CliRunner()


@pytest.fixture
def nets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's model file in the current directory, importable as ``mynets``."""
    (tmp_path / "mynets.py").write_text(NETS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("mynets", None)


def _error_line(result) -> str:  # type: ignore[no-untyped-def]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


@pytest.mark.torch
def test_analytic_profile_then_show(tmp_path: Path) -> None:
    pytest.importorskip("torchvision")
    out = tmp_path / "w.json"
    result = runner.invoke(app, ["profile", "--model", "resnet18", "--analytic", "--device",
                                 "V100", "--batch-size", "4", "--out", str(out)])
    assert result.exit_code == 0, result.output
    workload = load_workload(out)
    assert workload.provenance["method"] == "analytic" and workload.batch_size == 4
    assert workload.parameter_bytes == 4 * 11_689_512
    shown = runner.invoke(app, ["show", str(out)])
    assert shown.exit_code == 0, shown.output
    for text in ("conv1", "layer4.1.conv2", "unattributed", "total (41 layers)", "share %",
                 "GFLOPs", "method=analytic"):
        assert text in shown.stdout
    top = runner.invoke(app, ["show", str(out), "--top", "3"])
    assert top.exit_code == 0 and "layer1.0.bn1" not in top.stdout


@pytest.mark.torch
def test_profile_json_prints_the_workload() -> None:
    pytest.importorskip("torchvision")
    result = runner.invoke(app, ["profile", "--model", "mobilenet_v2", "--analytic", "--json",
                                 "--batch-size", "2", "--device", "A100"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["format"] == "ddlperf.workload/1" and data["device"] == "A100"


@pytest.mark.torch
def test_measured_profile_of_a_user_module(nets: Path) -> None:
    pytest.importorskip("torch")
    result = runner.invoke(app, ["profile", "--module", "mynets:build", "--input-shape", "16",
                                 "--batch-size", "8", "--warmup", "1", "--repetitions", "2",
                                 "--optimizer", "adam", "--out", "w.json"])
    assert result.exit_code == 0, result.output
    workload = load_workload(nets / "w.json")
    assert workload.name == "build" and workload.batch_size == 8
    assert workload.provenance["method"] == "measured" and workload.provenance["threads"] == 1
    assert workload.parameter_bytes == 4 * (16 * 32 + 32 + 32 * 4 + 4)
    assert workload.update_s_per_byte == workload.provenance["update_s_per_byte"]["adam"]
    assert "wrote w.json" in result.stdout


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (["profile", "--model", "resnet51"], "did you mean 'resnet50'"),
        (["profile"], "exactly one of --model or --module"),
        (["profile", "--model", "resnet18", "--module", "a:b"], "exactly one"),
        (["profile", "--model", "resnet18", "--batch-size", "0"], "--batch-size"),
        (["profile", "--model", "resnet18", "--batch-size", "-4"], "--batch-size"),
        (["profile", "--model", "resnet18", "--input-shape", "3,x"], "--input-shape"),
        (["profile", "--model", "resnet18", "--out", "/no/such/dir/w.json"], "--out"),
        (["profile", "--module", "mynets:build"], "--input-shape: is required"),
        (["profile", "--module", "mynets", "--input-shape", "16"], "package.module:factory"),
        (["profile", "--module", "no_such_pkg.nets:build", "--input-shape", "16"],
         "cannot import 'no_such_pkg.nets'"),
        (["profile", "--module", "mynets:nope", "--input-shape", "16"], "no callable 'nope'"),
        (["profile", "--module", "mynets:broken", "--input-shape", "16"], "failed"),
        (["profile", "--module", "mynets:not_a_model", "--input-shape", "16"], "nn.Module"),
        (["profile", "--module", "mynets:build", "--input-shape", "3,32,32"], "does not fit"),
        (["profile", "--model", "resnet18", "--input-shape", "3,7", "--analytic"],
         "--input-shape"),
        (["profile", "--model", "resnet18", "--analytic", "--device", "V1000"], "V100"),
        (["profile", "--model", "resnet18", "--calibrate", "--step-time", "fast"],
         "--step-time"),
        (["show", "missing.json"], "missing.json"),
        (["show", "bad.json"], "bad.json"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(nets: Path, args: list[str], expect: str) -> None:
    if "mynets:" in " ".join(args) or args[:2] == ["profile", "--module"]:
        pytest.importorskip("torch")
    (nets / "bad.json").write_text('{"format": "ddlperf.workload/1", "name": "x"}')
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert expect in _error_line(result)


def _run_without_torch(args: list[str]) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys\n"
        "for name in ('torch', 'torchvision', 'transformers'):\n"
        "    sys.modules[name] = None  # import fails as if not installed\n"
        "from ddlperf.cli import main\n"
        f"sys.argv = ['ddlperf', *{args!r}]\n"
        "main()\n"
    )
    path = os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": path}, timeout=120)


def test_missing_torch_says_which_extra_to_install() -> None:
    result = _run_without_torch(["profile", "--model", "resnet18"])
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert "pip install 'ddlperf[torch]'" in lines[0]


def test_show_works_without_torch(tmp_path: Path) -> None:
    path = zoo.load("resnet18", 4).save(tmp_path / "w.json")
    result = _run_without_torch(["show", str(path)])
    assert result.returncode == 0, result.stderr
    assert "conv1" in result.stdout and "kernel model" in result.stdout
