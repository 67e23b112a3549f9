"""Reports of ``ddlperf validate``: a rich table, CSV, a PNG and the published Markdown page.

Everything here works on the plain result rows of :mod:`ddlperf.validate` (dicts, as stored in
``results.json``), so a report can be rebuilt from a finished run without rerunning it.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from pathlib import Path
from typing import Any

from ddlperf.io import write_atomic
from ddlperf.units import format_bandwidth, format_size

METHODS = ("analytic", "simulate")
TARGET_WORST_PCT = 10.0
CSV_COLUMNS = [
    "scenario", "method", "status", "arch", "sync", "staleness", "sharding", "workers", "ps",
    "placement", "compute", "heterogeneous", "bandwidth_bps", "parameter_bytes", "batch_size",
    "predicted_s", "measured_s",
    "error_pct", "measured_ci95_pct", "measured_p5_s", "measured_p50_s", "measured_p95_s",
    "predicted_p5_s",
    "predicted_p95_s", "predicted_throughput", "measured_throughput", "throughput_error_pct",
    "bottleneck_predicted", "bottleneck_measured", "rates", "probe_max_deviation_pct",
    "host_probe_ms", "steal_pct", "resent_pct", "wire_ok", "worst_worker",
    "worst_worker_error_pct",
    "worker_errors_pct", "note",
]


def _ok(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r.get("status") == "ok"]


def csv_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One CSV row per (scenario, method); failed scenarios get one row with their status."""
    out = []
    for r in rows:
        setup = r.get("setup", {})
        base = {
            "scenario": r["name"], "status": r.get("status"), "arch": setup.get("arch"),
            "sync": setup.get("sync"), "staleness": setup.get("staleness"),
            "sharding": setup.get("sharding"), "workers": setup.get("workers"),
            "ps": setup.get("ps"), "placement": setup.get("placement"),
            "compute": setup.get("compute"),
            "heterogeneous": heterogeneous(setup),
            "bandwidth_bps": setup.get("bandwidth_bps"),
            "parameter_bytes": setup.get("parameter_bytes"),
            "batch_size": setup.get("batch_size"), "note": r.get("note") or "",
        }
        if r.get("status") != "ok":
            out.append({**base, "method": "", "note": r.get("error", "")})
            continue
        m, host = r["measured"], r.get("inputs", {}).get("host")
        for method in METHODS:
            p = r["predicted"].get(method)
            if p is None:
                continue
            out.append({
                **base, "method": method, "predicted_s": p["iteration_time_s"],
                "measured_s": m["iteration_time_s"], "error_pct": p["error_pct"],
                "measured_ci95_pct": ci_pct(m), "measured_p5_s": m.get("p5_s"),
                "measured_p50_s": m.get("p50_s"),
                "measured_p95_s": m.get("p95_s"), "predicted_p5_s": p.get("p5_s"),
                "predicted_p95_s": p.get("p95_s"),
                "predicted_throughput": p["throughput_samples_per_s"],
                "measured_throughput": m["throughput_samples_per_s"],
                "throughput_error_pct": p.get("throughput_error_pct"),
                "bottleneck_predicted": p.get("bottleneck"),
                "bottleneck_measured": m.get("bottleneck"),
                "rates": r.get("inputs", {}).get("rates"),
                "probe_max_deviation_pct": m.get("probe_max_deviation_pct"),
                "host_probe_ms": probe_ms(host), "steal_pct": (host or {}).get("steal_pct"),
                "resent_pct": m.get("resent_pct"), "wire_ok": m.get("wire_ok"),
                **_worker_columns(p.get("worker_error_pct") or {}),
            })
    return out


def ci_pct(measured: dict[str, Any]) -> float | None:
    """The measured mean's 95% interval, ± percent of the mean (None: not known)."""
    half, mean = measured.get("mean_ci95_s"), measured.get("iteration_time_s")
    return 100.0 * half / mean if half is not None and mean else None


def _ci_text(measured: dict[str, Any]) -> str:
    pct = ci_pct(measured)
    return "" if pct is None else f" ±{pct:.1f}%"


