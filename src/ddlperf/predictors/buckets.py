"""Gradient buckets for all-reduce: which tensors travel together (both predictors)."""

from __future__ import annotations

import numpy as np

from ddlperf.scenario import Scenario


def buckets(sizes: np.ndarray, cap: float) -> list[np.ndarray]:
    """Tensor indices (gradient order) per bucket; a bucket closes once it reaches ``cap``."""
    out, current, filled = [], [], 0.0
    for j, size in enumerate(sizes):
        current.append(j)
        filled += size
        if filled >= cap:
            out.append(np.array(current))
            current, filled = [], 0.0
    if current:
        out.append(np.array(current))
    return out


def bucket_layout(sc: Scenario) -> tuple[np.ndarray, np.ndarray]:
    """Last tensor (gradient order) and bytes of each bucket, cached per bucket size."""
    cache = sc.workload.derived_cache
    key = ("bucket_layout", sc.strategy.bucket_bytes)
    if key not in cache:
        members = buckets(sc.tensor_bytes, sc.strategy.bucket_bytes)
        cache[key] = (np.array([b[-1] for b in members]),
                      np.array([sc.tensor_bytes[b].sum() for b in members]))
    return cache[key]
