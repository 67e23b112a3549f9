"""The launcher on an emulated cluster whose hosts run several ranks without being servers
(root only): a colocated shard's host holds its worker and the shard, so every rank waits at
the gate until each pair of ranks on different hosts has its own class on the links between
them, and the run still moves the bytes the models count."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddlperf.api import predict
from ddlperf.measure.records import read_records
from ddlperf.measure.run import measure
from tests.conftest import leftovers, make_workload, netns_skip_reason

pytest.importorskip("torch")

_SKIP = netns_skip_reason()
pytestmark = [pytest.mark.root, pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")]

WORKLOAD = make_workload([(0.01, 0.02, [500_000])] * 4, name="coloc2mb")
SETUP = {"workers": 2, "ps": 2, "placement": "colocated", "bandwidth": "200Mbps",
         "latency": "50us"}


def test_colocated_shards_get_a_class_per_rank_pair(tmp_path: Path) -> None:
    messages: list[str] = []
    m = measure(workload=WORKLOAD, iterations=4, warmup=1, out=tmp_path / "m", timeout=60,
                probe=False, progress=messages.append, **SETUP)
    rid = next(msg.split("(run ")[1].split(",")[0] for msg in messages if "(run " in msg)
    assert leftovers(rid) == []
    wire = m.inputs["measure"]["wire_check"]
    assert wire["ok"], wire["message"]
    records, _ = read_records(tmp_path / "m" / "records.jsonl")
    gate = next(r for r in records if r["type"] == "gate")
    # 4 ranks on 2 hosts (w0+ps0, w1+ps1): each way between the hosts two connections (a
    # worker's pushes to the other host's shard, its shard's pulls to the other worker), each
    # rank pair classed apart; nothing on a loopback is shaped (no servers)
    assert gate["classified"]["pairs"] >= 4
    assert set(gate["classified"]) == {"pairs"}
    predicted = predict(workload=WORKLOAD, method="simulate", **SETUP)
    assert m.iteration_time_s == pytest.approx(predicted.iteration_time_s, rel=0.15)
