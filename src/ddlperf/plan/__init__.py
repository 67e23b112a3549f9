"""``ddlperf plan``: the cheapest and the fastest clusters that meet a target, and the
cost–time Pareto front.

The search (:mod:`.space`) enumerates instance types and counts, PS shards, architectures,
all-reduce algorithms and sync modes; every candidate is predicted with the analytic model
(batched where it applies, :mod:`.evaluate`) on an executor (:mod:`ddlperf.executors`), rows
streaming to a CSV/Parquet file if asked. Only the answers are kept in memory: the cheapest
and the fastest candidate that meet the target within the budget, the best reachable one, and
the Pareto front. The best few are then re-predicted with the simulator (percentiles
included). Ctrl-C stops the search and keeps what finished.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddlperf.errors import InputError
from ddlperf.plan.evaluate import evaluate_chunk
from ddlperf.plan.pareto import Front
from ddlperf.plan.prices import PriceTable, load_prices
from ddlperf.plan.space import Candidate, SearchSpace, candidates
from ddlperf.plan.target import Target

__all__ = ["PlanResult", "SearchSpace", "Target", "load_prices", "plan"]

# Candidates per chunk of work: a batched family is one vectorized call; others are predicted
# one by one (~10 ms each), so their chunks are smaller to keep the workers balanced.
BATCHED_CHUNK = 512
# What the plan page needs of every answer and Pareto row.
ROW_KEYS = frozenset({"throughput_samples_per_s", "price_per_hour", "job_s", "cost", "meets"})
SINGLE_CHUNK = 16


@dataclass
class PlanResult:
    target: Target
    prices: PriceTable
    total: int
    evaluated: int = 0
    errors: int = 0
    cheapest: dict[str, Any] | None = None
    fastest: dict[str, Any] | None = None
    best_reachable: dict[str, Any] | None = None
    front: list[dict[str, Any]] = field(default_factory=list)
    rechecks: list[dict[str, Any]] = field(default_factory=list)
    interrupted: bool = False
    rows_file: Path | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        def clean(row: dict[str, Any] | None) -> dict[str, Any] | None:
            return None if row is None else {k: v for k, v in row.items() if k != "kwargs"}

        return {
            "target": {"kind": self.target.kind, "throughput_samples_per_s":
                       self.target.throughput, "deadline_s": self.target.deadline_s,
                       "samples": self.target.samples, "budget": self.target.budget,
                       "text": self.target.describe()},
            "prices": {"example": self.prices.example, "currency": self.prices.currency,
                       "note": self.prices.note,
                       **self.prices.model_dump(mode="json", include={"instances",
                                                                      "ps_hosts"})},
            "candidates": self.total, "evaluated": self.evaluated, "errors": self.errors,
            "interrupted": self.interrupted,
            "cheapest": clean(self.cheapest), "fastest": clean(self.fastest),
            "best_reachable": clean(self.best_reachable),
            "pareto_front": [clean(r) for r in self.front],
            "rechecks": self.rechecks,
            "rows_file": None if self.rows_file is None else str(self.rows_file),
            "notes": self.notes,
        }

    @classmethod
    def from_dict(cls, data: Any, field: str = "--plan") -> PlanResult:
        """The result saved by ``ddlperf plan --json`` (what ``ddlperf report --plan`` draws),
        or a one-line error naming ``field``."""
        from ddlperf.schema import validate

        fix = "save one with 'ddlperf plan ... --json > plan.json'"
        keys = ("target", "prices", "candidates", "evaluated", "pareto_front")
        if not isinstance(data, dict) or any(k not in data for k in keys):
            raise InputError(field, "is not the JSON of 'ddlperf plan --json'", fix)
        prices = data["prices"]
        if not isinstance(prices, dict) or "instances" not in prices:
            raise InputError(field, "holds no price table (saved by an older ddlperf)",
                             "run the plan again with --json")
        table = validate(PriceTable, {k: v for k, v in prices.items()
                                      if k in PriceTable.model_fields}, prefix=f"{field} prices")
        try:
            answers = [data.get("cheapest"), data.get("fastest"), *data["pareto_front"]]
            t = data["target"]
            target = Target(throughput=t.get("throughput_samples_per_s"),
                            deadline_s=t.get("deadline_s"), samples=t.get("samples"),
                            budget=t.get("budget"))
            ok = (all(isinstance(data[k], int) for k in ("candidates", "evaluated"))
                  and all(row is None or set(row) >= ROW_KEYS for row in answers))
        except (AttributeError, TypeError, ValueError):
            ok = False
        if not ok:
            raise InputError(field, "is not the JSON of 'ddlperf plan --json' (its target, "
                             "counts or rows are not what plan writes)", fix)
        rows_file = data.get("rows_file")
        return cls(target=target, prices=table, total=data["candidates"],
                   evaluated=data["evaluated"], errors=data.get("errors", 0),
                   cheapest=data.get("cheapest"), fastest=data.get("fastest"),
                   best_reachable=data.get("best_reachable"), front=data["pareto_front"],
                   rechecks=data.get("rechecks", []),
                   interrupted=bool(data.get("interrupted")),
                   rows_file=None if rows_file is None else Path(rows_file),
                   notes=data.get("notes", []))


def count(space: SearchSpace, table: PriceTable) -> int:
    return sum(1 for _ in candidates(space, table))


def chunks(space: SearchSpace, table: PriceTable) -> Iterator[list[Candidate]]:
    """Consecutive candidates of one family, cut to the chunk sizes above."""
    for _key, group in itertools.groupby(candidates(space, table), key=lambda c: c.family):
        members = list(group)
        size = BATCHED_CHUNK if members[0].batchable else SINGLE_CHUNK
        for start in range(0, len(members), size):
            yield members[start:start + size]


def plan(
    target: Target, space: SearchSpace, *, prices: PriceTable | None = None,
    fixed: dict[str, Any] | None = None, executor: Any = None, rows: Any = None,
    recheck: int = 3, simulate_options: dict[str, Any] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> PlanResult:
    """Search ``space`` for ``target`` (see the module docstring).

    ``fixed``: :func:`ddlperf.api.predict` keywords every candidate shares (the model, batch,
    dtype, sharding, latency, …). ``executor``: an :class:`ddlperf.executors.Executor` (default:
    this process). ``rows``: a :class:`ddlperf.report.rowfile.RowWriter` for every candidate's
    row. ``recheck``: how many of the answers to re-predict with the simulator.
    """
    from ddlperf.executors import Executor, map_grouped, sigint_deferred

    table = prices or load_prices()
    fixed = dict(fixed or {})
    _check_space(space, table)
    total = count(space, table)
    result = PlanResult(target, table, total)
    if table.example:
        result.notes.append("prices: the bundled EXAMPLE table (dated public list prices, not "
                            "a quote); give --prices FILE with yours")
    front = Front()
    executor = executor or Executor()
    queue: deque[list[Candidate]] = deque()  # chunks handed out, oldest first

    keep_all = rows is not None

    def feed() -> Iterator[tuple[list[Candidate], dict[str, Any], Target, bool]]:
        for chunk in chunks(space, table):
            queue.append(chunk)
            yield chunk, fixed, target, keep_all

    try:
        for kept, errors in map_grouped(executor, evaluate_chunk, feed()):
            chunk = queue.popleft()  # results come back in the order chunks went out
            with sigint_deferred():  # a chunk is in the file and counted, or not at all
                result.evaluated += len(chunk)
                result.errors += errors
                for i, row in kept:
                    if not row.get("error"):
                        _account(result, front, chunk[i], row, fixed)
                if rows is not None:
                    rows.write(row for _i, row in kept)
            if progress is not None:
                progress(result.evaluated, total)
    except KeyboardInterrupt:
        result.interrupted = True
    finally:
        executor.close()
    result.front = front.rows()
    if result.interrupted:
        result.notes.append(f"interrupted: {result.evaluated:,} of {total:,} candidates "
                            "searched; the answers are over those only")
        return result
    if result.cheapest is None:
        raise _unmet(target, result)
    if recheck > 0:
        try:
            _recheck(result, target, recheck, simulate_options or {}, result.rechecks)
            if _no_spread(result.rechecks):
                result.notes.append(
                    "re-check: p5–p95 equal the mean: the workload has no per-operation "
                    "spread (zoo models have none measured), so every simulated iteration is "
                    "the same; give --jitter (e.g. 0.05) or a profiled --workload for a spread")
        except KeyboardInterrupt:  # the search is complete: keep it and what was re-checked
            result.interrupted = True
            result.notes.append(f"interrupted during the simulator's re-check: "
                                f"{len(result.rechecks)} of the answers re-checked")
    return result


def _check_space(space: SearchSpace, table: PriceTable) -> None:
    if not table.instances:
        raise InputError("--prices", "the price table lists no instances")


def _account(result: PlanResult, front: Front, candidate: Candidate, row: dict[str, Any],
             fixed: dict[str, Any]) -> None:
    """Keep ``row`` (predicted, with the target's measures) where it is an answer so far."""
    kept = None

    def keep() -> dict[str, Any]:
        nonlocal kept
        if kept is None:
            kept = {**row, "kwargs": candidate.kwargs(fixed)}
        return kept

    thr = row["throughput_samples_per_s"]
    best = result.best_reachable
    if best is None or reach_key(row) > reach_key(best):
        result.best_reachable = keep()
    if row.get("within_budget", True):
        front.add(row["cost"], thr, keep)
    if not row["meets"]:
        return
    cheapest = result.cheapest
    if cheapest is None or (row["cost"], -thr) < (cheapest["cost"],
                                                  -cheapest["throughput_samples_per_s"]):
        result.cheapest = keep()
    fastest = result.fastest
    if fastest is None or (-thr, row["cost"]) < (-fastest["throughput_samples_per_s"],
                                                 fastest["cost"]):
        result.fastest = keep()


def reach_key(row: dict[str, Any]) -> tuple[bool, float]:
    """The best reachable: the fastest within the budget (the fastest of all when none is)."""
    return bool(row.get("within_budget", True)), row["throughput_samples_per_s"]


def _unmet(target: Target, result: PlanResult) -> InputError:
    flag = "--throughput" if target.kind == "throughput" else "--deadline"
    best = result.best_reachable
    if best is None:
        return InputError(flag, f"none of the {result.total:,} searched clusters could be "
                          "predicted", "check the model and the price table")
    where = (f"{best['servers']} × {best['instance']}, {best['arch']}"
             + (f" with {best['ps']} PS" if best["ps"] else ""))
    from ddlperf.report.plan_text import money
    from ddlperf.units import format_long_duration

    currency = result.prices.currency
    if target.kind == "throughput":
        reach = (f"{best['throughput_samples_per_s']:,.0f} samples/s ({where}, "
                 f"{money(best['cost'], currency)} per hour)")
    else:
        reach = (f"{format_long_duration(best['job_s'])} for the job ({where}, "
                 f"{money(best['cost'], currency)})")
    if target.budget is None:
        scope = ""
    elif best.get("within_budget", True):
        scope = " within the budget: the best reachable within it"
    else:
        scope = " within the budget: none is within it; the best reachable"
    scope = scope or ": the best reachable"
    return InputError(flag, f"no searched cluster meets {target.describe()}{scope} is "
                      f"{reach}", "lower the target, search more --servers, raise --budget, "
                      "or allow more instance types")


def _no_spread(rechecks: list[dict[str, Any]]) -> bool:
    spreads = [(r.get("simulate_p5"), r.get("simulate_p95")) for r in rechecks
               if r.get("simulate_p5") is not None]
    return bool(spreads) and all(p95 - p5 <= 1e-9 * p95 for p5, p95 in spreads)


# ASP and SSP answers with more workers than this are not re-checked: the simulator gives
# every worker a random phase of its own (no symmetry folds them), and its time grows with
# the square of the flows: resnet50 on 8-GPU servers with 8 shards took 4.5 s for 32 GPUs,
# 22 s for 64 and 64 s for 128 on this 2-core machine (December 2026); 512 took minutes.
MAX_ASYNC_RECHECK_WORKERS = 64


def _recheck(result: PlanResult, target: Target, limit: int, options: dict[str, Any],
             out: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cheapest, the fastest, then the front, re-predicted with the simulator (appended
    to ``out`` one by one, so an interruption keeps those done)."""
    from ddlperf import api

    chosen: list[tuple[str, dict[str, Any]]] = []
    for label, row in [("cheapest", result.cheapest), ("fastest", result.fastest),
                       *(("pareto", r) for r in result.front if r["meets"])]:
        if row is not None and all(row is not r for _l, r in chosen):
            chosen.append((label, row))
    for label, row in chosen[:limit]:
        entry: dict[str, Any] = {"which": label, "instance": row["instance"],
                                 "servers": row["servers"], "arch": row["arch"],
                                 "ps": row["ps"], "sync": row["sync"],
                                 "analytic_throughput": row["throughput_samples_per_s"]}
        if row["kwargs"]["sync"] in ("asp", "ssp") and row["workers"] > MAX_ASYNC_RECHECK_WORKERS:
            entry["skipped"] = (
                f"{row['sync'].upper()} with {row['workers']} workers: the simulator runs each "
                "at a phase of its own, minutes at this size; check it with 'ddlperf predict "
                "--method simulate'")
            out.append(entry)
            continue
        try:
            p = api.predict(method="simulate", **row["kwargs"], **options)
        except InputError as exc:
            entry["error"] = str(exc)
            out.append(entry)
            continue
        spread = (p.percentiles or {}).get("throughput_samples_per_s", {})
        simulated = {**row, "throughput_samples_per_s": p.throughput_samples_per_s}
        entry.update({
            "simulate_throughput": p.throughput_samples_per_s,
            "simulate_p5": spread.get("p5"), "simulate_p95": spread.get("p95"),
            "difference": p.throughput_samples_per_s / row["throughput_samples_per_s"] - 1,
            "meets_simulate": target.measures(simulated)["meets"],
        })
        out.append(entry)
    return out
