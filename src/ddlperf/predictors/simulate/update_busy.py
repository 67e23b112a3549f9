"""Busy time of the shards' update streams in the measured window, also for updates that
have no event of their own.

Why: a shard's update used to be counted when its end event ran: ``min(duration, end −
warm-up end)`` if it ended after the warm-up, in the order the updates ended; an update
still running when the run stops was never counted. Noisy ASP runs now book an update and
queue its pull when the gradient's last byte is sent, with no event at the update's end
(see ``PSModel._pushed_early``), so those updates are *booked* here with their end and
counted, by the same formula and in the same order (a shard's bookings end in the order
they are booked), once the clock has passed their end: at a later booking (in bulk), at
the warm-up and when the share is read after the run.
"""

from __future__ import annotations

from collections import deque

_SETTLE_AT = 64  # bookings kept per shard, beyond those not ended, before the ended are counted


class UpdateBusy:
    """Per shard: seconds its updates kept its stream busy since the warm-up."""

    def __init__(self, shards: int) -> None:
        self.busy = [0.0] * shards
        self.warm_at = 0.0
        self._booked: list[deque[tuple[float, float]]] = [deque() for _ in range(shards)]
        self._settle_at = [_SETTLE_AT] * shards  # bookings kept before the ended are counted

    def ended(self, shard: int, now: float, duration: float) -> None:
        """An update of ``duration`` seconds on ``shard`` ends now."""
        if now > self.warm_at:
            self.busy[shard] += min(duration, now - self.warm_at)

    def booked(self, shard: int, end: float, duration: float, now: float) -> None:
        """An update of ``duration`` seconds on ``shard`` will end at ``end`` (>= every end
        booked on that shard before), without an event."""
        booked = self._booked[shard]
        booked.append((end, duration))
        if len(booked) > self._settle_at[shard]:  # (counted in bulk: the same sums)
            self._settle(shard, now)
            self._settle_at[shard] = len(booked) + _SETTLE_AT

    def warm(self, now: float) -> None:
        """The measured window starts now."""
        for shard in range(len(self.busy)):
            self._settle(shard, now)
        self.warm_at = now
        self.busy = [0.0] * len(self.busy)

    def seconds(self, shard: int, now: float) -> float:
        """Busy seconds of ``shard`` since the warm-up, counting the updates ended by ``now``."""
        self._settle(shard, now)
        return self.busy[shard]

    def _settle(self, shard: int, now: float) -> None:
        """Count the booked updates of ``shard`` that ended by ``now``, in order (as
        :meth:`ended`)."""
        booked = self._booked[shard]
        warm = self.warm_at
        busy = self.busy[shard]
        while booked and booked[0][0] <= now:
            end, duration = booked.popleft()
            if end > warm:
                busy += min(duration, end - warm)
        self.busy[shard] = busy
