"""The validation reports: CSV, PNG, Markdown page, publish, setup text."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from ddlperf.report.validation_report import (
    csv_text,
    markdown,
    plot_validation,
    publish,
    setup_text,
)
from ddlperf.validate import summarize
from tests.validate.helpers import row


def test_csv_png_markdown_and_publish(tmp_path: Path) -> None:
    rows = [row("a", 1.0, 0.9, 1.02), row("b", 2.0, 2.4, 1.9),
            {"name": "d", "status": "failed", "error": "w1 | crashed", "setup": {}}]
    summary = summarize(rows)
    table = list(csv.DictReader(io.StringIO(csv_text(rows))))
    assert [(t["scenario"], t["method"]) for t in table] == [
        ("a", "analytic"), ("a", "simulate"), ("b", "analytic"), ("b", "simulate"), ("d", "")]
    assert float(table[0]["error_pct"]) == pytest.approx(-10.0)
    assert float(table[0]["measured_s"]) == 1.0 and table[0]["bottleneck_measured"]
    assert table[-1]["status"] == "failed"
    png = plot_validation(rows, tmp_path / "v.png", summary)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = markdown(rows, summary, {"machine": {"cores": 2, "cpu_model": "CPU X"},
                                    "runtime_s": 600}, command="ddlperf validate --matrix m")
    assert "| analytic | 2 | 15.0% | +20.0% (b) | 1/2 |" in text
    assert "![predicted vs measured iteration time](validation.png)" in text
    assert "| 1 | a | PS×1 BSP · 2w · 200Mbps · 8MB · emulated | 1.000 (0.900–1.100) | " \
           "0.900 (-10.0%) | 1.020 (+2.0%) |" in text
    assert "failed: w1 / crashed" in text and "10.0 min" in text and "CPU X, 2 cores" in text
    assert "a note" in text
    written = publish(rows, summary, {}, tmp_path)
    assert sorted(p.name for p in written) == ["validation.csv", "validation.md",
                                               "validation.png"]
    assert not list(tmp_path.glob(".*.tmp"))


def test_setup_text_names_the_mechanisms() -> None:
    assert setup_text({"arch": "ps", "sync": "ssp", "staleness": 2, "ps": 2,
                       "sharding": "greedy", "workers": 3, "bandwidth_bps": 5e8,
                       "parameter_bytes": 12e6, "compute": "real", "speeds": [0.4, 1.0],
                       "cpu_quota": {"w1": 0.5}}) == (
        "PS×2 SSP(2) greedy · 3w · 500Mbps · 12MB · real · speed 0.4 · quota w1=0.5")
    assert setup_text({"arch": "allreduce", "workers": 5, "compute": "emulated"}) == \
        "ring · 5w · emulated"


def test_asp_rows_get_per_worker_errors_in_the_csv_and_the_page() -> None:
    r = row("asp", 1.0, 1.0, 1.0)
    r["setup"]["sync"] = "asp"
    r["measured"]["per_worker"] = {"w0": 0.8, "w1": 1.2}
    r["predicted"]["simulate"]["worker_error_pct"] = {"w0": 12.5, "w1": -4.0}
    table = list(csv.DictReader(io.StringIO(csv_text([r]))))
    simulate = next(t for t in table if t["method"] == "simulate")
    assert simulate["worst_worker"] == "w0" and float(simulate["worst_worker_error_pct"]) == 12.5
    assert simulate["worker_errors_pct"] == "w0:+12.5;w1:-4.0"
    text = markdown([r], summarize([r]), {})
    assert "| 1 | asp | w0 | 0.800 | +0.0% | +12.5% |" in text
    assert "+12.5% (asp w0)" in text  # the summary's worst worker


def test_heterogeneous_column_from_speeds_or_quotas():
    from ddlperf.report.validation_report import heterogeneous

    assert not heterogeneous({"speeds": [1.0]})
    assert heterogeneous({"speeds": [0.4, 1.0]})
    assert heterogeneous({"speeds": [1.0], "cpu_quota": {"w1": 0.5}})


def test_the_measured_means_interval_is_in_the_csv_the_page_and_the_summary() -> None:
    from ddlperf.report.validation_report import summary_lines

    r = row("asp", 2.0, 1.8, 2.05)
    r["measured"]["mean_ci95_s"] = 0.1  # ±5%
    plain = row("b", 1.0, 1.0, 1.0)
    table = list(csv.DictReader(io.StringIO(csv_text([r, plain]))))
    assert float(table[0]["measured_ci95_pct"]) == pytest.approx(5.0)
    assert table[2]["measured_ci95_pct"] == ""  # not known: empty, not 0
    summary = summarize([r, plain])
    text = markdown([r, plain], summary, {})
    assert "| 1 | asp | PS×1 BSP · 2w · 200Mbps · 8MB · emulated | 2.000 ±5.0% (" in text
    assert "| 2 | b | PS×1 BSP · 2w · 200Mbps · 8MB · emulated | 1.000 (" in text
    # analytic −10% is beyond the ±5% interval, simulate +2.5% is not (and b has none)
    assert "| analytic | 2 | 5.0% | -10.0% (asp) | 2/2 | -10.0% (asp w0) | 1/1 |" in text
    assert any("0/1 beyond the measured mean's 95% interval" in line
               for line in summary_lines(summary) if line.startswith("simulate"))


def test_the_host_cpu_probe_is_in_the_csv_and_slow_rows_are_named_on_the_page() -> None:
    rows = [row(name, 1.0, 1.0, 1.0) for name in ("a", "b", "c", "d")]
    for r, before, after in zip(rows, (10e-3, 10.2e-3, 9.9e-3, 10.1e-3),
                                (10e-3, 10e-3, 10e-3, 13e-3)):
        r["inputs"] = {"host": {"probe_before_s": before, "probe_after_s": after,
                                "steal_pct": 0.5}}
    rows[1]["inputs"]["host"]["steal_pct"] = 4.0
    table = list(csv.DictReader(io.StringIO(csv_text(rows))))
    assert float(table[0]["host_probe_ms"]) == pytest.approx(10.0)
    assert float(table[6]["host_probe_ms"]) == pytest.approx(13.0)  # the slower reading
    assert float(table[2]["steal_pct"]) == pytest.approx(4.0)
    text = markdown(rows, summarize(rows), {})
    assert "a fixed CPU probe took 10.0–13.0 ms" in text
    assert "at most 4.0% of the CPU" in text
    assert "over 10% slower than the run's median: d (+29%)" in text
    # rows from before the probe existed: no line, empty CSV cells
    old = [row("a", 1.0, 1.0, 1.0)]
    assert "CPU probe" not in markdown(old, summarize(old), {})
    assert next(csv.DictReader(io.StringIO(csv_text(old))))["host_probe_ms"] == ""
