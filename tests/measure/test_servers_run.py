"""``measure`` on servers of 2 GPUs (root only): each trainer on 2 servers × 2 GPUs with
emulated device time, a 2 MB model, 200 Mbit NICs and a 1 Gbit loopback per GPU. The bytes
on every NIC, rack link and loopback add up, workers are named as the predictors name them,
the analytic prediction agrees within 15% (the dev matrix holds the tight numbers) and
nothing is left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddlperf.api import predict
from ddlperf.measure.records import read_records
from ddlperf.measure.run import measure
from tests.conftest import leftovers, netns_skip_reason

pytest.importorskip("torch")

_SKIP = netns_skip_reason()
pytestmark = [pytest.mark.root, pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")]

WORKLOAD = {
    "format": "ddlperf.workload/1", "name": "servers2mb", "batch_size": 32, "device": "V100",
    "layers": [{"name": f"l{i}", "forward_s": 0.01, "backward_s": 0.02,
                "tensors": [{"name": f"l{i}.w", "bytes": 500_000}]} for i in range(4)],
}
SERVERS = {"gpus_per_node": 2, "intra": "1Gbps", "bandwidth": "200Mbps", "latency": "50us"}


@pytest.mark.parametrize("options,intra", [
    ({"ps": 1, "rack_size": 1, "rack_uplink": "200Mbps"}, False),
    ({"ps": 1, "local_aggregation": True}, True),
    ({"arch": "allreduce"}, True),
    ({"arch": "allreduce", "allreduce": "hierarchical"}, True),
], ids=["ps-racks", "ps-local-aggregation", "flat-ring", "hierarchical"])
def test_each_trainer_on_servers_moves_the_expected_bytes(tmp_path: Path, options: dict,
                                                          intra: bool) -> None:
    messages: list[str] = []
    m = measure(workload=WORKLOAD, workers=4, iterations=4, warmup=1, out=tmp_path / "m",
                timeout=60, probe=False, progress=messages.append, **SERVERS, **options)
    rid = next(msg.split("(run ")[1].split(",")[0] for msg in messages if "(run " in msg)
    assert leftovers(rid) == []
    wire = m.inputs["measure"]["wire_check"]
    assert wire["ok"], wire["message"]
    rows = {row["link"]: row for row in wire["links"]}
    assert rows["node0 nic0 uplink"]["judged"] and rows["node1 nic0 downlink"]["judged"]
    assert ("node0 intra" in rows and rows["node0 intra"]["judged"]) == intra
    if "rack_size" in options:
        assert rows["rack0 uplink"]["judged"] and rows["rack1 downlink"]["judged"]
    assert [w.name for w in m.workers] == ["node0/gpu0", "node0/gpu1", "node1/gpu0",
                                           "node1/gpu1"]
    records, _ = read_records(tmp_path / "m" / "records.jsonl")
    gate = next(r for r in records if r["type"] == "gate")
    assert gate["classified"]["pairs"] > 0
    split = {k: m.breakdown_s.get(k) for k in ("communication_intra", "communication_inter")}
    if options.get("allreduce") == "hierarchical":  # measured phase times split it
        assert 0 < split["communication_intra"] < m.breakdown_s["communication"]
    elif not intra:  # nothing crossed a loopback
        assert split["communication_intra"] == 0.0
    predicted = predict(workload=WORKLOAD, workers=4, method="analytic", **SERVERS, **options)
    assert m.iteration_time_s == pytest.approx(predicted.iteration_time_s, rel=0.15)


def test_one_server_alone_is_measured_over_its_loopback(tmp_path: Path) -> None:
    # all-reduce inside one server of 2 GPUs: no NIC traffic (nothing to probe), every byte on
    # the loopback, and the ring's time as predicted
    m = measure(workload=WORKLOAD, workers=2, ps=0, arch="allreduce", iterations=4, warmup=1,
                out=tmp_path / "m", timeout=60, **SERVERS)
    wire = m.inputs["measure"]["wire_check"]
    assert wire["ok"], wire["message"]
    rows = {row["link"]: row for row in wire["links"]}
    assert rows["node0 intra"]["judged"]
    assert "probe" not in m.inputs["measure"] or not m.inputs["measure"]["probe"]
    assert [w.name for w in m.workers] == ["node0/gpu0", "node0/gpu1"]
    predicted = predict(workload=WORKLOAD, workers=2, ps=0, arch="allreduce", method="analytic",
                        **SERVERS)
    assert m.iteration_time_s == pytest.approx(predicted.iteration_time_s, rel=0.15)
