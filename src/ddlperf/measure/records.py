"""Measurement records (JSONL) and the steady-state summary built from them.

Every rank appends one JSON object per line to ``records.jsonl`` as it goes (see
:class:`ddlperf.measure.trainer_common.Recorder`); an interrupted run keeps every complete line
and a truncated last line is skipped. Record types:

- ``iteration`` (workers): ``iteration``, ``start``/``end`` (Unix seconds), ``duration_s``,
  ``compute_s`` (measured; emulated device time or real CPU, see ``compute``), ``forward_s``,
  ``backward_s``, ``pull_wait_s``/``push_wait_s`` (PS) or ``allreduce_exposed_s`` (DDP),
  ``payload_sent_bytes``/``payload_received_bytes`` (what the trainer sent/received) and, in an
  emulated cluster, ``wire_sent_bytes``/``wire_received_bytes`` (the host NIC's counters).
- ``serve`` (PS shards, per worker and iteration): ``gate_wait_s`` (synchronization wait),
  ``send_s``, ``recv_s``, ``update_s``.
- ``single`` (real compute alone, no communication), ``error`` (a rank's failure), and the
  launcher's ``run`` / ``probe`` / ``failure`` / ``end`` lines.

Steady state: iterations ≥ ``warmup`` that lie inside the window where every worker was running
(from the latest first steady start to the earliest last end), so ASP workers that finish early
do not leave the others' last iterations running alone. Under SSP the window starts only once
every worker that the staleness bound ever held was held the first time (before that a faster
worker is still catching up: its period is shorter than in steady state, where every worker
runs at the slowest's rate); a note says when the run is too short for that. Per worker the
iteration time is the median of those iterations (a rare stall of this machine does not move
it), or their mean where emulated compute is random by design (layer times with a spread:
then the slow draws are the point, and the mean step is what sets the throughput);
percentiles are over all of them.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ddlperf.io import write_atomic
from ddlperf.measure.trainer_common import EMULATED_LABEL
from ddlperf.prediction import Prediction, ResourceUse, WorkerResult, busiest

COMPUTE_BOUND_SHARE = 0.05  # below this share of the iteration, communication is not the story
OVER_RATE = 1.05  # above this a link carried more than its configured rate allows
CPU_WAIT_SHARE = 0.05  # a rank that waited for a CPU longer than this share is noted
QUANTILES = {"p5": 0.05, "p25": 0.25, "p50": 0.5, "p75": 0.75, "p95": 0.95}


def read_records(path: str | Path) -> tuple[list[dict[str, Any]], int]:
    """All complete records and the number of lines skipped (a truncated or garbled line)."""
    records: list[dict[str, Any]] = []
    skipped = 0
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return [], 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            skipped += 1
            continue
        if isinstance(item, dict):
            records.append(item)
        else:
            skipped += 1
    return records, skipped


def append_record(path: str | Path, record: dict[str, Any]) -> None:
    """Append one line from the launcher (same format as the ranks' lines)."""
    from ddlperf.measure.trainer_common import Recorder

    recorder = Recorder(path)
    recorder.write(record)
    recorder.close()


def quantile(values: list[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default) without numpy."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def spread(values: list[float]) -> dict[str, float]:
    return {key: quantile(values, q) for key, q in QUANTILES.items()}


def worker_iterations(records: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Worker name → its iteration records, by iteration (a repeated iteration keeps the last)."""
    by_name: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for r in records:
        if r.get("type") == "iteration" and r.get("role", "worker") == "worker":
            by_name[str(r["name"])][int(r["iteration"])] = r
    return {name: [its[i] for i in sorted(its)] for name, its in sorted(
        by_name.items(), key=lambda kv: _natural(kv[0]))}


def _natural(name: str) -> tuple[str, int]:
    head = name.rstrip("0123456789")
    tail = name[len(head):]
    return head, int(tail) if tail else -1


def steady_state(
    iterations: dict[str, list[dict[str, Any]]], warmup: int
) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """Per worker the steady iterations (see the module docstring) and notes on fallbacks."""
    notes: list[str] = []
    after = {name: [r for r in its if int(r["iteration"]) >= warmup]
             for name, its in iterations.items()}
    empty = [name for name, its in after.items() if not its]
    if empty:
        notes.append(f"no iterations after warm-up for {', '.join(empty)}")
        after = {n: its for n, its in after.items() if its}
    if not after:
        return {}, notes
    typical = statistics.median(float(r["duration_s"]) for its in after.values() for r in its)
    slack = 0.5 * typical
    lo = max(float(its[0]["start"]) for its in after.values()) - slack
    hi = min(float(its[-1]["end"]) for its in after.values()) + slack
    steady: dict[str, list[dict[str, Any]]] = {}
    for name, its in after.items():
        inside = [r for r in its if float(r["start"]) >= lo and float(r["end"]) <= hi]
        if not inside:
            notes.append(f"{name}: no iteration inside the window where all workers ran; "
                         "used all its post-warm-up iterations")
            inside = its
        steady[name] = inside
    return steady, notes


SSP_HELD_SHARE = 0.02  # a gate wait above this share of the typical period counts as held
SSP_PERIODS_AGREE = 0.03  # measured SSP periods this close count as one rate (noise ~1–3%)
SSP_MIN_ITERATIONS = 3  # fewer steady iterations per worker than this: the run is too short


def ssp_steady(steady: dict[str, list[dict[str, Any]]], waits: dict[tuple[str, int], float]
               ) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """SSP: drop the catch-up of the faster workers (see the module docstring) and say when the
    run is too short for the steady state, where every worker runs at the slowest's rate."""
    typical = statistics.median(float(r["duration_s"]) for its in steady.values() for r in its)
    first_held = []
    for name, its in steady.items():
        held = [r for r in its
                if waits.get((name, int(r["iteration"])), 0.0) > SSP_HELD_SHARE * typical]
        if held:
            first_held.append(float(held[0]["end"]))  # the next iteration starts held
    notes: list[str] = []
    trimmed = steady
    if first_held:
        begin = max(first_held) - 0.5 * typical
        trimmed = {name: [r for r in its if float(r["start"]) >= begin]
                   for name, its in steady.items()}
        if min(len(its) for its in trimmed.values()) < SSP_MIN_ITERATIONS:
            notes.append("SSP: too few iterations after every worker reached the staleness "
                         "bound; the catch-up is included (use more --iterations)")
            trimmed = steady
    periods = [_median(float(r["duration_s"]) for r in its) for its in trimmed.values()]
    gap = 1.0 - min(periods) / max(periods) if max(periods) > 0 else 0.0
    if gap > SSP_PERIODS_AGREE:
        notes.append(f"SSP: the workers' periods differ by {100 * gap:.0f}%: the run is too "
                     "short for the steady state, where every worker runs at the slowest's "
                     "rate (use more --iterations)")
    return trimmed, notes


ASP_TREND = 0.10  # ASP: a first half this much slower than the second is still a transient
ASP_TREND_MIN = 6  # steady iterations per worker needed to compare the halves


def asp_trend_note(steady: dict[str, list[dict[str, Any]]]) -> list[str]:
    """ASP: identical workers started together begin near lockstep and noise spreads their
    phases over 10-15 iterations (docs/models.md), so a short run measures that transient.
    Say so when the first half of each worker's steady iterations took clearly longer than
    its second half (mean over workers of the ratio of the halves' medians)."""
    if min((len(its) for its in steady.values()), default=0) < ASP_TREND_MIN:
        return []
    ratios = []
    for its in steady.values():
        half = len(its) // 2
        second = _median(float(r["duration_s"]) for r in its[len(its) - half:])
        if second > 0:
            ratios.append(_median(float(r["duration_s"]) for r in its[:half]) / second)
    trend = statistics.fmean(ratios) - 1 if ratios else 0.0
    if trend <= ASP_TREND:
        return []
    return [f"ASP: the first half of the measured iterations took {100 * trend:.0f}% longer "
            "than the second (workers leaving their lockstep start): the run may be too "
            "short for the steady state (use more --iterations)"]


def random_compute(context: dict[str, Any]) -> bool:
    """Whether the run's emulated compute draws its layer times (a spec worker with a cv)."""
    if context.get("label") != EMULATED_LABEL:
        return False
    return any(float(cv) > 0 for w in context.get("workers", [])
               for cv in (*w.get("forward_cv", ()), *w.get("backward_cv", ())))


def step_statistic(random: bool) -> Callable[[Iterable[float]], float]:
    """A worker's iteration time from its steps: the median, or the mean where compute is
    random (see the module docstring)."""
    return _mean if random else _median


def _mean(values: Iterable[float]) -> float:
    values = list(values)
    return float(statistics.fmean(values)) if values else 0.0


def _median(values: Iterable[float]) -> float:
    values = list(values)
    return float(statistics.median(values)) if values else 0.0


def gate_waits(records: Iterable[dict[str, Any]]) -> dict[tuple[str, int], float]:
    """(worker, iteration) → synchronization wait at the PS (longest over shards)."""
    waits: dict[tuple[str, int], float] = {}
    for r in records:
        if r.get("type") == "serve":
            key = (str(r["worker"]), int(r["iteration"]))
            waits[key] = max(waits.get(key, 0.0), float(r.get("gate_wait_s", 0.0)))
    return waits


def steady_iterations(records: list[dict[str, Any]], warmup: int, sync: str | None,
                      waits: dict[tuple[str, int], float] | None = None
                      ) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """Per worker the iterations a measurement's figures come from (the steady state; SSP:
    after the catch-up, read from ``waits``, the :func:`gate_waits` of the records), and notes
    on what was dropped."""
    steady, notes = steady_state(worker_iterations(records), warmup)
    if sync == "ssp" and steady:
        steady, ssp_notes = ssp_steady(steady, gate_waits(records) if waits is None else waits)
        notes = notes + ssp_notes
    return steady, notes


def summarize(records: list[dict[str, Any]], context: dict[str, Any]) -> Prediction:
    """The Measurement: a :class:`Prediction` with ``kind='measurement'``, ``method='measured'``.

    ``context`` keys: ``workers`` (spec workers: name, group, device, batch_size), ``arch``,
    ``sync`` (ps: bsp | asp | ssp), ``warmup``, ``label`` (compute label), ``single_worker``
    (dict with ``throughput_samples_per_s``), ``standalone`` (worker name → samples/s alone),
    ``links`` (link name → {"rate_Bps": payload bytes/s, "bytes": {worker: bytes/iteration}}),
    ``inputs`` and ``notes``.
    """
    notes = list(context.get("notes", []))
    waits = gate_waits(records) if context["arch"] == "ps" else {}
    steady, steady_notes = steady_iterations(records, int(context["warmup"]),
                                             context.get("sync"), waits)
    notes += steady_notes
    if not steady:
        raise ValueError("no steady-state iterations recorded")
    spec_workers = {w["name"]: w for w in context["workers"]}
    if context.get("sync") == "asp":
        notes += asp_trend_note(steady)
    random = random_compute(context)
    center = step_statistic(random)
    if random:
        notes.append("emulated compute is random (layer times with a spread): each worker's "
                     "iteration time is its mean step, which sets the throughput")
    medians = {n: center(float(r["duration_s"]) for r in its) for n, its in steady.items()}
    notes += cpu_wait_notes(steady, medians)
    computes = {n: center(float(r["compute_s"]) for r in its) for n, its in steady.items()}
    slowest_compute = max(computes.values())
    workers: list[WorkerResult] = []
    for name, its in steady.items():
        period, comp = medians[name], min(computes[name], medians[name])
        rest = max(period - comp, 0.0)
        if context["arch"] == "ps":
            wait = center(waits.get((name, int(r["iteration"])), 0.0) for r in its)
        else:
            wait = slowest_compute - comp
        wait = min(max(wait, 0.0), rest)
        info = spec_workers.get(name, {})
        batch = int(info.get("batch_size", 0))
        workers.append(WorkerResult(
            name=name, group=str(info.get("group", "w")), device=info.get("device_label"),
            batch_size=batch, iteration_time_s=period,
            throughput_samples_per_s=batch / period if period > 0 else 0.0,
            compute_s=comp, communication_s=rest - wait, wait_s=wait,
        ))
    count = len(workers)
    throughput = sum(w.throughput_samples_per_s for w in workers)
    mean = lambda key: sum(getattr(w, key) for w in workers) / count  # noqa: E731
    period = mean("iteration_time_s")
    resources = _resources(context.get("links", {}), medians, period)
    over = [r for r in resources if r.utilization > OVER_RATE]
    if over:
        busiest = max(over, key=lambda r: r.utilization)
        others = f" (and {len(over) - 1} more link(s) above it)" if len(over) > 1 else ""
        notes.append(f"{busiest.name} carried {busiest.utilization:.0%} of its configured rate"
                     f"{others}: the links are faster than configured, so "
                     "utilization and a link bottleneck are not meaningful — give the real "
                     "line rates (--bandwidth or --config)")
    single = dict(context["single_worker"])
    standalone = context.get("standalone") or {}
    standalone_sum = sum(standalone.get(w.name, single["throughput_samples_per_s"])
                         for w in workers)
    samples = [float(r["duration_s"]) for its in steady.values() for r in its]
    percentiles = {"iteration_time_s": spread(samples)}
    for name, its in steady.items():
        percentiles[f"iteration_time_s.{name}"] = spread([float(r["duration_s"]) for r in its])
    from ddlperf.measure.mean_interval import mean_interval  # it reads this module

    interval = mean_interval(steady, center)
    bottleneck = _bottleneck(workers, resources)
    if context["arch"] == "allreduce" and bottleneck in {r.name for r in resources}:
        bottleneck = f"ring ({bottleneck})"  # named as the predictors name it
    return Prediction(
        method="measured",
        iteration_time_s=period,
        throughput_samples_per_s=throughput,
        speedup=throughput / float(single["throughput_samples_per_s"]),
        scaling_efficiency=throughput / standalone_sum if standalone_sum > 0 else 0.0,
        bottleneck=bottleneck,
        breakdown_s={"compute": mean("compute_s"), "communication": mean("communication_s"),
                     "wait": mean("wait_s")},
        workers=workers,
        single_worker=single,
        resources=resources,
        inputs=dict(context.get("inputs", {})),
        notes=notes,
        percentiles=percentiles,
        kind="measurement",
        uncertainty=None if interval is None else {"iteration_time_s": interval},
    )


def cpu_wait_notes(steady: dict[str, list[dict[str, Any]]], medians: dict[str, float]
                   ) -> list[str]:
    """A note when a worker's thread waited on a run queue for more than
    :data:`CPU_WAIT_SHARE` of its iteration (the trainers' ``*_runqueue_s`` fields): the
    machine's cores were oversubscribed, so its steps ran slower than on a host of its own."""
    shares = {}
    for name, its in steady.items():
        waits = [sum(float(v) for k, v in r.items() if k.endswith("_runqueue_s")) for r in its
                 if any(k.endswith("_runqueue_s") for k in r)]
        if waits and medians.get(name, 0.0) > 0:
            shares[name] = _median(waits) / medians[name]
    over = {n: v for n, v in shares.items() if v > CPU_WAIT_SHARE}
    if not over:
        return []
    listed = ", ".join(f"{n} {v:.0%}" for n, v in sorted(over.items()))
    return [f"waited for a CPU (run queue) for part of each iteration: {listed}; this "
            "machine's cores were oversubscribed (other ranks or jobs), so those steps took "
            "longer than on hosts of their own"]


def _resources(links: dict[str, dict[str, Any]], medians: dict[str, float],
               period: float) -> list[ResourceUse]:
    """Link utilization inferred from the expected payload per worker iteration, each worker's
    measured iteration time and the link's probed (or configured) goodput."""
    out = []
    for name, link in links.items():
        rate = float(link["rate_Bps"])
        if rate <= 0:
            continue
        per_second = sum(b / medians[w] for w, b in link["bytes"].items()
                         if w in medians and medians[w] > 0)
        utilization = per_second / rate
        out.append(ResourceUse(name, utilization * period, utilization))
    return out


def _bottleneck(workers: list[WorkerResult], resources: list[ResourceUse]) -> str:
    """Inferred simply: compute if communication + wait are a small share; a straggler if
    waiting dominates and the workers' compute differs; otherwise the most utilized link
    (waits between equally fast workers come from the network, e.g. unfair TCP sharing)."""
    period = sum(w.iteration_time_s for w in workers) / len(workers)
    comm = sum(w.communication_s for w in workers) / len(workers)
    wait = max(w.wait_s for w in workers)
    computes = [w.compute_s for w in workers]
    uneven = max(computes) - min(computes) > COMPUTE_BOUND_SHARE * period
    if comm + wait <= COMPUTE_BOUND_SHARE * period:
        return "compute"
    if uneven and wait > comm and wait > COMPUTE_BOUND_SHARE * period:
        slowest = max(workers, key=lambda w: w.compute_s)
        return f"straggler {slowest.name}"
    if resources:
        return busiest(resources).name  # the predictors' tie rule for equally busy links
    return "communication"


def write_summary(path: str | Path, measurement: Prediction) -> Path:
    """measurement.json, written atomically (a reader never sees half of it)."""
    return write_atomic(path, json.dumps(measurement.to_dict(), indent=2, allow_nan=False) + "\n")


def load_summary(path: str | Path) -> Prediction:
    """Read a measurement.json back into a Prediction (kind='measurement')."""
    data = json.loads(Path(path).read_text())
    data["workers"] = [WorkerResult(**w) for w in data.get("workers", [])]
    data["resources"] = [ResourceUse(**r) for r in data.get("resources", [])]
    return Prediction(**data)
