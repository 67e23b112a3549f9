"""Reports of ``ddlperf validate --published``: the console table, the summary lines and the
published Markdown page. The CSV and the plot are the emulated validation's
(:mod:`ddlperf.report.validation_report`), on throughput instead of iteration time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ddlperf.io import write_atomic
from ddlperf.report.validation_report import csv_text, plot_validation, signed_pct
from ddlperf.units import format_bandwidth

METHODS = ("analytic", "simulate")


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.5g}"


def _cell(prediction: dict[str, Any] | None) -> str:
    if not prediction:
        return "-"
    return (f"{_rate(prediction['throughput_samples_per_s'])} "
            f"({signed_pct(prediction.get('throughput_error_pct'))})")


def setup_line(row: dict[str, Any]) -> str:
    """``2×8 K80 · 7.88GB/s · 10Gbps · PS×2 colocated, local aggregation · grpc-tf1``."""
    s = row.get("setup", {})
    if s.get("arch") == "single GPU":
        return f"1 {s.get('device')} · b{s.get('batch_size')} {s.get('dtype')}"
    parts = [f"{s.get('servers')}×{s.get('gpus_per_server', '?')} {s.get('device')}"]
    if s.get("arch") == "not expressible":
        return f"{s.get('servers')} servers · {row.get('what')}"
    if s.get("intra") and (s.get("gpus_per_server") or 1) > 1:
        parts.append(str(s["intra"]))
    if s.get("servers", 1) > 1 and s.get("bandwidth_bps"):
        nics = s.get("nics", 1)
        parts.append((f"{nics}×" if nics > 1 else "") + format_bandwidth(s["bandwidth_bps"]))
    if s.get("arch") == "ps":
        ps = f"PS×{s.get('ps')} {s.get('placement') or 'dedicated'}"
        if s.get("local_aggregation"):
            ps += ", local aggregation"
        if s.get("step_barrier"):
            ps += ", step barrier"
        parts.append(ps)
    else:
        parts.append(f"{s.get('allreduce', 'ring')} all-reduce")
    if s.get("transport"):
        parts.append(str(s["transport"]))
    parts.append(f"b{s.get('batch_size')} {s.get('dtype')}")
    return " · ".join(parts)


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """The headline figures, one line each (the CLI prints them under the table)."""
    lines = []
    single = summary.get("single", {}).get("analytic")
    if single:
        lines.append(
            f"single GPU (compute model), {single['entries']} entries: median |error| "
            f"{single['median_abs_error_pct']:.1f}%, worst {single['worst_error_pct']:+.1f}% "
            f"({single['worst_entry']}), {single['within_25pct']}/{single['entries']} within "
            "±25% (targets: median ≤ 10%, all within 25%)")
    for key, label in (("cluster", "clusters"),
                       ("cluster_scaled", "clusters, compute from the source's 1-GPU figure")):
        parts = []
        for method in METHODS:
            s = summary.get(key, {}).get(method)
            if s and s.get("mape_pct") is not None:
                parts.append(f"{method} {s['mape_pct']:.1f}%")
        s = summary.get(key, {}).get("analytic")
        if parts and s:
            lines.append(f"{label}: MAPE over the {s['entries_network_stated']} entries with a "
                         f"stated network: {', '.join(parts)} (target ≤ 15%); over all "
                         f"{s['entries']}: analytic {s['mape_all_pct']:.1f}%")
    for method in METHODS:
        w = summary.get("winners", {}).get(method)
        if w:
            lines.append(f"winners ({method}): {w['right']} right, {w['wrong']} wrong, "
                         f"{w['not_expressible']} not judged (a set-up ddlperf cannot express)")
    missing = summary.get("not_expressible") or []
    if missing:
        lines.append(f"not expressible: {len(missing)} entries (reasons in the table)")
    return lines


def render(rows: list[dict[str, Any]], summary: dict[str, Any], console: Any) -> None:
    """The comparison table (throughput, samples/s) and the summary lines (rich)."""
    from rich.table import Table

    table = Table(title="ddlperf validate --published: throughput (samples/s), predicted vs "
                  "published", header_style="bold", title_justify="left")
    for col, justify in (("#", "right"), ("entry", "left"), ("GPUs", "right"),
                         ("published", "right"), ("analytic", "right"),
                         ("simulate", "right")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for i, r in enumerate(rows, 1):
        published = _rate(r["measured"]["throughput_samples_per_s"])
        if r.get("status") != "ok":
            table.add_row(str(i), r["name"], str(r.get("gpus")), published,
                          "not expressible", "")
            continue
        p = r["predicted"]
        table.add_row(str(i), r["name"], str(r["gpus"]), published,
                      _cell(p.get("analytic")), _cell(p.get("simulate")))
    console.print(table)
    reasons = sorted({(r.get("what"), r.get("error")) for r in rows if r.get("status") != "ok"})
    for what, why in reasons:
        console.print(f"not expressible — {what}: {why}", highlight=False)
    for line in summary_lines(summary):
        console.print(line, highlight=False)


# ----------------------------------------------------------------------------- Markdown


def _md(text: Any) -> str:
    return str(text).replace("|", "/")


def _comparison_lines(comparisons: list[dict[str, Any]]) -> list[str]:
    lines = ["| compared | published winner (margin) | analytic | simulate |",
             "| --- | --- | --- | --- |"]
    for c in comparisons:
        a, b = c["entries"]
        if c["status"] != "ok":
            verdict = ["not judged", "not judged"]
        else:
            verdict = ["right" if c["right"][m] else f"**wrong** ({c['predicted_winner'][m]})"
                       for m in METHODS]
        lines.append(f"| {_md(a)} vs {_md(b)} | {_md(c['published_winner'])} "
                     f"(+{c['margin_pct']:.1f}%) | {verdict[0]} | {verdict[1]} |")
    return lines


def _summary_table(summary: dict[str, Any]) -> list[str]:
    lines = ["| check | analytic | simulate | target |", "| --- | --- | --- | --- |"]
    single = summary.get("single", {})
    if single.get("analytic"):
        cells = [f"median {s['median_abs_error_pct']:.1f}%, worst {s['worst_error_pct']:+.1f}%, "
                 f"{s['within_25pct']}/{s['entries']} within 25%"
                 for s in (single[m] for m in METHODS)]
        lines.append(f"| single GPU: compute model ({single['analytic']['entries']} entries) | "
                     f"{cells[0]} | {cells[1]} | median ≤ 10%, all within 25% |")
    for key, label in (("cluster", "clusters: MAPE, network stated"),
                       ("cluster_scaled", "clusters, compute from the 1-GPU figure: MAPE")):
        s = summary.get(key, {})
        if s.get("analytic") and s["analytic"].get("mape_pct") is not None:
            cells = [f"{s[m]['mape_pct']:.1f}% (worst {s[m]['worst_error_pct']:+.1f}%)"
                     for m in METHODS]
            n = s["analytic"]["entries_network_stated"]
            lines.append(f"| {label} ({n} entries) | {cells[0]} | {cells[1]} | ≤ 15% |")
            cells = [f"{s[m]['mape_all_pct']:.1f}%" for m in METHODS]
            lines.append(f"| … all cluster entries ({s['analytic']['entries']}) | {cells[0]} | "
                         f"{cells[1]} | |")
    w = summary.get("winners", {})
    if w.get("analytic"):
        cells = [f"{w[m]['right']} right, {w[m]['wrong']} wrong" for m in METHODS]
        lines.append(f"| winners ({w['analytic']['not_expressible']} pairs not judged) | "
                     f"{cells[0]} | {cells[1]} | all right |")
    return lines


def _group_table(summary: dict[str, Any]) -> list[str]:
    groups = summary.get("groups") or {}
    if not groups:
        return []

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}%"

    lines = ["| source, set-up | entries | network stated | analytic | simulate | from 1-GPU "
             "(analytic) |", "| --- | ---: | --- | ---: | ---: | ---: |"]
    for name, g in groups.items():
        lines.append(f"| {name} | {g['entries']} | {'yes' if g['network_stated'] else 'no'} | "
                     f"{pct(g['predicted_analytic_mape_pct'])} | "
                     f"{pct(g['predicted_simulate_mape_pct'])} | "
                     f"{pct(g['scaled_analytic_mape_pct'])} |")
    return ["Cluster MAPE by source and synchronization:", "", *lines, ""]


def markdown(rows: list[dict[str, Any]], comparisons: list[dict[str, Any]],
             summary: dict[str, Any], meta: dict[str, Any], *, command: str,
             png: str = "published.png", csv_name: str = "published.csv") -> str:
    """The published page: summary, plot, one table per source, comparisons, assumptions."""
    lines = [f"# {meta.get('title') or 'Published check'}", "",
             "<!-- generated by `ddlperf validate --published … --publish`; do not edit -->", ""]
    if meta.get("description"):
        lines += [meta["description"].strip(), ""]
    lines += ["Regenerate (about 5 minutes on 2 cores, nothing runs, no root):", "",
              "```bash", command, "```", "",
              "## Summary", "", *_summary_table(summary), "", *_group_table(summary),
              f"![predicted vs published throughput]({png})", "",
              f"Data: [{csv_name}]({csv_name}) (one row per entry and method; `measured_*` "
              "columns hold the published values).", ""]
    if meta.get("findings"):
        lines += ["## What the errors show", "", meta["findings"].strip(), ""]
    sources = meta.get("sources", {})
    for key in sorted({r["source"] for r in rows}):
        src = sources.get(key, {})
        lines += [f"## {key}: {src.get('title', '')}", "",
                  f"{src.get('where', '')}, {src.get('date', '')}.", "",
                  "Throughput in samples/s of the whole job; errors relative to the published "
                  "value. *From 1-GPU*: compute scaled to the source's own one-GPU figure.", "",
                  "| # | entry | set-up | published | analytic | simulate | from 1-GPU "
                  "| bottleneck |", "| ---: | --- | --- | ---: | --- | --- | --- | --- |"]
        for i, r in enumerate(rows, 1):
            if r["source"] != key:
                continue
            published = _rate(r["measured"]["throughput_samples_per_s"])
            if r.get("status") != "ok":
                lines.append(f"| {i} | {_md(r['name'])} | {_md(setup_line(r))} | {published} | "
                             f"not expressible: {_md(r.get('error'))} | | | |")
                continue
            p = r["predicted"]
            scaled = (r.get("scaled") or {}).get("analytic")
            lines.append(
                f"| {i} | {_md(r['name'])} | {_md(setup_line(r))} | {published} | "
                f"{_cell(p.get('analytic'))} | {_cell(p.get('simulate'))} | "
                f"{signed_pct(scaled['throughput_error_pct']) if scaled else '-'} | "
                f"{_md(p.get('simulate', {}).get('bottleneck', '-'))} |")
        lines.append("")
    if comparisons:
        lines += ["## Winners", "",
                  "Where the source compares two set-ups on one cluster: is the predicted "
                  "faster one the published faster one?", "", *_comparison_lines(comparisons),
                  ""]
    lines += ["## Assumptions", "", "Every entry:", ""]
    lines += [f"- {a}" for a in meta.get("assumptions", [])]
    seen: dict[str, list[str]] = {}
    for r in rows:
        what = f"{r['source']} · {r.get('what')}"
        if r.get("assumptions") and what not in seen:
            seen[what] = r["assumptions"]
    for what, notes in seen.items():
        lines += ["", f"{what}:", ""] + [f"- {n}" for n in notes]
    return "\n".join(lines).rstrip() + "\n"


def plot_published(rows: list[dict[str, Any]], path: str | Path,
                   summary: dict[str, Any]) -> Path:
    """The emulated validation's plot, on throughput: predicted vs published and the error."""
    legend = {m: s for m, s in summary.get("cluster", {}).items() if s.get("mape_pct") is not None}
    return plot_validation(rows, path, legend, metric="throughput_samples_per_s",
                           reference="published")


def publish(rows: list[dict[str, Any]], comparisons: list[dict[str, Any]],
            summary: dict[str, Any], meta: dict[str, Any], directory: str | Path, *,
            command: str) -> list[Path]:
    """Write ``published.md``, ``published.csv`` and ``published.png`` into ``directory``."""
    d = Path(directory)
    return [
        write_atomic(d / "published.csv", csv_text(rows)),
        plot_published(rows, d / "published.png", summary),
        write_atomic(d / "published.md", markdown(rows, comparisons, summary, meta,
                                                  command=command)),
    ]
