"""Flow-level network: max-min fair rates, piecewise completion times, symmetry, accounting."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddlperf.predictors.simulate.engine import Engine
from ddlperf.predictors.simulate.flows import checked_path
from ddlperf.predictors.simulate.network import Flow, Link, Network, max_min_rates


def _close(a: float, b: float, rel: float = 1e-9) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


def _start_at(
    eng: Engine,
    net: Network,
    t: float,
    size: float,
    links: Sequence[Link],
    box: list[Flow] | None = None,
    **kw: object,
) -> list[Flow]:
    """Start a flow at absolute time t; it is appended to ``box`` (returned) once started."""
    box = [] if box is None else box
    eng.at(t, lambda: box.append(net.start(size, links, **kw)))  # type: ignore[arg-type]
    return box


# -- hand-computed cases ---------------------------------------------------------------------------


def test_single_flow_takes_latency_plus_size_over_capacity() -> None:
    # Uplink 100 B/s, downlink 200 B/s: the flow runs at min = 100 B/s.
    # 1000 B / 100 B/s = 10 s, plus α = 0.5 s  ->  ends at 10.5 s.
    eng = Engine()
    net = Network(eng)
    nic_a = net.add_nic("a", up=100.0, down=100.0)
    nic_b = net.add_nic("b", up=200.0)
    done: list[float] = []
    f = net.start(
        1000.0, [nic_a.up, nic_b.down], latency=0.5, on_complete=lambda fl: done.append(eng.now)
    )
    eng.run()
    assert done == [pytest.approx(10.5, rel=1e-12)]
    assert f.submit_time == 0.0
    assert f.start_time == 0.5
    assert f.end_time == pytest.approx(10.5, rel=1e-12)
    # The link carries data only after the latency: busy 10 s, all of it saturated (uplink).
    assert nic_a.up.busy_time == pytest.approx(10.0)
    assert nic_a.up.saturated_time == pytest.approx(10.0)
    assert nic_b.down.busy_time == pytest.approx(10.0)
    assert nic_b.down.saturated_time == 0.0  # 100 of 200 B/s used: not a bottleneck
    assert nic_a.up.bytes == 1000.0
    assert nic_a.down.bytes == 0.0 and nic_a.down.busy_time == 0.0


def test_two_flows_share_a_link_piecewise() -> None:
    # One link of 100 B/s. A: 1000 B from t=0. B: 300 B from t=2.
    #   0..2   A alone at 100 B/s  -> A has 800 B left.
    #   2..8   A and B at 50 B/s   -> B needs 300/50 = 6 s, ends at 8; A has 800-300 = 500 left.
    #   8..13  A alone at 100 B/s  -> 500/100 = 5 s, ends at 13 (= 1300 B / 100 B/s, no idle).
    eng = Engine()
    net = Network(eng)
    link = net.add_link(100.0, "l")
    a = _start_at(eng, net, 0.0, 1000.0, [link], tag="A")
    b = _start_at(eng, net, 2.0, 300.0, [link], tag="B")
    rates: list[tuple[float, float]] = []
    eng.at(5.0, lambda: rates.append((a[0].rate, b[0].rate)))
    eng.run()
    assert rates == [(50.0, 50.0)]
    assert b[0].end_time == pytest.approx(8.0, rel=1e-12)
    assert a[0].end_time == pytest.approx(13.0, rel=1e-12)
    assert link.bytes == 1300.0
    assert link.busy_time == pytest.approx(13.0)
    assert link.saturated_time == pytest.approx(13.0)


def test_classic_max_min_three_links() -> None:
    # Links a = 1, b = 10, c = 3 B/s. X crosses a,b; Y crosses b; Z crosses b,c.
    # Filling: a saturates first at level 1 (X = 1); then c at 3 (Z = 3); b's leftover
    # 10 - 1 - 3 = 6 goes to Y.  Rates X, Y, Z = 1, 6, 3.
    # Sizes X = 2, Y = 60, Z = 30:
    #   X ends at 2/1 = 2. By then Y sent 12 (48 left), Z sent 6 (24 left).
    #   From 2: Z still capped by c at 3; Y gets 10 - 3 = 7 -> Y ends at 2 + 48/7 = 62/7.
    #   Z: 24/3 = 8 more -> ends at 10 (alone after 62/7, still capped at 3 by c).
    eng = Engine()
    net = Network(eng)
    la, lb, lc = net.add_link(1.0, "a"), net.add_link(10.0, "b"), net.add_link(3.0, "c")
    x = net.start(2.0, [la, lb], tag="X")
    y = net.start(60.0, [lb], tag="Y")
    z = net.start(30.0, [lb, lc], tag="Z")
    seen: list[tuple[float, ...]] = []
    eng.at(1.0, lambda: seen.append((x.rate, y.rate, z.rate)))
    eng.at(5.0, lambda: seen.append((x.rate, y.rate, z.rate)))
    eng.run()
    assert seen == [(1.0, 6.0, 3.0), (0.0, 7.0, 3.0)]
    assert x.end_time == pytest.approx(2.0, rel=1e-12)
    assert y.end_time == pytest.approx(62.0 / 7.0, rel=1e-12)
    assert z.end_time == pytest.approx(10.0, rel=1e-12)
    # Same rates from the dense numpy reference.
    ref = max_min_rates([[0, 1], [1], [1, 2]], [1.0, 10.0, 3.0])
    np.testing.assert_allclose(ref, [1.0, 6.0, 3.0], rtol=1e-12)
    # Accounting: a is busy and saturated 0..2; b busy 0..10, saturated until Y ends at 62/7
    # (then only Z at 3 of 10); c busy and saturated 0..10.
    assert (la.bytes, lb.bytes, lc.bytes) == (2.0, 92.0, 30.0)
    assert la.busy_time == pytest.approx(2.0) and la.saturated_time == pytest.approx(2.0)
    assert lb.busy_time == pytest.approx(10.0)
    assert lb.saturated_time == pytest.approx(62.0 / 7.0)
    assert lc.saturated_time == pytest.approx(10.0)
    assert lb.utilisation(10.0) == pytest.approx(0.92)


def test_weighted_flow_takes_k_times_the_share_of_a_shared_link() -> None:
    # Link 90 B/s; flow P weight 2 (two sub-flows) and flow Q weight 1: three equal shares of 30.
    # Q (300 B) ends at 10; P's sub-flows (each 600 B) sent 300 by then, then get 45 each:
    # 300/45 = 20/3 more -> 10 + 20/3 = 50/3.  Link bytes = 2*600 + 300 = 1500 = 90 * 50/3.
    eng = Engine()
    net = Network(eng)
    link = net.add_link(90.0)
    p = net.start(600.0, [link], weight=2)
    q = net.start(300.0, [link])
    eng.run()
    assert q.end_time == pytest.approx(10.0, rel=1e-12)
    assert p.end_time == pytest.approx(50.0 / 3.0, rel=1e-12)
    assert link.bytes == 1500.0


def test_copies_make_a_symmetric_ring_step_one_flow() -> None:
    # 8 identical workers, up = down = 100 B/s, ring step: worker i sends 500 B to i+1.
    # Each transfer crosses one uplink and one downlink it shares with nobody: 5 s.
    # As one flow of weight 8 over uplinks/downlinks with copies=8: the same 5 s.
    eng = Engine()
    net = Network(eng)
    nic = net.add_nic("worker", up=100.0, copies=8)
    f = net.start(500.0, [nic.up, nic.down], weight=8)
    eng.run()
    assert f.end_time == pytest.approx(5.0, rel=1e-12)
    assert nic.up.bytes == 8 * 500.0
    assert nic.up.utilisation(5.0) == pytest.approx(1.0)
    # Through a shared core of 400 B/s, 8 flows get 50 B/s each: 10 s.
    eng2 = Engine()
    net2 = Network(eng2)
    nic2 = net2.add_nic("worker", up=100.0, copies=8)
    core = net2.add_link(400.0, "core")
    g = net2.start(500.0, [nic2.up, core, nic2.down], weight=8)
    eng2.run()
    assert g.end_time == pytest.approx(10.0, rel=1e-12)
    assert core.saturated_time == pytest.approx(10.0)
    assert nic2.up.saturated_time == 0.0


def test_disjoint_components_are_not_touched() -> None:
    # Flows on separate links do not disturb each other's completion events.
    eng = Engine()
    net = Network(eng)
    l1, l2 = net.add_link(10.0), net.add_link(10.0)
    a = net.start(100.0, [l1])
    eng.run(until=1.0)
    handle = a._event
    b = net.start(10.0, [l2])
    eng.run(until=5.0)
    assert a._event is handle  # a's completion was not rescheduled
    assert b.end_time == pytest.approx(2.0)
    eng.run()
    assert a.end_time == pytest.approx(10.0)


def test_same_instant_changes_are_batched_into_one_reallocation() -> None:
    eng = Engine()
    net = Network(eng)
    link = net.add_link(100.0)
    flows = [net.start(100.0, [link]) for _ in range(10)]
    eng.run()
    # 10 starts at t=0 -> 1 reallocation; 10 equal completions at t=10 -> 1 reallocation.
    assert net.reallocations == 2
    assert all(f.end_time == pytest.approx(10.0) for f in flows)


def test_observer_and_callbacks_see_each_flow_once_in_order() -> None:
    eng = Engine()
    log: list[tuple[str, object, float, float]] = []
    net = Network(eng, observer=lambda f, s, e: log.append(("obs", f.tag, s, e)))
    link = net.add_link(10.0)

    def chain(f: Flow) -> None:
        log.append(("done", f.tag, f.start_time, f.end_time))
        if f.tag < 2:
            net.start(10.0, [link], latency=1.0, on_complete=chain, tag=f.tag + 1)

    net.start(10.0, [link], latency=1.0, on_complete=chain, tag=0)
    eng.run()
    # Each flow: 1 s latency + 10 B / 10 B/s = 2 s; three in a row end at 2, 4, 6.
    assert log == [
        ("obs", 0, 1.0, 2.0),
        ("done", 0, 1.0, 2.0),
        ("obs", 1, 3.0, 4.0),
        ("done", 1, 3.0, 4.0),
        ("obs", 2, 5.0, 6.0),
        ("done", 2, 5.0, 6.0),
    ]
    assert link.busy_time == pytest.approx(3.0)
    assert net.active_flows == 0 and net.flows_completed == 3


def test_sent_reports_progress_mid_flight() -> None:
    eng = Engine()
    net = Network(eng)
    link = net.add_link(10.0)
    f = net.start(100.0, [link], latency=2.0)
    probes: list[float] = []
    for t in (1.0, 4.0, 20.0):
        eng.at(t, lambda: probes.append(net.sent(f)))
    eng.run()
    # t=1: still in latency; t=4: 2 s at 10 B/s; t=20: done.
    assert probes == [0.0, pytest.approx(20.0), 100.0]


def test_reset_accounting_drops_warm_up_and_delivered_counts_in_flight() -> None:
    # Link 10 B/s, one 100 B flow from t=0 (ends at 10). Reset at t=4 (40 B already sent).
    # At t=6: delivered since reset = 20 B; busy 2 s. At the end: bytes = 60, busy 6 s.
    eng = Engine()
    net = Network(eng)
    link = net.add_link(10.0)
    net.start(100.0, [link])
    eng.run(until=4.0)
    assert net.delivered(link) == pytest.approx(40.0)
    net.reset_accounting()
    assert net.delivered(link) == pytest.approx(0.0, abs=1e-9)
    eng.run(until=6.0)
    assert net.delivered(link) == pytest.approx(20.0)
    assert link.busy_time == pytest.approx(2.0)
    eng.run()
    assert link.bytes == pytest.approx(60.0)
    assert link.busy_time == pytest.approx(6.0)
    assert link.saturated_time == pytest.approx(6.0)


@pytest.mark.parametrize("cap", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_capacity_raises(cap: float) -> None:
    net = Network(Engine())
    with pytest.raises(ValueError):
        net.add_link(cap)


def test_bad_copies_raises() -> None:
    net = Network(Engine())
    for copies in (0, -2, 1.5):  # (the compiled simulator rejects 1.5 by its type)
        with pytest.raises((ValueError, TypeError)):
            net.add_link(1.0, copies=copies)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"size": 0.0},
        {"size": -5.0},
        {"size": float("nan")},
        {"weight": 0.0},
        {"weight": -1.0},
        {"latency": -1e-6},
        {"latency": float("inf")},
    ],
)
def test_bad_flow_arguments_raise(kwargs: dict[str, float]) -> None:
    net = Network(Engine())
    link = net.add_link(1.0)
    args = {"size": 1.0, **kwargs}
    size = args.pop("size")
    with pytest.raises(ValueError):
        net.start(size, [link], **args)


def test_bad_paths_raise() -> None:
    net = Network(Engine())
    link = net.add_link(1.0)
    with pytest.raises(ValueError):
        net.start(1.0, [])
    with pytest.raises(ValueError):
        net.start(1.0, [link, link])


# -- properties over random small topologies -------------------------------------------------------

_caps = st.integers(min_value=1, max_value=100).map(float)


@st.composite
def scenarios(draw: st.DrawFn) -> dict:
    """Shared links, flow groups of k identical flows, each optionally with private links."""
    shared = draw(st.lists(_caps, min_size=1, max_size=4))
    groups = []
    for _ in range(draw(st.integers(min_value=1, max_value=5))):
        path = draw(st.lists(st.sampled_from(range(len(shared))), unique=True, max_size=3))
        private = draw(st.lists(_caps, max_size=2, min_size=0 if path else 1))
        groups.append(
            {
                "k": draw(st.integers(min_value=1, max_value=4)),
                "shared": path,
                "private": private,
                "size": float(draw(st.integers(min_value=1, max_value=1000))),
                "t0": draw(st.sampled_from([0.0, 0.5, 1.0, 3.25, 7.0])),
                "latency": draw(st.sampled_from([0.0, 0.0, 0.1, 2.0])),
            }
        )
    return {"shared": shared, "groups": groups}


def _simulate(sc: dict, merged: bool) -> tuple[list[float], Network, list[Flow]]:
    """Run a scenario with each group as k separate flows or as one flow of weight k.

    Separate: each of the k flows has its own copy of the group's private links.
    Merged: one flow of weight k over private links with copies=k.
    Returns the end time of every group (all k members must agree).
    """
    eng = Engine()
    net = Network(eng)
    shared = [net.add_link(c, f"s{i}") for i, c in enumerate(sc["shared"])]
    boxes: list[list[Flow]] = []
    for gi, g in enumerate(sc["groups"]):
        k = g["k"]
        box: list[Flow] = []
        if merged:
            priv = [net.add_link(c, f"g{gi}p{j}", copies=k) for j, c in enumerate(g["private"])]
            links = [shared[i] for i in g["shared"]] + priv
            box = _start_at(eng, net, g["t0"], g["size"], links, weight=k, latency=g["latency"])
        else:
            for m in range(k):
                priv = [net.add_link(c, f"g{gi}m{m}p{j}") for j, c in enumerate(g["private"])]
                links = [shared[i] for i in g["shared"]] + priv
                _start_at(eng, net, g["t0"], g["size"], links, box, latency=g["latency"])
        boxes.append(box)
    eng.run()
    ends = []
    for box in boxes:
        times = [f.end_time for f in box]
        assert all(_close(t, times[0]) for t in times), times
        ends.append(times[0])
    return ends, net, [f for box in boxes for f in box]


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_weighted_flow_equals_k_separate_flows(sc: dict) -> None:
    separate, _, _ = _simulate(sc, merged=False)
    merged, _, _ = _simulate(sc, merged=True)
    for a, b in zip(separate, merged, strict=True):
        assert _close(a, b), (separate, merged)


@settings(max_examples=100, deadline=None)
@given(scenarios(), st.booleans())
def test_bytes_are_conserved_per_link(sc: dict, merged: bool) -> None:
    _, net, flows = _simulate(sc, merged)
    expected = {id(link): 0.0 for link in net.links}
    for f in flows:
        for link in f.links:
            expected[id(link)] += f.weight * f.size
    for link in net.links:
        assert _close(link.bytes, expected[id(link)])
        # A link cannot carry more than capacity x busy time (all copies).
        assert link.bytes <= link.capacity * link.copies * link.busy_time * (1 + 1e-9) + 1e-9
        assert link.saturated_time <= link.busy_time + 1e-9
    assert net.active_flows == 0
    # No sub-flow can beat its narrowest link even when alone on it.
    for f in flows:
        fastest = min(link.capacity * link.copies / f.weight for link in f.links)
        assert f.end_time >= f.start_time + f.size / fastest * (1 - 1e-9)


@settings(max_examples=50, deadline=None)
@given(scenarios(), st.booleans())
def test_simulation_is_deterministic(sc: dict, merged: bool) -> None:
    a, net_a, _ = _simulate(sc, merged)
    b, net_b, _ = _simulate(sc, merged)
    assert a == b  # bit-identical, not just close
    assert [link.bytes for link in net_a.links] == [link.bytes for link in net_b.links]
    assert [link.busy_time for link in net_a.links] == [link.busy_time for link in net_b.links]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(_caps, min_size=1, max_size=6),
    st.data(),
)
def test_rates_match_dense_reference_and_are_max_min_fair(caps: list[float], data) -> None:
    n_links = len(caps)
    paths = data.draw(
        st.lists(
            st.lists(st.integers(0, n_links - 1), min_size=1, max_size=n_links, unique=True),
            min_size=1,
            max_size=8,
        )
    )
    weights = data.draw(
        st.lists(st.sampled_from([1.0, 2.0, 3.0, 0.5]), min_size=len(paths), max_size=len(paths))
    )
    eng = Engine()
    net = Network(eng)
    links = [net.add_link(c) for c in caps]
    flows = [
        net.start(1e9, [links[i] for i in p], weight=w) for p, w in zip(paths, weights, strict=True)
    ]
    got: list[float] = []
    eng.at(0.0, lambda: got.extend(f.rate for f in flows))  # after the batched reallocation
    eng.run(until=1e-3)
    ref = max_min_rates(paths, caps, weights)
    np.testing.assert_allclose(got, ref, rtol=1e-9)
    # Max-min fairness: feasible, and every flow crosses a saturated link on which it has
    # the largest rate (so it cannot grow without shrinking an equal-or-smaller flow).
    load = np.zeros(n_links)
    for p, w, r in zip(paths, weights, got, strict=True):
        load[p] += w * r
    assert np.all(load <= np.asarray(caps) * (1 + 1e-9))
    for p, r in zip(paths, got, strict=True):
        assert any(
            load[i] >= caps[i] * (1 - 1e-9)
            and all(got[j] <= r * (1 + 1e-9) for j, q in enumerate(paths) if i in q)
            for i in p
        )


class _CheckedNetwork(Network):
    """Checks every reallocation against the dense reference over all active flows."""

    checks = 0

    def _reallocate(self) -> None:
        super()._reallocate()
        active = [f for f in dict.fromkeys(f for link in self.links for f in link.flows)]
        if not active:
            return
        index = {link: i for i, link in enumerate(self.links)}
        ref = max_min_rates([[index[link] for link in f.links] for f in active],
                            [link.capacity for link in self.links],
                            [f.weight for f in active], [link.copies for link in self.links])
        np.testing.assert_allclose([f.rate for f in active], ref, rtol=1e-9)
        for link in self.links:  # the kept loads are what the flows use
            used = sum(f.weight * f.rate for f in link.flows)
            assert abs(link._load - used) <= 1e-9 * link.capacity * link.copies
        _CheckedNetwork.checks += 1


@pytest.mark.pure_python  # subclasses Network
@settings(max_examples=120, deadline=None)
@given(st.lists(_caps, min_size=2, max_size=7), st.data())
def test_local_reallocation_is_max_min_fair_after_every_change(caps: list[float], data) -> None:
    # Flows start and end at many different times over shared links; after each change the
    # local reallocation (or its fallback) must give exactly the dense max-min rates.
    n_links = len(caps)
    specs = data.draw(st.lists(st.tuples(
        st.lists(st.integers(0, n_links - 1), min_size=1, max_size=3, unique=True),
        st.sampled_from([1.0, 1.0, 2.0, 0.5]),
        st.integers(1, 400).map(float),
        st.integers(0, 40).map(lambda t: t / 8)), min_size=1, max_size=14))
    ends = {}
    for local in (True, False):
        eng = Engine()
        net = _CheckedNetwork(eng, local=local)
        links = [net.add_link(c, copies=1 + i % 2) for i, c in enumerate(caps)]
        flows = []
        for path, w, size, t0 in specs:
            eng.at(t0, lambda p=path, w=w, s=size, net=net, links=links, flows=flows:
                   flows.append(net.start(s, [links[i] for i in p], weight=w)))
        eng.run()
        ends[local] = [f.end_time for f in flows]
    np.testing.assert_allclose(ends[True], ends[False], rtol=1e-9)


def test_local_reallocation_touches_only_the_changed_links() -> None:
    # 8 senders into one receiver: a 9th flow on the receiver's link changes the 8 others'
    # rates and nothing else, so it is settled locally (no fallback).
    eng = Engine()
    net = Network(eng, local=True)
    sink = net.add_link(80.0, "sink")
    senders = [net.add_link(100.0, f"up{i}") for i in range(9)]
    flows = [net.start(1e6, [senders[i], sink]) for i in range(8)]
    eng.run(until=1.0)
    assert [f.rate for f in flows] == [10.0] * 8
    extra = net.start(1e6, [senders[8], sink])
    eng.run(until=2.0)
    assert [f.rate for f in [*flows, extra]] == pytest.approx([80 / 9] * 9, rel=1e-12)
    assert net.local_misses == 0


def test_local_reallocation_falls_back_when_the_change_spreads() -> None:
    # L0 = 10 carries a and b, L1 = 8 carries b and c: L1 limits b and c to 4, a gets 6.
    # d joins L0: a, b, d get 10/3; b slowing down leaves L1 room, so c (not on L0) grows to
    # 8 − 10/3. The local step only sees L0's flows, finds L1 no longer full, and falls back.
    eng = Engine()
    net = Network(eng, local=True)
    l0, l1 = net.add_link(10.0), net.add_link(8.0)
    a, b, c = net.start(1e6, [l0]), net.start(1e6, [l0, l1]), net.start(1e6, [l1])
    eng.run(until=0.5)
    assert (a.rate, b.rate, c.rate) == (6.0, 4.0, 4.0)
    d = net.start(1e6, [l0])
    eng.run(until=1.0)
    assert [f.rate for f in (a, b, d, c)] == pytest.approx([10 / 3] * 3 + [8 - 10 / 3])
    assert net.local_misses == 1


def test_a_spreading_change_is_settled_by_a_wider_local_fill() -> None:
    # As above, with c also crossing L2 = 100, which g fills. d joins L0: c grows, so g
    # shrinks. The local step (L0's flows) fails its check; refills with the links where it
    # failed added give the max-min rates, without the fill over the whole component.
    eng = Engine()
    net = Network(eng, local=True)
    l0, l1, l2 = net.add_link(10.0), net.add_link(8.0), net.add_link(100.0)
    a, b, c = net.start(1e6, [l0]), net.start(1e6, [l0, l1]), net.start(1e6, [l1, l2])
    g = net.start(1e6, [l2])
    eng.run(until=0.5)
    assert (a.rate, b.rate, c.rate, g.rate) == (6.0, 4.0, 4.0, 96.0)
    d = net.start(1e6, [l0])
    eng.run(until=1.0)
    assert [f.rate for f in (a, b, d, c)] == pytest.approx([10 / 3] * 3 + [8 - 10 / 3])
    assert g.rate == pytest.approx(100 - (8 - 10 / 3))
    assert net.local_misses == 1 and net.widened == 1


@pytest.mark.parametrize("local", [False, True])
def test_a_checked_start_runs_as_start(local: bool) -> None:
    # Network.start_checked (for a connection, which checks its path once): the same flow,
    # rates and end times as start().
    got = []
    for checked in (False, True):
        eng = Engine()
        net = Network(eng, local=local)
        a, b = net.add_link(100.0), net.add_link(50.0)
        first = net.start(300.0, [a])
        if checked:
            path, weight = checked_path([a, b], 2)
            flow = net.start_checked(200, path, weight, None, "x", None)
        else:
            flow = net.start(200, [a, b], weight=2, tag="x")
        eng.run()
        got.append((first.end_time, flow.end_time, flow.weight, flow.size, flow.tag))
        assert type(flow.size) is float and type(flow.weight) is float
    assert got[0] == got[1]
