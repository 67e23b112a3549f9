"""``ddlperf sweep`` as a user runs it: every flag sweeps, failures are per row, narrow output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ddlperf.cli  # noqa: F401  (registers the commands)
from ddlperf.api import predict
from ddlperf.cli.app import app
from tests.conftest import assert_one_line_error

runner = CliRunner()


def invoke(*args: str, columns: int = 80):
    return runner.invoke(app, ["sweep", *args], env={"COLUMNS": str(columns)})


def rows_of(*args: str) -> list[dict]:
    result = invoke(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize(("flag", "values", "key"), [
    ("--ps", "1,2,4", "ps"), ("--bandwidth", "10Gbps,25Gbps", "bandwidth"),
    ("--latency", "5us,500us", "latency"), ("--arch", "ps,allreduce", "arch"),
    ("--model", "resnet18,vgg16", "model"), ("--batch-size", "16,64", "batch_size"),
    ("--sync", "bsp,asp", "sync"), ("--sharding", "round_robin,even", "sharding"),
    ("--device", "V100,A100", "device"), ("--placement", "dedicated,colocated", "placement"),
    ("--overlap", "on,off", "overlap"), ("--goodput", "0.5,1", "goodput"),
    ("--bucket-size", "1MB,100MB", "bucket_size"), ("--workers", "2,4", "workers"),
    ("--transport", "tcp,50MB/s", "transport"),
])
def test_every_sweepable_flag_sweeps_without_a_plot(flag: str, values: str, key: str) -> None:
    extra = ["--arch", "allreduce"] if key == "bucket_size" else []
    rows = rows_of(flag, values, *extra)
    assert len(rows) == len(values.split(","))
    assert all(r["error"] is None for r in rows), rows
    assert len({r["iteration_time_s"] for r in rows}) > 1 or key == "sharding"
    assert "swept axis" not in invoke(flag, values).output


def test_a_bad_value_is_that_rows_error_and_shown_as_such() -> None:
    result = invoke("--bandwidth", "10Gbps,10Gbs", "--workers", "4")
    assert result.exit_code == 0, result.output
    assert "error 1: --bandwidth: cannot read bandwidth '10Gbs'" in result.stdout
    rows = rows_of("--bandwidth", "10Gbps,10Gbs")
    assert rows[0]["error"] is None and "'10Gbs'" in rows[1]["error"]


def test_a_sweep_where_every_row_fails_exits_2_with_the_first_error() -> None:
    assert_one_line_error(invoke("--bandwidth", "10Gbs,fast"), "--bandwidth", "'10Gbs'")


def test_x_defaults_to_the_first_swept_axis_and_matters_only_with_a_plot(tmp_path: Path) -> None:
    out = tmp_path / "p.png"
    result = invoke("--ps", "1,2", "--bandwidth", "1Gbps,10Gbps", "--plot", str(out))
    assert result.exit_code == 0, result.output
    assert out.read_bytes().startswith(b"\x89PNG")
    assert invoke("--ps", "1,2", "--x", "workers").exit_code == 0
    assert_one_line_error(invoke("--ps", "1,2", "--x", "workers", "--plot", str(out)),
                          "--x: 'workers' is not a swept axis", "use one of ps")


@pytest.mark.parametrize(("args", "needle"), [
    (["--y", "foo", "--plot", "p.png"], "--y: 'foo' is not a result"),
    (["--plot", "p.jpg"], "--plot: cannot write .jpg"),
    (["--method", "guess"], "--method: 'guess' is not one of analytic, simulate"),
    (["--model", "resnet18", "--workload", "w.json"], "--model"),
])
def test_bad_plot_and_method_options(args: list[str], needle: str, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "w.json").write_text("{}")
    assert_one_line_error(invoke(*args), needle)
    assert not (tmp_path / "p.png").exists() and not (tmp_path / "p.jpg").exists()


def test_workers_sweep_over_a_cluster_file_without_workers(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("bandwidth: 25GbE\nps: {count: 1}\n")
    rows = rows_of("--config", str(cfg), "--workers", "1,2,4")
    assert [r["error"] for r in rows] == [None] * 3
    assert len({r["throughput_samples_per_s"] for r in rows}) == 3


def test_flags_that_do_not_apply_are_noted_under_the_table() -> None:
    out = " ".join(invoke("--arch", "ps,allreduce", "--sharding", "greedy").stdout.split())
    assert "--sharding does not apply to all-reduce" in out and "allreduce rows" in out


@pytest.mark.parametrize("columns", [80, 160])
def test_the_table_fits_and_never_cuts_a_number(columns: int) -> None:
    result = invoke("--model", "resnet50,vgg16", "--ps", "1,2", "--bandwidth", "10Gbps,100Gbps",
                    columns=columns)
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= columns
    assert "…" not in result.stdout
    best = predict("resnet50", ps=2, bandwidth="100Gbps").throughput_samples_per_s
    assert f"{best:,.1f}" in result.stdout and "ps0 downlink" in result.stdout
    assert ("efficiency" in lines[1]) == (columns == 160)  # the header row
    assert ("not shown at this width: efficiency" in result.stdout) == (columns == 80)
    wide = invoke("--model", "resnet50,vgg16", "--wide", columns=columns).stdout
    assert "efficiency" in wide and "…" not in wide


def test_server_flags_sweep_too() -> None:
    # 4 shards: four GPUs behind one NIC are held by it, two NICs or two GPUs are not
    rows = rows_of("--workers", "8", "--ps", "4", "--gpus-per-node", "2,4", "--intra", "NVLink2",
                   "--nics", "1,2")
    assert len(rows) == 4 and all(r["error"] is None for r in rows), rows
    assert len({r["iteration_time_s"] for r in rows}) > 1
