"""Busy time of the shards' update streams: booked updates count like ones with end events."""

from __future__ import annotations

import pytest

from ddlperf.predictors.simulate.update_busy import UpdateBusy


def test_booked_updates_count_as_if_their_end_events_ran() -> None:
    # One shard: updates (end, duration) in the order they end; the warm-up ends at 2.5 (the
    # one ending at 3 counts its last 0.5 s), the run stops at 6 (the one ending at 7 never
    # ended, so it does not count).
    updates = [(1.0, 0.5), (2.0, 1.0), (3.0, 1.0), (4.5, 1.5), (5.5, 1.0), (7.0, 1.0)]
    by_events = UpdateBusy(1)
    for end, duration in updates:
        if end <= 2.5:
            by_events.ended(0, end, duration)
    by_events.warm(2.5)
    for end, duration in updates:
        if 2.5 < end <= 6.0:
            by_events.ended(0, end, duration)

    booked = UpdateBusy(1)
    booked.booked(0, 1.0, 0.5, now=0.2)
    booked.booked(0, 2.0, 1.0, now=0.9)
    booked.booked(0, 3.0, 1.0, now=1.5)  # the first one is counted here
    booked.warm(2.5)
    booked.booked(0, 4.5, 1.5, now=2.8)
    booked.booked(0, 5.5, 1.0, now=4.0)
    booked.booked(0, 7.0, 1.0, now=5.0)

    assert booked.seconds(0, 6.0) == by_events.seconds(0, 6.0) == 0.5 + 1.5 + 1.0
    assert booked.seconds(0, 7.0) == 0.5 + 1.5 + 1.0 + 1.0  # read later: it has ended


def test_shards_are_counted_apart() -> None:
    busy = UpdateBusy(2)
    busy.booked(0, 1.0, 1.0, now=0.0)
    busy.booked(1, 2.0, 0.5, now=0.0)
    assert (busy.seconds(0, 1.5), busy.seconds(1, 1.5)) == (1.0, 0.0)
    busy.booked(1, 3.0, 0.25, now=2.5)
    assert (busy.seconds(0, 5.0), busy.seconds(1, 5.0)) == (1.0, 0.75)


@pytest.mark.parametrize("count, stop", [(1000, 1.6), (6000, 11.0)])
def test_a_long_backlog_of_bookings_counts_the_same_sums(count: int, stop: float) -> None:
    # ``count`` updates of 1–3 ms, each booked 0.2 s before its end (a queue of ~100 ahead of
    # the clock), warm-up ending at 0.5 s, run ending at ``stop`` (bookings stop; some of them
    # end later): the same floats, added in the same order; the second case books enough
    # for the counted ones to be dropped on the way.
    durations = [1e-3 * (1 + (k * 7) % 3) for k in range(count)]
    ends = []
    clock = 0.0
    for d in durations:
        clock += d
        ends.append(clock)
    by_events, booked = UpdateBusy(1), UpdateBusy(1)
    warmed = False
    for end, d in zip(ends, durations, strict=True):
        now = end - 0.2
        if not warmed and now >= 0.5:
            for e, dd in zip(ends, durations, strict=True):
                if e <= 0.5:
                    by_events.ended(0, e, dd)
            by_events.warm(0.5)
            booked.warm(0.5)
            warmed = True
        if now < stop:
            booked.booked(0, end, d, now)
    for end, d in zip(ends, durations, strict=True):
        if 0.5 < end <= stop:
            by_events.ended(0, end, d)
    assert booked.seconds(0, stop) == by_events.seconds(0, stop)
    assert stop - 0.6 < booked.seconds(0, stop) < stop - 0.5


def test_counted_bookings_are_dropped_so_memory_stays_bounded() -> None:
    # 5000 bookings, each ending 1 s after it is booked: the ended ones are counted and
    # dropped every 1024 bookings; the sum is the one of the end events.
    busy, by_events = UpdateBusy(1), UpdateBusy(1)
    for k in range(5000):
        busy.booked(0, k + 1.0, 0.25 + (k % 3) * 0.25, now=float(k))
        assert len(busy._ends[0]) <= 1025
    for k in range(5000):
        by_events.ended(0, k + 1.0, 0.25 + (k % 3) * 0.25)
    assert busy.seconds(0, 5000.0) == by_events.seconds(0, 5000.0)
