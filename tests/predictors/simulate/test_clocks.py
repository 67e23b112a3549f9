"""Local mode of the network: per-link virtual clocks and one-link settlements (clocks.py).

The reference is the per-flow network (``local=False``: one completion event per flow, the
whole component refilled on every change), which computes the same max-min allocation with
different rounding; and the dense numpy water-filling.
"""

from __future__ import annotations

from heapq import heapify, heapreplace

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.stats import ks_2samp

from ddlperf.api import predict
from ddlperf.predictors.simulate import run
from ddlperf.predictors.simulate.engine import Engine
from ddlperf.predictors.simulate.network import Flow, Network, max_min_rates
from tests.predictors.simulate.reference_cases import MIXED, small_workload


def _fan_in(local: bool, sizes: list[float]) -> tuple[Network, list[Flow], Engine]:
    """Flows from their own 100 B/s uplinks into one 80 B/s sink."""
    eng = Engine()
    net = Network(eng, local=local)
    sink = net.add_link(80.0, "sink")
    flows = [net.start(size, [net.add_link(100.0, f"up{i}"), sink])
             for i, size in enumerate(sizes)]
    return net, flows, eng


def test_a_flow_joining_a_shared_link_moves_only_that_links_level() -> None:
    net, flows, eng = _fan_in(True, [1e6] * 8)
    eng.run(until=1.0)
    quick = net.quick
    sink = net.links[0]
    extra = net.start(1e6, [net.add_link(100.0, "up8"), sink])
    eng.run(until=2.0)
    assert net.quick == quick + 1 and net.local_misses == 0
    assert sink.level == pytest.approx(80 / 9, rel=1e-12)
    assert all(f.rate == sink.level for f in [*flows, extra])  # rate is the level
    assert len(sink._bn) == 9


def test_an_ended_flow_raises_its_bottleneck_level_and_end_times_match_per_flow_events() -> None:
    sizes = [100.0 * (i + 1) for i in range(8)]
    ends = {}
    for local in (True, False):
        net, flows, eng = _fan_in(local, sizes)
        eng.run()
        ends[local] = [f.end_time for f in flows]
        if local:
            assert net.quick == net.reallocations  # every end settled on the sink alone
    # Processor sharing: the k-th smallest ends when k of each size has gone at 80/n.
    assert ends[False][0] == pytest.approx(100 / 10)
    np.testing.assert_allclose(ends[True], ends[False], rtol=1e-12)


def test_a_freed_link_that_limits_someone_is_left_to_the_fill() -> None:
    # L0 = 10 carries a, b and d, L1 = 8 carries b and c: L0 limits a, b, d to 10/3, c gets
    # the rest of L1. a ends: raising b and d on L0 alone would give b 5, but L1 (which
    # limits c) then limits b too; the fill finds b = c = 4 and d = 6.
    eng = Engine()
    net = Network(eng, local=True)
    l0, l1 = net.add_link(10.0), net.add_link(8.0)
    a, b = net.start(10.0, [l0]), net.start(1e6, [l0, l1])
    c, d = net.start(1e6, [l1]), net.start(1e6, [l0])
    eng.run(until=2.0)
    assert [f.rate for f in (a, b, c, d)] == pytest.approx([10 / 3, 10 / 3, 14 / 3, 10 / 3])
    quick = net.quick
    eng.run(until=4.0)
    assert a.end_time == pytest.approx(3.0)
    assert [f.rate for f in (b, c, d)] == pytest.approx([4.0, 4.0, 6.0], rel=1e-12)
    assert net.quick == quick
    assert net.sent(b) == pytest.approx(10.0 + 4.0, rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 50).map(float), min_size=1, max_size=40), st.integers(0, 50))
def test_a_next_tag_before_both_children_of_the_root_is_where_heapreplace_leaves_it(
        tags: list[float], new: int) -> None:
    # clocks.finish puts a flow's next finish tag at the root of its link's heap without a
    # sift when it precedes both children: the layout heapreplace leaves (ties in the tags
    # broken by the sequence number, as in the link heaps).
    heap = [[t, i, None] for i, t in enumerate(tags)]
    heapify(heap)
    entry = [float(new), len(tags), None]
    n = len(heap)
    assume((n < 2 or entry < heap[1]) and (n < 3 or entry < heap[2]))
    want = list(heap)
    heapreplace(want, entry)
    heap[0] = entry
    assert heap == want


_caps = st.sampled_from([10.0, 20.0, 35.0, 80.0, 100.0])


