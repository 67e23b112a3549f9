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

import math
from typing import Any

from ddlperf.report.validation_report import ci_pct, probe_ms
from ddlperf.validate.compare import METHODS

AGREE_POINTS = 2.0  # the issue's bar: two runs' errors within this many points per scenario


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
        mine, theirs = row.get("fingerprint"), other.get("fingerprint")
        if mine and theirs and mine != theirs:
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
