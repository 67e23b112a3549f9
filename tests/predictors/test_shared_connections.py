"""Connections with one cap sharing a link: the virtual-time event loop, its closed form for
items ready at once, many columns at once, and the shifted repeats of a BSP fixed point."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddlperf.predictors.shared_connections import (
    ConnectionItems,
    ShiftedColumns,
    ShiftedRepeats,
    entries_finish,
    equal_caps_finish,
)
from ddlperf.predictors.shared_link import connections_finish, water_filled_finish


@st.composite
def connection_sets(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, float, float]:
    """(ready, work, cap, capacity): items on one or more connections (some on none), ready
    times with ties and out of item order, caps below and above the link's share."""
    items = draw(st.integers(1, 14))
    count = draw(st.integers(1, 5))
    work = np.zeros((items, count))
    for j in range(items):
        on = draw(st.lists(st.integers(0, count - 1), max_size=count, unique=True))
        for k in on:
            work[j, k] = draw(st.floats(1.0, 1e6))
    times = draw(st.lists(st.sampled_from([0.0, 0.25, 1.0, 3.0]) | st.floats(0.0, 5.0),
                          min_size=items, max_size=items))
    capacity = draw(st.floats(10.0, 1e6))
    cap = capacity * draw(st.sampled_from([0.1, 0.3, 0.5, 1.0, 2.0, math.inf]))
    return np.array(times), work, cap, capacity


@settings(max_examples=300, deadline=None)
@given(connection_sets(), st.booleans())
def test_equal_caps_equal_the_water_filled_loop(case, at_once) -> None:
    ready, work, cap, capacity = case
    if at_once:
        ready = np.full_like(ready, ready[0])
    got = equal_caps_finish(ConnectionItems.of(work), ready, cap, capacity)
    expected = water_filled_finish(ready, work, np.full(work.shape[1], cap), capacity)
    assert np.array_equal(np.isneginf(got), work <= 0)
    carried = work > 0
    assert np.allclose(got[carried], expected[carried], rtol=1e-12, atol=0)


def test_items_ready_at_once_end_when_their_bytes_per_connection_were_sent() -> None:
    # a 12 B/s link, three connections with 10, 20 and 60 B: 4 B/s each until the first is
    # done (2.5 s), 6 B/s each until the second (10 B more: 4.16 s), then the last alone
    work = np.array([[10.0, 0.0, 0.0], [0.0, 20.0, 0.0], [0.0, 0.0, 30.0], [0.0, 0.0, 30.0]])
    finish = equal_caps_finish(ConnectionItems.of(work), np.full(4, 1.0), math.inf, 12.0)
    second = 2.5 + 10.0 / 6.0
    assert finish[0, 0] == pytest.approx(1.0 + 2.5)
    assert finish[1, 1] == pytest.approx(1.0 + second)
    # 30 B: 10 at 4 B/s, 10 at 6 B/s, the last 10 alone at 12 B/s; 60 B: 30 more alone
    assert finish[2, 2] == pytest.approx(1.0 + second + 10.0 / 12.0)
    assert finish[3, 2] == pytest.approx(1.0 + second + 40.0 / 12.0)


def test_a_cap_below_the_share_holds_every_connection_at_it() -> None:
    # 2 connections at most 3 B/s each on a 10 B/s link: independent FIFOs at 3 B/s
    ready = np.array([0.0, 0.0, 1.0])
    work = np.array([[6.0, 0.0], [0.0, 9.0], [3.0, 0.0]])
    finish = equal_caps_finish(ConnectionItems.of(work), ready, 3.0, 10.0)
    assert finish[0, 0] == pytest.approx(2.0)
    assert finish[1, 1] == pytest.approx(3.0)
    assert finish[2, 0] == pytest.approx(3.0)


def test_a_connection_held_by_its_cap_then_sharing_then_idle() -> None:
    # a 10 B/s link, connections capped at 6 B/s: c0 alone at its cap (0-1 s), c0 and c1 at
    # 5 B/s each (item 2 queues behind item 0 on c0), c1 alone at its cap again, and after an
    # idle gap c2 alone
    work = np.array([[12.0, 0, 0], [0, 10.0, 0], [3.0, 0, 0], [0, 0, 6.0]])
    ready = np.array([0.0, 1.0, 1.5, 10.0])
    finish = equal_caps_finish(ConnectionItems.of(work), ready, 6.0, 10.0)
    assert finish[0, 0] == pytest.approx(2.2, rel=1e-14)  # 6 B at 6 B/s, 6 B at 5 B/s
    assert finish[2, 0] == pytest.approx(2.8, rel=1e-14)  # then its 3 B at 5 B/s
    assert finish[1, 1] == pytest.approx(2.8 + 1.0 / 6.0, rel=1e-14)  # 9 B shared, 1 B alone
    assert finish[3, 2] == pytest.approx(11.0, rel=1e-14)


@settings(max_examples=100, deadline=None)
@given(connection_sets(), st.lists(st.tuples(st.sampled_from([0.5, 1.0, 2.0]),
                                              st.sampled_from([0.25, 1.0, 4.0]),
                                              st.booleans(), st.floats(-3.0, 3.0)),
                                    min_size=1, max_size=6))
