"""``ddlperf sweep`` for big grids: streamed files, HTML, Ctrl-C. ``--executor ray|dask`` is
checked in tests/test_executors.py, on the engine cluster that test starts anyway."""

from __future__ import annotations

import csv
import importlib.util

import pytest
from typer.testing import CliRunner

import ddlperf.cli  # noqa: F401  (registers the commands)
from ddlperf.cli import sweep as sweep_cli
from ddlperf.cli.app import app
from tests.conftest import assert_one_line_error

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, ["sweep", *args])


def _csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_big_sweeps_only_stream_to_files(tmp_path, monkeypatch):
    monkeypatch.setattr(sweep_cli, "MAX_ROWS_IN_MEMORY", 10)
    out = tmp_path / "rows.csv"
    result = invoke("--workers", "1,2,4,8,16,32", "--ps", "1,2,4", "--csv", str(out))
    assert result.exit_code == 0, result.output
    assert "18 rows written to" in result.stdout
    assert len(_csv(out)) == 18
    assert_one_line_error(invoke("--workers", "1,2,4,8,16,32", "--ps", "1,2,4"), "--csv",
                          "more than are shown")
    assert_one_line_error(invoke("--workers", "1,2,4,8,16,32", "--ps", "1,2,4", "--json",
                                 "--csv", str(out)), "--json")


def test_a_long_sweep_to_a_file_prints_where_not_the_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(sweep_cli, "MAX_TABLE_ROWS", 5)
    out = tmp_path / "rows.csv"
    result = invoke("--workers", "1,2,4,8,16,32", "--csv", str(out))
    assert result.exit_code == 0, result.output
    assert " ".join(result.stdout.split()) == f"6 rows written to {out}"
    assert len(_csv(out)) == 6
    short = invoke("--workers", "1,2,4,8,16", "--csv", str(tmp_path / "short.csv"))
    assert "ddlperf sweep (5 scenarios" in short.stdout  # short enough for the screen


@pytest.mark.skipif(importlib.util.find_spec("pyarrow") is None,
                    reason="needs pyarrow ('ddlperf[parquet]')")
def test_parquet_and_csv_hold_the_same_rows(tmp_path):
    import pyarrow.parquet as pq

    result = invoke("--workers", "1,2,4", "--sync", "bsp,asp", "--csv", str(tmp_path / "r.csv"),
                    "--parquet", str(tmp_path / "r.parquet"))
    assert result.exit_code == 0, result.output
    table = pq.read_table(tmp_path / "r.parquet").to_pylist()
    rows = _csv(tmp_path / "r.csv")
    assert [r["workers"] for r in table] == [int(r["workers"]) for r in rows]
    assert [r["throughput_samples_per_s"] for r in table] == pytest.approx(
        [float(r["throughput_samples_per_s"]) for r in rows], rel=1e-12)


@pytest.mark.skipif(importlib.util.find_spec("pyarrow") is None,
                    reason="needs pyarrow ('ddlperf[parquet]')")
def test_parquet_types_a_result_column_empty_in_its_first_row_group(tmp_path, monkeypatch):
    """One-worker rows first (no lockstep figure) and ASP rows of more in a later row group:
    the column is numbers from the start, not text that the ASP figures cannot go into."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    monkeypatch.setattr("ddlperf.report.rowfile.BATCH", 2)
    out = tmp_path / "r.parquet"
    result = invoke("--sync", "bsp,asp", "--workers", "1,4,8", "--parquet", str(out))
    assert result.exit_code == 0, result.output
    table = pq.read_table(out)
    assert table.schema.field("lockstep_iteration_time_s").type == pa.float64()
    rows = table.to_pylist()
    assert [r["lockstep_iteration_time_s"] is None for r in rows] == [
        r["sync"] == "bsp" or r["workers"] == 1 for r in rows]


def test_html_report_of_a_sweep(tmp_path):
    out = tmp_path / "s.html"
    result = invoke("--workers", "1,2,4,8", "--ps", "1,2", "--html", str(out))
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert 'id="fig-sweep"' in text and text.count("<tr>") >= 9


def test_ctrl_c_keeps_the_finished_rows(tmp_path, monkeypatch):
    import ddlperf.sweep

    real = ddlperf.sweep.iter_sweep

    def interrupted(*args, **kwargs):
        kwargs["chunk_points"] = 2
        for i, rows in enumerate(real(*args, **kwargs)):
            if i == 2:
                raise KeyboardInterrupt
            yield rows

    monkeypatch.setattr(ddlperf.sweep, "iter_sweep", interrupted)
    out = tmp_path / "part.csv"
    result = invoke("--workers", "1,2,4,8,16,32", "--csv", str(out))
    assert result.exit_code == 130
    assert "interrupted: 4 of 6 rows finished; they are in" in result.stderr
    assert len(_csv(out)) == 4


def test_progress_bar_on_request():
    result = invoke("--workers", "1,2,4,8,16,32", "--progress")
    assert result.exit_code == 0, result.output
    assert "sweeping" in result.stderr and "6/6" in result.stderr
    assert "sweeping" not in invoke("--workers", "1,2", "--no-progress").stderr


@pytest.mark.slow
def test_a_real_ctrl_c_keeps_every_finished_row_once_and_says_where(tmp_path):
    import re

    from tests.cli.ctrl_c import interrupt

    out = tmp_path / "rows.csv"
    status, stderr, rows = interrupt(
        ["sweep", "--workers", "1..20000", "--ps", "1..8", "--sync", "bsp,asp", "--csv",
         str(out), "--jobs", "2", "--no-progress"], out)
    assert status == 130, stderr
    assert "Traceback" not in stderr  # neither from the command nor from its workers
    line = stderr.strip().splitlines()[-1]
    done, total = (int(n.replace(",", "")) for n in re.match(
        r"interrupted: ([\d,]+) of ([\d,]+) rows finished; they are in ", line).groups())
    assert line.endswith(str(out)) and total == 320_000
    assert 0 < done < total and len(rows) == done
    keys = [(r["workers"], r["ps"], r["sync"]) for r in rows]
    assert len(set(keys)) == done  # each once: the first rows of the grid, in order
    assert keys[:2] == [("1", "1", "bsp"), ("1", "1", "asp")]
    assert not list(tmp_path.glob(".rows.csv.*"))  # no temporary file left behind