def _worker_columns(errors: dict[str, float]) -> dict[str, Any]:
    """The worst worker, its error and every worker's (``w0:+1.2;w1:-3.4``), in percent."""
    finite = {n: e for n, e in errors.items() if e is not None and math.isfinite(e)}
    if not finite:
        return {}
    name = max(finite, key=lambda n: abs(finite[n]))
    return {"worst_worker": name, "worst_worker_error_pct": finite[name],
            "worker_errors_pct": ";".join(f"{n}:{e:+.1f}" for n, e in finite.items())}


def heterogeneous(setup: dict[str, Any]) -> bool:
    """Workers of different speeds (emulated device time) or CPU quotas (real compute)."""
    return len(set(setup.get("speeds") or [1.0])) > 1 or bool(setup.get("cpu_quota"))


def csv_text(rows: list[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, extrasaction="ignore",
                            lineterminator="\n")
    writer.writeheader()
    for row in csv_rows(rows):
        writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
    return buffer.getvalue()


# ----------------------------------------------------------------------------- text


def setup_text(setup: dict[str, Any]) -> str:
    """``PS×2 BSP rr · 4w · 200Mbps · 8MB · emulated``."""
    if setup.get("arch") == "allreduce":
        arch = "hierarchical" if setup.get("allreduce") == "hierarchical" else "ring"
    else:
        sync = str(setup.get("sync", "?")).upper()
        if setup.get("sync") == "ssp":
            sync = f"SSP({setup.get('staleness')})"
        sharding = {"round_robin": "rr", "greedy": "greedy", "even": "even"}.get(
            setup.get("sharding") or "", "")
        arch = f"PS×{setup.get('ps')} {sync}" + (f" {sharding}" if setup.get("ps", 0) > 1
                                                  else "")
    if setup.get("placement") == "colocated":
        arch += " colocated"
    if setup.get("local_aggregation"):
        arch += " local agg"
    parts = [arch, f"{setup.get('workers')}w"]
    if setup.get("gpus_per_node"):  # servers: 2×2 GPUs, their fabric
        parts[1] = f"{setup.get('servers')}×{setup['gpus_per_node']} GPUs"
        if setup.get("intra_bps"):
            parts.append(f"intra {format_bandwidth(float(setup['intra_bps']))}")
    if setup.get("rack_servers"):
        parts.append(f"racks of {setup['rack_servers']}, uplink "
                     f"{format_bandwidth(float(setup['rack_uplink_bps']))}")
    if setup.get("bandwidth_bps"):
        parts.append(format_bandwidth(float(setup["bandwidth_bps"])))
    if setup.get("ps_bandwidth_bps"):
        parts.append(f"PS {format_bandwidth(float(setup['ps_bandwidth_bps']))}")
    if setup.get("parameter_bytes"):
        parts.append(format_size(float(setup["parameter_bytes"]), 3))
    if setup.get("accumulation"):
        parts.append(f"{setup['accumulation']} micro-batches")
    parts.append(str(setup.get("compute", "?")))
    speeds = [s for s in setup.get("speeds") or [] if s != 1.0]
    if speeds:
        parts.append("speed " + "/".join(f"{s:g}" for s in speeds))
    if setup.get("cpu_quota"):
        parts.append("quota " + ",".join(f"{h}={q:g}" for h, q in setup["cpu_quota"].items()))
    return " · ".join(parts)


def signed_pct(value: float | None) -> str:
    """A signed percentage for tables (``+1.2%``), ``-`` where there is none."""
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:+.1f}%"


def seconds_text(value: float | None) -> str:
    """Seconds to the millisecond for tables (``0.551``), ``-`` where there is none."""
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:.3f}"


def summary_lines(summary: dict[str, Any]) -> list[str]:
    lines = []
    for method in METHODS:
        s = summary.get(method)
        if not s:
            continue
        lines.append(f"{method}: MAPE {s['mape_pct']:.1f}% over {s['scenarios']} scenarios, "
                     f"worst {s['worst_error_pct']:+.1f}% ({s['worst_scenario']}), "
                     f"{s['within_10pct']}/{s['scenarios']} within ±{TARGET_WORST_PCT:g}%"
                     + (f"; worst worker {s['worst_worker_error_pct']:+.1f}% "
                        f"({s['worst_worker']})" if s.get("worst_worker") else "")
                     + (f"; {s['beyond_interval']}/{s['with_interval']} beyond the measured "
                        "mean's 95% interval" if s.get("with_interval") else ""))
    if summary.get("failed"):
        lines.append(f"failed: {', '.join(summary['failed'])}")
    return lines


