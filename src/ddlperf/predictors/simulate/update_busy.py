"""Busy time of the shards' update streams in the measured window, also for updates that
have no event of their own.

Why: a shard's update used to be counted when its end event ran: ``min(duration, end −
warm-up end)`` if it ended after the warm-up, in the order the updates ended; an update
still running when the run stops was never counted. Noisy ASP runs now book an update and
queue its pull when the gradient's last byte is sent, with no event at the update's end
(see ``PSModel._pushed_early``), so those updates are *booked* here with their end and
counted, by the same formula and in the same order (a shard's bookings end in the order
they are booked), once the clock has passed their end: at the warm-up, when the share is
read after the run, and every 1024 bookings (to bound the memory). A booking only stores its
end and duration; counting is a bisection of the ends and the same additions in the same
order as the end events (issue 14: an earlier version kept a running sum per booking).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Final

_KEEP: Final = 1024  # bookings kept per shard, beyond those not ended, before the ended are dropped


class UpdateBusy:
    """Per shard: seconds its updates kept its stream busy since the warm-up."""

    def __init__(self, shards: int) -> None:
        self.busy = [0.0] * shards  # from updates with end events (ended)
        self.warm_at = 0.0
        # booked updates per shard not counted yet, in the order they end: ends, durations
        self._ends: list[list[float]] = [[] for _ in range(shards)]
        self._durations: list[list[float]] = [[] for _ in range(shards)]
        self._counted = [0.0] * shards  # busy seconds of the counted bookings
        self._trim_at = [_KEEP] * shards

    def ended(self, shard: int, now: float, duration: float) -> None:
        """An update of ``duration`` seconds on ``shard`` ends now."""
        if now > self.warm_at:
            self.busy[shard] += min(duration, now - self.warm_at)

    def booked(self, shard: int, end: float, duration: float, now: float) -> None:
        """An update of ``duration`` seconds on ``shard`` will end at ``end`` (>= every end
        booked on that shard before), without an event."""
        ends = self._ends[shard]
        ends.append(end)
        self._durations[shard].append(duration)
        if len(ends) > self._trim_at[shard]:
            self._settle(shard, now)
            self._trim_at[shard] = len(ends) + _KEEP

    def warm(self, now: float) -> None:
        """The measured window starts now: the bookings still running count from now."""
        self.warm_at = now
        self.busy = [0.0] * len(self.busy)
        for shard in range(len(self.busy)):
            self._settle(shard, now)  # (those ended by now add nothing)
            self._counted[shard] = 0.0

    def seconds(self, shard: int, now: float) -> float:
        """Busy seconds of ``shard`` since the warm-up, counting the updates ended by ``now``."""
        self._settle(shard, now)
        return self.busy[shard] + self._counted[shard]  # (one of them is 0.0: exact)

    def _settle(self, shard: int, now: float) -> None:
        """Count the booked updates of ``shard`` that ended by ``now`` and drop them."""
        ends = self._ends[shard]
        done = bisect_right(ends, now)
        if done:
            durations = self._durations[shard]
            warm = self.warm_at
            total = self._counted[shard]
            for end, duration in zip(ends[:done], durations[:done], strict=True):
                if end > warm:
                    total += min(duration, end - warm)
            self._counted[shard] = total
            del ends[:done], durations[:done]
