"""When a BSP pull may start without overlap: once the shards holding the tensor are done.

A worker that does not overlap pushes everything after backward and pulls everything before
forward. A shard answers those pulls once *its own* updates of the iteration are applied, as
a parameter server answering pulls per key does (and the emulated trainer's shards do), not
once every shard's are: holding every pull until then is a step barrier (``step_barrier``).
Where shards finish apart (unequal shards, a colocated host's instant local pushes) the early
shards' pulls overlap the late shards' pushes. A tensor split over several shards (even
sharding) is released once every shard holding a part of it is done. The simulator
(``simulate/ps.py``) and every analytic BSP model (dedicated, colocated, batched) use this.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def shard_release(shard_rows: Sequence[np.ndarray], holds: np.ndarray,
                  updates: np.ndarray) -> np.ndarray:
    """Each tensor's pull release: the latest, over the shards holding it, of the shard's last
    update. ``shard_rows``: the tensors each shard holds; ``holds``: (tensors, shards) bool;
    ``updates``: each tensor's update finish, (tensors,) or (tensors, points)."""
    extra = updates.shape[1:]
    done = np.stack([updates[rows].max(axis=0) if len(rows) else np.full(extra, -np.inf)
                     for rows in shard_rows])  # (shards, …)
    mask = holds.reshape(holds.shape + (1,) * len(extra))
    return np.where(mask, done[None], -np.inf).max(axis=1)