def render(rows: list[dict[str, Any]], summary: dict[str, Any], console: Any) -> None:
    """The comparison table and the summary lines (rich)."""
    from rich.table import Table

    table = Table(title="ddlperf validate: iteration time (s), predicted vs measured",
                  header_style="bold", title_justify="left")
    for col, justify in (("#", "right"), ("scenario", "left"), ("measured", "right"),
                         ("analytic", "right"), ("simulate", "right"),
                         ("bottleneck measured / simulate", "left")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for i, r in enumerate(rows, 1):
        if r.get("status") != "ok":
            table.add_row(str(i), r["name"], "failed", "", "", (r.get("error") or "")[:60])
            continue
        m, p = r["measured"], r["predicted"]
        cells = []
        for method in METHODS:
            q = p.get(method, {})
            cells.append(f"{seconds_text(q.get('iteration_time_s'))} {_styled(q.get('error_pct'))}")
        table.add_row(str(i), r["name"], seconds_text(m["iteration_time_s"]), *cells,
                      f"{m.get('bottleneck')} / {p.get('simulate', {}).get('bottleneck', '-')}")
    console.print(table)
    for line in summary_lines(summary):
        console.print(line, highlight=False)


def _styled(value: float | None) -> str:
    text = signed_pct(value)
    if value is None or not math.isfinite(value):
        return text
    return text if abs(value) <= TARGET_WORST_PCT else f"[bold red]{text}[/]"


# ----------------------------------------------------------------------------- plot


PLOT_METRICS = {  # metric → (axis label, error key)
    "iteration_time_s": ("iteration time (s)", "error_pct"),
    "throughput_samples_per_s": ("throughput (samples/s)", "throughput_error_pct"),
}


def plot_validation(rows: list[dict[str, Any]], path: str | Path,
                    summary: dict[str, Any] | None = None, *,
                    metric: str = "iteration_time_s", reference: str = "measured") -> Path:
    """Predicted vs ``reference`` (measured, or published) ``metric`` (log-log, y = x and ±10%
    lines) and the signed error of every scenario per method; a PNG written atomically."""
    metric_label, error_key = PLOT_METRICS[metric]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = _ok(rows)
    styles = {"analytic": ("o", "tab:blue"), "simulate": ("s", "tab:orange")}
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, max(5.8, 0.16 * len(ok))),
                                 gridspec_kw={"width_ratios": [1, 1.25]})
    values: list[float] = []
    for method in METHODS:
        xs, ys, labels = [], [], []
        for i, r in enumerate(rows, 1):
            if r.get("status") == "ok" and method in r["predicted"]:
                xs.append(r["measured"][metric])
                ys.append(r["predicted"][method][metric])
                labels.append(str(i))
        if not xs:
            continue
        values += xs + ys
        marker, color = styles[method]
        s = (summary or {}).get(method)
        label = method + (f" (MAPE {s['mape_pct']:.1f}%, worst {s['worst_abs_error_pct']:.1f}%)"
                          if s else "")
        ax.scatter(xs, ys, marker=marker, color=color, label=label, alpha=0.8, zorder=3)
        if method == "simulate":
            for x, y, text in zip(xs, ys, labels):
                ax.annotate(text, (x, y), textcoords="offset points", xytext=(4, 3),
                            fontsize=7, color="0.3")
    if values:
        lo, hi = min(values) / 1.25, max(values) * 1.25
        line = [lo, hi]
        ax.plot(line, line, color="black", linewidth=1, label="y = x")
        ax.plot(line, [v * 1.1 for v in line], color="0.5", linestyle="--", linewidth=0.8,
                label="±10%")
        ax.plot(line, [v * 0.9 for v in line], color="0.5", linestyle="--", linewidth=0.8)
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_box_aspect(1)  # square, however tall the error panel grows
    from matplotlib.ticker import FuncFormatter

    wide = bool(values) and max(values) / min(values) > 100  # over two decades: fewer labels
    leads = (2, 5) if wide else (2, 3, 4, 5, 6, 8)

    def minor(v: float, _pos: int) -> str:
        lead = round(v / 10 ** math.floor(math.log10(v))) if v > 0 else 0
        return f"{v:g}" if lead in leads else ""

    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        axis.set_minor_formatter(FuncFormatter(minor))
    ax.set_xlabel(f"{reference} {metric_label}")
    ax.set_ylabel(f"predicted {metric_label}")
    ax.set_title(f"predicted vs {reference} (numbers: scenarios)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")

    names = [f"{i}. {r['name']}" for i, r in enumerate(rows, 1) if r.get("status") == "ok"]
    positions = list(range(len(ok)))
    height = 0.38
    for k, method in enumerate(METHODS):
        errors = [r["predicted"].get(method, {}).get(error_key) for r in ok]
        errors = [e if e is not None and math.isfinite(e) else 0.0 for e in errors]
        marker, color = styles[method]
        bx.barh([p + (k - 0.5) * height for p in positions], errors, height=height,
                color=color, label=method, alpha=0.85)
    bx.axvline(0, color="black", linewidth=0.8)
    for edge in (-TARGET_WORST_PCT, TARGET_WORST_PCT):
        bx.axvline(edge, color="0.5", linestyle="--", linewidth=0.8)
    bx.set_yticks(positions)
    bx.set_yticklabels(names, fontsize=7)
    bx.invert_yaxis()
    bx.set_xlabel(f"error of the predicted {metric_label.split(' (')[0]} (%)")
    bx.set_title("signed error per scenario")
    bx.grid(True, axis="x", alpha=0.3)
    bx.legend(fontsize=8)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return write_atomic(path, buffer.getvalue())


