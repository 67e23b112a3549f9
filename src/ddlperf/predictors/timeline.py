"""Closed-form building blocks shared by the coarse-grained models.

The key one is the FIFO single server: items released at ``ready`` times, each needing
``work`` seconds, processed in order. It models a link that sends gradients as backward
produces them (WFBP overlap) or a forward pass that waits for pulled parameters, in O(n)
without simulation: finish_j = max(ready_j, finish_{j-1}) + work_j.
"""

from __future__ import annotations

import numpy as np

from ddlperf.scenario import GroupPlan, Scenario


def serial_finish(ready: np.ndarray, work: np.ndarray) -> np.ndarray:
    """Finish times of a FIFO server; closed form max_{i≤j}(ready_i + Σ_{i..j} work).

    Works along axis 0, so a (items × servers) matrix is one FIFO per column.
    """
    total = np.cumsum(work, axis=0)
    return total + np.maximum.accumulate(ready - (total - work), axis=0)


def backward_ready(
    sc: Scenario, group: GroupPlan, backward_start: float
) -> tuple[np.ndarray, float]:
    """Ready time of each gradient (gradient order) and the end of backward.

    Backward runs the layers last to first; a tensor's gradient is ready when its layer's
    backward ends (``GroupPlan.ready_offset`` holds those offsets).
    """
    return group.ready_offset + backward_start, backward_start + group.backward_s


def forward_order(sc: Scenario) -> np.ndarray:
    """Tensor indices sorted by owning layer (parameters needed first are pulled first)."""
    cache = sc.workload.derived_cache
    if "forward_order" not in cache:
        cache["forward_order"] = np.argsort(sc.tensor_layer, kind="stable")
    return cache["forward_order"]
