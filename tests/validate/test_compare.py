"""Errors per method and the summary (MAPE, worst, failures)."""

from __future__ import annotations

import pytest

from ddlperf.validate import error_pct, probe_deviation, summarize
from ddlperf.validate.compare import compare, worker_errors
from tests.validate.helpers import fake, row


def test_compare_gives_signed_errors_percentiles_and_probe_deviation() -> None:
    r = row("x", 1.0, 0.9, 1.05)
    assert r["status"] == "ok"
    assert r["predicted"]["analytic"]["error_pct"] == pytest.approx(-10.0)
    assert r["predicted"]["simulate"]["error_pct"] == pytest.approx(5.0)
    assert r["predicted"]["simulate"]["throughput_error_pct"] == pytest.approx(
        100 * (1 / 1.05 - 1))
    assert r["measured"]["p5_s"] == pytest.approx(0.9) and r["measured"]["p95_s"] == 1.1
    assert r["predicted"]["simulate"]["p95_s"] == pytest.approx(1.155)
    assert r["measured"]["probe_max_deviation_pct"] == pytest.approx(100 * (195 / 191.2 - 1))
    assert r["measured"]["per_worker"] == {"w0": 1.0, "w1": 1.0}
    assert error_pct(1.0, 0.0) != error_pct(1.0, 0.0)  # NaN, not a crash
    assert probe_deviation(fake(1.0)) is None


def test_summary_mape_worst_and_failures() -> None:
    rows = [row("a", 1.0, 0.9, 1.02), row("b", 2.0, 2.4, 1.9), row("c", 0.5, 0.5, 0.55),
            {"name": "d", "status": "failed", "error": "w1 crashed", "setup": {}}]
    s = summarize(rows)
    assert s["analytic"]["scenarios"] == 3
    assert s["analytic"]["mape_pct"] == pytest.approx((10 + 20 + 0) / 3)
    assert s["analytic"]["worst_scenario"] == "b"
    assert s["analytic"]["worst_error_pct"] == pytest.approx(20)
    assert s["analytic"]["within_10pct"] == 2
    assert s["simulate"]["mape_pct"] == pytest.approx((2 + 5 + 10) / 3)
    assert s["simulate"]["worst_abs_error_pct"] == pytest.approx(10)
    assert s["failed"] == ["d"]
    assert summarize([]) == {}


def test_per_worker_errors_and_the_worst_worker_in_the_summary() -> None:
    r = row("asp", 1.0, 1.0, 1.0)
    r["measured"]["per_worker"] = {"w0": 0.8, "w1": 1.2}
    r["predicted"]["simulate"]["per_worker"] = {"w0": 0.9, "w1": 1.1}
    r["predicted"]["simulate"]["worker_error_pct"] = worker_errors(
        r["predicted"]["simulate"]["per_worker"], r["measured"]["per_worker"])
    assert r["predicted"]["simulate"]["worker_error_pct"] == {
        "w0": pytest.approx(12.5), "w1": pytest.approx(-100 / 12)}
    s = summarize([r, row("b", 2.0, 2.0, 2.02)])
    assert s["simulate"]["worst_worker"] == "asp w0"
    assert s["simulate"]["worst_worker_error_pct"] == pytest.approx(12.5)
    assert s["simulate"]["mape_pct"] == pytest.approx(0.5)  # the means agree


def test_compare_lists_each_workers_error() -> None:
    assert row("x", 1.0, 0.9, 1.05)["predicted"]["analytic"]["worker_error_pct"] == {
        "w0": pytest.approx(-10.0), "w1": pytest.approx(-10.0)}


def test_the_measured_means_interval_is_kept_and_errors_beyond_it_are_counted() -> None:
    from dataclasses import replace

    info = row("x", 1.0, 0.9, 1.05)
    assert info["measured"]["mean_ci95_s"] is None  # a measurement without one
    measured = replace(fake(1.0, kind="measurement"),
                       uncertainty={"iteration_time_s": {"half_width_s": 0.08, "batches": 5}})
    r = compare({k: info[k] for k in ("name", "index", "note", "fingerprint", "setup",
                                      "inputs")},
                measured, {"analytic": fake(0.9), "simulate": fake(1.05)})
    assert r["measured"]["mean_ci95_s"] == 0.08
    s = summarize([r, row("y", 1.0, 1.3, 1.0)])
    # analytic −10% is beyond ±8%, simulate +5% is not; "y" has no interval: not judged
    assert (s["analytic"]["beyond_interval"], s["analytic"]["with_interval"]) == (1, 1)
    assert (s["simulate"]["beyond_interval"], s["simulate"]["with_interval"]) == (0, 1)
    assert "with_interval" in summarize([row("z", 1.0, 1.0, 1.0)])["analytic"]
