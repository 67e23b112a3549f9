"""``ddlperf measure`` through the CLI: bad input is one line and exit 2, before any work;
``--launcher torchrun`` prints per-host commands. (Real runs: tests/measure/test_smoke.py.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ddlperf.cli  # noqa: F401  (registers the commands)
from ddlperf.cli.app import app
from tests.conftest import assert_one_line_error, leftovers, netns_skip_reason

runner = CliRunner()
WORKLOAD = {
    "format": "ddlperf.workload/1", "name": "tiny", "batch_size": 8, "device": "V100",
    "layers": [{"name": "l0", "forward_s": 0.01, "backward_s": 0.02,
                "tensors": [{"name": "l0.w", "bytes": 400_000}]}],
}


@pytest.fixture
def wl(tmp_path: Path) -> str:
    path = tmp_path / "wl.json"
    path.write_text(json.dumps(WORKLOAD))
    return str(path)


def invoke(*args: str):
    return runner.invoke(app, ["measure", *args])




@pytest.mark.parametrize("args,needles", [
    (["--bandwidth", "10Gbps"], ["--bandwidth", "more than this machine can drive", "2Gbps"]),
    (["--cpu-quota", "w9=0.5"], ["--cpu-quota", "w9", "w0, w1, ps0"]),
    (["--cpu-quota", "w1"], ["--cpu-quota", "HOST=FRACTION"]),
    (["--cpu-quota", "w1=half"], ["--cpu-quota", "not a number"]),
    (["--cpu-quota", "w1=0.01"], ["cpu_quota", "between 0.1"]),
    (["--gpus-per-node", "2", "--intra", "1Gbps", "--cpu-quota", "node0/gpu2=0.5"],
     ["--cpu-quota", "node0/gpu2", "ranks: node0/gpu0, node0/gpu1"]),
    (["--gpus-per-node", "2", "--intra", "1Gbps", "--cpu-quota", "node0/gpu1=0.01"],
     ["node0/gpu1.cpu_quota", "between 0.1"]),
    (["--compute", "gpu"], ["--compute", "emulated, real"]),
    (["--compute", "real"], ["--compute", "zoo model"]),
    (["--iterations", "0"], ["--iterations"]),
    (["--warmup", "-1"], ["--warmup"]),
    (["--timeout", "0"], ["--timeout"]),
    (["--hosts", "a,b"], ["--hosts", "torchrun"]),
    (["--launcher", "slurm"], ["--launcher"]),
    (["--arch", "allreduce", "--sync", "asp"], ["--sync"]),
    (["--workers", "0"], ["--workers"]),
    (["--ps", "0"], ["ps", "--ps 1"]),
    (["--workers", "1", "--arch", "allreduce", "--ps", "0"], ["--workers", "two ranks"]),
])
def test_bad_input_is_one_line_and_exit_2(wl: str, args: list[str], needles: list[str]
                                          ) -> None:
    assert_one_line_error(invoke("--workload", wl, *args), *needles)


def test_a_cluster_file_with_a_transport_is_refused(wl: str, tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("workers: 2\nps: 1\nbandwidth: 100Mbps\ntransport: grpc-tf1\n")
    result = invoke("--workload", wl, "--config", str(cfg), "--out", str(tmp_path / "o"))
    assert_one_line_error(result, "transport", "for predictions")
    assert not (tmp_path / "o").exists()


def test_real_compute_with_more_workers_than_cores_is_refused() -> None:
    cores = os.cpu_count() or 1
    assert_one_line_error(invoke("--model", "mobilenet_v2", "--compute", "real", "--workers",
                          str(cores + 1)), "--compute", f"{cores + 1} workers")


def test_not_root_says_root_is_needed(wl: str, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    result = invoke("--workload", wl, "--out", str(tmp_path / "o"))
    assert_one_line_error(result, "needs root")
    assert not (tmp_path / "o").exists()  # failed before creating anything


def test_out_that_already_holds_a_measurement_is_refused(wl: str, tmp_path: Path) -> None:
    out = tmp_path / "done"
    out.mkdir()
    (out / "measurement.json").write_text("{}")
    if os.geteuid() != 0:
        pytest.skip("the root check comes first without root")
    assert_one_line_error(invoke("--workload", wl, "--out", str(out)), "--out", "already holds")


def test_torchrun_prints_one_command_per_host(wl: str, tmp_path: Path) -> None:
    out = tmp_path / "tr"
    result = invoke("--workload", wl, "--workers", "2", "--ps", "1", "--launcher", "torchrun",
                    "--hosts", "nodeA,nodeB,nodeC", "--out", str(out), "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert [c["host"] for c in plan["commands"]] == ["nodeA (w0)", "nodeB (w1)", "nodeC (ps0)"]
    first = plan["commands"][0]["command"]
    assert first.startswith("GLOO_SOCKET_IFNAME=eth0 OMP_NUM_THREADS=1 torchrun --nnodes=3")
    assert "--master-addr=nodeA" in first and "-m ddlperf.measure.ps_trainer" in first
    assert "--node-rank=2" in plan["commands"][2]["command"]
    spec = json.loads((out / "spec.json").read_text())
    assert spec["format"] == "ddlperf.measure-spec/1" and len(spec["workers"]) == 2


def test_torchrun_without_hosts_uses_placeholders(wl: str, tmp_path: Path) -> None:
    result = invoke("--workload", wl, "--arch", "allreduce", "--workers", "3", "--launcher",
                    "torchrun", "--out", str(tmp_path / "t"))
    assert result.exit_code == 0, result.output
    assert "HOST0 (w0)" in result.stdout and "ddlperf.measure.ddp_trainer" in result.stdout
    assert result.stdout.count("torchrun --nnodes=3") == 3


def test_torchrun_with_the_wrong_number_of_hosts(wl: str, tmp_path: Path) -> None:
    result = invoke("--workload", wl, "--launcher", "torchrun", "--hosts", "a,b",
                    "--out", str(tmp_path / "t"))
    assert_one_line_error(result, "--hosts", "needs 3 hosts", "w0, w1, ps0")


def test_a_failed_run_is_one_line_and_exit_1(wl: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from ddlperf.measure import run as runner
    from ddlperf.measure.launcher import RunFailed

    def fail(*_args, **_kwargs):
        raise RunFailed("rank w1 (worker on host w1) exited with status 1: boom", "w1")

    monkeypatch.setattr(runner, "measure", fail)
    result = invoke("--workload", wl)
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "error: rank w1 (worker on host w1) exited with status 1: boom")


@pytest.mark.root
@pytest.mark.skipif(netns_skip_reason() is not None, reason=netns_skip_reason() or "")
def test_ctrl_c_during_a_run_exits_130_and_tears_down(wl: str, tmp_path: Path) -> None:
    """Ctrl-C as a terminal sends it (SIGINT to the foreground process group), pressed twice
    while the ranks train: one line, exit status 130, nothing left behind."""
    pytest.importorskip("torch")
    out = tmp_path / "run"
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ddlperf", "measure", "--workload", wl, "--workers", "2",
         "--ps", "1", "--iterations", "1000", "--no-probe", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, process_group=0)
    records = out / "records.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and '"iteration"' not in (
            records.read_text() if records.exists() else ""):
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)
    time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGINT)  # impatient: a second Ctrl-C while it cleans up
    _stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert lines == ["error: interrupted; the emulated cluster was torn down"], stderr
    assert "Traceback" not in stderr and "killed by signal" not in stderr
    rid = stderr.split("(run ")[1].split(",")[0]
    assert leftovers(rid) == []
