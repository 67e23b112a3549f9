"""Two runs of one matrix: per scenario within 2 points or not, and the testbed evidence."""

from __future__ import annotations

import pytest

from ddlperf.errors import InputError
from ddlperf.report.agreement_report import headline, markdown_lines
from ddlperf.report.validation_report import csv_text
from ddlperf.validate.agreement import agreement, page_rows, page_run
from tests.validate.helpers import row


def _runs() -> tuple[list[dict], list[dict]]:
    this = [row("steady", 1.0, 1.0, 1.01), row("moved", 1.0, 0.98, 1.0),
            row("failed-there", 1.0, 1.0, 1.0), row("new-setup", 1.0, 1.0, 1.0)]
    this[1]["inputs"]["host"] = {"probe_before_s": 0.010, "probe_after_s": 0.011,
                                 "steal_pct": 0.2}
    other = [row("steady", 1.01, 0.5, 0.5), row("moved", 1.08, 2.0, 2.0),
             {"name": "failed-there", "status": "failed", "error": "x"},
             {**row("new-setup", 1.0, 1.0, 1.0), "fingerprint": "changed"}]
    other[1]["measured"]["probe_max_deviation_pct"] = 14.1
    return this, other


def test_each_run_is_judged_with_this_runs_predictions() -> None:
    this, other = _runs()
    ag = agreement(this, other)
    assert ag["compared"] == 2 and ag["agree"] == 1 and ag["setup_changed"] == ["new-setup"]
    steady, moved = ag["scenarios"]
    # the other run's own (stale) predictions 0.5 s play no part: 1.0 against 1.01 s
    assert steady["errors_pct"]["analytic"] == pytest.approx((0.0, 100 * (1.0 / 1.01 - 1)))
    assert steady["points"] == pytest.approx(1.0) and steady["agree"]  # simulate: +1 → 0
    assert moved["change_pct"] == pytest.approx(100 * (1.0 / 1.08 - 1))  # this vs the other
    assert moved["points"] == pytest.approx(100 * (1.0 - 1.0 / 1.08), abs=1e-9)
    assert not moved["agree"]
    assert moved["evidence"]["host_probe_ms"] == pytest.approx(11.0)
    assert moved["other_evidence"]["probe_max_deviation_pct"] == pytest.approx(14.1)
    assert moved["other_evidence"]["host_probe_ms"] is None  # not recorded there


def test_the_page_lists_the_scenarios_beyond_the_bar_with_their_evidence() -> None:
    this, other = _runs()
    ag = agreement(this, other)
    assert headline(ag).startswith("1 of 2 scenarios agree within 2 points")
    lines = markdown_lines(ag, "another run")
    assert "## Agreement with another run" in lines
    moved = next(line for line in lines if line.startswith("| moved"))
    assert "1.000 / 1.080 s" in moved and "-7.4%" in moved and "14.1%" in moved
    assert "11.0 ms / -" in moved
    assert not any(line.startswith("| steady") for line in lines)


def test_a_published_page_csv_stands_in_for_its_run(tmp_path) -> None:
    """The page's CSV (what --publish writes) gives the same comparison as the run behind it:
    measurements, link probe and CPU probe; a set-up column that differs is not compared."""
    this, other = _runs()
    other = [r for r in other if r["name"] != "new-setup"]
    other[1]["inputs"]["host"] = {"probe_before_s": 0.012, "probe_after_s": 0.015,
                                  "steal_pct": 1.5}
    changed = row("new-setup", 1.0, 1.0, 1.0)
    changed["setup"]["workers"] = 3
    page = tmp_path / "validation.csv"
    page.write_text(csv_text([*other, changed]))
    from_run, from_page = agreement(this, other), agreement(this, page_rows(page))
    assert from_page["setup_changed"] == ["new-setup"]
    assert from_page["compared"] == from_run["compared"] == 2
    for a, b in zip(from_run["scenarios"], from_page["scenarios"], strict=True):
        assert b["other_measured_s"] == pytest.approx(a["other_measured_s"])
        assert b["points"] == pytest.approx(a["points"])
        assert b["other_evidence"]["probe_max_deviation_pct"] == pytest.approx(
            a["other_evidence"]["probe_max_deviation_pct"])
    moved = from_page["scenarios"][1]["other_evidence"]
    assert moved["host_probe_ms"] == pytest.approx(15.0) and moved["steal_pct"] == 1.5
    run = page_run(page)  # what --against reads: the rows, and the page it came from
    assert run.rows == page_rows(page) and run.meta == {"page": str(page)}


@pytest.mark.parametrize("text", ["", "a,b\n1,2\n", "\x00\xff", "BAD_NUMBER"])
def test_a_file_that_is_no_page_csv_is_one_clear_error(tmp_path, text: str) -> None:
    page = tmp_path / "validation.csv"
    if text == "BAD_NUMBER":  # a page CSV whose measured mean is no number
        lines = csv_text([row("a", 1.0, 1.0, 1.0)]).splitlines()
        column = lines[0].split(",").index("measured_s")
        cells = lines[1].split(",")
        cells[column] = "one"
        text = "\n".join([lines[0], ",".join(cells)]) + "\n"
    page.write_bytes(text.encode("latin-1"))
    with pytest.raises(InputError, match="--against"):
        page_rows(page)
