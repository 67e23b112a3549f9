"""Compute noise in the analytic model: a synchronous step waits for the slowest draw.

Why: when layer times vary from iteration to iteration (the workload's ``forward_cv`` and
``backward_cv``: a profile's measured spread), a BSP step or an all-reduce cannot finish before
the *last* worker's gradients are ready, and the expected last of N draws is later than the
mean by an order statistic (about 1.03 standard deviations for N = 4, 2.3 for N = 64). The
closed forms are deterministic, so they are run on a view whose layer times are the draws'
expected timelines. For every position k of an iteration's operations (forward layers in
order, the unattributed step, backward layers last to first) the time C_k a worker has spent
by then is a sum of lognormal operation times (the simulator's noise model); it is taken as a
shifted lognormal of the same mean, variance and third cumulant (:class:`Spread`), and the
expected maximum over the workers is integrated from their distribution functions. In
all-reduce every group runs on the expected slowest timeline (a bucket waits for every rank).
At a parameter server each worker's pushes are streams of their own, so a group of one-GPU
workers is split into rank classes on their ranks' expected timelines (the slowest on the
expected maximum): the shards' links take the early draws' gradients while the late ones
still compute. Where several groups are close, every timeline is raised by what the expected
maximum over *all* workers adds to the slowest group's own. docs/models.md#compute-noise has
the argument and the checks.

Applies to BSP parameter servers and to all-reduce (a barrier every iteration). ASP and SSP
are left alone: no worker waits for another's draw there (SSP's bound holds a worker only
when its own rate differs; small draws are absorbed by the staleness). The predicted compute
time stays each group's mean; what the view adds shows up as waiting for the slowest draw.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ddlperf.predictors.assembly import GroupTime
from ddlperf.scenario import GroupPlan, Scenario

#: points of each position's integration grid
_GRID = 2001


def noisy(sc: Scenario) -> bool:
    """Whether any layer's forward or backward time has a spread."""
    return any(layer.forward_cv > 0 or layer.backward_cv > 0 for layer in sc.workload.layers)


def barrier_with_noise(sc: Scenario) -> bool:
    """Noisy layer times under a barrier every step (BSP or all-reduce), at any worker count
    (a sweep's template has one worker; its points have more)."""
    synchronous = sc.strategy.arch == "allreduce" or sc.strategy.effective_sync == "bsp"
    return synchronous and noisy(sc)


def applies(sc: Scenario) -> bool:
    """Whether the analytic model waits for the slowest draw here (synchronous steps)."""
    return sc.worker_count > 1 and barrier_with_noise(sc)


