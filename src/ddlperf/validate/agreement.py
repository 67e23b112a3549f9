"""How far two runs of one matrix agree: per scenario, the error each run's measurement gives
this run's predictions, and what the runs recorded about their testbed.

Why: a model's error can only be told from the ground truth's own spread by measuring twice.
The issue's bar is two full runs within 2 points per scenario; where a row misses it, the
records should say why (a link probe that missed its rate, a slow CPU, a mean whose own 95%
interval is wide — the chaotic ASP arrangements). Both runs are judged with *this* run's
predictions, so the comparison is of the measurements alone (an older run's stored predictions
may come from older models).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddlperf.errors import InputError
from ddlperf.report.validation_report import ci_pct, csv_rows, probe_ms
from ddlperf.validate.compare import METHODS

AGREE_POINTS = 2.0  # the issue's bar: two runs' errors within this many points per scenario
# the page CSV's columns that describe a scenario's set-up (a published run keeps no
# fingerprint): a row whose set-up columns differ is not compared
SETUP_COLUMNS = ("arch", "sync", "staleness", "sharding", "workers", "ps", "placement",
                 "compute", "heterogeneous", "bandwidth_bps", "parameter_bytes", "batch_size")


@dataclass(frozen=True)
class PageRun:
    """Another run as ``--against`` reads it from a published page's CSV: its rows and where
    they came from (the ``rows`` and ``meta`` a results directory's run has too)."""

    rows: list[dict[str, Any]]
    meta: dict[str, Any] = field(default_factory=dict)


def page_run(path: str | Path, field_name: str = "--against") -> PageRun:
    """A published page's ``validation.csv`` as the run behind it (:func:`page_rows`)."""
    return PageRun(rows=page_rows(path, field_name), meta={"page": str(path)})


def _number(text: str) -> float | None:
    return float(text) if text not in ("", None) else None


def page_rows(path: str | Path, field: str = "--against") -> list[dict[str, Any]]:
    """A published page's ``validation.csv`` as rows :func:`agreement` reads: the runs behind
    a page may be gone (its results directory lived on another machine), but the CSV keeps
    each scenario's measured mean, its interval and the testbed evidence."""
    p = Path(path)
    try:
        with p.open(newline="") as f:
            table = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError):
        raise InputError(field, f"cannot read {str(p)!r}",
                         "give a validation.csv that ddlperf validate --publish wrote") from None
    needed = {"scenario", "status", "measured_s", *SETUP_COLUMNS}
    if not table or not needed <= set(table[0]):
        raise InputError(field, f"{str(p)!r} is not a validation page's CSV",
                         "give docs/validation.csv (or a results directory)")
    try:
        return _page_rows(table)
    except (ValueError, TypeError):
        raise InputError(field, f"{str(p)!r} has a value that is not a number where one "
                         "belongs", "give the CSV as ddlperf validate --publish wrote it") from None


def _page_rows(table: list[dict[str, str]]) -> list[dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for line in table:
        if line["scenario"] in rows or line["status"] != "ok" or not line["measured_s"]:
            continue
        measured = float(line["measured_s"])
        ci = _number(line.get("measured_ci95_pct", ""))
        host_ms = _number(line.get("host_probe_ms", ""))
        rows[line["scenario"]] = {
            "name": line["scenario"], "status": "ok",
            "page_setup": {c: line[c] for c in SETUP_COLUMNS},
            "measured": {"iteration_time_s": measured,
                         "probe_max_deviation_pct": _number(
                             line.get("probe_max_deviation_pct", "")),
                         "mean_ci95_s": None if ci is None else ci * measured / 100.0},
            "inputs": {"host": None if host_ms is None else {
                "probe_before_s": host_ms / 1e3,
                "steal_pct": _number(line.get("steal_pct", ""))}},
        }
    return list(rows.values())


def _setup_differs(row: dict[str, Any], other: dict[str, Any]) -> bool:
    """The two rows describe different set-ups: by fingerprint where both runs have one, by
    the page CSV's set-up columns where the other is a published page."""
    mine, theirs = row.get("fingerprint"), other.get("fingerprint")
    if mine and theirs:
        return bool(mine != theirs)
    page = other.get("page_setup")
    if page is None:
        return False
    described = (csv_rows([row]) or [{}])[0]
    return any(("" if described.get(c) is None else str(described.get(c))) != page[c]
               for c in SETUP_COLUMNS)


def _evidence(row: dict[str, Any]) -> dict[str, float | None]:
    m, host = row["measured"], (row.get("inputs") or {}).get("host")
    return {"probe_max_deviation_pct": m.get("probe_max_deviation_pct"),
            "host_probe_ms": probe_ms(host), "steal_pct": (host or {}).get("steal_pct"),
            "ci95_pct": ci_pct(m)}


def agreement(rows: list[dict[str, Any]], other_rows: list[dict[str, Any]]
              ) -> dict[str, Any]:
    """Per scenario measured in both runs (status ok, same fingerprint where both have one):
    the two measurements, each method's error against each (this run's prediction), the
    larger difference in points, whether it is within :data:`AGREE_POINTS`, and each run's
    testbed evidence. Scenarios whose set-up differs between the runs are listed apart."""
    others = {r["name"]: r for r in other_rows if r.get("status") == "ok"}
    compared: list[dict[str, Any]] = []
    changed: list[str] = []
    for row in rows:
        other = others.get(row["name"])
        if row.get("status") != "ok" or other is None:
            continue
        if _setup_differs(row, other):
            changed.append(row["name"])
            continue
        measured = float(row["measured"]["iteration_time_s"])
        again = float(other["measured"]["iteration_time_s"])
        errors = {}
        for method in METHODS:
            predicted = (row.get("predicted", {}).get(method) or {}).get("iteration_time_s")
            if predicted is None:
                continue
            errors[method] = (100.0 * (predicted - measured) / measured,
                              100.0 * (predicted - again) / again)
        points = max((abs(b - a) for a, b in errors.values()), default=math.nan)
        compared.append({
            "name": row["name"], "measured_s": measured, "other_measured_s": again,
            # this run's measurement relative to the other's (the other is usually older)
            "change_pct": 100.0 * (measured - again) / again, "errors_pct": errors,
            "points": points, "agree": bool(points <= AGREE_POINTS),
            "evidence": _evidence(row), "other_evidence": _evidence(other),
        })
    return {"points": AGREE_POINTS, "compared": len(compared),
            "agree": sum(1 for c in compared if c["agree"]), "scenarios": compared,
            "setup_changed": changed}
