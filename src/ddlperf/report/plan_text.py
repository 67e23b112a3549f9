"""``ddlperf plan`` on a terminal and as a Pareto plot: the answers first, then the front."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from ddlperf.io import write_atomic
from ddlperf.plan import PlanResult
from ddlperf.units import format_long_duration

MAX_FRONT_ROWS = 12


def money(value: float | None, currency: str) -> str:
    if value is None:
        return "-"
    unit = "$" if currency == "USD" else f"{currency} "
    return f"{unit}{value:,.2f}"


def _cluster(row: dict[str, Any]) -> str:
    text = f"{row['servers']} × {row['instance']}" if "+" not in row["instance"] else \
        row["instance"]
    arch = row["arch"].replace("allreduce-", "all-reduce ")
    if row["arch"] == "ps":
        arch = f"PS ×{row['ps']} on {row['ps_host']}"
        if row.get("local_aggregation") in (True, "True"):
            arch += ", local aggregation"
        if row.get("step_barrier") in (True, "True"):
            arch += ", step barrier"
    sync = "" if row["sync"] == "bsp" else f", {row['sync'].upper()}"
    gpus = f"{row['workers']} GPU" + ("s" if int(row["workers"]) != 1 else "")
    return f"{text} ({gpus}), {arch}{sync}"


def _answer_table(result: PlanResult, currency: str) -> Table:
    deadline = result.target.kind == "deadline"
    table = Table(title="Answers", title_justify="left", header_style="bold", box=None,
                  title_style="bold")
    table.add_column("", no_wrap=True)
    table.add_column("cluster", overflow="fold")
    table.add_column("samples/s", justify="right", no_wrap=True)
    table.add_column("per hour", justify="right", no_wrap=True)
    if deadline:
        table.add_column("job", justify="right", no_wrap=True)
        table.add_column("cost", justify="right", no_wrap=True)
    for label, row in (("cheapest", result.cheapest), ("fastest", result.fastest)):
        if row is None:
            continue
        cells = [label, _cluster(row), f"{row['throughput_samples_per_s']:,.0f}",
                 money(row["price_per_hour"], currency)]
        if deadline:
            cells += [format_long_duration(row["job_s"]), money(row["cost"], currency)]
        table.add_row(*cells)
    return table


def _recheck_table(result: PlanResult) -> Table:
    table = Table(title="Re-checked with the simulator", title_justify="left",
                  header_style="bold", box=None, title_style="bold")
    for col in ("", "analytic", "simulate", "p5–p95", "diff", "meets"):
        table.add_column(col, justify="left" if col in ("", "meets") else "right",
                         no_wrap=col != "", overflow="fold")
    for r in result.rechecks:
        which = f"{r['which']}: {r['servers']} × {r['instance']}"
        if r.get("error") or r.get("skipped"):  # the reason goes under the table
            table.add_row(which, f"{r['analytic_throughput']:,.0f}", "-", "-", "-",
                          "not simulated")
            continue
        table.add_row(which, f"{r['analytic_throughput']:,.0f}",
                      f"{r['simulate_throughput']:,.0f}",
                      f"{r['simulate_p5']:,.0f}–{r['simulate_p95']:,.0f}",
                      f"{100 * r['difference']:+.1f}%", "yes" if r["meets_simulate"] else "NO")
    return table


def front_rows_shown(rows: list[dict[str, Any]]) -> list[int]:
    """Indices of the front's rows for a table: spread over it, and always the cheapest row
    that meets the target with the one before it (where the target starts to be met)."""
    if len(rows) <= MAX_FRONT_ROWS:
        return list(range(len(rows)))
    spread = {round(i * (len(rows) - 1) / (MAX_FRONT_ROWS - 1)) for i in range(MAX_FRONT_ROWS)}
    first = next((i for i, r in enumerate(rows) if r["meets"]), None)
    if first is not None:
        spread |= {first, max(first - 1, 0)}
    return sorted(spread)


def _front_table(result: PlanResult, currency: str) -> Table:
    deadline = result.target.kind == "deadline"
    rows = result.front
    title = f"Cost–time Pareto front ({len(rows)} clusters, cheapest first)"
    table = Table(title=title, title_justify="left", header_style="bold", box=None,
                  title_style="bold")
    table.add_column("cluster", overflow="fold")
    table.add_column("samples/s", justify="right", no_wrap=True)
    table.add_column("job" if deadline else "per hour", justify="right", no_wrap=True)
    table.add_column("cost" if deadline else "meets", justify="right", no_wrap=True)
    shown = [rows[i] for i in front_rows_shown(rows)]
    for row in shown:
        last = money(row["cost"], currency) if deadline else ("yes" if row["meets"] else "")
        middle = format_long_duration(row["job_s"]) if deadline else money(row["price_per_hour"],
                                                                       currency)
        table.add_row(_cluster(row), f"{row['throughput_samples_per_s']:,.0f}", middle, last)
    if len(shown) < len(rows):
        table.add_row(f"… {len(rows) - len(shown)} more between these (see --json)", "", "",
                      "")
    return table


def render(result: PlanResult, console: Console | None = None, seconds: float | None = None
           ) -> None:
    console = console or Console()
    currency = result.prices.currency
    searched = (f"Searched {result.evaluated:,} of {result.total:,} candidate clusters"
                + (f" in {seconds:.1f} s" if seconds is not None else "")
                + (f" ({result.errors:,} could not be predicted)" if result.errors else ""))
    parts: list[Any] = [Text(f"Target: {result.target.describe()}", style="cyan"),
                        Text(searched)]
    if result.cheapest is not None:
        parts += [Text(""), _answer_table(result, currency)]
    if result.rechecks:
        parts += [Text(""), _recheck_table(result)]
        parts += [Text(f"not simulated: {r['which']}: {r.get('error') or r['skipped']}",
                       style="dim")
                  for r in result.rechecks if r.get("error") or r.get("skipped")]
    if result.front:
        parts += [Text(""), _front_table(result, currency)]
    for note in result.notes:
        parts.append(Text(f"note: {note}", style="yellow" if "EXAMPLE" in note or
                          "interrupted" in note else "dim"))
    console.print(Group(*parts))


def pareto_figure(result: PlanResult) -> Any:
    """Cost against throughput (or job time) of the front; the answers marked."""
    from ddlperf.report.figures import pyplot

    plt = pyplot()
    deadline = result.target.kind == "deadline"
    front = result.front
    fig, ax = plt.subplots(figsize=(8, 5))
    xs = [r["cost"] for r in front]
    ys = [r["job_s"] / 3600 if deadline else r["throughput_samples_per_s"] for r in front]
    ax.step(xs, ys, where="post", color="#bbbbbb", zorder=1)
    meets = [r["meets"] for r in front]
    ax.scatter([x for x, m in zip(xs, meets) if m], [y for y, m in zip(ys, meets) if m],
               color="#4e79a7", label="meets the target", zorder=2)
    ax.scatter([x for x, m in zip(xs, meets) if not m], [y for y, m in zip(ys, meets) if not m],
               color="#bab0ac", label="misses it", zorder=2)
    for label, row, color in (("cheapest", result.cheapest, "#59a14f"),
                              ("fastest", result.fastest, "#e15759")):
        if row is not None:
            y = row["job_s"] / 3600 if deadline else row["throughput_samples_per_s"]
            ax.scatter([row["cost"]], [y], s=120, facecolors="none", edgecolors=color,
                       linewidths=2, label=label, zorder=3)
    if deadline:
        ax.axhline(result.target.deadline_s / 3600, color="black", linestyle="--",  # type: ignore[operator]
                   linewidth=0.8, label="deadline")
        ax.set_ylabel("job time (hours)")
    else:
        ax.axhline(result.target.throughput, color="black", linestyle="--", linewidth=0.8,  # type: ignore[arg-type]
                   label="target")
        ax.set_ylabel("samples/s")
    currency = result.prices.currency
    ax.set_xlabel(f"{'cost of the job' if deadline else 'price per hour'} ({currency})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    title = "Cost–time Pareto front"
    if result.prices.example:
        title += " (EXAMPLE prices)"
    ax.set_title(title)
    return fig


def write_pareto_png(result: PlanResult, path: str | Path) -> Path:
    import io

    from ddlperf.report.figures import pyplot

    fig = pareto_figure(result)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120, bbox_inches="tight")
    pyplot().close(fig)
    return write_atomic(path, buffer.getvalue())
