"""The note beside ASP on one server of three or more GPUs: the lockstep figure (BSP's
schedule), which measured runs of such servers reached on some clusters and no model here
tells apart from the even spread the predictions assume."""

from __future__ import annotations

import re

import pytest

from ddlperf.api import predict
from ddlperf.api import scenario as api_scenario
from ddlperf.predictors.analytic import predict_analytic
from ddlperf.predictors.arrangement import one_server_spread_note
from tests.conftest import make_workload

WL = make_workload([(0.01, 0.02, [1_000_000])] * 8)


def _server(gpus: int, **kw):
    cluster = {"bandwidth": "400Mbps", "ps": {"count": 2, "bandwidth": "1Gbps"},
               "nodes": [{"count": kw.pop("servers", 1), "gpus": gpus, "intra": "1Gbps"}]}
    return dict(workload=WL, cluster=cluster, **kw)


def _note(p):
    return [n for n in p.notes if n.startswith("ASP on one server of")]


@pytest.mark.parametrize("method", ["analytic", "simulate"])
def test_asp_on_one_server_of_three_gpus_gets_the_lockstep_figure(method):
    kw = dict(iterations=20, warmup=3) if method == "simulate" else {}
    p = predict(sync="asp", method=method, **_server(3), **kw)
    lockstep = predict(sync="bsp", **_server(3)).iteration_time_s
    (note,) = _note(p)
    seconds = float(re.search(r"takes ([0-9.]+)ms per iteration", note).group(1)) / 1000
    assert seconds == pytest.approx(lockstep, rel=1e-3)
    assert lockstep > 1.02 * p.iteration_time_s
    share = int(re.search(r"(\d+)% more", note).group(1))
    assert share == round(100 * (lockstep / p.iteration_time_s - 1))


@pytest.mark.parametrize("kw", [
    dict(sync="bsp"),
    dict(sync="ssp", staleness=2),
    dict(sync="asp", gpus=2),  # a server pair: its prediction is the lockstep already
    dict(sync="asp", gpus=2, servers=2),  # several servers
])
def test_no_note_elsewhere(kw):
    gpus = kw.pop("gpus", 3)
    assert not _note(predict(**_server(gpus, **kw)))


def test_no_note_for_one_gpu_hosts():
    p = predict(workload=WL, workers=3, ps=2, sync="asp", bandwidth="400Mbps")
    assert not _note(p)


def test_the_lockstep_figure_leaves_the_scenario_alone():
    # it predicts a copy with BSP: the scenario's own notes and strategy stay as they were
    sc = api_scenario(sync="asp", **_server(3))
    before = (list(sc.notes), sc.strategy)
    p = predict_analytic(sc)
    assert one_server_spread_note(sc, p)
    assert (sc.notes, sc.strategy) == before