# ----------------------------------------------------------------------------- Markdown


METHOD_TEXT = """\
## How each scenario is compared

1. **Compute, in the same session.** `compute: real` runs the zoo model on this CPU (one thread
   per rank): it is profiled with `ddlperf profile` (one thread, a fresh process like every
   rank) right before its measurement and both predictors start from that profile. Ranks,
   profile and timers run with precedence over other jobs on this machine (a real host's CPU
   runs its worker only; `measure/cpu_precedence.py`).
   `compute: emulated` runs *emulated device time*: each layer waits the workload's seconds, so
   the workload is the ground truth of compute and the predictors get it unchanged.
2. **Heterogeneity.** Emulated device time: a worker group's `speed` (it waits
   `seconds / speed`), exact by construction. CPU quota (real compute, cgroup
   `cpu.cfs_quota_us`, 10 ms period): the slowdown is not exactly 1/quota, so the slow worker's
   training step is timed inside a cgroup with that quota beside an unrestricted copy, as the
   run has them, and `speed = free step / quota'd step` goes into the predicted cluster. With
   BSP, SSP and all-reduce the two step in lockstep (the copy finishes first and waits, so the
   quota'd step runs on alone for half its time, as in the run); with ASP the copy runs
   freely. It matters: a quota'd step timed alone on an idle machine was 20–30% slower than
   beside a busy copy (the throttled process leaves its vCPU idle). The quota'd host also pays
   its communication CPU from its quota (the PS worker sends from its compute thread, gloo's
   threads share the cgroup): the quota becomes the worker's `cpu_cap` and this machine's CPU
   per byte its `comm_cpu_s_per_byte`, timed in the same session with the PS trainer itself
   (one worker and one shard on two emulated hosts, the model computing as in the run): the
   worker's process CPU per iteration minus the model's step alone (the single-worker
   baseline), per byte pushed and pulled — communicating and what it does to the compute
   beside it. The predictors charge a capped worker `s/byte / cap` wall seconds per byte over
   its NIC: on the PS each layer's pushes and pulls lengthen its backward and forward (the
   step is never shorter than (compute CPU + communication CPU) / cap); in a ring the CPU is a
   link of `cap / (2 × s/byte)` per edge, which binds only when slower than the network (DDP
   reduces on gloo's threads beside the wire). Uncapped hosts are charged nothing. On an
   emulated server each GPU rank may have its own quota (`cpu_quota: {node0/gpu0: 0.7, …}`,
   one cgroup per rank, every GPU of a server the same): each rank is a worker with that
   `cpu_cap`, and with local aggregation it also pays its reduce-scatter and all-gather over
   the server's loopback from its cap: `intra_cpu_s_per_byte`, timed in the same session
   with the server's own trainer (one uncapped server, local aggregation, one shard, the
   model computing): each rank's CPU per iteration less the model's step alone and less its
   NIC bytes at `comm_cpu_s_per_byte`, per byte it moved over the loopback.
3. **The PS processor.** PS shards are CPU processes applying SGD with momentum; their cost per
   gradient byte is timed once per session on this CPU (the optimizer step's CPU seconds on
   one thread; for real compute the profile's own optimizer timing) and given to the
   predictors as `ps.update_s_per_byte`.
4. **Links.** Predictions use the *configured* line rate × goodput 0.956 (TCP payload per
   1514-byte frame). Every measurement first probes each link as its own: alone, and a link
   faster than any one peer (a 1 Gbit PS NIC among 100 Mbit workers) with concurrent flows to
   as many peers as reach its rate; the table's last column is the largest deviation of a probe
   from what it should reach. When the probes confirm the configured rate within ~2% it is the
   more honest input: it is what a user of ddlperf knows before building the cluster.
   (`--rates probed` predicts from each link's own probe instead.) This kernel has no netem:
   links add only queueing and stack delay, and the predictors get the default 50 µs latency
   per message.
5. **Measurement.** The iteration time is the median step period per worker over the measured
   iterations (warm-up excluded; the mean where emulated compute draws its layer times, rows
   with a `cv`: the slow draws are what such a row measures), averaged over workers; p5–p95
   spans all workers' steady
   iterations. ± is the 95% interval of that mean from batch means (each worker's steady
   iterations cut into 5 consecutive blocks; `ddlperf.measure.mean_interval`): how far
   another run's mean could fall, wide where the workers' phase arrangement matters (ASP with
   shared links; for deterministic rows it is a few tenths of a percent, so an error beyond
   it is the model's). SSP is measured in steady state: from the moment every worker the staleness
   bound holds was first held (before that a faster worker is still catching up), with a note
   when the run is too short. The bytes on every bridge port are checked against the expected
   volume.
6. **Error** = (predicted − measured) / measured. MAPE = mean |error| over the scenarios.
   ASP and SSP workers each have their own period: each worker's error is listed too, and
   the summary gives the worst one.
"""


