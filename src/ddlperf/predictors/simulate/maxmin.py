"""Max-min fair allocation: tolerances shared by the network's fills, and a dense numpy
water-filling kept as an independent test oracle and the vectorised baseline of
``benchmarks/bench_kernel.py``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from math import inf
from typing import Final

import numpy as np

TIE: Final = 1e-12  # links whose fair level is within this relative distance of the minimum tie
SATURATED: Final = 1e-9  # a link with less than this fraction of its capacity left is saturated


def max_min_rates(
    paths: Sequence[Iterable[int]],
    capacity: Sequence[float],
    weight: Sequence[float] | None = None,
    copies: Sequence[int] | None = None,
) -> np.ndarray:
    """Dense numpy max-min fair rates (per sub-flow) for flows given as lists of link indices.

    Same semantics as :class:`Network`; an independent implementation kept as a test oracle and
    as the vectorised baseline in the benchmark.
    """
    incidence = np.zeros((len(paths), len(capacity)))
    for i, path in enumerate(paths):
        incidence[i, list(path)] = 1.0
    total = np.asarray(capacity, dtype=float)
    if copies is not None:
        total = total * np.asarray(copies, dtype=float)
    w = np.ones(len(paths)) if weight is None else np.asarray(weight, dtype=float)
    return max_min_dense(incidence, total, w)


def max_min_dense(incidence: np.ndarray, total: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Water-filling on a flows x links 0/1 ``incidence`` matrix; ``total`` = capacity x copies."""
    rem = np.array(total, dtype=float)
    rate = np.zeros(incidence.shape[0])
    unfrozen = np.ones(incidence.shape[0], dtype=bool)
    while unfrozen.any():
        load = (weight * unfrozen) @ incidence
        used = load > 0
        level = np.full(rem.shape, inf)
        level[used] = rem[used] / load[used]
        best = level.min()
        bottleneck = level <= best * (1.0 + TIE)
        freeze = unfrozen & (incidence[:, bottleneck].sum(axis=1) > 0)
        rate[freeze] = best
        rem -= (weight * freeze * best) @ incidence
        unfrozen &= ~freeze
    return rate
