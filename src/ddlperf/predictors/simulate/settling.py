"""When a simulated window is past its transient, so that what is reported is the settled run.

Some simulated arrangements wander for a long time before they lock into one, while measured
runs get there within a few iterations (docs/models.md, *Settling*):

- fresh14-acc2-asp-3w-slow (one of three workers at half speed, one 100 Mbit shard) wanders
  for 15 to 230 simulated iterations, its periods jumping by up to 40% from one iteration to
  the next. Then every phase drawn locks at 2.008 s, the shard link's bound. The measured run
  was there by its seventh iteration (2.018 s), where a 20-iteration window of the wander said
  2.15 s.
- fresh10-asp-coloc-3w-2s (identical workers, colocated shards) locks at 0.2175 s after 60 to
  590 iterations. Measured: 0.217 s from its fourth iteration; the wander said 0.246 s.
- fresh5-ssp-identical-4w (SSP with 1% jitter) settles at 0.670–0.672 s for every seed.
  Measured: 0.675 s; 20 iterations said 0.72–0.78 s.

So a noise-free ASP phase draw (``runner._Job.run``) and SSP's steady-state search
(``runner._ssp_steady_warmup``) extend their warm-up until :func:`settled`.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from ddlperf.predictors.simulate.run import RunResult
from ddlperf.predictors.simulate.ssp import NOISE_LEVEL, PERIODS_AGREE, warmup_limit

# the search may grow a warm-up to SSP's limit or to this many iterations over all the run's
# workers, whichever is more: three workers locked after 16 to 936 iterations from eight
# phases (the tests' copy of fresh14's cluster); a draw of 64 resnet50 workers costs about
# 0.65 ms per worker-iteration here
SETTLE_WORKER_ITERATIONS = 6000


def settle_limit(warmup: int, iterations: int, workers: int) -> int:
    """The longest warm-up a run may grow to while it settles."""
    return max(warmup_limit(warmup, iterations), SETTLE_WORKER_ITERATIONS // max(workers, 1))


def next_warmup(warmup: int, iterations: int, limit: int) -> int:
    """The next warm-up tried: doubled plus the window, at most ``limit``."""
    return min(limit, 2 * warmup + iterations)


def settled(result: RunResult, noisy: bool = False) -> bool:
    """The run's window is past its transient: for each class of workers (one group), the
    class's mean period over the window's first half is within ``PERIODS_AGREE`` of that over
    its second half.

    Per class, not per worker: the class mean is what is reported, and one of 64 identical
    resnet50 workers drifting by 0.6% made a per-worker test grow a 2.765 s prediction's
    warm-up sevenfold for 0.1%. Not the whole job's mean either: the two fast workers of
    fresh14's cluster alternate (1.1 s, 2.3 s, …), which cancels in the job's mean and let
    the wander pass as settled. With jitter, the halves may also differ by what the noise of
    the class's compute explains (z two-sided at ``NOISE_LEVEL``, as :func:`.ssp.periods_agree`).
    A window too short to halve (under four iterations) counts as settled."""
    half = min(len(m.period) for m in result.measures) // 2
    if half < 2:
        return True
    classes: dict[int, list[tuple[float, float, float]]] = {}
    for unit, m in zip(result.units, result.measures):
        first, second = float(m.period[:half].mean()), float(m.period[half:2 * half].mean())
        variance = (_mean_variance(m.compute[:half]) + _mean_variance(m.compute[half:2 * half])
                    if noisy else 0.0)
        classes.setdefault(id(unit.group), []).append((first, second, variance))
    z = NormalDist().inv_cdf(1.0 - NOISE_LEVEL / (2 * len(classes)))
    for members in classes.values():
        first = float(np.mean([m[0] for m in members]))
        second = float(np.mean([m[1] for m in members]))
        noise = z * math.sqrt(sum(m[2] for m in members)) / len(members)
        if abs(first - second) > PERIODS_AGREE * max(first, second) + noise:
            return False
    return True


def _mean_variance(compute: np.ndarray) -> float:
    """Variance of the mean of ``compute`` that its noise alone gives."""
    n = len(compute)
    return float(compute.var(ddof=1) / n) if n > 1 else 0.0


def settling_notes(runs: list[RunResult], warmup: int, limit: int) -> list[str]:
    """What the search did to the phase draws (nothing to say where none grew)."""
    grown = [r.warmup for r in runs if r.warmup is not None and r.warmup > warmup]
    if not grown:
        return []
    unsettled = sum(not settled(r) for r in runs)
    note = (f"simulate: {len(grown)} of {len(runs)} phase draws had not settled after {warmup} "
            f"warm-up iterations (a class of workers' mean period over the two halves of the "
            f"window differed by more than {PERIODS_AGREE:.1%}); their warm-up doubled, up to "
            f"{max(grown)} iterations, as measured runs settle in a few iterations where the "
            "simulated ones wander for longer (docs/models.md, Settling)")
    if unsettled:
        note += (f"; {unsettled} had not settled at the limit of {limit} (more --iterations "
                 "allow a longer warm-up)")
    return [note]
