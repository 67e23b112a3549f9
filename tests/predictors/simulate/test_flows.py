"""The flow network's data types (flows.py)."""

from __future__ import annotations

import pytest

from ddlperf.predictors.simulate.engine import Engine
from ddlperf.predictors.simulate.flows import checked_path
from ddlperf.predictors.simulate.network import Network


def test_checked_path_rejects_what_start_rejects() -> None:
    net = Network(Engine())
    a, b = net.add_link(1.0), net.add_link(1.0)
    assert checked_path([a, b], 3) == ((a, b), 3.0)
    for links, weight in (([], 1.0), ([a, a], 1.0), ([a], 0.0), ([a], float("inf"))):
        with pytest.raises(ValueError):
            checked_path(links, weight)
        with pytest.raises(ValueError):
            net.start(1.0, links, weight=weight)
