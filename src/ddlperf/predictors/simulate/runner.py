"""``predict_simulate``: check the options, run the replications, write the trace, assemble.

Options (CLI flag in brackets): ``iterations`` [--iterations] measured iterations (default 20),
``warmup`` [--warmup] iterations dropped first (3), ``seed`` [--seed] (0), ``replications``
[--replications] independent runs (1), ``jitter`` [--jitter] per-operation coefficient of
variation (default: the workload's per-layer cv), ``trace`` [--trace] Chrome trace path.

Without noise every replication is the same run, so it is simulated once (exactly equal
results, stated in the notes). With noise, replications are independent runs (each has its
own seeded generators), so they run in parallel processes (``jobs``, default: one per core;
the results do not depend on it).
"""

from __future__ import annotations

import functools
import gc
import math
import multiprocessing
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from numbers import Integral, Real
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ddlperf.errors import InputError
from ddlperf.io import check_writable
from ddlperf.prediction import Prediction
from ddlperf.predictors.analytic_ps_async import server_pair
from ddlperf.predictors.simulate.results import assemble_simulated
from ddlperf.predictors.simulate.run import RunResult, simulate_once
from ddlperf.predictors.simulate.ssp import (
    PERIODS_AGREE,
    UnitRun,
    steady_warmup,
    warmup_limit,
)
from ddlperf.predictors.simulate.trace import write_trace
from ddlperf.predictors.simulate.tracks import TrackLog
from ddlperf.predictors.simulate.units import make_units
from ddlperf.predictors.simulate.worker import has_jitter
from ddlperf.scenario import Scenario

DEFAULTS: dict[str, Any] = {"iterations": 20, "warmup": 3, "seed": 0, "replications": 1}
# SSP without noise keeps whatever arrangement its common start gives: identical workers in
# lockstep, or classes in a balance the bound never breaks (see _ssp_steady_warmup); only noise
# tells whether a cluster stays there (a balance never does; lockstep on some clusters, not on
# others: docs/models.md). So SSP is simulated with this compute jitter where the workload has
# none: 1%, less than the iteration-time spread of any measured cluster (the emulated one's
# steps vary by more), and mean-preserving (:func:`predict_simulate`). ASP on one server of two
# GPUs is simulated the same way, for the same reason
# (:func:`~ddlperf.predictors.analytic_ps_async.server_pair`).
SSP_LEAST_CV = 0.01
# draws of that jitter tried while one keeps the balance, where the bound must line the
# workers up (_escape_balance)
BALANCE_ESCAPE_SEEDS = 4
# ASP with identical workers (but one server's two GPUs): three or more move their offsets
# every cycle, measured pairs of hosts part in some runs, so a run that starts them together
# shows a transient of real runs (noise spreads them within 10-15 iterations). Each
# replication starts every worker at an independent random phase; without noise the mean over
# this many phase draws is reported.
PHASE_DRAWS = 8
# ... but draws stop once their mean is this sure (standard error over mean): with many
# workers every draw gives nearly the same period (64 resnet50 workers: within 0.4%)
PHASE_SE = 0.005
_PHASE_STREAM = 0x5EED  # keeps the phase draws apart from the compute jitter's streams


