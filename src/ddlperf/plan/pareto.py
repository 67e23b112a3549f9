"""The cost–time Pareto front, kept incrementally (no candidate list in memory).

A point is on the front when no other point costs no more and is at least as fast, one of
the two strictly. The front is held sorted by cost, with throughput strictly rising.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import Any


class Front:
    def __init__(self) -> None:
        self._costs: list[float] = []
        self._speeds: list[float] = []
        self._rows: list[dict[str, Any]] = []

    def add(self, cost: float, speed: float, row: Callable[[], dict[str, Any]]) -> bool:
        """Add a point if nothing dominates it (``row`` is called only then)."""
        i = bisect.bisect_right(self._costs, cost)
        # the point before ``i`` is the fastest costing ≤ cost (speeds rise with cost)
        if i > 0 and self._speeds[i - 1] >= speed:
            return False
        j = i
        while j < len(self._costs) and self._speeds[j] <= speed:
            j += 1  # costs at least as much and is no faster: dominated now
        # equal cost and slower points sit just before i
        k = i
        while k > 0 and self._costs[k - 1] == cost and self._speeds[k - 1] < speed:
            k -= 1
        self._costs[k:j] = [cost]
        self._speeds[k:j] = [speed]
        self._rows[k:j] = [row()]
        return True

    def rows(self) -> list[dict[str, Any]]:
        """The front, cheapest first."""
        return list(self._rows)

    def __len__(self) -> int:
        return len(self._rows)
