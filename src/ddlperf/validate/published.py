"""``ddlperf validate --published``: predict every published number (no run) and compare.

Each entry of the file (:mod:`ddlperf.validate.published_file`) is predicted with both
methods from the zoo's kernel model, exactly as ``ddlperf predict`` would. A cluster entry
whose source also states its one-GPU figure is predicted a second time with compute taken from
that figure (each GPU's compute scaled by published / predicted one-GPU throughput, as a
profile would give it): that isolates the cluster model from the compute model. Entries whose
set-up ddlperf cannot express stay, with the reason. Comparisons the source makes on one
cluster are judged by whether the predicted faster set-up is the published faster one.

Errors are on throughput (the published quantity): ``100 × (predicted − published) /
published``; the iteration-time error is kept too.
"""

from __future__ import annotations

import copy
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddlperf.errors import InputError
from ddlperf.prediction import Prediction
from ddlperf.validate.compare import METHODS, prediction_entry
from ddlperf.validate.published_file import Entry, PublishedFile, load_published

PUBLISHED_FORMAT = "ddlperf.published/1"
SIMULATE_OPTIONS = {"iterations": 4, "warmup": 2}  # no jitter: steady after two (link-bound PS)
SINGLE_TARGET_PCT = 25.0  # every single-GPU entry within this
CLUSTER_TARGET_PCT = 15.0  # cluster MAPE over the entries whose network is stated


@dataclass
class PublishedRun:
    """What :func:`check_published` returns (and writes as ``OUT/results.json``)."""

    out: Path | None
    file: str
    rows: list[dict[str, Any]]
    comparisons: list[dict[str, Any]]
    summary: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"format": PUBLISHED_FORMAT, **self.meta, "file": self.file,
                "summary": self.summary, "comparisons": self.comparisons,
                "entries": self.rows}


def entry_gpus(file: PublishedFile, entry: Entry) -> int:
    setup = file.setup_of(entry)
    if setup is None:
        return 1
    per_server = entry.gpus or int((setup.cluster or {}).get("nodes", [{}])[0].get("gpus", 1))
    return int(entry.servers or 1) * per_server


def published_values(file: PublishedFile, entry: Entry) -> tuple[float, float]:
    """The published (iteration time s, throughput samples/s) of the whole job."""
    samples = entry_gpus(file, entry) * entry.batch_size
    if entry.published_s is not None:
        return entry.published_s, samples / entry.published_s
    assert entry.published is not None
    return samples / entry.published, entry.published


def entry_cluster(file: PublishedFile, entry: Entry, speed: float | None = None) -> dict[str, Any]:
    """The set-up's cluster with this entry's servers, GPUs per server and PS shards."""
    setup = file.setup_of(entry)
    assert setup is not None and setup.cluster is not None and setup.strategy is not None
    cluster = copy.deepcopy(setup.cluster)
    group = cluster["nodes"][0]
    group["count"] = entry.servers
    if entry.gpus is not None:
        group["gpus"] = entry.gpus
    if speed is not None:
        group["speed"] = speed
    if setup.strategy.arch == "ps":
        cluster["ps"] = {**(cluster.get("ps") or {}), "count": entry.ps}
    else:
        cluster.pop("ps", None)
    return cluster


def entry_device(file: PublishedFile, entry: Entry) -> str:
    setup = file.setup_of(entry)
    if setup is None:
        return str(entry.device)
    return str((setup.cluster or {}).get("nodes", [{}])[0].get("device", entry.device))


def predict_entry(file: PublishedFile, entry: Entry, method: str,
                  speed: float | None = None) -> Prediction:
    """One entry predicted by ``ddlperf predict`` (a single GPU: one worker, no exchange)."""
    from ddlperf.api import make_strategy, predict

    options = SIMULATE_OPTIONS if method == "simulate" else {}
    common = {"batch_size": entry.batch_size, "device": entry_device(file, entry),
              "dtype": entry.dtype, "math": entry.math, "method": method, **options}
    setup = file.setup_of(entry)
    if setup is None:
        return predict(entry.model, workers=1, arch="allreduce", **common)
    s = setup.strategy
    assert s is not None
    strategy = make_strategy(s.arch, s.sync, s.staleness, s.sharding, s.overlap, s.bucket_size,
                             s.allreduce, s.local_aggregation, s.step_barrier)
    return predict(entry.model, cluster=entry_cluster(file, entry, speed), strategy=strategy,
                   **common)


