"""The event kernel: time order, deterministic ties, cancellation, run(until), stop."""

from __future__ import annotations

import heapq

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ddlperf.predictors.simulate import engine
from ddlperf.predictors.simulate.engine import Engine, Entry


def test_events_run_in_time_order_and_advance_now() -> None:
    eng = Engine()
    seen: list[tuple[str, float]] = []
    for delay, name in [(3.0, "c"), (1.0, "a"), (2.0, "b")]:
        eng.schedule(delay, lambda n=name: seen.append((n, eng.now)))
    eng.run()
    assert seen == [("a", 1.0), ("b", 2.0), ("c", 3.0)]
    assert eng.now == 3.0
    assert len(eng) == 0


def test_equal_times_run_in_insertion_order() -> None:
    eng = Engine()
    seen: list[int] = []
    for i in range(50):
        eng.schedule(1.0, seen.append, i)
    eng.run()
    assert seen == list(range(50))


def test_callbacks_get_args_and_can_schedule_more() -> None:
    # A "process" in callback style: a 0.5 s timeout repeated 4 times ends at t = 2.0.
    eng = Engine()
    ticks: list[float] = []

    def tick(left: int) -> None:
        ticks.append(eng.now)
        if left > 1:
            eng.schedule(0.5, tick, left - 1)

    eng.schedule(0.5, tick, 4)
    eng.run()
    assert ticks == [0.5, 1.0, 1.5, 2.0]


def test_zero_delay_event_runs_after_already_queued_same_time_events() -> None:
    eng = Engine()
    seen: list[str] = []

    def first() -> None:
        seen.append("first")
        eng.schedule(0.0, seen.append, "zero-delay")

    eng.schedule(1.0, first)
    eng.schedule(1.0, seen.append, "second")
    eng.run()
    assert seen == ["first", "second", "zero-delay"]


def test_cancel_drops_event_and_is_idempotent() -> None:
    eng = Engine()
    seen: list[str] = []
    h = eng.schedule(1.0, seen.append, "x")
    eng.schedule(2.0, seen.append, "y")
    assert Engine.pending(h)
    eng.cancel(h)
    eng.cancel(h)
    assert not Engine.pending(h)
    assert len(eng) == 1
    assert eng.peek() == 2.0
    eng.run()
    assert seen == ["y"]
    eng.cancel(h)  # after the run: still a no-op


def test_cancel_after_run_is_noop_and_does_not_corrupt_count() -> None:
    eng = Engine()
    h = eng.schedule(1.0, lambda: None)
    eng.run()
    assert not Engine.pending(h)
    eng.cancel(h)
    eng.schedule(1.0, lambda: None)
    assert len(eng) == 1


def test_many_cancellations_compact_the_heap() -> None:
    eng = Engine()
    seen: list[int] = []
    handles = [eng.schedule(float(i), seen.append, i) for i in range(5000)]
    for h in handles[:4000]:
        eng.cancel(h)
    assert len(eng) == 1000
    assert len(eng._heap) < 5000  # compacted, not just marked
    eng.run()
    assert seen == list(range(4000, 5000))


def test_run_until_stops_before_events_at_until() -> None:
    # SimPy semantics: run(until=2) processes t < 2 and leaves now == 2.
    eng = Engine()
    seen: list[float] = []
    for t in (1.0, 2.0, 3.0):
        eng.schedule(t, lambda: seen.append(eng.now))
    eng.run(until=2.0)
    assert seen == [1.0]
    assert eng.now == 2.0
    eng.run(until=10.0)
    assert seen == [1.0, 2.0, 3.0]
    assert eng.now == 10.0


def test_at_schedules_absolute_time() -> None:
    eng = Engine(start=5.0)
    seen: list[float] = []
    eng.at(7.5, lambda: seen.append(eng.now))
    eng.run()
    assert seen == [7.5]


def test_stop_returns_after_current_callback_and_run_resumes() -> None:
    eng = Engine()
    seen: list[int] = []

    def cb(i: int) -> None:
        seen.append(i)
        if i == 1:
            eng.stop()

    for i in range(3):
        eng.schedule(float(i), cb, i)
    eng.run()
    assert seen == [0, 1]
    assert eng.now == 1.0
    eng.run()
    assert seen == [0, 1, 2]


