"""Random layer times for emulated device time: the workload's per-layer spread, for real.

Why: a synchronous step waits for the slowest worker, so compute that varies from iteration
to iteration makes a cluster slower than its mean compute says (the expected maximum of N
draws), while an asynchronous one does not wait. The predictors model that spread (the
workload's ``forward_cv``/``backward_cv``); emulated ground truth with fixed waits could never
check it. Each layer's forward and backward wait is the workload's seconds times a lognormal
factor with mean 1 and the layer's coefficient of variation (the simulator's noise model,
``ddlperf.predictors.simulate.jitter``), drawn independently per worker, layer and iteration
from a generator seeded by the spec's seed and the worker's index, so a rerun draws the same
sequence.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_STREAM = 0x6E015E  # keeps these draws apart from any other seeded stream of the trainers


class LayerNoise:
    """Per-iteration forward and backward layer times of one worker."""

    def __init__(self, forward: list[float], backward: list[float], forward_cv: list[float],
                 backward_cv: list[float], seed: int, worker_index: int) -> None:
        self.base = np.array([*forward, *backward], dtype=float)
        cv = np.array([*forward_cv, *backward_cv], dtype=float)
        self.sigma = np.sqrt(np.log1p(cv * cv))
        self.mu = -0.5 * self.sigma * self.sigma
        self.layers = len(forward)
        self.noisy = bool(np.any(self.sigma > 0))
        self.rng = np.random.default_rng([int(seed), int(worker_index), _STREAM])

    def draw(self) -> tuple[list[float], list[float]]:
        """One iteration's forward and backward seconds per layer (fixed when cv is 0)."""
        if not self.noisy:
            times = self.base
        else:
            times = self.base * np.exp(self.mu + self.sigma * self.rng.standard_normal(
                self.base.shape))
        values = times.tolist()
        return values[:self.layers], values[self.layers:]


def layer_noise(spec: dict[str, Any], worker: dict[str, Any]) -> LayerNoise:
    """The worker's noise from its spec entry (a spec without cv lists has none)."""
    forward = [float(x) for x in worker["forward"]]
    backward = [float(x) for x in worker["backward"]]
    zeros = [0.0] * len(forward)
    return LayerNoise(forward, backward,
                      [float(x) for x in worker.get("forward_cv", zeros)],
                      [float(x) for x in worker.get("backward_cv", zeros)],
                      int(spec.get("seed", 0)), int(worker["index"]))
