"""``ddlperf validate`` through the CLI: bad input is one line and exit 2 before any run;
``--dry-run`` and ``--results … --publish`` need no root; one root-only end-to-end run of
``scenarios/smoke.yaml``."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ddlperf.cli  # noqa: F401  (registers the commands)
from ddlperf.cli.app import app
from ddlperf.validate import ValidationRun, summarize
from tests.conftest import assert_one_line_error, netns_skip_reason

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "scenarios" / "smoke.yaml"
DEV = ROOT / "scenarios" / "dev_matrix.yaml"
runner = CliRunner()
GOOD = """
defaults: {bandwidth: 200Mbps}
scenarios:
  - name: a
    synthetic: {layers: [{count: 2, forward_ms: 5, backward_ms: 10, tensor_mb: 0.5}]}
"""


def invoke(*args: str):
    return runner.invoke(app, ["validate", *args])




def matrix(tmp_path: Path, text: str) -> str:
    path = tmp_path / "m.yaml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("text,needles", [
    ("scenarios:\n  - name: [a\n", ["--matrix", "not valid YAML"]),
    ("scenarios: [{name: a, model: mobilenet_v2, speed: 2}]\n",
     ["m.yaml: scenarios[0] (a).speed", "not a known field"]),
    ("scenarios: [{name: a, model: mobilenet_v3}]\n", ["scenario 'a'", "mobilenet_v3"]),
    ("scenarios: [{name: a, model: mobilenet_v2, bandwidth: 10Gbps}]\n",
     ["scenario 'a'", "more than this machine can drive"]),
])
def test_bad_matrix_is_one_line_and_exit_2(tmp_path: Path, text: str,
                                           needles: list[str]) -> None:
    out = tmp_path / "out"
    result = invoke("--matrix", matrix(tmp_path, text), "--out", str(out))
    assert_one_line_error(result, *needles)
    assert not out.exists()


@pytest.mark.parametrize("args,needles", [
    ([], ["--matrix", "is required"]),
    (["--matrix", "nowhere.yaml"], ["--matrix", "does not exist"]),
    (["--only", "zz"], ["--only", "no scenario named 'zz'"]),
    (["--only", ","], ["--only", "no scenario names"]),
    (["--rates", "guessed"], ["--rates", "configured or probed"]),
    (["--results", "nowhere"], ["--results"]),
    (["--publish", "no/such/dir"], ["--publish", "does not exist"]),
])
def test_bad_flags_are_one_line_and_exit_2(tmp_path: Path, args: list[str],
                                           needles: list[str]) -> None:
    if args[:1] not in (["--matrix"], ["--results"]) and args:
        args = ["--matrix", matrix(tmp_path, GOOD), *args]
    elif args[:1] == ["--results"]:
        args = [args[0], str(tmp_path / args[1])]
    assert_one_line_error(invoke(*args, "--out", str(tmp_path / "out")), *needles)


def test_not_root_says_root_is_needed_before_creating_anything(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    out = tmp_path / "out"
    result = invoke("--matrix", matrix(tmp_path, GOOD), "--out", str(out))
    assert_one_line_error(result, "needs root")
    assert not out.exists()


def test_out_with_results_needs_resume(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text("{}")
    if os.geteuid() != 0:
        pytest.skip("the root check comes first")
    assert_one_line_error(invoke("--matrix", matrix(tmp_path, GOOD), "--out", str(out)),
                   "--out", "already holds validation results", "--resume")


def test_dry_run_lists_the_dev_matrix_without_root() -> None:
    result = runner.invoke(app, ["validate", "--matrix", str(DEV), "--dry-run"],
                           terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "dry run" in result.output
    for name in ("ps-bsp-2w-1s", "ps-ssp-hetero", "ring-5w", "real-ps-bsp-quota"):
        assert name in result.output


@pytest.mark.parametrize(("args", "needle"), [
    (["--rates", "foo"], "--rates: unknown choice 'foo'"),
    (["--out", "FILE"], "--out:"),
    (["--publish", "FILE"], "--publish:"),
])
def test_a_dry_run_refuses_what_the_run_would(tmp_path, args, needle) -> None:
    """Before: the dry run accepted them and a run (as root) would have refused them, or
    measured the whole matrix before failing to publish."""
    afile = tmp_path / "w.json"
    afile.write_text("{}")
    args = [str(afile) if a == "FILE" else a for a in args]
    result = runner.invoke(app, ["validate", "--matrix", str(DEV), "--dry-run", *args])
    assert result.exit_code == 2 and needle in result.stderr


def _fake_results(out: Path) -> None:
    from tests.validate.helpers import row

    rows = [row("a", 1.0, 0.9, 1.02), row("b", 2.0, 2.4, 1.9)]
    run = ValidationRun(out, "m.yaml", rows, summarize(rows),
                        {"rates": "configured", "machine": {"cores": 2}})
    out.mkdir(exist_ok=True)
    (out / "results.json").write_text(json.dumps(run.to_dict()))


def test_results_are_reported_and_published_without_rerunning(tmp_path: Path) -> None:
    _fake_results(tmp_path / "run")
    docs = tmp_path / "docs"
    docs.mkdir()
    result = runner.invoke(app, ["validate", "--results", str(tmp_path / "run"), "--publish",
                                 str(docs)], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "simulate: MAPE 3.5% over 2 scenarios, worst -5.0% (b)" in result.output
    assert sorted(p.name for p in docs.iterdir()) == ["validation.csv", "validation.md",
                                                      "validation.png"]
    assert "ddlperf validate --matrix m.yaml --publish" in (docs / "validation.md").read_text()
    as_json = runner.invoke(app, ["validate", "--results", str(tmp_path / "run"), "--json"])
    assert json.loads(as_json.stdout)["summary"]["analytic"]["worst_scenario"] == "b"


def test_repredict_rewrites_predictions_of_an_earlier_run(tmp_path: Path) -> None:
    from tests.validate.helpers import MINIMAL, write
    from tests.validate.test_repredict import finished_run

    m = write(tmp_path, MINIMAL)
    out = finished_run(tmp_path, m)
    docs = tmp_path / "docs"
    docs.mkdir()
    shown = tmp_path / "dev_matrix.yaml"  # the same matrix elsewhere (a frozen clone's run)
    shown.write_text(m.read_text())
    result = runner.invoke(app, ["validate", "--results", str(out), "--matrix", str(shown),
                                 "--repredict", "--publish", str(docs)], terminal_width=200)
    assert result.exit_code == 0, result.output
    data = json.loads((out / "results.json").read_text())
    assert data["scenarios"][0]["predicted"]["analytic"]["iteration_time_s"] != 9.0
    assert "repredicted" in data and (docs / "validation.md").exists()
    # the page's command names the matrix given, not the path the run was made from
    page = (docs / "validation.md").read_text()
    assert f"ddlperf validate --matrix {shown} --publish" in page
    assert f"--matrix {m} " not in page


@pytest.mark.parametrize("args,needles", [
    (["--repredict", "--matrix", "m.yaml"], ["--repredict", "--results"]),
    (["--repredict", "--results", "RUN"], ["--repredict", "--matrix"]),
])
def test_repredict_needs_results_and_matrix(tmp_path: Path, args: list[str],
                                            needles: list[str]) -> None:
    _fake_results(tmp_path / "run")
    args = [str(tmp_path / "run") if a == "RUN" else a for a in args]
    before = (tmp_path / "run" / "results.json").read_text()
    assert_one_line_error(invoke(*args), *needles)
    assert (tmp_path / "run" / "results.json").read_text() == before


# ----------------------------------------------------------------------------- --published

PUBLISHED = ROOT / "scenarios" / "published.yaml"
FEW = "S3 resnet50 x1,S3 resnet50 DDP x2,S2-16 vgg16 CPU-TCP"


def test_published_predicts_writes_and_publishes(tmp_path: Path) -> None:
    out, docs = tmp_path / "out", tmp_path / "docs"
    docs.mkdir()
    result = runner.invoke(app, ["validate", "--published", str(PUBLISHED), "--only", FEW,
                                 "--out", str(out), "--publish", str(docs)],
                           terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "not expressible" in result.output and "S3 resnet50 DDP x2" in result.output
    assert sorted(p.name for p in out.iterdir()) == ["results.csv", "results.json",
                                                     "validation.png"]
    assert sorted(p.name for p in docs.iterdir()) == ["published.csv", "published.md",
                                                      "published.png"]
    data = json.loads((out / "results.json").read_text())
    assert data["format"] == "ddlperf.published/1"
    assert sorted(r["name"] for r in data["entries"]) == sorted(FEW.split(","))  # file order
    assert f"ddlperf validate --published {PUBLISHED}" in (docs / "published.md").read_text()
    again = runner.invoke(app, ["validate", "--published", str(PUBLISHED), "--only", FEW,
                                "--out", str(out), "--json"])
    assert again.exit_code == 0, again.output  # its own earlier results are replaced
    assert json.loads(again.stdout)["summary"]["not_expressible"] == ["S2-16 vgg16 CPU-TCP"]


@pytest.mark.parametrize("text,args,needles", [
    ("entries:\n  - {name: a, source: X, model: resnet50, device: V100, batch_size: 32, "
     "published: 300}\n", [], ["p.yaml: entries[0] (a).dtype", "is required"]),
    (None, ["--matrix", "m.yaml"], ["--matrix", "does not apply to --published"]),
    (None, ["--only", "nothing"], ["--only", "no entry named 'nothing'"]),
])
def test_bad_published_input_is_one_line_and_exit_2(tmp_path: Path, text: str | None,
                                                    args: list[str], needles: list[str]) -> None:
    path = PUBLISHED
    if text is not None:
        path = tmp_path / "p.yaml"
        path.write_text("sources: {X: {title: t, where: w, date: d}}\n" + text)
    out = tmp_path / "out"
    result = invoke("--published", str(path), "--out", str(out), *args)
    assert_one_line_error(result, *needles)
    assert not out.exists()


def test_published_does_not_overwrite_an_emulated_validation(tmp_path: Path) -> None:
    _fake_results(tmp_path / "run")
    result = invoke("--published", str(PUBLISHED), "--only", "S3 resnet50 x1", "--out",
                    str(tmp_path / "run"))
    assert_one_line_error(result, "--out", "holds results of another kind")


# ----------------------------------------------------------------------------- root only


@pytest.mark.root
@pytest.mark.slow
def test_smoke_matrix_end_to_end(tmp_path: Path) -> None:
    reason = netns_skip_reason()
    if reason:
        pytest.skip(reason)
    pytest.importorskip("torch")
    out, docs = tmp_path / "v", tmp_path / "docs"
    docs.mkdir()
    result = runner.invoke(app, ["validate", "--matrix", str(SMOKE), "--out", str(out),
                                 "--publish", str(docs)], terminal_width=200)
    assert result.exit_code == 0, result.output
    for name in ("results.json", "results.csv", "validation.png"):
        assert (out / name).stat().st_size > 0
    data = json.loads((out / "results.json").read_text())
    assert data["format"] == "ddlperf.validation/1"
    rows = data["scenarios"]
    assert rows and all(r["status"] == "ok" for r in rows)
    for r in rows:
        assert r["measured"]["wire_ok"] is True
        assert (out / r["name"] / "measure" / "measurement.json").exists()
        host = r["inputs"]["host"]  # how fast the CPU ran around the measurement
        assert host["probe_before_s"] > 0 and host["probe_after_s"] > 0
        for method in ("analytic", "simulate"):
            assert math.isfinite(r["predicted"][method]["error_pct"])
            assert abs(r["predicted"][method]["error_pct"]) < 50
    for method in ("analytic", "simulate"):
        assert math.isfinite(data["summary"][method]["mape_pct"])
    assert (docs / "validation.md").exists() and (docs / "validation.png").exists()
    # --resume keeps finished scenarios and reruns nothing
    again = runner.invoke(app, ["validate", "--matrix", str(SMOKE), "--out", str(out),
                                "--resume"], terminal_width=200)
    assert again.exit_code == 0, again.output
    assert "kept from the earlier run" in again.stderr
    assert json.loads((out / "results.json").read_text())["scenarios"] == rows
    # --repredict with the same models: the same predictions, the measurements untouched
    re = runner.invoke(app, ["validate", "--results", str(out), "--matrix", str(SMOKE),
                             "--repredict"], terminal_width=200)
    assert re.exit_code == 0, re.output
    for old, new in zip(rows, json.loads((out / "results.json").read_text())["scenarios"],
                        strict=True):
        assert new["measured"] == old["measured"]
        for method in ("analytic", "simulate"):
            assert new["predicted"][method]["iteration_time_s"] == pytest.approx(
                old["predicted"][method]["iteration_time_s"], rel=1e-9)


def test_against_compares_two_runs_and_puts_the_section_on_the_page(tmp_path: Path) -> None:
    from tests.validate.helpers import row

    _fake_results(tmp_path / "run")
    rows = [row("a", 1.1, 0.9, 1.02), row("b", 2.01, 2.4, 1.9)]
    other = ValidationRun(tmp_path / "other", "m.yaml", rows, summarize(rows),
                          {"created": "2026-12-02T06:03:11+0000"})
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "results.json").write_text(json.dumps(other.to_dict()))
    docs = tmp_path / "docs"
    docs.mkdir()
    result = runner.invoke(app, ["validate", "--results", str(tmp_path / "run"), "--against",
                                 str(tmp_path / "other"), "--publish", str(docs)],
                           terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "1 of 2 scenarios agree within 2 points" in result.output
    page = (docs / "validation.md").read_text()
    assert "## Agreement with another run" in page and "made 2026-12-02T06:03:11" in page
    assert "| a | 1.000 / 1.100 s | -9.1%" in page
    as_json = json.loads(runner.invoke(app, ["validate", "--results", str(tmp_path / "run"),
                                             "--against", str(tmp_path / "other"),
                                             "--json"]).stdout)
    assert as_json["agreement"]["agree"] == 1 and as_json["agreement"]["compared"] == 2


def test_against_takes_a_published_page_csv(tmp_path: Path) -> None:
    from ddlperf.report.validation_report import csv_text
    from tests.validate.helpers import row

    _fake_results(tmp_path / "run")
    page = tmp_path / "validation.csv"
    page.write_text(csv_text([row("a", 1.1, 0.9, 1.02), row("b", 2.01, 2.4, 1.9)]))
    result = runner.invoke(app, ["validate", "--results", str(tmp_path / "run"), "--against",
                                 str(page)], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "1 of 2 scenarios agree within 2 points" in result.output
    assert "validation.csv" in result.output
    page.write_text("not,a,page\n")
    assert_one_line_error(runner.invoke(app, ["validate", "--results", str(tmp_path / "run"),
                                              "--against", str(page)]), "--against")


@pytest.mark.parametrize("args,needles", [
    (["--against", "RUN"], ["--against", "--results"]),
    (["--results", "RUN", "--against", "MISSING"], ["--against"]),
])
def test_against_needs_results_and_an_existing_run(tmp_path: Path, args: list[str],
                                                   needles: list[str]) -> None:
    _fake_results(tmp_path / "RUN")
    args = [str(tmp_path / a) if a in ("RUN", "MISSING") else a for a in args]
    result = runner.invoke(app, ["validate", *args])
    assert_one_line_error(result, *needles)


def test_a_published_entry_that_fails_is_named_and_leaves_no_directory(tmp_path: Path) -> None:
    """Before: 'model: unknown model' without the file or entry, and an empty output
    directory left behind."""
    import yaml

    data = yaml.safe_load(PUBLISHED.read_text())
    data["entries"] = [dict(data["entries"][0], model="nosuchnet")]
    data["compare"] = []
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    result = runner.invoke(app, ["validate", "--published", str(bad), "--out", str(out)])
    assert result.exit_code == 2
    assert f"bad.yaml: entry {data['entries'][0]['name']!r}: model" in result.stderr
    assert not out.exists()