@dataclasses.dataclass(frozen=True)
class Spread:
    """Mean, variance and third cumulant of the time a worker has spent at the end of each
    operation of an iteration (one entry per position)."""

    mean: np.ndarray
    var: np.ndarray
    k3: np.ndarray

    def shifted_lognormal(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Shift c, μ and σ of c + lognormal(μ, σ) with these three moments.

        A sum of lognormal times is skewed like its most skewed terms, not like one lognormal
        of its mean and variance (Fenton–Wilkinson, the shift-free case): a rare slow layer
        on top of steady ones is a shifted, strongly skewed distribution. The lognormal's
        skewness is (v² + 3)·v for coefficient of variation v, so v is the real root of
        v³ + 3v − γ = 0; its standard deviation is the sum's, its mean sd / v, the shift the
        rest (never negative: then the shift-free fit).
        """
        sd = np.sqrt(self.var)
        spread = sd > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            gamma = np.where(spread, self.k3 / np.where(spread, sd, 1.0) ** 3, 0.0)
            root = np.sqrt(gamma * gamma / 4 + 1)
            v = np.cbrt(gamma / 2 + root) + np.cbrt(gamma / 2 - root)
            tail_mean = np.where(spread & (v > 0), sd / np.where(v > 0, v, 1.0), self.mean)
        shift = self.mean - tail_mean
        fallback = shift < 0
        shift = np.where(fallback, 0.0, shift)
        tail_mean = np.where(fallback, self.mean, tail_mean)
        tail_mean = np.maximum(tail_mean, 1e-300)
        sigma2 = np.log1p(self.var / tail_mean**2)
        return shift, np.log(tail_mean) - sigma2 / 2, np.sqrt(sigma2)


def _positions(sc: Scenario, group: GroupPlan) -> Spread:
    """The group's :class:`Spread` over forward layers in order, the unattributed step and
    backward layers last to first (each operation a lognormal of its time and cv)."""
    layers = sc.workload.layers
    fwd_cv = np.array([layer.forward_cv for layer in layers], dtype=float)
    bwd_cv = np.array([layer.backward_cv for layer in layers], dtype=float)
    means = np.concatenate([group.forward, [group.unattributed_s], group.backward[::-1]])
    cv = np.concatenate([fwd_cv, [0.0], bwd_cv[::-1]])
    sd = means * cv
    k3 = (cv * cv + 3) * cv * sd**3  # a lognormal's skewness times sd³
    return Spread(np.cumsum(means), np.cumsum(sd * sd), np.cumsum(k3))


def expected_max(spreads: list[Spread], counts: list[int]) -> np.ndarray:
    """E[max] per position over ``counts[g]`` independent workers of each spread ``g``.

    E[M] = ∫₀^∞ (1 − P(M ≤ x)) dx for a positive M, with P(M ≤ x) = Π_g F_g(x)^count; each
    position is integrated on its own grid, up to where every group's tail is negligible
    (a position without variance is a step at its mean).
    """
    from scipy.special import log_ndtr

    fits = [sp.shifted_lognormal() for sp in spreads]
    top = np.max([np.where(sigma > 0, c + np.exp(mu + sigma * (6.0 + np.sqrt(2 * np.log(n)))),
                           sp.mean)
                  for (c, mu, sigma), sp, n in zip(fits, spreads, counts)], axis=0)
    x = top[:, None] * np.linspace(0.0, 1.0, _GRID)[None, :]
    log_below = np.zeros_like(x)
    for (c, mu, sigma), sp, n in zip(fits, spreads, counts):
        spread = sigma > 0
        tail = np.log(np.maximum(x - c[:, None], 1e-300))
        z = (tail - mu[:, None]) / np.where(spread, sigma, 1.0)[:, None]
        z = np.where(x > c[:, None], z, -np.inf)
        step = np.where(x >= sp.mean[:, None], 0.0, -np.inf)
        log_below += n * np.where(spread[:, None], log_ndtr(z), step)
    result = np.trapezoid(-np.expm1(log_below), x, axis=1)
    return np.maximum(result, np.max([sp.mean for sp in spreads], axis=0))


#: a group of more workers than this is split into this many rank classes (the slowest alone)
MAX_CLASSES = 16


def _rank_classes(n: int) -> list[tuple[int, list[int]]]:
    """(count, ranks) classes of ``n`` workers sorted by their draw, fastest first: one class
    per rank up to :data:`MAX_CLASSES`, else the slowest alone and the rest in equal runs."""
    if n <= MAX_CLASSES:
        return [(1, [r]) for r in range(n)]
    runs = np.array_split(np.arange(n - 1), MAX_CLASSES - 1)
    return [*((len(run), run.tolist()) for run in runs), (1, [n - 1])]


def _quantile_timeline(spread: Spread, ranks: list[int], n: int) -> np.ndarray:
    """The mean over ``ranks`` of the expected timeline of the r-th fastest of ``n`` workers
    (Blom's plotting positions on each position's shifted lognormal)."""
    from scipy.special import ndtri

    c, mu, sigma = spread.shifted_lognormal()
    z = ndtri((np.asarray(ranks, dtype=float) + 1 - 0.375) / (n + 0.25))
    values = c[None, :] + np.exp(mu[None, :] + sigma[None, :] * z[:, None])
    return np.where(sigma > 0, values.mean(axis=0), spread.mean)


def _splittable(sc: Scenario, group: GroupPlan) -> bool:
    """Workers of a PS whose pushes share the shards' links as streams of their own
    (one GPU per server, no racks): each worker's draw is a group of its own in the view."""
    return (sc.strategy.arch == "ps" and group.gpus == 1 and sc.racks is None
            and group.count > 1)


def _with_timeline(sc: Scenario, g: GroupPlan, cumulative: np.ndarray, **changes: object
                   ) -> GroupPlan:
    """``g`` with the operation times whose running total is ``cumulative``."""
    times = np.diff(np.concatenate([[0.0], np.maximum.accumulate(cumulative)]))
    layers = len(g.forward)
    forward = times[:layers]
    unattributed = float(times[layers])
    backward = times[layers + 1:][::-1].copy()
    # gradient j is ready when its layer's backward ends (backward runs last to first)
    ready = np.cumsum(backward[::-1])[::-1][sc.tensor_layer]
    return dataclasses.replace(
        g, forward=forward, backward=backward, unattributed_s=unattributed, ready_offset=ready,
        forward_s=float(forward.sum()), backward_s=float(backward.sum()),
        compute_s=float(forward.sum() + backward.sum() + unattributed), **changes)


def slowest_draw_view(sc: Scenario) -> tuple[Scenario, list[list[tuple[int, int]]]]:
    """``sc`` with layer times of the slowest draws, and, per group of ``sc``, the (view
    group, worker count) pairs it became.

    All-reduce (and workers that cannot be split): every group's timeline is its expected
    slowest. A PS's one-GPU workers: one view group per rank class (:func:`_rank_classes`),
    each on its ranks' expected timeline and the slowest on the expected slowest, so the
    shards' links take the early draws' pushes while the late ones still compute.
    """
    stats = [_positions(sc, g) for g in sc.groups]
    counts = [g.count for g in sc.groups]
    own = [expected_max([spread], [n]) for spread, n in zip(stats, counts)]
    overall = expected_max(stats, counts)
    gap = np.maximum(overall - np.max(np.vstack(own), axis=0), 0.0)
    groups: list[GroupPlan] = []
    parts: list[list[tuple[int, int]]] = []
    for g, spread, slowest in zip(sc.groups, stats, own):
        if not _splittable(sc, g):
            parts.append([(len(groups), g.count)])
            groups.append(_with_timeline(sc, g, slowest + gap))
            continue
        mine, offset = [], 0
        for count, ranks in _rank_classes(g.count):
            timeline = slowest if ranks == [g.count - 1] else _quantile_timeline(
                spread, ranks, g.count)
            mine.append((len(groups), count))
            groups.append(_with_timeline(sc, g, timeline + gap, first=g.first + offset,
                                         count=count, first_server=g.first_server + offset))
            offset += count
        parts.append(mine)
    return dataclasses.replace(sc, groups=tuple(groups)), parts


def merge_times(sc: Scenario, times: list[GroupTime], parts: list[list[tuple[int, int]]]
                ) -> list[GroupTime]:
    """Per group of ``sc``: its view groups' times, averaged over their workers, with the
    group's mean compute; what the slower draws added is waiting."""
    merged = []
    for g, mine in zip(sc.groups, parts):
        weights = np.array([count for _, count in mine], dtype=float) / g.count
        pick = [times[i] for i, _ in mine]
        period = float(sum(w * t.iteration_s for w, t in zip(weights, pick)))
        comm = float(sum(w * t.communication_s for w, t in zip(weights, pick)))
        intra = float(sum(w * t.intra_s for w, t in zip(weights, pick)))
        merged.append(GroupTime(period, g.compute_s, comm, period - g.compute_s - comm, intra))
    return merged
