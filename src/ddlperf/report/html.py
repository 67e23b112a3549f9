"""``ddlperf report``: one self-contained HTML file (figures inline, no network to view it).

A scenario report holds the inputs, the prediction, the breakdown chart, the resources' busy
shares, a timeline excerpt of one steady-state iteration from the simulator with its critical
path, the explanation and the what-ifs, and how far to trust the numbers. Sweep and plan
reports hold their plots and tables. Every figure is an ``<img>`` with a PNG ``data:`` URI;
the page has no external reference at all (a test renders it in headless Chromium offline).
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

from ddlperf.explain import Explanation
from ddlperf.predictors.simulate.tracks import TrackLog
from ddlperf.report.header import scenario_lines
from ddlperf.units import format_bandwidth, format_duration, format_size

MAX_TABLE_ROWS = 500

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid
#ddd;padding-bottom:.2em}.scenario{color:#1f5f8b}.dim{color:#777;font-size:.9em}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}td,th{padding:.2em .7em;
border-bottom:1px solid #eee;text-align:left;vertical-align:top}th{background:#f6f6f6}
td.num{text-align:right;font-variant-numeric:tabular-nums}figure{margin:1em 0}
figure img{max-width:100%;height:auto;border:1px solid #eee}figcaption{font-size:.88em;color:#555}
.answer{font-size:1.05em;background:#f5f9fc;border-left:4px solid #4e79a7;padding:.6em 1em}
.bar{display:inline-block;height:.8em;background:#4e79a7;vertical-align:middle}
.barbg{display:inline-block;width:160px;height:.8em;background:#eee;vertical-align:middle}
"""