def baselines(file: PublishedFile) -> dict[str, Entry]:
    """Each cluster entry's single-GPU entry: the one it names, else the one single-GPU entry
    of its source with its model, batch, dtype, math and device."""
    singles = [e for e in file.entries if e.single]
    by_name = {e.name: e for e in file.entries}
    out: dict[str, Entry] = {}
    for i, e in enumerate(file.entries):
        if e.single:
            continue
        if e.baseline is not None:
            if not by_name[e.baseline].single:
                raise InputError(f"entries[{i}] ({e.name}).baseline",
                                 f"{e.baseline!r} is not a single-GPU entry", "name one")
            out[e.name] = by_name[e.baseline]
            continue
        device = entry_device(file, e)
        match = [s for s in singles if file.source_of(s) == file.source_of(e)
                 and (s.model, s.batch_size, s.dtype, s.math, s.device)
                 == (e.model, e.batch_size, e.dtype, e.math, device)]
        if len(match) > 1:
            raise InputError(f"entries[{i}] ({e.name}).baseline",
                             f"{len(match)} single-GPU entries match "
                             f"({', '.join(m.name for m in match)})", "name one with baseline:")
        if match:
            out[e.name] = match[0]
    return out


def describe(file: PublishedFile, entry: Entry) -> dict[str, Any]:
    """The set-up fields the CSV and the tables show."""
    setup = file.setup_of(entry)
    base: dict[str, Any] = {"workers": entry_gpus(file, entry), "batch_size": entry.batch_size,
                            "device": entry_device(file, entry), "dtype": entry.dtype,
                            "math": entry.math or "default", "compute": "kernel model"}
    if setup is None:
        return {**base, "arch": "single GPU", "servers": 1}
    base["servers"] = entry.servers
    if setup.unsupported is not None:
        return {**base, "arch": "not expressible"}
    from ddlperf.units import parse_bandwidth

    cluster = setup.cluster or {}
    s = setup.strategy
    assert s is not None
    group = cluster["nodes"][0]
    return {**base, "arch": s.arch, "sync": s.sync, "sharding": s.sharding,
            "ps": entry.ps if s.arch == "ps" else 0,
            "placement": (cluster.get("ps") or {}).get("placement"),
            "local_aggregation": s.local_aggregation, "step_barrier": s.step_barrier,
            "allreduce": s.allreduce,
            "gpus_per_server": entry.gpus or group.get("gpus", 1),
            "intra": group.get("intra"), "nics": group.get("nics", 1),
            "bandwidth_bps": parse_bandwidth(cluster.get("bandwidth", "10Gbps"), "bandwidth"),
            "goodput": cluster.get("goodput"), "transport": _transport_name(cluster)}


def _transport_name(cluster: dict[str, Any]) -> str | None:
    """The set-up's transport as its catalog name (or ``custom``), None when not set."""
    if cluster.get("transport") is None:
        return None
    from ddlperf.transport import parse_transport

    return parse_transport(cluster["transport"], "transport").name


def check_entry(file: PublishedFile, entry: Entry, baseline: Entry | None) -> dict[str, Any]:
    """One result row: the published value, both methods' predictions and their errors."""
    setup = file.setup_of(entry)
    iteration_s, throughput = published_values(file, entry)
    notes = [a for a in (setup.assumptions if setup else [])] + list(entry.assumptions)
    row: dict[str, Any] = {
        "name": entry.name, "source": file.source_of(entry),
        "what": setup.what if setup else "one GPU alone",
        "kind": "single" if entry.single else "cluster",
        "gpus": entry_gpus(file, entry),
        "network_stated": bool(setup.network_stated) if setup else None,
        "note": entry.note, "assumptions": notes, "setup": describe(file, entry),
        "measured": {"iteration_time_s": iteration_s, "throughput_samples_per_s": throughput,
                     "bottleneck": None,
                     "published": (f"{entry.published_s} s per iteration"
                                   if entry.published_s is not None
                                   else f"{entry.published} samples/s")},
        "predicted": {},
    }
    if setup is not None and setup.unsupported is not None:
        return {**row, "status": "not expressible", "error": setup.unsupported}
    for method in METHODS:
        p = predict_entry(file, entry, method)
        row["predicted"][method] = prediction_entry(p, iteration_s, throughput)
        row["setup"].setdefault("parameter_bytes",
                                p.inputs.get("workload", {}).get("parameter_bytes"))
    if baseline is not None:
        row["baseline"] = baseline.name
        row["scaled"] = {}
        _b_it, b_throughput = published_values(file, baseline)
        for method in METHODS:
            single = predict_entry(file, baseline, method).throughput_samples_per_s
            speed = b_throughput / single
            p = predict_entry(file, entry, method, speed=speed)
            row["scaled"][method] = {**prediction_entry(p, iteration_s, throughput),
                                     "speed": speed}
    return {**row, "status": "ok"}


