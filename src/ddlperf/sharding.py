"""Place gradient tensors on PS shards: TensorFlow round-robin, greedy by bytes, or even slices.

Returns a (tensors × shards) matrix of bytes so every predictor treats whole-tensor placement
and slicing the same way. Imbalance between shards is a real bottleneck, so it is kept exact.
"""

from __future__ import annotations

import heapq

import numpy as np

from ddlperf.strategy import Sharding


def shard_matrix(tensor_bytes: np.ndarray, shards: int, policy: Sharding) -> np.ndarray:
    """Bytes of each tensor (rows, in variable-creation order) held by each shard (columns).

    - ``round_robin``: tensor i on shard i mod K (TensorFlow's replica_device_setter default).
    - ``greedy``: each tensor, in creation order, on the shard with the fewest bytes so far
      (TensorFlow's GreedyLoadBalancingStrategy with a byte-size load function).
    - ``even``: every tensor sliced into K equal parts (MXNet / BytePS style partitioning).
    """
    n = len(tensor_bytes)
    out = np.zeros((n, shards), dtype=float)
    if shards == 0 or n == 0:
        return out
    if policy == "round_robin":
        out[np.arange(n), np.arange(n) % shards] = tensor_bytes
    elif policy == "greedy":
        # A heap of (bytes so far, shard) in Python floats: the same sums, and the least-loaded
        # shard with the lowest index first (as argmin), without a numpy call per tensor.
        heap = [(0.0, k) for k in range(shards)]
        holder = []
        for size in np.asarray(tensor_bytes, dtype=float).tolist():
            load, k = heap[0]
            holder.append(k)
            heapq.heapreplace(heap, (load + size, k))
        out[np.arange(n), holder] = tensor_bytes
    elif policy == "even":
        out[:] = (np.asarray(tensor_bytes, dtype=float) / shards)[:, None]
    else:  # pragma: no cover - Strategy validates the policy
        raise ValueError(policy)
    return out


def imbalance(matrix: np.ndarray) -> float:
    """Largest shard over mean shard (1.0 = perfectly balanced)."""
    totals = matrix.sum(axis=0)
    mean = totals.mean() if totals.size else 0.0
    return float(totals.max() / mean) if mean > 0 else 1.0