@pytest.mark.parametrize("bad", [-1.0, float("nan")])
def test_negative_or_nan_delay_raises(bad: float) -> None:
    eng = Engine()
    with pytest.raises(ValueError):
        eng.schedule(bad, lambda: None)


def test_at_in_the_past_and_until_in_the_past_raise() -> None:
    eng = Engine(start=1.0)
    with pytest.raises(ValueError):
        eng.at(0.5, lambda: None)
    with pytest.raises(ValueError):
        eng.run(until=0.5)


def test_advance_runs_a_continuation_inline_only_when_it_would_run_next() -> None:
    # A callback that continues itself: inline while nothing queued comes first (strictly:
    # an event queued at the same time was scheduled earlier), posted otherwise; the order
    # and the times are those of posting every step.
    def trace(inline: bool) -> list[tuple[str, float]]:
        eng = Engine()
        seen: list[tuple[str, float]] = []

        def step(k: int) -> None:
            while True:
                seen.append((f"step{k}", eng.now))
                if k == 5:
                    return
                k, at = k + 1, eng.now + 1.0
                if not (inline and eng.advance(at)):
                    eng.post(at, step, k)
                    return

        eng.at(0.0, step, 0)
        eng.at(2.0, lambda: seen.append(("other", eng.now)))  # ties with step2: goes first
        eng.at(3.5, lambda: seen.append(("later", eng.now)))
        eng.run(until=4.5)  # step5 at 5.0 stays queued
        assert len(eng) == 1
        return seen

    assert trace(True) == trace(False) == [
        ("step0", 0.0), ("step1", 1.0), ("other", 2.0), ("step2", 2.0), ("step3", 3.0),
        ("later", 3.5), ("step4", 4.0)]
    eng = Engine()
    assert not eng.advance(1.0) and eng.now == 0.0  # outside run: never


@given(st.lists(st.floats(min_value=0.0, max_value=1e6, allow_nan=False), max_size=200))
def test_order_is_a_stable_sort_by_time(delays: list[float]) -> None:
    eng = Engine()
    seen: list[int] = []
    for i, d in enumerate(delays):
        eng.schedule(d, seen.append, i)
    eng.run()
    assert seen == sorted(range(len(delays)), key=lambda i: delays[i])


@given(st.lists(st.tuples(st.sampled_from(["push", "pop", "replace"]),
                          st.integers(0, 20).map(float)), max_size=200),
       st.lists(st.integers(0, 20).map(float), max_size=40))
def test_entry_heaps_keep_the_layout_of_heapq(steps: list[tuple[str, float]],
                                              start: list[float]) -> None:
    # engine.push/pop/replace/heapify are heapq's algorithms on Entry objects ordered by
    # (time, seq): the same layout and the same entries popped as heapq on [time, seq] lists.
    seq = 0
    ours: list[Entry] = []
    want: list[list[float]] = []
    for time in start:
        seq += 1
        ours.append(Entry(time, seq, None, ()))
        want.append([time, seq])
    engine.heapify(ours)
    heapq.heapify(want)
    for op, time in steps:
        if op == "pop" and want:
            got = engine.pop(ours)
            assert [got.time, got.seq] == heapq.heappop(want)
        elif op == "replace" and want:
            seq += 1
            got = engine.replace(ours, Entry(time, seq, None, ()))
            assert [got.time, got.seq] == heapq.heapreplace(want, [time, seq])
        elif op == "push":
            seq += 1
            engine.push(ours, Entry(time, seq, None, ()))
            heapq.heappush(want, [time, seq])
        assert [[e.time, e.seq] for e in ours] == want


def test_the_cyclic_gc_is_off_while_events_run_and_restored_after() -> None:
    # (every container an event allocates is freed by reference counting; see Engine.run)
    import gc

    eng = Engine()
    seen: list[bool] = []
    eng.schedule(1.0, lambda: seen.append(gc.isenabled()))
    assert gc.isenabled()
    eng.run()
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:
        eng.schedule(1.0, lambda: seen.append(gc.isenabled()))
        eng.run()
        assert not gc.isenabled()  # a caller's choice is kept
    finally:
        gc.enable()