@settings(max_examples=80, deadline=None)
@given(st.lists(_caps, min_size=2, max_size=6), st.data())
def test_back_to_back_messages_match_per_flow_events(caps: list[float], data) -> None:
    # Connections that send several messages back to back (``follow``) start at random
    # times over shared links; every message's end, and bytes sent and delivered probed
    # mid-flight, agree with the per-flow network; rates agree with the dense reference.
    n_links = len(caps)
    specs = data.draw(st.lists(st.tuples(
        st.lists(st.integers(0, n_links - 1), min_size=1, max_size=3, unique=True),
        st.sampled_from([1.0, 1.0, 2.0]),
        st.lists(st.integers(1, 300).map(float), min_size=1, max_size=4),
        st.integers(0, 30).map(lambda t: t / 8)), min_size=1, max_size=12))
    probes = data.draw(st.lists(st.integers(1, 400).map(lambda t: t / 16), max_size=4))
    seen: dict[bool, tuple[list[float], list[float], list[float]]] = {}
    for local in (True, False):
        eng = Engine()
        ends: list[float] = []
        net = Network(eng, observer=lambda f, s, e, ends=ends: ends.append(e), local=local)
        links = [net.add_link(c, copies=1 + i % 2) for i, c in enumerate(caps)]
        flows: list[Flow] = []
        probed: list[float] = []
        rates_ok: list[bool] = []

        def begin(path, w, sizes, net=net, links=links, flows=flows):
            queue = list(sizes[1:])
            flows.append(net.start(sizes[0], [links[i] for i in path], weight=w,
                                   follow=lambda f, q=queue: (q.pop(0), None) if q else None))

        def probe(net=net, links=links, flows=flows, probed=probed, rates_ok=rates_ok):
            probed.extend(net.sent(f) for f in flows)
            probed.extend(net.delivered(link) for link in links)
            active = [f for f in flows if f.active]
            if active:
                index = {link: i for i, link in enumerate(links)}
                ref = max_min_rates([[index[x] for x in f.links] for f in active],
                                    caps, [f.weight for f in active],
                                    [link.copies for link in links])
                rates_ok.append(np.allclose([f.rate for f in active], ref, rtol=1e-9))

        for path, w, sizes, t0 in specs:
            eng.at(t0, begin, path, w, sizes)
        for t in probes:
            eng.at(t + 1e-7, probe)  # after any reallocation at t
        eng.run()
        assert all(rates_ok)
        seen[local] = ends, probed, [f.end_time for f in flows]
    for got, want in zip(seen[True], seen[False], strict=True):
        np.testing.assert_allclose(sorted(got), sorted(want), rtol=1e-9, atol=1e-9)


def _per_flow(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make noisy runs use the per-flow network (as before the virtual clocks)."""
    monkeypatch.setattr(run, "Network", lambda engine, local=False: Network(engine))


NOISY = {
    "asp": dict(workers=12, ps=3, sync="asp"),
    "bsp": dict(workers=12, ps=3),
    "ssp-mixed": dict(cluster=MIXED, ps=2, sync="ssp", staleness=1),
    "ring": dict(arch="allreduce", workers=12),
}


@pytest.mark.parametrize("name", list(NOISY))
def test_noisy_runs_equal_the_per_flow_network_seed_by_seed(name, monkeypatch) -> None:
    # The same seed draws the same compute times per worker; the clocks change only rounding.
    kw = dict(NOISY[name], jitter=0.05, iterations=4, warmup=1, jobs=1)
    for seed in (0, 1):
        clocked = predict(workload=small_workload(), method="simulate", seed=seed, **kw)
        with monkeypatch.context() as m:
            _per_flow(m)
            exact = predict(workload=small_workload(), method="simulate", seed=seed, **kw)
        assert clocked.iteration_time_s == pytest.approx(exact.iteration_time_s, rel=1e-9)


@pytest.mark.slow
def test_asp_iteration_times_have_the_per_flow_distribution(monkeypatch) -> None:
    # Two-sample check of the new path on disjoint seeds (as test_reference does against
    # frozen samples): 8 workers on 2 shards, where most changes settle on one link.
    kw = dict(workers=8, ps=2, sync="asp", jitter=0.05, iterations=3, warmup=1, jobs=1)

    def means(seeds: range) -> list[float]:
        return [predict(workload=small_workload(), method="simulate", seed=s,
                        **kw).iteration_time_s for s in seeds]

    clocked = means(range(100, 130))
    with monkeypatch.context() as m:
        _per_flow(m)
        exact = means(range(200, 230))
    assert ks_2samp(clocked, exact).pvalue > 1e-3
