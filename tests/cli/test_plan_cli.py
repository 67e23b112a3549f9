"""``ddlperf plan`` on the command line: answers, files, and one-line bad input."""

from __future__ import annotations

import csv
import json
import re

import pytest
import yaml
from typer.testing import CliRunner

import ddlperf.cli  # noqa: F401  (registers the commands)
from ddlperf.cli.app import app
from tests.conftest import assert_one_line_error
from tests.plan.conftest import TABLE

runner = CliRunner()


@pytest.fixture
def prices(tmp_path):
    path = tmp_path / "prices.yaml"
    path.write_text(yaml.safe_dump(TABLE))
    return path


def invoke(*args: str):
    return runner.invoke(app, ["plan", *args])


def test_plan_json_files_and_answers(tmp_path, prices):
    rows, plot, html = tmp_path / "rows.csv", tmp_path / "front.png", tmp_path / "plan.html"
    result = invoke("--throughput", "3000", "--prices", str(prices), "--servers", "1..8",
                    "--ps", "1,2", "--recheck", "1", "--iterations", "3", "--rows", str(rows),
                    "--plot", str(plot), "--html", str(html), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["cheapest"]["meets"] and data["cheapest"]["throughput_samples_per_s"] >= 3000
    assert data["evaluated"] == data["candidates"]
    assert data["rechecks"][0]["which"] == "cheapest"
    with open(rows, newline="") as f:
        assert len(list(csv.DictReader(f))) == data["candidates"]
    assert plot.read_bytes()[:4] == b"\x89PNG"
    assert 'id="fig-pareto"' in html.read_text()


def test_plan_table_says_the_example_prices(tmp_path):
    result = invoke("--throughput", "20000", "--servers", "1..6", "--ps", "1", "--recheck", "0",
                    "--instances", "p4d.24xlarge,p2.xlarge")
    assert result.exit_code == 0, result.output
    assert "cheapest" in result.stdout and "EXAMPLE" in result.stdout


def test_deadline_with_epochs(prices):
    result = invoke("--deadline", "2h", "--epochs", "10", "--dataset-size", "1000000",
                    "--prices", str(prices), "--servers", "1..16", "--recheck", "0", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["target"]["samples"] == 1e7 and data["cheapest"]["job_s"] <= 7200


@pytest.mark.parametrize(("args", "needles"), [
    (["--throughput", "1e9", "--servers", "1..2"], ["--throughput", "best reachable"]),
    (["--throughput", "100", "--devices", "T4"], ["--devices", "no instance with T4"]),
    (["--throughput", "100", "--instances", "nope"], ["--instances", "'nope'"]),
    (["--throughput", "100", "--servers", "8..1"], ["--servers", "inverted"]),
    (["--throughput", "100", "--servers", ""], ["--servers", "empty"]),
    (["--throughput", "100", "--ps", "0..2"], ["--ps", "below 1"]),
    (["--throughput", "100", "--arch", "mesh"], ["--arch", "'mesh'"]),
    (["--throughput", "100", "--step-barrier", "maybe"], ["--step-barrier", "'maybe'"]),
    (["--servers", "1..2"], ["--throughput", "target"]),
    (["--deadline", "1h"], ["--deadline", "size of the job"]),
    (["--throughput", "100", "--executor", "spark"], ["--executor", "spark"]),
    (["--throughput", "100", "--executor", "dask", "--executor-address", "tcp://127.0.0.1:9"],
     ["--executor-address", "127.0.0.1:9"]),
    (["--throughput", "100", "--model", "nosuchnet"], ["nosuchnet"]),
    # were exit 0, the re-check's problem a note in the table (or -1 taken as 0)
    (["--throughput", "100", "--iterations", "0"], ["--iterations", "≥ 1"]),
    (["--throughput", "100", "--jitter", "-1"], ["--jitter"]),
    (["--throughput", "100", "--recheck", "-1"], ["--recheck", "≥ 0"]),
    (["--throughput", "100", "--plot", "front.txt"], ["--plot", "PNG"]),  # wrote a PNG there
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, prices, args, needles):
    rows = tmp_path / "rows.csv"
    if "dask" in args:
        pytest.importorskip("distributed", reason="needs dask.distributed ('ddlperf[dask]')")
    result = invoke(*args, "--prices", str(prices), "--rows", str(rows))
    assert_one_line_error(result, *needles)
    assert not rows.exists() and not list(tmp_path.glob(".rows.csv.*"))


@pytest.mark.slow
def test_a_real_ctrl_c_keeps_the_searched_rows_and_says_where(tmp_path, prices):
    import re

    from tests.cli.ctrl_c import interrupt

    out = tmp_path / "rows.csv"
    status, stderr, rows = interrupt(
        ["plan", "--throughput", "1000", "--prices", str(prices), "--instances", "v1,a1",
         "--servers", "1..4000", "--ps", "1..8", "--sync", "bsp,asp", "--rows", str(out),
         "--jobs", "2", "--no-progress"], out)
    assert status == 130, stderr
    assert "Traceback" not in stderr
    line = stderr.strip().splitlines()[-1]
    done, total = (int(n.replace(",", "")) for n in re.match(
        r"interrupted after ([\d,]+) of ([\d,]+) candidates; the [\d,]+ finished rows are "
        r"in ", line).groups())
    assert line.endswith(str(out)) and 0 < done < total
    assert len(rows) == done
    assert len({(r["instance"], r["servers"], r["arch"], r["ps"], r["sync"])
                for r in rows}) == done


def test_every_flag_a_plan_error_suggests_exists(prices):
    result = invoke("--throughput", "1e9", "--servers", "1..2", "--budget", "5", "--prices",
                    str(prices))
    assert_one_line_error(result, "--throughput", "within the budget")
    help_text = runner.invoke(app, ["plan", "--help"], env={"COLUMNS": "200"}).stdout
    for flag in re.findall(r"--[a-z][a-z-]+", result.stderr or result.output):
        assert flag in help_text, flag


def test_job_times_read_in_hours_and_days(prices):
    result = invoke("--deadline", "8h", "--epochs", "90", "--dataset-size", "1281167",
                    "--prices", str(prices), "--servers", "1..32", "--recheck", "0")
    assert result.exit_code == 0, result.output
    assert "within 8h" in result.stdout and "e+0" not in result.stdout
    assert re.search(r"\d+h \d\dmin|\d+d \d+h|\d+h ", result.stdout)
