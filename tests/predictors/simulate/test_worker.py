"""A worker's chain: the ends of a chain's operations are the running sums of their times."""

from __future__ import annotations

from itertools import accumulate

from hypothesis import given
from hypothesis import strategies as st

from ddlperf.predictors.simulate.worker import _ends

_times = st.lists(st.floats(1e-9, 1.0), min_size=1, max_size=30)


@given(_times, st.data(), st.floats(0.0, 1e4))
def test_chain_ends_are_the_running_sums_of_accumulate(times: list[float], data,
                                                       now: float) -> None:
    # the same floats as accumulate(times[i:j + 1], initial=now), as before the loop
    i = data.draw(st.integers(0, len(times) - 1))
    j = data.draw(st.integers(i, len(times) - 1))
    assert _ends(times, i, j, now) == list(accumulate(times[i:j + 1], initial=now))