def _beyond_text(s: dict[str, Any]) -> str:
    judged = s.get("with_interval")
    return f"{s['beyond_interval']}/{judged}" if judged else "-"


def markdown(rows: list[dict[str, Any]], summary: dict[str, Any], meta: dict[str, Any], *,
             png: str = "validation.png", csv_name: str = "validation.csv",
             title: str | None = None, description: str | None = None,
             command: str | None = None, findings: str | None = None,
             agreement: list[str] | None = None) -> str:
    """The published page: summary, plot, per-scenario table, findings, method;
    ``agreement``: the section on another run of the matrix, if any
    (:func:`ddlperf.report.agreement_report.markdown_lines`)."""
    machine = meta.get("machine", {})
    lines = [f"# {title or 'Validation: predicted vs measured iteration time'}", ""]
    lines.append("<!-- generated by `ddlperf validate … --publish`; do not edit by hand -->")
    lines.append("")
    if description:
        lines += [description.strip(), ""]
    where = ", ".join(str(x) for x in (
        machine.get("cpu_model"), f"{machine.get('cores')} cores" if machine.get("cores")
        else None, f"Linux {machine.get('kernel')}" if machine.get("kernel") else None,
        f"torch {machine.get('torch')}" if machine.get("torch") else None) if x)
    runtime = meta.get("runtime_s")
    lines.append(f"Measured on {where or 'this machine'}"
                 + (f", {meta.get('created')}" if meta.get("created") else "")
                 + (f"; the whole matrix ran in {runtime / 60:.1f} min" if runtime else "")
                 + ".")
    if command:
        lines += ["", "Regenerate (root needed):", "", "```bash", command, "```"]
    lines += ["", "## Summary", "",
              "| method | scenarios | MAPE | worst error | within ±10% | worst worker | "
              "error beyond the measured mean's 95% interval |",
              "| --- | ---: | ---: | --- | ---: | --- | ---: |"]
    for method in METHODS:
        s = summary.get(method)
        if s:
            hardest = (f"{s['worst_worker_error_pct']:+.1f}% ({s['worst_worker']})"
                       if s.get("worst_worker") else "-")
            lines.append(f"| {method} | {s['scenarios']} | {s['mape_pct']:.1f}% | "
                         f"{s['worst_error_pct']:+.1f}% ({s['worst_scenario']}) | "
                         f"{s['within_10pct']}/{s['scenarios']} | {hardest} | "
                         f"{_beyond_text(s)} |")
    if summary.get("failed"):
        lines += ["", f"Failed runs (not in the summary): {', '.join(summary['failed'])}."]
    lines += ["", f"![predicted vs measured iteration time]({png})", "",
              f"Data: [{csv_name}]({csv_name}) (one row per scenario and method).", "",
              "## Scenarios", "",
              "Iteration times in seconds; errors relative to the measurement.", "",
              "| # | scenario | setup | measured ±95% interval of the mean (p5–p95) | analytic "
              "| simulate | bottleneck "
              "measured / analytic / simulate | probe dev. |",
              "| ---: | --- | --- | --- | --- | --- | --- | ---: |"]
    for i, r in enumerate(rows, 1):
        setup = setup_text(r.get("setup", {}))
        if r.get("status") != "ok":
            lines.append(f"| {i} | {r['name']} | {setup} | failed: "
                         f"{(r.get('error') or '').replace('|', '/')[:120]} | | | | |")
            continue
        m, p = r["measured"], r["predicted"]
        a, s = p.get("analytic", {}), p.get("simulate", {})
        dev = m.get("probe_max_deviation_pct")
        lines.append(
            f"| {i} | {r['name']} | {setup} | {seconds_text(m['iteration_time_s'])}{_ci_text(m)} "
            f"({seconds_text(m.get('p5_s'))}–{seconds_text(m.get('p95_s'))}) | "
            f"{seconds_text(a.get('iteration_time_s'))} ({signed_pct(a.get('error_pct'))}) | "
            f"{seconds_text(s.get('iteration_time_s'))} ({signed_pct(s.get('error_pct'))}) | "
            f"{m.get('bottleneck')} / {a.get('bottleneck', '-')} / {s.get('bottleneck', '-')} | "
            f"{'-' if dev is None else f'{dev:.1f}%'} |")
    lines += _host_lines(rows)
    lines += _per_worker_table(rows)
    notes = [(i, r) for i, r in enumerate(rows, 1) if r.get("note")]
    if notes:
        lines += ["", "What each scenario checks:", ""]
        lines += [f"{i}. **{r['name']}**: {r['note'].strip()}" for i, r in notes]
    extra = _inputs_text(rows)
    if extra:
        lines += ["", "In-session calibration:", "", *extra]
    lines += agreement or []
    if findings:
        lines += ["", "## What the errors show", "", findings.strip()]
    lines += ["", METHOD_TEXT]
    return "\n".join(lines).rstrip() + "\n"


