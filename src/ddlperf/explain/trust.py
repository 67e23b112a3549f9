"""How far to trust a prediction: the measured error of validated scenarios of its class.

The published validation results (``docs/validation.csv``: real distributed PyTorch runs on
the emulated dev matrix, written by ``ddlperf validate --publish``) hold one row per scenario
and method with the signed error of the predicted iteration time. A prediction's class is its
architecture, its synchronization and whether its workers differ (heterogeneity); the rows of
the same class and method say how far such predictions have been from measurements, and over
what range of scale they were checked. The files are package data (``ddlperf/data``, links to
``docs/`` in the source tree), so an installed ddlperf reads the same results.
"""

from __future__ import annotations

import csv
import math
from functools import lru_cache
from pathlib import Path
from typing import Any

from ddlperf.scenario import Scenario
from ddlperf.units import format_bandwidth

DATA = Path(__file__).resolve().parent.parent / "data"
# the source tree's docs/ (results published there before they are package data)
DOCS = Path(__file__).resolve().parents[3] / "docs"
# (what the rows are, file in ddlperf/data or docs/, where it is published)
SOURCES = (("emulated dev matrix", "validation.csv", "docs/validation.csv"),
           ("published cluster", "published.csv", "docs/published.csv"))


@lru_cache(maxsize=8)
def _rows(name: str) -> tuple[dict[str, str], ...]:
    path = next((p for p in (DATA / name, DOCS / name) if p.is_file()), None)
    if path is None:
        return ()
    with path.open(newline="") as f:
        return tuple(csv.DictReader(f))


def scenario_class(sc: Scenario) -> dict[str, Any]:
    """Architecture, synchronization, heterogeneity and shard placement of a resolved
    scenario (colocated shards are a class of their own: the analytic ASP/SSP model's errors
    there are not those of dedicated shards)."""
    strategy = sc.strategy
    sync = "bsp" if strategy.arch == "allreduce" else strategy.effective_sync
    return {"arch": strategy.arch, "sync": sync, "heterogeneous": sc.cluster.heterogeneous,
            "colocated": any(s.host is not None for s in sc.shards)}


def describe_class(cls: dict[str, Any]) -> str:
    arch = "PS" if cls["arch"] == "ps" else "all-reduce"
    sync = "" if cls["arch"] == "allreduce" else f" + {cls['sync'].upper()}"
    mixed = " with mixed workers" if cls["heterogeneous"] else " with identical workers"
    placed = " and colocated shards" if cls.get("colocated") else ""
    return f"{arch}{sync}{mixed}{placed}"


def _in_class(row: dict[str, str], cls: dict[str, Any], method: str) -> bool:
    if row.get("status") != "ok" or row.get("method") != method:
        return False
    sync = row.get("sync") or "bsp"
    if sync == "ssp" and row.get("staleness") in ("0", "0.0"):
        sync = "bsp"
    if (row.get("arch"), sync) != (cls["arch"], cls["sync"]):
        return False
    het = row.get("heterogeneous")
    if het not in (None, "") and (het == "True") != cls["heterogeneous"]:
        return False
    placement = row.get("placement")  # absent from results published before the column
    return placement is None or (placement == "colocated") == bool(cls.get("colocated"))


def _summary(rows: list[dict[str, str]]) -> dict[str, Any] | None:
    errors = [float(r["error_pct"]) for r in rows if r.get("error_pct")]
    errors = [e for e in errors if math.isfinite(e)]
    if not errors:
        return None
    workers = [int(float(r["workers"])) for r in rows if r.get("workers")]
    rates = [float(r["bandwidth_bps"]) for r in rows if r.get("bandwidth_bps")]
    worst = max(errors, key=abs)
    return {
        "runs": len(errors),
        "mape_pct": sum(abs(e) for e in errors) / len(errors),
        "worst_error_pct": worst,
        "within_pct": abs(worst),
        "scenarios": sorted({r["scenario"] for r in rows}),
        "workers": [min(workers), max(workers)] if workers else None,
        "bandwidth_bps": [min(rates), max(rates)] if rates else None,
    }


def trust_for(sc: Scenario, method: str) -> dict[str, Any]:
    """The validation record of this prediction's class and method, and one sentence."""
    cls = scenario_class(sc)
    sources = []
    sentences = []
    for label, name, published in SOURCES:
        rows = list(_rows(name))
        if not rows:
            continue
        exact = [r for r in rows if _in_class(r, cls, method)]
        summary = _summary(exact)
        scope = "class"
        if summary is None:  # nothing of this class: the same architecture at least
            broader = {**cls}
            same_arch = [r for r in rows if r.get("status") == "ok"
                         and r.get("method") == method and r.get("arch") == cls["arch"]]
            summary = _summary(same_arch)
            scope = "architecture"
            if summary is None:
                continue
            cls_text = ("PS" if broader["arch"] == "ps" else "all-reduce") + " (any sync)"
        else:
            cls_text = describe_class(cls)
        sources.append({"source": label, "file": published, "scope": scope, **summary})
        sentences.append(_sentence(cls_text, method, label, published, summary, scope, cls))
    if not sources:
        text = (f"No published validation results for {describe_class(cls)} ({method}) are "
                "available: treat this as an unchecked estimate.")
    else:
        text = " ".join(sentences)
        beyond = outside_range(sc, sources)
        if beyond:
            text += " " + beyond
    return {"class": cls, "method": method, "sources": sources, "text": text}


def _sentence(cls_text: str, method: str, label: str, published: str, s: dict[str, Any],
              scope: str, cls: dict[str, Any]) -> str:
    runs = s["runs"]
    scale = ""
    if s["workers"]:
        lo, hi = s["workers"]
        scale = f"{lo}" if lo == hi else f"{lo}–{hi}"
        scale = f" with {scale} workers"
    if s["bandwidth_bps"]:
        lo, hi = (format_bandwidth(x) for x in s["bandwidth_bps"])
        scale += f" at {lo}" if lo == hi else f" at {lo}–{hi}"
    text = (f"Predictions ({method}) for {cls_text} have been within {s['within_pct']:.1f}% "
            f"(mean |error| {s['mape_pct']:.1f}%) on {runs} {label} run"
            f"{'s' if runs != 1 else ''}{scale} ({published}).")
    if scope != "class":
        text = f"No {label} run of this class ({describe_class(cls)}); " + text
    return text


def outside_range(sc: Scenario, sources: list[dict[str, Any]]) -> str | None:
    """A sentence when the scenario's scale lies outside every source's validated range."""
    n = sc.worker_count
    rate = max(max(g.up, g.down) for g in sc.cluster.servers())  # NIC line rate, bits/s
    for s in sources:
        workers, rates = s.get("workers"), s.get("bandwidth_bps")
        inside = (workers is None or workers[0] <= n <= workers[1]) and (
            rates is None or rates[0] * 0.999 <= rate <= rates[1] * 1.001)
        if inside:
            return None
    if not sources:
        return None
    return (f"This scenario ({n} workers, {format_bandwidth(rate)} links) lies outside the "
            "validated range: its error there has not been measured.")
