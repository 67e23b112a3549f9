"""Chrome trace of a simulated run: valid JSON, a track per stream, events for every worker."""

from __future__ import annotations

import json
from collections import defaultdict
from itertools import pairwise

import pytest
from typer.testing import CliRunner

import ddlperf.cli  # noqa: F401  (registers the commands)
from ddlperf.api import predict
from ddlperf.cli.app import app
from tests.conftest import make_workload

TOY = make_workload([(0.01, 0.02, [1_000_000]), (0.005, 0.01, [2_000_000, 1_000])],
                    update_s_per_byte=1e-9)


def load(path):
    data = json.loads(path.read_text())
    assert data["displayTimeUnit"] == "ms"
    events = data["traceEvents"]
    process = {e["pid"]: e["args"]["name"] for e in events
               if e["ph"] == "M" and e["name"] == "process_name"}
    thread = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
              if e["ph"] == "M" and e["name"] == "thread_name"}
    spans = [e for e in events if e["ph"] == "X"]
    return process, thread, spans


def by_track(process, thread, spans):
    tracks = defaultdict(list)
    for e in spans:
        tracks[(process[e["pid"]], thread[(e["pid"], e["tid"])])].append(e)
    return tracks


@pytest.mark.parametrize("kw", [
    dict(workers=6, ps=2),  # identical workers simulated as one unit
    dict(workers=3, ps=2, sync="asp"),
    dict(workers=4, ps=2, placement="colocated"),
    dict(workers=5, arch="allreduce"),
    dict(cluster={"workers": [{"count": 2}, {"count": 2, "speed": 0.5}]}, ps=1, jitter=0.1),
])
def test_trace_has_events_for_every_worker(tmp_path, kw):
    path = tmp_path / "t.json"
    p = predict(workload=TOY, method="simulate", iterations=4, warmup=1, trace=path, **kw)
    process, thread, spans = load(path)
    tracks = by_track(process, thread, spans)
    for worker in p.workers:
        assert tracks[(worker.name, "compute")], worker.name
        assert any(name == worker.name and t.startswith("uplink") for name, t in tracks)
        assert any(name == worker.name and t.startswith("downlink") for name, t in tracks)
    if kw.get("arch") != "allreduce":
        for shard in ("ps0", "ps1")[: kw.get("ps", 1)]:
            assert any(name == shard for name, _ in tracks)
    for e in spans:
        assert e["ts"] >= 0 and e["dur"] >= 0
        assert isinstance(e["args"]["iteration"], int)
    # Every thread is one stream: its events do not overlap.
    for events in tracks.values():
        events.sort(key=lambda e: e["ts"])
        for a, b in pairwise(events):
            assert a["ts"] + a["dur"] <= b["ts"] + 1e-6


def test_trace_shows_the_iteration_structure(tmp_path):
    path = tmp_path / "t.json"
    p = predict(workload=TOY, method="simulate", workers=2, ps=1, iterations=3, warmup=1,
                trace=path)
    process, thread, spans = load(path)
    tracks = by_track(process, thread, spans)
    compute = tracks[("w0", "compute")]
    names = [e["name"] for e in compute if e["args"]["iteration"] == 1]
    assert names == ["forward l0", "forward l1", "backward l1", "backward l0"]
    assert [e["name"] for e in tracks[("ps0", "update")] if e["args"]["iteration"] == 1] == [
        "update l1.t1", "update l1.t0", "update l0.t0"]  # gradient order
    # consecutive iteration starts are one iteration time apart in steady state
    starts = [e["ts"] for e in compute if e["name"] == "forward l0"]
    assert (starts[-1] - starts[-2]) / 1e6 == pytest.approx(p.iteration_time_s, rel=1e-6)


def test_cli_trace_written_atomically(tmp_path):
    out = tmp_path / "trace.json"
    result = CliRunner().invoke(app, ["predict", "--method", "simulate", "--model", "resnet18",
                                      "--workers", "3", "--ps", "1", "--iterations", "3",
                                      "--trace", str(out)])
    assert result.exit_code == 0, result.output
    assert "trace written" in result.output
    assert [f.name for f in tmp_path.iterdir()] == ["trace.json"]  # no temporary left behind
    process, _, spans = load(out)
    assert {"w0", "w1", "w2", "ps0"} <= set(process.values())
    assert len(spans) > 100


def test_no_trace_unless_asked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    predict(workload=TOY, method="simulate", workers=2, ps=1, iterations=2)
    assert list(tmp_path.iterdir()) == []
