"""``ddlperf explain`` and ``ddlperf report`` on the command line."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import ddlperf.cli  # noqa: F401  (registers the commands)
from ddlperf.cli.app import app
from tests.conftest import assert_one_line_error
from tests.report import chromium

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


def test_explain_text_has_the_answer_the_bars_the_what_ifs_and_trust():
    result = invoke("explain", "--workers", "16", "--ps", "3")
    assert result.exit_code == 0, result.output
    out = result.stdout
    for needle in ("The bottleneck is ps0 downlink", "Busy share of the iteration", "█",
                   "PS shards", "What-ifs", "--arch allreduce", "How far to trust this",
                   "docs/validation.csv"):
        assert needle in out, needle
    assert max(len(line) for line in out.splitlines()) <= 80


def test_explain_json_matches_the_api():
    from ddlperf.explain import explain

    result = invoke("explain", "--workers", "8", "--arch", "allreduce", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    direct = explain(workers=8, arch="allreduce").to_dict()
    assert [w["key"] for w in data["what_ifs"]] == [w["key"] for w in direct["what_ifs"]]
    assert data["what_ifs"][0]["gain"] == direct["what_ifs"][0]["gain"]
    assert data["critical_path"] is None


def test_explain_simulate_prints_the_critical_path():
    result = invoke("explain", "--workers", "4", "--ps", "1", "--method", "simulate",
                    "--iterations", "3", "--warmup", "1", "--no-what-ifs")
    assert result.exit_code == 0, result.output
    assert "Critical path of iteration" in result.stdout and "What-ifs" not in result.stdout


def test_explain_bad_input_is_one_line():
    assert_one_line_error(invoke("explain", "--workers", "0"), "--workers")
    assert_one_line_error(invoke("explain", "--method", "guess"), "--method")


def test_report_writes_a_self_contained_page(tmp_path):
    out = tmp_path / "r.html"
    result = invoke("report", "--workers", "8", "--ps", "2", "--out", str(out))
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert text.startswith("<!DOCTYPE html>") and 'id="fig-timeline"' in text
    assert "ddlperf report --workers 8" not in text or "made by" in text


def test_report_bad_out_writes_nothing(tmp_path):
    result = invoke("report", "--out", str(tmp_path / "missing" / "r.html"))
    assert_one_line_error(result, "--out")


def _last_line_of_python(code: str) -> str:
    """Run ``code`` in a fresh interpreter (nothing imported yet); its last line of output."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    return out.stdout.strip().splitlines()[-1]


def test_explain_plan_and_report_never_import_torch(tmp_path):
    code = ("import sys, ddlperf.cli; from ddlperf.explain import explain, simulated_iteration; "
            "from ddlperf.report.html import scenario_report; "
            "from ddlperf.plan import SearchSpace, Target, load_prices, plan; "
            "e = explain('simulate', workers=4, iterations=2, warmup=1); "
            "scenario_report(e, simulated_iteration(workers=4)); t = load_prices(); "
            "plan(Target(throughput=10), SearchSpace(instances=t.instances[:1], "
            "servers=[1, 2]), prices=t, recheck=0); print('torch' in sys.modules)")
    assert _last_line_of_python(code) == "False"