# Marks each figure that the browser decoded: a renderer (or a test) can read the count.
SCRIPT = """
window.addEventListener('load',function(){var n=0;document.querySelectorAll('figure img')
.forEach(function(i){if(i.complete&&i.naturalWidth>0){n++;i.dataset.rendered='yes';}});
document.body.dataset.figuresRendered=String(n);});
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]],
           numeric: Sequence[bool] | None = None) -> str:
    numeric = numeric or [False] * len(headers)
    out = ["<table><thead><tr>", *(f"<th>{_e(h)}</th>" for h in headers), "</tr></thead><tbody>"]
    for row in rows:
        out.append("<tr>" + "".join(
            f'<td class="num">{_e(v)}</td>' if n else f"<td>{_e(v)}</td>"
            for v, n in zip(row, numeric)) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _figure(uri: str, caption: str, ident: str) -> str:
    return (f'<figure id="{_e(ident)}"><img alt="{_e(caption)}" src="{uri}">'
            f"<figcaption>{_e(caption)}</figcaption></figure>")


def page(title: str, body: Sequence[str]) -> str:
    """A whole HTML document around ``body`` parts (already HTML)."""
    from ddlperf import __version__

    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<p class="dim">ddlperf {_e(__version__)} · {stamp} · a self-contained page: '
        "figures are inline, nothing is loaded from the network</p>",
        *body, f"<script>{SCRIPT}</script>", "</body></html>", ""])


# ---------------------------------------------------------------- one scenario


def scenario_report(e: Explanation, timeline: tuple[TrackLog, dict[str, Any] | None] | None,
                    command: str | None = None) -> str:
    """The HTML page for one scenario (see the module docstring)."""
    from ddlperf.report import figures

    p = e.prediction
    body = [f'<p class="scenario">{"<br>".join(_e(line) for line in scenario_lines(p))}</p>']
    if command:
        body.append(f'<p class="dim">made by: <code>{_e(command)}</code></p>')
    body.append(f'<p class="answer">{_e(e.bottleneck)}</p>')
    body += ["<h2>Prediction</h2>", _prediction_table(e)]
    body += ["<h2>Inputs</h2>", _inputs(p.inputs)]
    body += ["<h2>Where the time goes</h2>",
             _figure(figures.data_uri(figures.breakdown_figure(e)),
                     "Compute, exposed communication and synchronization wait per worker",
                     "fig-breakdown")]
    if e.resources:
        body.append(_figure(figures.data_uri(figures.resources_figure(e)),
                            "Busy share of the iteration per link and PS processor",
                            "fig-resources"))
        body.append(_resource_table(e))
    if e.shards:
        body += [f"<h3>PS shards (heaviest / even share {e.shard_imbalance:.2f})</h3>",
                 _table(["shard", "bytes", "share", "tensors", "largest tensors"],
                        [(s.name, format_size(s.bytes), f"{100 * s.share:.0f}%", s.tensors,
                          "; ".join(f"{t['name']} {format_size(t['bytes'])}"
                                    for t in s.top_tensors)) for s in e.shards],
                        [False, True, True, True, False])]
    if any(w.wait_s > 0 for w in e.waits):
        body += ["<h3>Waits</h3>", _table(
            ["workers", "compute", "wait", "share", "why"],
            [(w.workers, format_duration(w.compute_s), format_duration(w.wait_s),
              f"{100 * w.share:.0f}%", w.reason) for w in e.waits],
            [False, True, True, True, False])]
    body += _timeline_section(e, timeline)
    body += _what_if_section(e)
    body += ["<h2>How far to trust this</h2>", f"<p>{_e(e.trust.get('text', ''))}</p>"]
    if p.notes:
        body += ["<h2>Notes</h2>", "<ul>", *(f"<li>{_e(n)}</li>" for n in p.notes), "</ul>"]
    body += ["<h2>Data</h2>", "<details><summary>the explanation as JSON (ddlperf explain "
             "--json)</summary><pre>", _e(json.dumps(e.to_dict(), indent=1, allow_nan=False)),
             "</pre></details>"]
    return page(f"ddlperf report: {p.inputs.get('workload', {}).get('name', 'scenario')}", body)


def _prediction_table(e: Explanation) -> str:
    p = e.prediction
    rows = [("iteration time", format_duration(p.iteration_time_s)),
            ("throughput", f"{p.throughput_samples_per_s:,.1f} samples/s"),
            ("speedup", f"{p.speedup:.2f}×"),
            ("scaling efficiency", f"{100 * p.scaling_efficiency:.1f}%"),
            ("bottleneck", p.bottleneck), ("method", p.method)]
    for key, label in (("compute", "compute"), ("communication", "exposed communication"),
                       ("wait", "synchronization wait")):
        rows.append((f"  {label}", format_duration(p.breakdown_s.get(key, 0.0))))
    spread = (p.percentiles or {}).get("iteration_time_s")
    if spread:
        rows.append(("iteration time p5 / p50 / p95", " / ".join(
            format_duration(spread[k]) for k in ("p5", "p50", "p95"))))
    return _table(["", "value"], rows, [False, True])


def _inputs(inputs: dict[str, Any]) -> str:
    rows = []
    for section in ("workload", "cluster", "strategy"):
        for key, value in _flatten(inputs.get(section, {})):
            rows.append((section, key, _human(key, value)))
    return _table(["input", "field", "value"], rows)


def _flatten(data: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(data, dict):
        out = []
        for k, v in data.items():
            out += _flatten(v, f"{prefix}.{k}" if prefix else str(k))
        return out
    if isinstance(data, list):
        out = []
        for i, v in enumerate(data):
            out += _flatten(v, f"{prefix}[{i}]")
        return out
    return [(prefix, data)]


def _human(key: str, value: Any) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return str(value)
    last = key.split(".")[-1]
    if last in ("bandwidth", "uplink", "downlink", "intra"):
        return format_bandwidth(value)
    if last in ("latency", "compute_s"):
        return format_duration(value)
    if last in ("parameter_bytes", "bucket_bytes"):
        return format_size(value)
    return f"{value:g}"


def _resource_table(e: Explanation) -> str:
    rows = []
    for r in e.resources:
        width = round(160 * min(r.utilization, 1.0))
        bar = f'<span class="barbg"><span class="bar" style="width:{width}px"></span></span>'
        moved = (f"{format_size(r.bytes)} at {format_bandwidth(r.rate_bytes_per_s * 8)}"
                 if r.bytes is not None and r.rate_bytes_per_s else "")
        rows.append(f"<tr><td>{_e(r.name)}</td><td>{bar}</td><td class=\"num\">"
                    f"{100 * r.utilization:.0f}%</td><td class=\"num\">"
                    f"{_e(format_duration(r.busy_s))}</td><td>{_e(moved)}</td></tr>")
    return ("<table><thead><tr><th>resource</th><th>busy</th><th></th><th>per iteration</th>"
            "<th>bytes</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _timeline_section(e: Explanation,
                      timeline: tuple[TrackLog, dict[str, Any] | None] | None) -> list[str]:
    from ddlperf.report import figures

    out = ["<h2>One steady-state iteration (simulator)</h2>"]
    if timeline is None or timeline[1] is None:
        out.append("<p>No timeline: the simulator could not run this scenario.</p>")
        return out
    log, path = timeline
    source = ("from the same simulation" if e.prediction.method == "simulate" else
              "from a short simulation of the same scenario (the figures above are analytic)")
    out.append(_figure(figures.data_uri(figures.timeline_figure(log, path)),
                       f"Every stream's operations during iteration {path['iteration']}, "
                       f"{source}", "fig-timeline"))
    shares = ", ".join(f"{k} {100 * v / path['length_s']:.0f}%"
                       for k, v in sorted(path["by_kind_s"].items(), key=lambda kv: -kv[1]))
    out.append(f"<p>Critical path on {_e(path['worker'])} "
               f"({_e(format_duration(path['length_s']))}): {_e(shares)}.</p>")
    out.append(_table(["at", "for", "kind", "where", "what"],
                      [(format_duration(s["start_s"]), format_duration(s["duration_s"]),
                        s["kind"], s["where"], s["what"] + (
                            f" ({s['operations']} ops)" if s["operations"] > 1 else ""))
                       for s in path["segments"]], [True, True, False, False, False]))
    return out


def _what_if_section(e: Explanation) -> list[str]:
    from ddlperf.report import figures

    out = ["<h2>What-ifs</h2>"]
    predicted = [w for w in e.what_ifs if w.gain is not None]
    if not predicted:
        return [*out, "<p>None applies.</p>"]
    out.append(_figure(figures.data_uri(figures.what_if_figure(e)),
                       f"Each what-if re-predicted with the {e.prediction.method} method",
                       "fig-whatifs"))
    out.append(_table(
        ["gain", "iteration", "samples/s", "what if", "bottleneck", "how"],
        [(f"{100 * (w.gain or 0):+.1f}%", format_duration(w.iteration_time_s or 0),
          f"{w.throughput_samples_per_s or 0:,.1f}",
          w.title + (" (changes convergence)" if w.changes_convergence else ""),
          w.bottleneck, w.how) for w in predicted],
        [True, True, True, False, False, False]))
    failed = [w for w in e.what_ifs if w.error]
    if failed:
        out.append("<ul>" + "".join(f"<li class=\"dim\">not predicted: {_e(w.title)}: "
                                    f"{_e(w.error)}</li>" for w in failed) + "</ul>")
    return out


# ---------------------------------------------------------------- sweeps and plans


def rows_table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """Up to :data:`MAX_TABLE_ROWS` rows (the rest are counted)."""
    shown = rows[:MAX_TABLE_ROWS]
    body = _table(columns, [[_cell(r.get(c)) for c in columns] for r in shown],
                  [isinstance(shown[0].get(c), (int, float)) if shown else False
                   for c in columns])
    if len(rows) > len(shown):
        body += f'<p class="dim">… {len(rows) - len(shown)} more rows in the data file.</p>'
    return body


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def figure(uri: str, caption: str, ident: str) -> str:
    """An inline figure for sweep and plan reports."""
    return _figure(uri, caption, ident)


def plan_report(result: Any, command: str | None = None) -> str:
    """The HTML page of a plan: target, prices used (with sources), answers, re-checks and
    the Pareto front (figure and table)."""
    from ddlperf.report import figures
    from ddlperf.report.plan_text import pareto_figure

    prices = result.prices
    body = [f'<p class="scenario">Target: {_e(result.target.describe())}</p>']
    if command:
        body.append(f'<p class="dim">made by: <code>{_e(command)}</code></p>')
    body.append(f"<p>Searched {result.evaluated:,} of {result.total:,} candidate clusters"
                + (" (interrupted)" if result.interrupted else "") + ".</p>")
    if prices.example:
        body.append('<p class="answer">Prices: the bundled EXAMPLE table — dated public list '
                    "prices, not a quote.</p>")
    answers = [(label, row) for label, row in (("cheapest", result.cheapest),
                                               ("fastest", result.fastest)) if row]
    columns = ["which", "instance", "servers", "workers", "arch", "ps", "ps_host", "sync",
               "throughput_samples_per_s", "price_per_hour", "job_s", "cost", "bottleneck"]
    body += ["<h2>Answers</h2>", rows_table([{"which": label, **row} for label, row in answers],
                                            columns)]
    if result.rechecks:
        body += ["<h2>Re-checked with the simulator</h2>",
                 rows_table(result.rechecks, ["which", "instance", "servers", "arch", "ps",
                                              "sync", "analytic_throughput",
                                              "simulate_throughput", "simulate_p5",
                                              "simulate_p95", "meets_simulate", "error",
                                              "skipped"])]
    if result.front:
        body += ["<h2>Cost–time Pareto front</h2>",
                 figure(figures.data_uri(pareto_figure(result)),
                        "Clusters no other searched cluster beats on both cost and speed",
                        "fig-pareto"),
                 rows_table(result.front, columns[1:])]
    body += ["<h2>Prices used</h2>", _table(
        ["name", "kind", "device", "GPUs", "NIC", "per hour", "source", "date"],
        [(i.name, "instance", i.device, i.gpus, format_bandwidth(i.bandwidth),
          f"{i.price_per_hour:g} {prices.currency}", i.source, i.date)
         for i in prices.instances]
        + [(h.name, "PS host", "", "", format_bandwidth(h.bandwidth),
            f"{h.price_per_hour:g} {prices.currency}", h.source, h.date)
           for h in prices.ps_hosts])]
    if result.notes:
        body += ["<h2>Notes</h2>", "<ul>", *(f"<li>{_e(n)}</li>" for n in result.notes),
                 "</ul>"]
    return page("ddlperf plan", body)


def sweep_report(rows: Sequence[dict[str, Any]], columns: Sequence[str], x: str, y: str,
                 title: str, command: str | None = None) -> str:
    """The HTML page of a sweep: its plot (``y`` against ``x``) and its rows."""
    from ddlperf.report import figures
    from ddlperf.report.sweep_plot import sweep_figure

    body = [f'<p class="scenario">{_e(title)}</p>']
    if command:
        body.append(f'<p class="dim">made by: <code>{_e(command)}</code></p>')
    ok = [r for r in rows if not r.get("error")]
    body.append(f"<p>{len(rows):,} scenarios, {len(rows) - len(ok):,} of them impossible "
                "(their reason is in the error column).</p>")
    if ok:
        body.append(figure(figures.data_uri(sweep_figure(list(rows), x, y, title)),
                           f"{y} against {x}", "fig-sweep"))
    body += ["<h2>Rows</h2>", rows_table(rows, columns)]
    return page("ddlperf sweep", body)