def test_many_columns_at_once_equal_each_column_alone(case, columns) -> None:
    # columns with their own caps, links and ready times (some all ready at once, some
    # shifted): each equals the one-column computation, bit for bit
    ready, work, cap, capacity = case
    items = ConnectionItems.of(work)
    readies = np.stack([np.full_like(ready, ready[0]) + s if once else ready * r + s
                        for r, _c, once, s in columns], axis=1)
    caps = np.array([cap * c for _r, c, _o, _s in columns])
    links = np.array([capacity * r for r, _c, _o, _s in columns])
    got = entries_finish(items, readies, caps, links)
    for i in range(len(columns)):
        alone = equal_caps_finish(items, readies[:, i], float(caps[i]), float(links[i]))
        assert got[:, i].tolist() == alone[items.flat, items.on].tolist()


def test_an_item_on_several_connections_ends_with_its_last_part() -> None:
    work = np.array([[4.0, 8.0], [2.0, 0.0]])
    items = ConnectionItems.of(work)
    assert items.owner is None
    finish = equal_caps_finish(items, np.zeros(2), math.inf, 2.0)  # 1 B/s each, then 2 B/s
    entries = finish[items.flat, items.on][:, None]
    assert items.per_item(entries)[:, 0].tolist() == [finish[0].max(), finish[1, 0]]
    assert finish[0, 1] == pytest.approx(6.0 + 2.0 / 2.0)  # 6 B at 1 B/s, 2 B alone
    # one connection per item: each item's own entry
    whole = ConnectionItems.of(np.array([[0.0, 3.0], [1.0, 0.0], [0.0, 2.0]]))
    ends = equal_caps_finish(whole, np.array([0.0, 1.0, 2.0]), math.inf, 1.0)
    by_item = whole.per_item(ends[whole.flat, whole.on][:, None])[:, 0]
    assert by_item.tolist() == [ends[0, 1], ends[1, 0], ends[2, 1]]


def test_equal_caps_take_the_fast_path_and_unequal_ones_water_filling(monkeypatch) -> None:
    from ddlperf.predictors import shared_link

    fast = []
    monkeypatch.setattr(shared_link, "equal_caps_finish",
                        lambda *args: fast.append(args) or equal_caps_finish(*args))
    ready = np.array([0.0, 0.5])
    work = np.array([[20.0, 0.0], [0.0, 40.0]])
    for caps in (np.array([4.0, 4.0]), np.array([2.0, 100.0])):
        assert np.allclose(connections_finish(ready, work, caps, 10.0),
                           water_filled_finish(ready, work, caps, 10.0), rtol=1e-12, atol=0)
    assert len(fast) == 1 and fast[0][2] == 4.0


def test_a_shifted_repeat_is_the_last_result_shifted() -> None:
    repeats = ShiftedRepeats()
    calls = []

    def compute(ready: np.ndarray):
        def run() -> np.ndarray:
            calls.append(ready)
            return ready[:, None] * 2.0 + 1.0
        return run

    first = np.array([0.1, 0.2, 0.7])
    assert repeats.finish("push", first, compute(first)).tolist() == [[1.2], [1.4], [2.4]]
    shifted = first + 0.3
    assert repeats.finish("push", shifted, compute(shifted)) == pytest.approx(
        np.array([[1.5], [1.7], [2.7]]))
    assert len(calls) == 1  # the shift was not computed again
    moved = np.array([0.1, 0.3, 0.7])  # not a shift: computed
    assert repeats.finish("push", moved, compute(moved)).tolist() == [[1.2], [1.6], [2.4]]
    assert repeats.finish("pull", first, compute(first)).tolist() == [[1.2], [1.4], [2.4]]
    assert len(calls) == 3


def test_shifted_columns_repeat_each_column_as_its_own_shifted_repeats() -> None:
    # three columns (points) over three passes: a column that is a shift of its own last
    # computation is shifted, not computed; the others are computed, as ShiftedRepeats does
    # per column
    columns = ShiftedColumns(3)
    alone = [ShiftedRepeats() for _ in range(3)]
    computed = []

    def run(ready: np.ndarray):
        def compute(mask: np.ndarray) -> np.ndarray:
            computed.append(int(mask.sum()))
            return ready[:, mask] * 2.0 + 1.0
        return compute

    first = np.array([[0.1, 0.0, 0.3], [0.2, 0.5, 0.3], [0.7, 0.9, 0.4]])
    moved = np.array([[0.3, 0.0, 0.0], [0.3, 0.1, 0.2], [0.3, 0.0, 0.0]])
    passes = [first, first + np.array([0.3, 0.0, 0.1]), first + moved]
    for ready in passes:
        got = columns.finish("push", np.arange(3), ready, run(ready))
        for i in range(3):
            expected = alone[i].finish("push", ready[:, i],
                                       lambda i=i, r=ready: r[:, i] * 2.0 + 1.0)
            assert got[:, i].tolist() == expected.tolist()
    # pass 2: columns 0 and 2 shifted, 1 the same (shift 0): nothing computed; pass 3:
    # column 0 shifted, 1 and 2 computed
    assert computed == [3, 2]
    # a subset of the columns: column 2 alone, shifted from its pass-3 computation
    last = passes[2][:, [2]]
    part = columns.finish("push", np.array([2]), last + 1.0, run(last + 1.0))
    assert part[:, 0].tolist() == (last[:, 0] * 2.0 + 1.0 + 1.0).tolist()
    assert computed == [3, 2]
