"""How sure a measured mean iteration time is: a 95% interval from batch means.

A measurement's iteration time is the mean over workers of each worker's median step period.
Consecutive steps are not independent (under ASP an arrangement of the workers' phases
persists for several iterations, and a run passes through a few of them), so the spread of
single steps (p5–p95) says little about how far another run's mean could fall. The batch-means
method does: the steady iterations of every worker are cut into ``BATCHES`` consecutive
blocks, the same statistic is taken per block (mean over workers of the block medians), and
the Student-t interval of the blocks' mean is the interval of the run's mean. Blocks of 9
iterations (a 45-iteration ASP run) span several phase arrangements; the interval is only as
good as that, and it is wide where the arrangement matters (the validation page shows it next
to each measurement).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable
from typing import Any

from ddlperf.measure.records import steady_iterations, step_statistic

BATCHES = 5
# Student t, 0.975 quantile, BATCHES - 1 = 4 degrees of freedom (two-sided 95%)
T_975_4 = 2.7764451051977987
MIN_PER_BATCH = 2  # iterations per worker and block, at least


def mean_interval(steady: dict[str, list[dict[str, Any]]],
                  center: Callable[[Iterable[float]], float] = statistics.median,
                  ) -> dict[str, Any] | None:
    """``{"half_width_s", "batches", "batch_s"}``: the 95% interval of the measured mean
    iteration time (± ``half_width_s``) from ``BATCHES`` consecutive blocks of each worker's
    steady iterations, each block summarized by ``center`` as the run is (the median, or the
    mean where compute is random: :func:`ddlperf.measure.records.step_statistic`); None when
    a worker has fewer than ``MIN_PER_BATCH`` per block."""
    if not steady or min(len(its) for its in steady.values()) < BATCHES * MIN_PER_BATCH:
        return None
    blocks: list[float] = []
    for b in range(BATCHES):
        medians = []
        for its in steady.values():
            size = len(its) // BATCHES
            block = its[b * size:(b + 1) * size]
            medians.append(center(float(r["duration_s"]) for r in block))
        blocks.append(statistics.fmean(medians))
    half = T_975_4 * statistics.stdev(blocks) / math.sqrt(BATCHES)
    return {"half_width_s": half, "batches": BATCHES, "batch_s": blocks}


def interval_from_records(records: Iterable[dict[str, Any]], warmup: int,
                          sync: str | None, random_compute: bool = False
                          ) -> dict[str, Any] | None:
    """:func:`mean_interval` of a run's records, over the same steady iterations the
    measurement's mean is taken over (SSP: after the catch-up), with the same statistic."""
    steady, _notes = steady_iterations(list(records), warmup, sync)
    return mean_interval(steady, step_statistic(random_compute))
