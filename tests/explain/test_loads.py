"""Resource loads, shard bytes, waits and the bottleneck sentence."""

from __future__ import annotations

import pytest

from ddlperf.api import predict, scenario
from ddlperf.explain.loads import (
    bottleneck_words,
    imbalance,
    resource_loads,
    shard_loads,
    worker_waits,
)


def _all(**kwargs):
    sc = scenario(**{k: v for k, v in kwargs.items()
                     if k not in ("method", "iterations", "warmup")})
    p = predict(**kwargs)
    loads = resource_loads(sc, p)
    shards = shard_loads(sc)
    waits = worker_waits(sc, p)
    return sc, p, loads, shards, waits, bottleneck_words(sc, p, loads, shards, waits)


def test_shard_bytes_add_up_and_name_the_tensors_behind_an_imbalance():
    # resnet50 has conv / bn weight / bn bias triples: round-robin over 3 shards puts
    # every convolution on ps0
    sc, _p, _loads, shards, _w, words = _all(model="resnet50", workers=16, ps=3)
    assert sum(s.bytes for s in shards) == pytest.approx(sc.parameter_bytes)
    assert imbalance(shards) > 2.5
    heavy = max(shards, key=lambda s: s.bytes)
    assert heavy.name == "ps0"
    assert heavy.top_tensors[0]["name"].endswith("conv2.weight")
    assert "imbalanced" in words and "ps0" in words


def test_link_bytes_are_senders_times_shard_bytes():
    _sc, p, loads, shards, _w, words = _all(model="resnet50", workers=16, ps=2)
    down = next(r for r in loads if r.name == "ps0 downlink")
    assert down.bytes == pytest.approx(16 * shards[0].bytes)
    assert down.busy_s == pytest.approx(down.bytes / down.rate_bytes_per_s)
    assert words.startswith(f"The bottleneck is {p.bottleneck}")
    assert loads == sorted(loads, key=lambda r: r.utilization, reverse=True)


def test_straggler_waits_and_sentence():
    cluster = {"workers": [{"name": "fast", "count": 3}, {"name": "slow", "count": 1,
                                                          "speed": 0.25}], "ps": 2}
    _sc, p, _loads, _shards, waits, words = _all(model="resnet50", cluster=cluster,
                                              bandwidth="100Gbps")
    assert p.bottleneck.startswith("straggler")
    fast = next(w for w in waits if w.group == "fast")
    slow = next(w for w in waits if w.group == "slow")
    assert fast.count == 3 and fast.workers == "w0–w2"
    assert fast.wait_s == pytest.approx(slow.compute_s - fast.compute_s)
    assert slow.wait_s == 0 and slow.reason == "no wait"
    assert "straggler" in words and "w3" in words


def test_ssp_waits_are_at_the_bound():
    cluster = {"workers": [{"name": "fast", "count": 2}, {"name": "slow", "count": 1,
                                                          "speed": 0.25}], "ps": 1}
    _sc, _p, _l, _s, waits, _words = _all(model="resnet18", cluster=cluster, sync="ssp",
                                        staleness=1, bandwidth="100Gbps", method="simulate",
                                        iterations=6, warmup=2)
    waiting = [w for w in waits if w.wait_s > 0]
    assert waiting and all("SSP bound" in w.reason for w in waiting)


def test_compute_bound_sentence():
    *_rest, words = _all(model="resnet50", workers=2, ps=2, bandwidth="400Gbps")
    assert words.startswith("Compute-bound")
