"""The fluid max-min fair link shared by FIFO streams (the analytic BSP push side)."""

from __future__ import annotations

import numpy as np
import pytest

from ddlperf.predictors.shared_link import connections_finish, fair_rates, shared_link_finish


def test_water_filling_gives_a_capped_flows_leftover_to_the_others() -> None:
    assert fair_rates([1, 1], [10.0, 100.0], 50.0) == [10.0, 40.0]
    assert fair_rates([3, 1], [100.0, 100.0], 40.0) == [10.0, 10.0]


def test_a_late_stream_gets_the_whole_link_once_the_others_are_done() -> None:
    # 100 B items on a 10 B/s link: the first stream alone from 0 to 10 s, the straggler's
    # item (ready at 10 s) alone after it — not at half the link for 20 s.
    first, late = shared_link_finish([np.array([0.0]), np.array([10.0])], np.array([100.0]),
                                     [1.0, 1.0], [100.0, 100.0], 10.0)
    assert first[0] == pytest.approx(10.0) and late[0] == pytest.approx(20.0)


def test_concurrent_streams_share_and_items_follow_in_order() -> None:
    a, b = shared_link_finish([np.array([0.0, 0.0]), np.array([0.0, 0.0])],
                              np.array([100.0, 50.0]), [1.0, 3.0], [1e9, 1e9], 40.0)
    # four flows at 10 B/s: the 100 B items end at 10 s, the 50 B ones 5 s later
    assert list(a) == pytest.approx([10.0, 15.0]) and list(b) == pytest.approx([10.0, 15.0])


def test_connections_share_the_link_and_each_keeps_its_order() -> None:
    # a 10 B/s link, two connections: item 0 (connection 0) alone for 0.1 s, then both at
    # 5 B/s; item 2 waits behind item 0 on its connection, not behind item 1
    ready = np.array([0.0, 0.1, 0.2])
    work = np.array([[10.0, 0.0], [0.0, 10.0], [20.0, 0.0]])
    finish = connections_finish(ready, work, np.array([np.inf, np.inf]), 10.0)
    assert finish[0, 0] == pytest.approx(1.9)  # 1 B alone, 9 B at 5 B/s
    assert finish[1, 1] == pytest.approx(2.1)  # 9 B by 1.9 s, its last 1 B at 5 B/s
    assert finish[2, 0] == pytest.approx(2.1 + 19.0 / 10.0)  # 1 B shared, then alone
    assert np.isneginf(finish[0, 1]) and np.isneginf(finish[1, 0])


def test_a_capped_connection_leaves_the_rest_of_the_link_to_the_others() -> None:
    # caps 2 and 100 B/s on a 10 B/s link: 2 and 8 B/s while both are busy
    finish = connections_finish(np.array([0.0, 0.0]), np.array([[20.0, 0.0], [0.0, 40.0]]),
                                np.array([2.0, 100.0]), 10.0)
    assert finish[1, 1] == pytest.approx(5.0)  # 40 B at 8 B/s
    assert finish[0, 0] == pytest.approx(10.0)  # 10 B by 5 s, the rest at its cap


def test_one_connection_is_a_fifo_at_the_slower_of_its_cap_and_the_link() -> None:
    ready = np.array([0.0, 0.5, 4.0])
    work = np.array([[10.0], [10.0], [5.0]])
    finish = connections_finish(ready, work, np.array([4.0]), 10.0)
    assert finish[:, 0] == pytest.approx([2.5, 5.0, 6.25])
