"""Per-operation compute noise: multiplicative lognormal factors with mean 1, seeded.

Why lognormal: compute times are positive and right-skewed (a slow kernel launch, a cache
miss, an OS hiccup), and a lognormal with mean 1 and coefficient of variation ``cv`` keeps the
profile's mean while giving the measured spread: σ² = ln(1 + cv²), μ = −σ²/2.

Every worker owns a child generator of ``SeedSequence(seed)``, so its noise does not depend on
the order in which the simulation happens to process events, and the same seed gives a
bit-identical run.
"""

from __future__ import annotations

from typing import Final

import numpy as np

#: iterations of noise drawn per generator call (a worker's generator serves nothing else)
DRAW_BLOCK: Final = 8


def lognormal_sigma(cv: np.ndarray | float) -> np.ndarray:
    """σ of the underlying normal for coefficient(s) of variation ``cv``."""
    return np.sqrt(np.log1p(np.square(np.asarray(cv, dtype=float))))


def unit_generators(seed: int, replication: int, count: int) -> list[np.random.Generator]:
    """Independent generators for ``count`` workers of replication ``replication``."""
    rep = np.random.SeedSequence(seed).spawn(replication + 1)[replication]
    return [np.random.default_rng(child) for child in rep.spawn(count)]


class OpDurations:
    """Durations of one iteration's operations: ``base`` × lognormal(``cv``) per iteration."""

    __slots__ = ("_base", "_base_list", "_block", "_mu", "_rng", "_sigma", "deterministic")

    def __init__(self, base: np.ndarray, cv: np.ndarray, rng: np.random.Generator | None) -> None:
        self._base = np.asarray(base, dtype=float)
        self._base_list: list[float] = self._base.tolist()
        sigma = lognormal_sigma(cv) * np.ones_like(self._base)
        self.deterministic = rng is None or not bool(np.any(sigma > 0))
        self._sigma = sigma
        self._mu = -0.5 * sigma * sigma
        self._rng = rng
        self._block: list[list[float]] = []  # drawn iterations not handed out yet (reversed)

    def draw(self) -> list[float]:
        """One iteration's durations (the same list every time when there is no noise).

        Drawn ``DRAW_BLOCK`` iterations at a time: one generator call of shape (k, n) gives
        exactly the numbers of k calls of shape n, so the run is the same, at fewer calls.
        """
        if self.deterministic:
            return self._base_list
        if not self._block:
            z = self._rng.standard_normal((DRAW_BLOCK, *self._base.shape))  # type: ignore[union-attr]
            self._block = (self._base * np.exp(self._mu + self._sigma * z)).tolist()[::-1]
        return self._block.pop()
