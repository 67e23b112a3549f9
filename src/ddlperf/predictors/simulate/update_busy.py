"""Busy time of the shards' update streams in the measured window, also for updates that
have no event of their own.

Why: a shard's update used to be counted when its end event ran: ``min(duration, end −
warm-up end)`` if it ended after the warm-up, in the order the updates ended; an update
still running when the run stops was never counted. Noisy ASP runs now book an update and
queue its pull when the gradient's last byte is sent, with no event at the update's end
(see ``PSModel._pushed_early``), so those updates are *booked* here with their end and
counted, by the same formula and in the same order (a shard's bookings end in the order
they are booked), once the clock has passed their end: at the warm-up and when the share is
read after the run. Each booking stores the running sum up to it (the same additions in the
same order), so counting is a bisection of the ends instead of a step per update (issue 14).
"""

from __future__ import annotations

from bisect import bisect_right

_KEEP = 1024  # bookings kept per shard, beyond those not ended, before the ended are dropped


class UpdateBusy:
    """Per shard: seconds its updates kept its stream busy since the warm-up."""

    def __init__(self, shards: int) -> None:
        self.busy = [0.0] * shards  # from updates with end events (ended)
        self.warm_at = 0.0
        # booked updates per shard, in the order they end: their ends, durations and the
        # running sum of their busy seconds; ``_from``: the first not yet counted
        self._ends: list[list[float]] = [[] for _ in range(shards)]
        self._durations: list[list[float]] = [[] for _ in range(shards)]
        self._sums: list[list[float]] = [[] for _ in range(shards)]
        self._from = [0] * shards
        self._counted = [0.0] * shards  # the running sum of the counted bookings
        self._trim_at = [_KEEP] * shards

    def ended(self, shard: int, now: float, duration: float) -> None:
        """An update of ``duration`` seconds on ``shard`` ends now."""
        if now > self.warm_at:
            self.busy[shard] += min(duration, now - self.warm_at)

    def booked(self, shard: int, end: float, duration: float, now: float) -> None:
        """An update of ``duration`` seconds on ``shard`` will end at ``end`` (>= every end
        booked on that shard before), without an event."""
        sums = self._sums[shard]
        total = sums[-1] if sums else self._counted[shard]
        warm = self.warm_at
        if end > warm:
            total += min(duration, end - warm)
        self._ends[shard].append(end)
        self._durations[shard].append(duration)
        sums.append(total)
        if len(sums) > self._trim_at[shard]:
            self._settle(shard, now)
            self._trim(shard)
            self._trim_at[shard] = len(sums) + _KEEP

    def warm(self, now: float) -> None:
        """The measured window starts now: the bookings still running count from now."""
        self.warm_at = now
        self.busy = [0.0] * len(self.busy)
        for shard in range(len(self.busy)):
            self._settle(shard, now)
            self._trim(shard)
            total = self._counted[shard] = 0.0
            sums = self._sums[shard]
            for i, (end, duration) in enumerate(zip(self._ends[shard],
                                                    self._durations[shard], strict=True)):
                total += min(duration, end - now)  # (they end after now)
                sums[i] = total

    def seconds(self, shard: int, now: float) -> float:
        """Busy seconds of ``shard`` since the warm-up, counting the updates ended by ``now``."""
        self._settle(shard, now)
        return self.busy[shard] + self._counted[shard]  # (one of them is 0.0: exact)

    def _settle(self, shard: int, now: float) -> None:
        """Count the booked updates of ``shard`` that ended by ``now``."""
        start = self._from[shard]
        done = bisect_right(self._ends[shard], now, start)
        if done > start:
            self._counted[shard] = self._sums[shard][done - 1]
            self._from[shard] = done

    def _trim(self, shard: int) -> None:
        """Drop the counted bookings of ``shard``."""
        done = self._from[shard]
        del self._ends[shard][:done], self._durations[shard][:done], self._sums[shard][:done]
        self._from[shard] = 0