def test_analytic_explain_leaves_the_simulator_and_plots_unimported():
    """Start-up is most of a command's time: ``explain`` with the analytic method imports
    neither the simulator nor matplotlib."""
    code = ("import sys, ddlperf.cli.explain; from ddlperf.explain import explain; "
            "explain(model='resnet50', workers=64); "
            "print(sorted(m for m in sys.modules if m.startswith("
            "('ddlperf.predictors.simulate', 'matplotlib'))))")
    assert _last_line_of_python(code) == "[]"


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Rows of a sweep as CSV and Parquet, and a plan's JSON, as the commands save them: made
    once for the module (a sweep and a plan), only read by the tests."""
    import yaml

    from tests.plan.conftest import TABLE

    tmp_path = tmp_path_factory.mktemp("saved")
    csv_path, parquet = tmp_path / "rows.csv", tmp_path / "rows.parquet"
    args = ["sweep", "--workers", "1,2,4,8", "--ps", "1,2", "--bandwidth", "1Gbps,10Gbps",
            "--csv", str(csv_path)]
    try:
        import pyarrow  # noqa: F401

        args += ["--parquet", str(parquet)]
    except ImportError:
        parquet = None
    assert invoke(*args).exit_code == 0
    prices = tmp_path / "prices.yaml"
    prices.write_text(yaml.safe_dump(TABLE))
    result = invoke("plan", "--throughput", "3000", "--prices", str(prices), "--servers",
                    "1..8", "--recheck", "0", "--json")
    assert result.exit_code == 0, result.output
    plan_json = tmp_path / "plan.json"
    plan_json.write_text(result.stdout)
    return csv_path, parquet, plan_json


def test_report_draws_a_saved_sweep_or_plan(tmp_path, saved):
    """``report --sweep`` / ``--plan``: the page ``sweep --html`` / ``plan --html`` would
    write, from the saved results (nothing is predicted again)."""
    csv_path, parquet, plan_json = saved
    for rows in filter(None, (csv_path, parquet)):
        out = tmp_path / f"{rows.suffix[1:]}.html"
        result = invoke("report", "--sweep", str(rows), "--x", "bandwidth", "--y", "speedup",
                        "--out", str(out))
        assert result.exit_code == 0, result.output
        text = out.read_text()
        assert 'id="fig-sweep"' in text and "16 rows over workers × ps × bandwidth" in text
        assert "speedup against bandwidth" in text
    out = tmp_path / "plan.html"
    assert invoke("report", "--plan", str(plan_json), "--out", str(out)).exit_code == 0
    text = out.read_text()
    for needle in ('id="fig-pareto"', ">Answers<", ">Prices used<", "test input"):
        assert needle in text, needle


@pytest.mark.parametrize(("args", "needles"), [
    (["--sweep", "{rows}", "--plan", "{plan}"], ["--sweep", "not both"]),
    (["--sweep", "{rows}", "--workers", "4"], ["--workers: does not apply to --sweep"]),
    (["--plan", "{plan}", "--method", "simulate"], ["--method: does not apply to --plan"]),
    (["--sweep", "{rows}", "--x", "sync"], ["--x: 'sync' is not a swept axis", "workers"]),
    (["--sweep", "{rows}", "--y", "cost"], ["--y: 'cost' is not a result"]),
    (["--x", "workers"], ["--x: applies to --sweep"]),
    (["--plan", "{rows}"], ["--plan", "not a .json file"]),
    (["--sweep", "{plan}"], ["--sweep", "unknown format"]),
    (["--plan", "{tmp}/nothing.json"], ["--plan", "does not exist"]),
    (["--sweep", "{tmp}/headers.csv"], ["--sweep", "has no rows"]),
    (["--plan", "{tmp}/other.json"], ["--plan: is not the JSON of 'ddlperf plan --json'"]),
])
def test_report_bad_saved_input_is_one_line_and_writes_nothing(tmp_path, saved, args, needles):
    csv_path, _parquet, plan_json = saved
    (tmp_path / "headers.csv").write_text(csv_path.read_text().splitlines()[0] + "\n")
    (tmp_path / "other.json").write_text('{"workers": 4}')
    out = tmp_path / "r.html"
    filled = [a.format(rows=csv_path, plan=plan_json, tmp=tmp_path) for a in args]
    assert_one_line_error(invoke("report", *filled, "--out", str(out)), *needles)
    assert not out.exists()


@pytest.mark.skipif(chromium.skip_reason() is not None, reason=str(chromium.skip_reason()))
def test_chromium_renders_the_saved_sweep_and_plan_reports(tmp_path, saved):
    csv_path, _parquet, plan_json = saved
    for name, args in (("sweep", ["--sweep", str(csv_path)]), ("plan", ["--plan", str(plan_json)])):
        page = tmp_path / f"{name}.html"
        assert invoke("report", *args, "--out", str(page)).exit_code == 0
        text = page.read_text()
        dom = chromium.run(page, tmp_path / f"profile-{name}", "--dump-dom")
        assert text.count("<figure ") == 1
        assert f'data-figures-rendered="{text.count("<figure ")}"' in dom, name
        assert dom.count('data-rendered="yes"') == 1, name
