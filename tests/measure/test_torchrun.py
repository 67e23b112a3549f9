"""``--launcher torchrun`` end to end on this machine: the printed per-host commands really run
(three torchrun nodes on loopback, each in its own working directory, as on three machines),
their records are copied back and ``--summarize`` turns them into a Measurement. A ring's
torchrun nodes run (and are summarized) in tests/measure/test_remote.py, over ssh's stand-in."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ddlperf.cli  # noqa: F401  (registers the commands)
from ddlperf.cli.app import app
from ddlperf.measure.records import read_records
from ddlperf.measure.torchrun import nic_check
from ddlperf.prediction import Prediction
from tests.conftest import assert_one_line_error, free_port, needs_torchrun, tiny_workload_dict

pytest.importorskip("torch")
runner = CliRunner()
WORKLOAD = tiny_workload_dict(200_000)
ITERATIONS, WARMUP = 3, 1


def _plan(tmp_path: Path, *extra: str, hosts: int = 3) -> tuple[Path, dict]:
    wl = tmp_path / "wl.json"
    wl.write_text(json.dumps(WORKLOAD))
    out = tmp_path / "run"
    result = runner.invoke(app, [
        "measure", "--workload", str(wl), "--workers", "2", "--launcher", "torchrun",
        "--hosts", ",".join(["127.0.0.1"] * hosts), "--interface", "lo",
        "--master-port", str(free_port()), "--iterations", str(ITERATIONS),
        "--warmup", str(WARMUP), "--out", str(out), "--json", *extra])
    assert result.exit_code == 0, result.output
    return out, json.loads(result.stdout)


def _run_hosts(tmp_path: Path, out: Path, plan: dict) -> None:
    """Each 'host' runs its printed command in its own directory holding spec.json; then its
    records-<host>.jsonl is copied back into the run directory."""
    procs = []
    for entry in plan["commands"]:
        role = entry["host"].split("(")[1].rstrip(")")
        home = tmp_path / f"host-{role}"
        home.mkdir()
        shutil.copy(out / "spec.json", home / "spec.json")
        procs.append((role, home, subprocess.Popen(
            ["bash", "-c", entry["command"]], cwd=home, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)))
    for role, home, proc in procs:
        output, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, output[-2000:]
        shutil.copy(home / f"records-{role}.jsonl", out / f"records-{role}.jsonl")


@pytest.fixture(scope="module")
def ps_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp_path = tmp_path_factory.mktemp("torchrun-ps")
    out, plan = _plan(tmp_path, "--ps", "1")
    assert [c["host"] for c in plan["commands"]] == [
        "127.0.0.1 (w0)", "127.0.0.1 (w1)", "127.0.0.1 (ps0)"]
    assert (out / "scenario.json").is_file() and (out / "spec.json").is_file()
    _run_hosts(tmp_path, out, plan)
    return out


@needs_torchrun
def test_summarize_merges_every_host_into_a_measurement(ps_run: Path) -> None:
    result = runner.invoke(app, ["measure", "--summarize", str(ps_run), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["kind"] == "measurement" and data["method"] == "measured"
    assert data["inputs"]["measure"]["launcher"] == "torchrun"
    # the same keys as a prediction, so validate and reports treat both alike
    # (``uncertainty`` needs 10 steady iterations per worker, this run has fewer;
    # ``arrangement`` is only a prediction's)
    assert set(Prediction.__dataclass_fields__) - {"uncertainty", "arrangement"} <= set(data)
    assert [w["name"] for w in data["workers"]] == ["w0", "w1"]
    # every step has at least the emulated device time: 3 × (4 + 8) ms
    assert all(w["compute_s"] >= 0.036 for w in data["workers"])
    assert data["iteration_time_s"] >= 0.036
    wire = data["inputs"]["measure"]["wire_check"]
    assert wire["ok"] and wire["checked"]
    assert {(r["worker"], r["direction"]) for r in wire["links"]} == {
        ("w0", "sent"), ("w0", "received"), ("w1", "sent"), ("w1", "received")}
    written = json.loads((ps_run / "measurement.json").read_text())
    assert written["iteration_time_s"] == pytest.approx(data["iteration_time_s"])
    # the PS shard's records came from its own host file
    shard, _ = read_records(ps_run / "records-ps0.jsonl")
    assert {r["type"] for r in shard} == {"serve"}
    text = runner.invoke(app, ["measure", "--summarize", str(ps_run)])
    assert text.exit_code == 0 and "records-ps0.jsonl" in text.stdout


@needs_torchrun
def test_a_missing_host_file_is_named(ps_run: Path, tmp_path: Path) -> None:
    partial = tmp_path / "partial"
    shutil.copytree(ps_run, partial)
    (partial / "records-w1.jsonl").unlink()
    (partial / "measurement.json").unlink(missing_ok=True)
    result = runner.invoke(app, ["measure", "--summarize", str(partial)])
    assert_one_line_error(result, "--summarize", "host w1", "records-w1.jsonl")
    assert not (partial / "measurement.json").exists()


@needs_torchrun
def test_traffic_missing_from_the_nic_is_refused(ps_run: Path, tmp_path: Path) -> None:
    """Records whose NIC counters show a fraction of the payload (a shared-memory shortcut
    or the wrong GLOO_SOCKET_IFNAME) give no measurement.json, only the invalid one."""
    bad = tmp_path / "bad"
    shutil.copytree(ps_run, bad)
    (bad / "measurement.json").unlink(missing_ok=True)
    path = bad / "records-w0.jsonl"
    lines = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record.get("type") == "iteration":
            record["wire_sent_bytes"] = record["wire_received_bytes"] = 1000
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n")
    result = runner.invoke(app, ["measure", "--summarize", str(bad)])
    assert_one_line_error(result, "w0", "GLOO_SOCKET_IFNAME")
    assert not (bad / "measurement.json").exists()
    invalid = json.loads((bad / "measurement.invalid.json").read_text())
    assert invalid["notes"][0].startswith("INVALID")


def test_summarize_of_a_directory_without_a_plan(tmp_path: Path) -> None:
    assert_one_line_error(runner.invoke(app, ["measure", "--summarize", str(tmp_path / "no")]),
                          "--summarize", "not a directory")
    assert_one_line_error(runner.invoke(app, ["measure", "--summarize", str(tmp_path)]),
                          "--summarize", "spec.json", "--launcher torchrun")
    (tmp_path / "spec.json").write_text("{not json")
    (tmp_path / "scenario.json").write_text("{}")
    result = runner.invoke(app, ["measure", "--summarize", str(tmp_path)])
    assert_one_line_error(result, "spec.json")


def test_bad_master_port_is_refused(tmp_path: Path) -> None:
    wl = tmp_path / "wl.json"
    wl.write_text(json.dumps(WORKLOAD))
    result = runner.invoke(app, ["measure", "--workload", str(wl), "--launcher", "torchrun",
                                 "--master-port", "70000", "--out", str(tmp_path / "o")])
    assert_one_line_error(result, "--master-port")
    assert not (tmp_path / "o").exists()


def test_nic_check_without_counters_is_not_checked() -> None:
    records = [{"type": "iteration", "name": "w0", "iteration": 0, "payload_sent_bytes": 10}]
    check = nic_check(records)
    assert check["ok"] and not check["checked"] and "not checked" in check["message"]