def judge(file: PublishedFile, rows: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Each comparison (of entries both checked): the published faster entry, the predicted
    one per method, right?"""
    out = []
    for c in file.compare:
        if not all(name in rows for name in c.entries):
            continue
        a, b = (rows[name] for name in c.entries)
        pa, pb = (r["measured"]["throughput_samples_per_s"] for r in (a, b))
        winner = a["name"] if pa >= pb else b["name"]
        item: dict[str, Any] = {"what": c.what, "entries": list(c.entries),
                                "published_winner": winner,
                                "margin_pct": 100.0 * (max(pa, pb) / min(pa, pb) - 1.0)}
        blocked = [r for r in (a, b) if r.get("status") != "ok"]
        if blocked:
            item["status"] = "not expressible"
            item["why"] = f"{blocked[0]['name']}: {blocked[0].get('error')}"
        else:
            item["status"] = "ok"
            item["predicted_winner"] = {}
            item["right"] = {}
            for method in METHODS:
                qa, qb = (r["predicted"][method]["throughput_samples_per_s"] for r in (a, b))
                predicted = a["name"] if qa >= qb else b["name"]
                item["predicted_winner"][method] = predicted
                item["right"][method] = predicted == winner
        out.append(item)
    return out


def _errors(rows: list[dict[str, Any]], method: str,
            key: str = "predicted") -> list[tuple[str, float]]:
    return [(r["name"], r[key][method]["throughput_error_pct"]) for r in rows
            if method in r.get(key, {})
            and math.isfinite(r[key][method]["throughput_error_pct"])]


def _cluster_summary(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    stated = [r for r in rows if r.get("network_stated")]
    for method in METHODS:
        errors = _errors(rows, method, key)
        stated_errors = _errors(stated, method, key)
        if not errors:
            continue
        worst = max(stated_errors or errors, key=lambda e: abs(e[1]))
        out[method] = {
            "entries": len(errors), "entries_network_stated": len(stated_errors),
            "mape_pct": (sum(abs(e) for _n, e in stated_errors) / len(stated_errors)
                         if stated_errors else None),
            "mape_all_pct": sum(abs(e) for _n, e in errors) / len(errors),
            "worst_error_pct": worst[1], "worst_abs_error_pct": abs(worst[1]),
            "worst_entry": worst[0],
            "within_15pct": sum(1 for _n, e in stated_errors if abs(e) <= CLUSTER_TARGET_PCT),
        }
    return out


def summarize_published(rows: list[dict[str, Any]],
                        comparisons: list[dict[str, Any]]) -> dict[str, Any]:
    """Single-GPU compute check, cluster check (kernel-model compute and compute from the
    source's one-GPU figure), winners, and what could not be expressed."""
    ok = [r for r in rows if r.get("status") == "ok"]
    single = [r for r in ok if r["kind"] == "single"]
    cluster = [r for r in ok if r["kind"] == "cluster"]
    summary: dict[str, Any] = {"single": {}, "cluster": _cluster_summary(cluster, "predicted"),
                               "cluster_scaled": _cluster_summary(cluster, "scaled"),
                               "winners": {}}
    for method in METHODS:
        errors = _errors(single, method)
        if errors:
            worst = max(errors, key=lambda e: abs(e[1]))
            summary["single"][method] = {
                "entries": len(errors),
                "median_abs_error_pct": statistics.median(abs(e) for _n, e in errors),
                "worst_error_pct": worst[1], "worst_entry": worst[0],
                "within_25pct": sum(1 for _n, e in errors if abs(e) <= SINGLE_TARGET_PCT),
            }
        judged = [c for c in comparisons if c["status"] == "ok"]
        summary["winners"][method] = {
            "right": sum(1 for c in judged if c["right"][method]),
            "wrong": sum(1 for c in judged if not c["right"][method]),
            "not_expressible": len(comparisons) - len(judged),
        }
    summary["groups"] = _group_summary(cluster)
    summary["not_expressible"] = [r["name"] for r in rows if r.get("status") != "ok"]
    return summary


def _group_summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Cluster MAPE per source and synchronization (``S2 ps``): where the errors come from."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(f"{r['source']} {r['setup'].get('arch')}", []).append(r)
    out: dict[str, dict[str, Any]] = {}
    for name, members in groups.items():
        item: dict[str, Any] = {"entries": len(members),
                                "network_stated": bool(members[0].get("network_stated"))}
        for key in ("predicted", "scaled"):
            for method in METHODS:
                errors = [abs(e) for _n, e in _errors(members, method, key)]
                item[f"{key}_{method}_mape_pct"] = (sum(errors) / len(errors)
                                                    if errors else None)
        out[name] = item
    return out


@dataclass(frozen=True)
class PublishedPlan:
    """A checked file, the entries to predict and each cluster entry's one-GPU baseline."""

    path: str
    file: PublishedFile
    entries: list[Entry]
    baselines: dict[str, Entry]


def plan_published(path: str | Path, only: list[str] | None = None) -> PublishedPlan:
    """Read and check the file and ``only`` before anything is predicted or written."""
    file = load_published(path)
    names = {e.name for e in file.entries}
    for name in only or []:
        if name not in names:
            raise InputError("--only", f"no entry named {name!r}", "names are in the file")
    chosen = [e for e in file.entries if not only or e.name in only]
    return PublishedPlan(str(path), file, chosen, baselines(file))


def run_published(plan: PublishedPlan,
                  progress: Callable[[dict[str, Any]], None] | None = None) -> PublishedRun:
    """Predict the planned entries and compare them with the published values."""
    rows: list[dict[str, Any]] = []
    total = len(plan.entries)
    for i, entry in enumerate(plan.entries):
        if progress:
            progress({"event": "start", "index": i, "total": total, "name": entry.name})
        try:
            rows.append(check_entry(plan.file, entry, plan.baselines.get(entry.name)))
        except InputError as exc:  # say which entry of which file
            raise InputError(f"{Path(plan.path).name}: entry {entry.name!r}: {exc.field}",
                             exc.problem, exc.fix) from None
        if progress:
            progress({"event": "done", "index": i, "total": total, "name": entry.name,
                      "row": rows[-1]})
    comparisons = judge(plan.file, {r["name"]: r for r in rows})
    f = plan.file
    meta = {"title": f.title, "description": f.description, "findings": f.findings,
            "assumptions": list(f.assumptions),
            "sources": {k: v.model_dump() for k, v in f.sources.items()}}
    return PublishedRun(None, plan.path, rows, comparisons,
                        summarize_published(rows, comparisons), meta)


def check_published(path: str | Path, only: list[str] | None = None,
                    progress: Callable[[dict[str, Any]], None] | None = None) -> PublishedRun:
    """Predict every entry of a published-check file (or those named in ``only``)."""
    return run_published(plan_published(path, only), progress)


def prepare_published_out(out: str | Path) -> Path:
    """The output directory; one holding an emulated validation's results is refused."""
    import json

    from ddlperf.io import prepare_output_dir

    p = prepare_output_dir(out, "--out", (), "", "")
    try:
        existing = json.loads((p / "results.json").read_text())
    except (OSError, ValueError):
        return p
    if isinstance(existing, dict) and existing.get("format") not in (None, PUBLISHED_FORMAT):
        raise InputError("--out", f"{str(out)!r} holds results of another kind "
                         f"({existing.get('format')})", "choose another directory")
    return p


def write_published(run: PublishedRun, out: str | Path) -> PublishedRun:
    """``results.json``, ``results.csv`` and ``validation.png`` in ``out``, atomically."""
    import json

    from ddlperf.io import write_atomic
    from ddlperf.report.published_report import plot_published
    from ddlperf.report.validation_report import csv_text
    from ddlperf.validate.results import clean_json

    directory = prepare_published_out(out)
    run.out = directory
    write_atomic(directory / "results.json",
                 json.dumps(clean_json(run.to_dict()), indent=1, allow_nan=False) + "\n")
    write_atomic(directory / "results.csv", csv_text(run.rows))
    if any(r.get("status") == "ok" for r in run.rows):
        plot_published(run.rows, directory / "validation.png", run.summary)
    return run
