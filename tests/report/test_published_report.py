"""Reports of the published check: the set-up line, the summary lines, the Markdown page and
the plot (throughput) from result rows."""

from __future__ import annotations

from pathlib import Path

from ddlperf.report.published_report import markdown, plot_published, setup_line, summary_lines


def _row(name: str, kind: str = "cluster", status: str = "ok") -> dict:
    p = {"iteration_time_s": 0.5, "throughput_samples_per_s": 1100.0, "bottleneck": "compute",
         "throughput_error_pct": 10.0, "error_pct": -9.1}
    setup = {"arch": "ps", "servers": 2, "gpus_per_server": 8, "device": "K80",
             "intra": "7.88GB/s", "bandwidth_bps": 10e9, "nics": 1, "ps": 2,
             "placement": "colocated", "local_aggregation": True, "batch_size": 64,
             "dtype": "fp32"}
    row = {"name": name, "source": "S1", "what": "replicated", "kind": kind, "gpus": 16,
           "network_stated": False, "status": status, "assumptions": ["10 Gbit/s per server"],
           "setup": setup, "measured": {"iteration_time_s": 0.55,
                                        "throughput_samples_per_s": 1000.0},
           "predicted": {"analytic": p, "simulate": p}}
    if status != "ok":
        row.update(error="host all-reduce", predicted={})
    return row


SUMMARY = {
    "single": {m: {"entries": 1, "median_abs_error_pct": 5.0, "worst_error_pct": -5.0,
                   "worst_entry": "x", "within_25pct": 1} for m in ("analytic", "simulate")},
    "cluster": {m: {"entries": 2, "entries_network_stated": 1, "mape_pct": 10.0,
                    "mape_all_pct": 12.0, "worst_error_pct": 10.0, "worst_abs_error_pct": 10.0,
                    "worst_entry": "a", "within_15pct": 1} for m in ("analytic", "simulate")},
    "cluster_scaled": {},
    "winners": {m: {"right": 1, "wrong": 0, "not_expressible": 1}
                for m in ("analytic", "simulate")},
    "not_expressible": ["b"],
}


def test_setup_line_says_servers_fabric_network_and_strategy() -> None:
    assert setup_line(_row("a")) == ("2×8 K80 · 7.88GB/s · 10Gbps · PS×2 colocated, local "
                                     "aggregation · b64 fp32")
    row = _row("a")
    row["setup"]["transport"] = "grpc-tf1"
    assert setup_line(row) == ("2×8 K80 · 7.88GB/s · 10Gbps · PS×2 colocated, local "
                               "aggregation · grpc-tf1 · b64 fp32")


def test_summary_lines_quote_the_targets() -> None:
    text = "\n".join(summary_lines(SUMMARY))
    assert "median |error| 5.0%" in text and "target ≤ 15%" in text
    assert "1 right, 0 wrong, 1 not judged" in text


def test_markdown_has_the_summary_a_table_per_source_and_the_reasons(tmp_path: Path) -> None:
    rows = [_row("a"), _row("b", status="not expressible")]
    comparisons = [{"what": "x", "entries": ["a", "b"], "published_winner": "a",
                    "margin_pct": 20.0, "status": "not expressible"}]
    meta = {"title": "T", "sources": {"S1": {"title": "TF", "where": "w", "date": "2017"}},
            "assumptions": ["latency 50 us"]}
    page = markdown(rows, comparisons, SUMMARY, meta, command="ddlperf validate --published f")
    assert page.startswith("# T")
    assert "## S1: TF" in page and "not expressible: host all-reduce" in page
    assert "| a vs b | a (+20.0%) | not judged | not judged |" in page
    assert "- 10 Gbit/s per server" in page and "- latency 50 us" in page
    png = plot_published(rows, tmp_path / "p.png", SUMMARY)
    assert png.read_bytes()[:4] == b"\x89PNG"