def _integer(value: Any, flag: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise InputError(flag, f"must be an integer, got {value!r}")
    if value < minimum:
        raise InputError(flag, f"must be ≥ {minimum}, got {value}")
    return int(value)


def _jitter(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise InputError("--jitter", f"must be a finite number ≥ 0, got {value!r}")
    if value < 0:
        raise InputError("--jitter", f"a coefficient of variation must be ≥ 0, got {value}",
                         "use 0 for no noise, e.g. 0.05 for 5%")
    return float(value)


def check_options(
    iterations: Any = None, warmup: Any = None, seed: Any = None, replications: Any = None,
    jitter: Any = None, trace: Any = None, jobs: Any = None,
) -> dict[str, Any]:
    """Validated options with defaults filled in; raises a one-line InputError naming the flag."""
    opts = {
        "iterations": _integer(DEFAULTS["iterations"] if iterations is None else iterations,
                               "--iterations", 1),
        "warmup": _integer(DEFAULTS["warmup"] if warmup is None else warmup, "--warmup", 0),
        "seed": _integer(DEFAULTS["seed"] if seed is None else seed, "--seed", 0),
        "replications": _integer(DEFAULTS["replications"] if replications is None
                                 else replications, "--replications", 1),
        "jitter": _jitter(jitter),
        "trace": None if trace is None else check_writable(trace, "--trace"),
        "jobs": None if jobs is None else _integer(jobs, "--jobs", 1),
    }
    return opts


_F = TypeVar("_F", bound=Callable[..., Any])


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Leave the objects that exist now (modules, the workload, the scenario) out of the
    cyclic GC's collections until the block ends (:func:`gc.freeze`, then :func:`gc.unfreeze`).

    Why: runs allocate at a high rate, so the oldest generation is collected now and then, and
    each such collection scanned every object of the process (ten replications: four of them,
    ~0.1 s each, ~4% of the work); in a forked replication process the scan also copied every
    page it touched. Nothing lives longer: frozen objects are still freed by reference
    counting, and cycles among them at the first collection after the block. Left alone
    where the caller has frozen objects itself.
    """
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _with_frozen_heap(fn: _F) -> _F:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with frozen_heap():
            return fn(*args, **kwargs)
    return wrapper  # type: ignore[return-value]


@_with_frozen_heap
def predict_simulate(
    sc: Scenario, *, iterations: int | None = None, warmup: int | None = None,
    seed: int | None = None, replications: int | None = None, jitter: float | None = None,
    trace: str | Path | None = None, ring_steps: str = "coalesced",
    timeline: TrackLog | None = None, jobs: int | None = None,
) -> Prediction:
    """Fine-grained (discrete-event) prediction of a resolved scenario.

    ``timeline``: a :class:`TrackLog` to fill with the first replication's operations (what
    ``trace`` writes to a file), for callers that read the timeline themselves.
    """
    opts = check_options(iterations, warmup, seed, replications, jitter, trace, jobs)
    iters, warm, reps, cv = (opts["iterations"], opts["warmup"], opts["replications"],
                             opts["jitter"])
    asynchronous = sc.strategy.arch == "ps" and sc.strategy.effective_sync != "bsp"
    ssp = asynchronous and sc.strategy.sync == "ssp"
    together = asynchronous and not ssp and server_pair(sc)
    least_noise = ((ssp or together) and cv is None  # not with --jitter 0
                   and not has_jitter(sc, None))
    if least_noise:
        cv = SSP_LEAST_CV
    noisy = has_jitter(sc, cv)
    # SSP with noise starts every worker together, as its steady-state search does (the
    # search's run is replication 0, and a trace must show that run); so does ASP on one
    # server of two GPUs
    phased = (asynchronous and any(g.count > 1 for g in sc.groups)
              and ((sc.strategy.effective_sync == "asp" and not (together and noisy))
                   or (not noisy and _ssp_never_held(sc))))
    units = make_units(sc, individual=noisy or asynchronous)
    log = timeline if timeline is not None else (
        TrackLog() if opts["trace"] is not None else None)
    steady_note, searched, jitter_note = None, None, None
    seed = opts["seed"]
    if least_noise and together:
        jitter_note = (
            f"simulate: ASP with {SSP_LEAST_CV:g} compute jitter (the workload has none), both "
            "GPUs starting together: one server's two GPUs keep whatever offset they start "
            "with (two flows on their NIC, fairly shared), a job starts them together, and only "
            "noise tells whether they stay in lockstep (--jitter 0: without, at random phases)")
    elif least_noise:
        jitter_note = (
            f"simulate: SSP with {SSP_LEAST_CV:g} compute jitter (the workload has none): "
            "without noise a run keeps the arrangement its common start gives (identical "
            "workers in lockstep, or faster workers at the slowest's rate yet never held), and "
            "only noise tells whether a real cluster stays there (--jitter 0: without)")
        warm, steady_note, searched, seed = _escape_balance(
            sc, units, warm, iters, cv, seed, ring_steps)
        if seed != opts["seed"]:
            jitter_note += (f"; the jitter of seed {opts['seed']} kept such a balance, where "
                            f"the bound must line the workers up, so the jitter of seed {seed} "
                            "was used")
    elif ssp:
        warm, steady_note, searched, _ = _ssp_steady_warmup(
            sc, units, warm, iters, cv, seed, noisy, ring_steps)
    job = _Job(sc, units, warm, iters, cv, seed, noisy, ring_steps,
               phase_ranges(sc, units) if phased else None)
    if phased and not noisy:
        runs = _phase_draws(job, reps, log, opts["jobs"])
    else:
        # the search's last run is replication 0 with this warm-up (unless it must fill a trace)
        runs = _replicate(job, reps if noisy else 1, log, opts["jobs"],
                          searched if log is None else None)
    runs_wanted = len(runs)

    notes = [
        f"simulate: iteration time = mean step period over {iters} iterations after {warm} "
        f"warm-up; {reps} replication(s), seed {opts['seed']}",
    ]
    if noisy:
        source = f"cv {cv:g} on every operation" if cv is not None else "the workload's cv"
        notes.append(f"simulate: compute jitter lognormal ({source}); p5/p95 over all "
                     "measured iterations of all replications")
    elif phased:
        kind = "ASP" if sc.strategy.effective_sync == "asp" else "SSP (never held: ASP)"
        who = (f"identical {kind} workers" if len(sc.groups) == 1
               else f"{kind} workers of one group")
        pair = (" (the two remote workers of the host holding every shard together)"
                if job.pair else "")
        notes.append(f"simulate: {who} keep their phase offsets, so each of "
                     f"{runs_wanted} runs starts every worker{pair} at a random phase (seed "
                     f"{opts['seed']}; runs are added, up to {max(reps, PHASE_DRAWS)}, until "
                     f"the mean's standard error is below {PHASE_SE:.1%}); the mean is "
                     "reported, p5/p95 span the runs")
    elif reps > 1:
        notes.append("simulate: deterministic (no jitter), so the replications are one run")
    if any(u.count > 1 for u in units):
        biggest = max(u.count for u in units)
        notes.append(f"simulate: identical workers simulated together (up to {biggest} per "
                     "unit, weighted flows; exact because they stay in lockstep)")
    if jitter_note:
        notes.append(jitter_note)
    if steady_note:
        notes.append(steady_note)
    if asynchronous:
        notes.append("simulate: ASP/SSP updates the PS per arriving gradient; each worker "
                     "pulls the tensors it pushed once they are applied")

    options = {"iterations": iters, "warmup": warm, "seed": seed,
               "replications": len(runs) if phased else reps,
               "jitter": "workload" if cv is None else cv}
    prediction = assemble_simulated(sc, runs, options, notes)
    if opts["trace"] is not None and log is not None:
        meta = {"ddlperf": {"method": "simulate", **options,
                            "iteration_time_s": prediction.iteration_time_s}}
        write_trace(opts["trace"], log, meta)
    return prediction


def _escape_balance(sc: Scenario, units: list, warmup: int, iterations: int, cv: float,
                    seed: int, ring_steps: str) -> tuple[int, str | None, RunResult, int]:
    """The steady-state search with jitter from ``seed``; where that draw of the jitter ends
    in a balance and the analytic model's steady state is BSP's schedule (one distinct
    slowest worker, :func:`~ddlperf.predictors.analytic.ssp_lines_up`), again from the next
    seeds (at most ``BALANCE_ESCAPE_SEEDS``).

    Why: ps-ssp-hetero, measured at 1.39 s in every run, was predicted at 1.00 s (the
    balance) with one session's PS update cost: seed 0's 1% jitter held the balance for 820
    iterations, seed 1's left it after 87 (1.38 s). The balance has no restoring force, so
    another draw of the same noise is as likely a run as the first. Only where the bound
    must line the workers up: where the slowest are apart (identical workers, colocated
    shards on some of them: fresh9-ssp-coloc-3s) the runs do stay unheld (0.71–0.75 s, the
    lined-up schedule 1.34 s), and trying seeds until one lines them up took that row from
    −4.9% to +78.6%. Returns the search's warm-up, note and run, and the seed used."""
    from ddlperf.predictors.analytic import ssp_lines_up

    tries = BALANCE_ESCAPE_SEEDS if ssp_lines_up(sc) else 1
    for attempt in range(tries):
        tried = seed + attempt
        warm, note, run, balanced = _ssp_steady_warmup(
            sc, units, warmup, iterations, cv, tried, True, ring_steps)
        if not balanced:
            break
    return warm, note, run, tried


def _ssp_steady_warmup(
    sc: Scenario, units: list, warmup: int, iterations: int, cv: float | None, seed: int,
    noisy: bool, ring_steps: str,
) -> tuple[int, str | None, RunResult, bool]:
    """SSP is reported in steady state (every worker at the slowest's rate, the faster ones
    held by the bound): the warm-up is extended until it is (:func:`.ssp.steady_warmup`).
    Returns the warm-up, a note, the run (replication 0) with that warm-up, and whether the
    search ended in a *balance*: workers of different classes at one rate (within
    ``PERIODS_AGREE``) yet a faster one never held. Without noise that can last: e.g. three
    workers, one 2.5× slower, sharing one saturated PS link equally all run at its rate
    (ps-ssp-hetero of the dev matrix, 1.00 s for 900 iterations), while the measured cluster
    — whose noise lets the faster ones drift ahead until the bound holds them — and the same
    simulation with 1% jitter run at 1.38 s. A small change of inputs (the PS update cost)
    decides which of the two the noise-free run shows.

    With jitter, "at the slowest's rate" allows for the noise of each worker's mean period
    (the standard error of its compute per iteration in the window, :func:`_standard_error`,
    :func:`.ssp.periods_agree`)."""
    latest: dict[int, RunResult] = {}  # the search's last run (by its warm-up)
    lockstep = make_units(sc, individual=False)  # the classes of identical workers
    classes = [next(c.index for c in lockstep if c.first <= u.first < c.first + c.count)
               for u in units]

    def run(warm: int) -> list[UnitRun]:
        latest.clear()
        result = latest[warm] = simulate_once(sc, units, warm, iterations, cv, seed, 0,
                                              noisy, None, ring_steps)
        return [UnitRun(float(m.period.mean()), bool(m.wait.max(initial=0.0) > 0), c,
                        _standard_error(m.compute) if noisy else 0.0)
                for c, m in zip(classes, result.measures)]

    warm, steady, gap = steady_warmup(run, warmup, sc.strategy.staleness or 0,
                                      warmup_limit(warmup, iterations))
    beyond = " (more than their jitter explains)" if noisy else ""
    if not steady:
        balanced = gap <= PERIODS_AGREE and len(set(classes)) > 1
        return warm, (f"simulate: SSP not in steady state after {warm} warm-up iterations "
                      f"(the workers' periods differ by {100 * gap:.1f}%{beyond} or a faster "
                      "one is not yet held by the bound; more --iterations allow a longer "
                      "warm-up)"), latest[warm], balanced
    if warm > warmup:
        return warm, (f"simulate: SSP steady state: warm-up extended from {warmup} to {warm} "
                      "iterations, until every worker runs at the slowest's rate"
                      + (" (within the noise of its mean period)" if noisy else "")
                      ), latest[warm], False
    return warm, None, latest[warm], False


def _standard_error(compute: np.ndarray) -> float:
    """Standard error that the jitter gives a worker's mean period over the window: that of
    its own compute per iteration, which holds only the noise (its periods also hold the
    catch-up itself, a worker going from free-running to held, and would hide it)."""
    n = len(compute)
    return float(compute.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0


def _ssp_never_held(sc: Scenario) -> bool:
    """SSP where every worker runs at one ASP rate, faster than BSP: the bound never holds
    anyone, so SSP is ASP there, phases included where nothing is noisy (``--jitter 0``:
    with noise every worker starts together, :data:`SSP_LEAST_CV`); the analytic model's own test
    (:func:`~ddlperf.predictors.analytic.ssp_runs_as_asp`), so both predictors agree on
    which runs it is."""
    from ddlperf.predictors.analytic import ssp_runs_as_asp

    return ssp_runs_as_asp(sc)


def phase_ranges(sc: Scenario, units: list) -> list[float]:
    """Each unit's phase range: its contention-free cycle alone with the shards (a start
    drawn uniformly from it is a uniform phase of that worker's cycle)."""
    from ddlperf.predictors.analytic_ps_async import alone_cycle

    cycles = {id(g): alone_cycle(sc, g) for g in sc.groups}
    return [cycles[id(u.group)] for u in units]


def sharing_pair(sc: Scenario, units: list) -> set[int]:
    """The two remote workers of a host that holds every shard, if any (their unit indices).

    The argument of :func:`~ddlperf.predictors.analytic_ps_async.server_pair` for a pair inside
    a larger job: the two send through one link, the shard host's NIC, and keep the offset they
    start with. Measured, that common start mostly lasts: the two remote workers of a one-shard
    host stayed within 20 ms of each other for all 60 iterations in six of eight runs of
    ps-asp-colocated-3w and fresh4-asp-coloc-3w-100m (the thirteenth session's full run parted
    both, docs/models.md), so such a pair starts together. With three or more on one link the
    offsets change every cycle ((d, d) → (2d, d/2)) and measured runs wander, so everyone else
    starts at a random phase."""
    if any(u.count != 1 or u.group.gpus != 1 for u in units) or not sc.shards:
        return set()
    hosts = {s.host for s in sc.shards}
    if len(hosts) != 1 or None in hosts:
        return set()
    crossing = [u.index for u in units if u.hosts is None]
    return set(crossing) if len(crossing) == 2 else set()


class _Job:
    """What every replication of one prediction shares (handed to forked processes as is)."""

    def __init__(self, sc: Scenario, units: list, warmup: int, iterations: int,
                 jitter: float | None, seed: int, noisy: bool, ring_steps: str,
                 phase_ranges: list[float] | None = None) -> None:
        self.sc, self.units, self.warmup, self.iterations = sc, units, warmup, iterations
        self.jitter, self.seed, self.noisy, self.ring_steps = jitter, seed, noisy, ring_steps
        self.phase_ranges = phase_ranges
        self.pair = sharing_pair(sc, units) if phase_ranges is not None else set()

    def starts(self, replication: int) -> list[float] | None:
        """Replication ``replication``'s start times (random phases; None: all at once). Every
        worker draws its own phase, the GPUs of one server too when the job has more than one
        server: in the measured runs of 2 servers × 2 GPUs a server's GPUs that parted (after
        15 and 30 iterations) never came back together, and ran at 0.67-0.71 s where the ones
        still together ran at 0.84 s (docs/models.md). Only the two remote workers of a host
        that holds every shard start together (:func:`sharing_pair`); a job of one server's
        two GPUs is not phased at all (``analytic_ps_async.server_pair``)."""
        if self.phase_ranges is None:
            return None
        rng = np.random.default_rng([self.seed, replication, _PHASE_STREAM])
        keys = [("pair", 0) if u.index in self.pair else ("worker", u.first)
                for u in self.units]
        phase: dict[tuple[str, int], float] = {}
        for key in keys:
            if key not in phase:
                phase[key] = float(rng.uniform(0.0, 1.0))
        return [phase[key] * cycle for key, cycle in zip(keys, self.phase_ranges)]

    def run(self, replication: int, log: TrackLog | None = None) -> RunResult:
        return simulate_once(self.sc, self.units, self.warmup, self.iterations, self.jitter,
                             self.seed, replication, self.noisy, log, self.ring_steps,
                             self.starts(replication))


def _phase_draws(job: _Job, reps: int, log: TrackLog | None, jobs: int | None
                 ) -> list[RunResult]:
    """Noise-free ASP with identical workers: phase draws in rounds of two, until their mean's
    standard error is below ``PHASE_SE`` or ``max(reps, PHASE_DRAWS)`` were made (``reps``
    exactly when the user asked for more). The rounds do not depend on the cores or
    ``jobs``, so neither does the result."""
    most = max(reps, PHASE_DRAWS)
    step = 2
    runs: list[RunResult] = []
    while len(runs) < most:
        runs += _replicate(job, min(len(runs) + step, most), log, jobs, start=len(runs))
        if reps <= len(runs) and _phase_mean_sure(runs):
            break
    return runs


def _phase_mean_sure(runs: list[RunResult]) -> bool:
    """The mean period over the runs is known to ``PHASE_SE`` (relative standard error)."""
    means = np.array([np.mean([m.period.mean() for m in r.measures]) for r in runs])
    if len(means) < 2:
        return False
    mean = float(means.mean())
    return mean > 0 and _standard_error(means) <= PHASE_SE * mean


_SHARED: _Job | None = None  # the job a replication process inherits when it forks


def _replica(replication: int) -> tuple[list, list[tuple[str, float]], int]:
    """One replication in a worker process; the units go back as the parent's own."""
    result = _SHARED.run(replication)  # type: ignore[union-attr]
    return result.measures, result.utilization, result.events


def _replicate(job: _Job, reps: int, log: TrackLog | None, jobs: int | None,
               first: RunResult | None = None, start: int = 0) -> list[RunResult]:
    """Replications start … reps−1 in order; all but the first in forked processes when there
    are cores.

    Replication ``start`` runs here (replication 0 fills the trace, unless ``first`` is that
    run already), and so does every ``jobs``-th one after it; the others run in up to
    ``jobs − 1`` processes. Only where ``fork``
    exists (the job is inherited, not pickled) and we are not a pool's worker ourselves (e.g.
    inside a parallel sweep). The processes are a :class:`~ddlperf.forked_pool.ForkedPool`:
    a Ctrl-C stops them at once (``multiprocessing.Pool`` can hang in ``terminate`` on a
    worker that is writing a result).
    """
    global _SHARED
    cores = jobs if jobs is not None else (os.cpu_count() or 1)
    helpers = min(cores - 1, reps - start - 1)
    if (helpers < 1 or "fork" not in multiprocessing.get_all_start_methods()
            or multiprocessing.current_process().daemon):
        return [first if r == start and first is not None
                else job.run(r, log if r == 0 else None) for r in range(start, reps)]
    from ddlperf.forked_pool import ForkedPool

    _SHARED = job  # set before the workers fork
    # every helper task at once: this process is busy with its own share and hands out
    # nothing while it runs
    pool = ForkedPool(helpers, per_worker=reps)
    # this process takes every (helpers + 1)-th replication, the helpers the rest: with one
    # helper and 10 replications each runs 5 (the helper used to run 9 while this one waited)
    order = list(range(start, reps))
    here = set(order[::helpers + 1])
    try:
        tickets = {r: pool.submit(_replica, (r,)) for r in order if r not in here}
        runs: dict[int, RunResult] = {}
        for r in sorted(here):
            runs[r] = (first if r == start and first is not None
                       else job.run(r, log if r == 0 else None))
            pool.drain()  # a helper waits on sending its result until it is read
        for r, ticket in tickets.items():
            m, u, e = pool.result(ticket)
            runs[r] = RunResult(job.units, m, u, e)
    finally:
        pool.close()
        _SHARED = None
    return [runs[r] for r in order]
