"""``ddlperf explain`` and ``ddlperf report`` on the command line."""

from __future__ import annotations

import json

from typer.testing import CliRunner

import ddlperf.cli  # noqa: F401  (registers the commands)
from ddlperf.cli.app import app
from tests.conftest import assert_one_line_error

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
