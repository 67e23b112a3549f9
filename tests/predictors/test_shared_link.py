"""The fluid max-min fair link shared by FIFO streams (the analytic BSP push side)."""

from __future__ import annotations

import numpy as np
import pytest

from ddlperf.predictors.shared_link import fair_rates, shared_link_finish


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