def probe_ms(host: dict[str, Any] | None) -> float | None:
    """The row's CPU probe in ms: the slower of its two readings (a slow spell on either
    side of the run is what it may have met), None where not recorded."""
    if not host:
        return None
    values = [v for v in (host.get("probe_before_s"), host.get("probe_after_s"))
              if v is not None]
    return 1e3 * max(values) if values else None


def slow_rows(rows: list[dict[str, Any]], threshold_pct: float = 10.0
              ) -> list[tuple[str, float]]:
    """Rows whose CPU probe ran more than ``threshold_pct`` slower than the run's median
    probe: (name, percent slower), slowest first."""
    probes = {r["name"]: probe_ms(r.get("inputs", {}).get("host"))
              for r in rows if r.get("status") == "ok"}
    known = {n: p for n, p in probes.items() if p is not None}
    if len(known) < 2:
        return []
    median = statistics.median(known.values())
    slow = [(n, 100.0 * (p / median - 1)) for n, p in known.items()
            if p > median * (1 + threshold_pct / 100)]
    return sorted(slow, key=lambda item: -item[1])


def _host_lines(rows: list[dict[str, Any]]) -> list[str]:
    """How fast the host's CPU ran around each measurement (:mod:`ddlperf.validate.host_speed`):
    the run's spread of the CPU probe, the rows measured while it ran slow, the most steal."""
    hosts = [(r["name"], r.get("inputs", {}).get("host")) for r in _ok(rows)]
    probes = sorted(p for p in (probe_ms(h) for _n, h in hosts) if p is not None)
    if not probes:
        return []
    steals = [(h or {}).get("steal_pct") for _n, h in hosts]
    known = [s for s in steals if s is not None]
    slow = slow_rows(rows)
    text = (f"Host CPU around each measurement: a fixed CPU probe took {probes[0]:.1f}–"
            f"{probes[-1]:.1f} ms (median {statistics.median(probes):.1f}) over "
            f"{len(probes)} rows")
    text += (f"; the hypervisor took at most {max(known):.1f}% of the CPU while a row was "
             "measured" if known else "")
    text += ("; measured while the CPU ran over 10% slower than the run's median: "
             + ", ".join(f"{n} (+{pct:.0f}%)" for n, pct in slow) if slow else "")
    return ["", text + " (CSV: `host_probe_ms`, `steal_pct`)."]


