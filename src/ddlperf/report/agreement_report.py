"""Two runs of one matrix side by side (:mod:`ddlperf.validate.agreement`): a console table
and a section of the published page."""

from __future__ import annotations

from typing import Any

from ddlperf.report.validation_report import signed_pct


def _pair(ev: dict[str, Any], other: dict[str, Any], key: str, unit: str = "%") -> str:
    def one(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}{unit}"
    return f"{one(ev.get(key))} / {one(other.get(key))}"


def headline(ag: dict[str, Any]) -> str:
    """``71 of 83 scenarios agree within 2 points (both methods, this run's predictions)``."""
    text = (f"{ag['agree']} of {ag['compared']} scenarios agree within {ag['points']:g} points "
            "(both methods, each run judged with this run's predictions)")
    if ag["setup_changed"]:
        text += f"; set-up changed between the runs, not compared: {', '.join(ag['setup_changed'])}"
    return text


def _apart(ag: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted((c for c in ag["scenarios"] if not c["agree"]), key=lambda c: -c["points"])


def markdown_lines(ag: dict[str, Any], other: str) -> list[str]:
    """The page's section: the headline and every scenario beyond the bar, with each run's
    measurement and testbed evidence (this run / the other)."""
    lines = ["", "## Agreement with another run", "",
             f"Against {other}: {headline(ag)}.", ""]
    apart = _apart(ag)
    if not apart:
        return lines
    lines += ["| scenario | measured (this / other) | this vs other | points | link probe dev. | "
              "CPU probe | steal | mean ±95% |",
              "| --- | --- | ---: | ---: | --- | --- | --- | --- |"]
    for c in apart:
        ev, ot = c["evidence"], c["other_evidence"]
        lines.append(
            f"| {c['name']} | {c['measured_s']:.3f} / {c['other_measured_s']:.3f} s | "
            f"{signed_pct(c['change_pct'])} | {c['points']:.1f} | "
            f"{_pair(ev, ot, 'probe_max_deviation_pct')} | "
            f"{_pair(ev, ot, 'host_probe_ms', ' ms')} | {_pair(ev, ot, 'steal_pct')} | "
            f"±{_pair(ev, ot, 'ci95_pct')} |")
    return lines


def render(ag: dict[str, Any], other: str, console: Any) -> None:
    """The console's view: the headline and a table of the scenarios beyond the bar."""
    from rich.table import Table

    console.print(f"against {other}: {headline(ag)}", highlight=False, soft_wrap=True)
    apart = _apart(ag)
    if not apart:
        return
    table = Table(header_style="bold", title_justify="left",
                  title=f"beyond {ag['points']:g} points (this run / the other)")
    for col in ("scenario", "measured s", "this vs other", "points", "link probe dev.", "CPU probe",
                "steal", "mean ±95%"):
        table.add_column(col)
    for c in apart:
        ev, ot = c["evidence"], c["other_evidence"]
        table.add_row(c["name"], f"{c['measured_s']:.3f} / {c['other_measured_s']:.3f}",
                      signed_pct(c["change_pct"]), f"{c['points']:.1f}",
                      _pair(ev, ot, "probe_max_deviation_pct"),
                      _pair(ev, ot, "host_probe_ms", " ms"), _pair(ev, ot, "steal_pct"),
                      _pair(ev, ot, "ci95_pct"))
    console.print(table)