def _per_worker_table(rows: list[dict[str, Any]]) -> list[str]:
    """ASP and SSP: every worker has its own period, so each worker's error is listed."""
    out = []
    for i, r in enumerate(rows, 1):
        if r.get("status") != "ok" or r.get("setup", {}).get("sync") not in ("asp", "ssp"):
            continue
        m, p = r["measured"], r["predicted"]
        for worker, period in (m.get("per_worker") or {}).items():
            errs = [signed_pct((p.get(method, {}).get("worker_error_pct") or {}).get(worker))
                    for method in METHODS]
            out.append(f"| {i} | {r['name']} | {worker} | {seconds_text(period)} | "
                       + " | ".join(errs) + " |")
    if not out:
        return []
    return ["", "Per worker (ASP and SSP: each worker has its own period):", "",
            "| # | scenario | worker | measured | analytic | simulate |",
            "| ---: | --- | --- | ---: | ---: | ---: |", *out]


def _inputs_text(rows: list[dict[str, Any]]) -> list[str]:
    out = []
    for r in _ok(rows):
        inputs = r.get("inputs", {})
        profile = inputs.get("profile")
        if profile and profile.get("step_s"):
            out.append(f"- {r['name']}: profiled step {profile['step_s']:.3f} s "
                       f"(cv {100 * (profile.get('step_cv') or 0):.1f}%)")
        for host, q in (inputs.get("quota") or {}).items():
            out.append(f"- {r['name']}: {host} at quota {q['quota']:g} core: step "
                       f"{q['step_quota_s']:.3f} s vs {q['step_free_s']:.3f} s free → "
                       f"speed {q['speed']:.3f} (1/quota would be {q['quota']:g})")
    updates = {round(float(r["inputs"]["ps_update_s_per_byte"]["value"]) * 1e9, 3)
               for r in _ok(rows) if (r.get("inputs", {}).get("ps_update_s_per_byte") or {})
               .get("value") is not None}
    if updates:
        out.append("- PS update cost given to the predictors: "
                   + ", ".join(f"{u:g}" for u in sorted(updates)) + " ns per gradient byte")
    return out


def publish(rows: list[dict[str, Any]], summary: dict[str, Any], meta: dict[str, Any],
            directory: str | Path, *, title: str | None = None,
            description: str | None = None, command: str | None = None,
            findings: str | None = None, agreement: list[str] | None = None) -> list[Path]:
    """Write ``validation.md``, ``validation.csv`` and ``validation.png`` into ``directory``."""
    d = Path(directory)
    written = [
        write_atomic(d / "validation.csv", csv_text(rows)),
        plot_validation(rows, d / "validation.png", summary),
        write_atomic(d / "validation.md", markdown(rows, summary, meta, title=title,
                                                   description=description,
                                                   command=command, findings=findings,
                                                   agreement=agreement)),
    ]
    return written
