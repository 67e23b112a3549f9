"""Parameter server, simulated: hand-computed cases, agreement with analytic, BSP/ASP/SSP."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddlperf.api import predict
from ddlperf.api import scenario as api_scenario
from ddlperf.predictors.simulate.connection import Connection
from ddlperf.predictors.simulate.engine import Engine
from ddlperf.predictors.simulate.network import Network
from ddlperf.predictors.simulate.units import make_units
from ddlperf.workload import zoo
from tests.conftest import make_workload

GOODPUT = 1448 / 1514
B_1G = 1e9 * GOODPUT / 8  # payload bytes/s of 1 Gbps


def sim(workload, **kw):
    return predict(workload=workload, method="simulate", **kw)


def both(workload, **kw):
    return predict(workload=workload, **kw), sim(workload, **kw)


# -- connections: back-to-back messages on one flow ------------------------------------------


def test_connection_sends_back_to_back_and_adds_latency_per_message():
    # 100 B/s, α = 0.5 s; messages of 100, 200, 100 B queued at once:
    # last bytes leave at 1, 3, 4 s → delivered at 1.5, 3.5, 4.5 s.
    eng = Engine()
    net = Network(eng)
    a, b = net.add_nic("a", 100.0), net.add_nic("b", 100.0)
    got: list[tuple[str, float]] = []
    conn = Connection(net, (a.up, b.down), 1, 0.5, lambda p: got.append((p, eng.now)), "a→b")
    for name, size in (("x", 100.0), ("y", 200.0), ("z", 100.0)):
        conn.send(size, name)
    eng.run()
    assert got == [("x", pytest.approx(1.5)), ("y", pytest.approx(3.5)), ("z", pytest.approx(4.5))]
    assert net.reallocations == 2  # busy once, idle once: messages in between cost nothing
    assert a.up.bytes == 400.0
    assert conn.flow is None


def test_connection_shares_link_fairly_with_another():
    # Two connections into one 100 B/s downlink: 100 B each at 50 B/s → both arrive at 2 s.
    eng = Engine()
    net = Network(eng)
    a, b, c = (net.add_nic(n, 100.0) for n in "abc")
    got: list[float] = []
    for src in (a, b):
        Connection(net, (src.up, c.down), 1, 0.0, lambda p: got.append(eng.now), "").send(100, 0)
    eng.run()
    assert got == [pytest.approx(2.0), pytest.approx(2.0)]


@pytest.mark.parametrize("local", [False, True])
def test_messages_queued_ahead_go_out_as_if_sent_at_their_ready_time(local) -> None:
    # 100 B/s, α = 0.5 s. Queued at 0: x (100 B) ready at 0, y (200 B) ready at 0.5 (x still
    # sending: it follows at 1), z (100 B) ready at 5 (the connection idles from 3.5 to 5).
    # Another flow shares the uplink from 1.5 to 2.5 (50 B/s each then): y ends at 3.5.
    eng = Engine()
    net = Network(eng, local=local)
    a, b, c = (net.add_nic(n, 100.0) for n in "abc")
    got: list[tuple[str, float]] = []
    conn = Connection(net, (a.up, b.down), 1, 0.5, lambda p: got.append((p, eng.now)), "a→b")
    for name, size, ready in (("x", 100.0, 0.0), ("y", 200.0, 0.5), ("z", 100.0, 5.0)):
        conn.send_at(ready, size, name)
    eng.at(1.5, lambda: net.start(50.0, (a.up, c.down)))
    eng.run()
    assert got == [("x", pytest.approx(1.5)), ("y", pytest.approx(4.0)),
                   ("z", pytest.approx(6.5))]
    assert a.up.bytes == 450.0
    assert conn.flow is None


@pytest.mark.parametrize("local", [False, True])
def test_early_connection_tells_each_message_at_its_last_byte(local) -> None:
    # 100 B/s, α = 0.5 s; x (100 B) sent at 0, y (200 B) queued behind it, z (100 B) sent at
    # 4 on the idle connection: told (payload, arrival) when the last byte leaves, at 1, 3, 5.
    # Local mode: the link's clock asks the connection for its next message natively.
    eng = Engine()
    net = Network(eng, local=local)
    a, b = net.add_nic("a", 100.0), net.add_nic("b", 100.0)
    got: list[tuple[str, float, float]] = []
    conn = Connection(net, (a.up, b.down), 1, 0.5,
                      lambda p, arrival: got.append((p, arrival, eng.now)), "a→b", early=True)
    conn.send(100.0, "x")
    conn.send(200.0, "y")
    eng.at(4.0, lambda: conn.send(100.0, "z"))
    eng.run()
    assert got == [("x", pytest.approx(1.5), pytest.approx(1.0)),
                   ("y", pytest.approx(3.5), pytest.approx(3.0)),
                   ("z", pytest.approx(5.5), pytest.approx(5.0))]
    assert a.up.bytes == 400.0
    assert conn.flow is None


# -- hand-computed -----------------------------------------------------------------------------


def test_bsp_single_tensor_by_hand():
    w = make_workload([(0.001, 0.002, [4_000_000])], update_s_per_byte=1e-9)
    p = sim(w, workers=4, ps=1, bandwidth="1Gbps", latency="50us")
    # pull 16 MB through the PS uplink + α, forward 1 ms, backward 2 ms, push 16 MB through
    # the PS downlink + α, update 4 MB × 1 ns (one tensor: nothing to overlap)
    expected = 16e6 / B_1G + 50e-6 + 0.003 + 16e6 / B_1G + 50e-6 + 0.004
    assert p.iteration_time_s == pytest.approx(expected, rel=1e-9)
    assert p.method == "simulate"
    assert p.bottleneck == "ps0 downlink"
    assert p.breakdown_s["compute"] == pytest.approx(0.003)
    assert p.breakdown_s["wait"] == 0
    parts = ("compute", "communication", "wait")
    assert sum(p.breakdown_s[k] for k in parts) == pytest.approx(p.iteration_time_s)
    assert p.breakdown_s["communication_inter"] == p.breakdown_s["communication"]
    down = next(r for r in p.resources if r.name == "ps0 downlink")
    assert down.busy_s == pytest.approx(16e6 / B_1G, rel=1e-6)
    update = next(r for r in p.resources if r.name == "ps0 update")
    assert update.busy_s == pytest.approx(0.004, rel=1e-6)


def test_colocated_ps_keeps_local_traffic_off_the_wire():
    w = make_workload([(0.001, 0.002, [4_000_000])])
    p = sim(w, workers=4, ps=1, placement="colocated", bandwidth="1Gbps", latency=0)
    assert p.iteration_time_s == pytest.approx(2 * 12e6 / B_1G + 0.003, rel=1e-9)
    assert p.bottleneck in ("ps0 downlink", "ps0 uplink")


# -- agreement with the analytic model where it is exact -----------------------------------


def _small():
    return make_workload([(0.01, 0.02, [4_000_000]), (0.005, 0.01, [2_000_000, 1_000]),
                          (0.02, 0.03, [8_000_000])], update_s_per_byte=1e-10)


def _zoo(workload):
    return zoo.load(workload, batch_size=32, device="V100") if isinstance(workload, str) \
        else workload


def _cases():
    # Not colocated PS: there the hosts pull less than the others (their own shard is local),
    # which the analytic model ignores, so the simulation is (rightly) a little faster.
    small = _small()
    return [
        pytest.param(small, dict(workers=4, ps=1, bandwidth="1Gbps"), id="small-1ps"),
        pytest.param(small, dict(workers=6, ps=3, sharding="even"), id="small-even"),
        pytest.param("resnet18", dict(workers=8, ps=2), id="resnet18-rr"),
        pytest.param("resnet18", dict(workers=8, ps=3, sharding="greedy"), id="resnet18-greedy"),
        pytest.param("resnet50", dict(workers=64, ps=4), id="resnet50-64w"),
    ]


@pytest.mark.parametrize(("workload", "kw"), _cases())
def test_bsp_agrees_with_analytic_without_overlap(workload, kw):
    a, s = both(_zoo(workload), overlap=False, **kw)
    assert s.iteration_time_s == pytest.approx(a.iteration_time_s, rel=0.02)
    assert s.throughput_samples_per_s == pytest.approx(a.throughput_samples_per_s, rel=0.02)
    assert s.bottleneck == a.bottleneck


def _barrier_cases():
    capped = dict(workers=4, ps=2, bandwidth="1Gbps", transport="20MB/s")
    return [*_cases()[:3], pytest.param(_small(), capped, id="small-capped")]


@pytest.mark.parametrize(("workload", "kw"), _barrier_cases())
def test_step_barrier_agrees_with_analytic_exactly(workload, kw):
    # Identical workers, dedicated shards: after the barrier every pull leaves at once, in
    # gradient order on each connection — the FIFOs of the analytic model's one pass.
    workload = _zoo(workload)
    a, s = both(workload, step_barrier=True, **kw)
    assert s.iteration_time_s == pytest.approx(a.iteration_time_s, rel=1e-9)
    assert s.bottleneck == a.bottleneck
    free = predict(workload=workload, **kw)
    # the barrier only takes overlap away: never faster than pulls that follow each update
    assert a.iteration_time_s >= free.iteration_time_s * (1 - 1e-12)


def test_step_barrier_holds_pulls_until_the_last_update():
    # Two layers, one tensor each (gradient order: layer 1's first). Without the barrier
    # layer 1's pull runs behind layer 0's backward and push; with it, both pulls start after
    # the last update, layer 1's first, so forward waits for the whole transfer.
    w = make_workload([(0.001, 0.002, [1_000_000]), (0.001, 0.002, [1_000_000])])
    kw = dict(workers=2, ps=1, bandwidth="1Gbps", latency=0)
    barrier = sim(w, step_barrier=True, **kw)
    pull = push = 2 * 1e6 / B_1G  # one 1 MB tensor to (from) 2 workers through the shard
    # pulls: both tensors back to back; forward 2 × 1 ms; backward of layer 1 (2 ms); its push
    # hides layer 0's backward (2 ms) and layer 0's push queues behind it on the shard's link
    expected = 2 * pull + 0.002 + 0.002 + push + push
    assert barrier.iteration_time_s == pytest.approx(expected, rel=1e-9)
    assert sim(w, **kw).iteration_time_s < barrier.iteration_time_s


def test_colocated_shard_updates_on_the_host_cpu_not_its_worker_stream():
    # ASP, the only shard on w0, 10 ms per update: w0 computes 30 ms and waits only for its own
    # update (its parameters stay local) — 40 ms; the others' updates run on the host's CPU
    # beside w0's accelerator stream, so they do not stretch w0's compute.
    w = make_workload([(0.01, 0.02, [1_000_000])], update_s_per_byte=1e-8)
    p = sim(w, workers=3, ps=1, placement="colocated", sync="asp", bandwidth="1Gbps", latency=0)
    # (the workers start at random phases, so w0's update now and then waits behind another's)
    assert 0.040 <= p.workers[0].iteration_time_s < 0.0415
    assert p.workers[0].compute_s == pytest.approx(0.030)


@pytest.mark.parametrize("kw", [dict(workers=6, ps=3, sharding="even"), dict(workers=8, ps=2),
                                dict(workers=4, ps=4)], ids=["even-3", "rr-2", "rr-4"])
def test_colocated_bsp_agrees_with_analytic_without_overlap(kw):
    # Without overlap a host's two roles use its NIC in separate phases (pushes, then pulls),
    # which the analytic view of colocated shards assumes: exact for balanced shards.
    workload = zoo.load("resnet18", batch_size=32, device="V100")
    a, s = both(workload, overlap=False, placement="colocated", **kw)
    assert s.iteration_time_s == pytest.approx(a.iteration_time_s, rel=0.02)
    assert s.bottleneck == a.bottleneck


@pytest.mark.parametrize("kw", [dict(workers=3, ps=2), dict(workers=4, ps=2),
                                dict(workers=3, ps=3), dict(workers=8, ps=2)])
def test_colocated_bsp_with_overlap_close_to_analytic(kw):
    # With overlap a host's roles follow each other on its NIC (the shard's pulls, then its
    # worker's pushes): the analytic view is within a few percent for balanced shards (a split
    # of the NIC in proportion to the bytes made it 9–19% slow here).
    workload = make_workload([(0.01, 0.02, [1_000_000])] * 8)
    a, s = both(workload, placement="colocated", bandwidth="200Mbps", **kw)
    assert a.iteration_time_s == pytest.approx(s.iteration_time_s, rel=0.04)


def test_heterogeneous_bsp_names_the_straggler_like_analytic():
    w = make_workload([(0.02, 0.04, [100_000])])
    cluster = {"workers": [{"count": 3}, {"name": "slow", "count": 1, "speed": 0.5}]}
    a, s = both(w, cluster=cluster, ps=1, overlap=False)
    assert s.bottleneck == a.bottleneck == "straggler w3"
    assert s.iteration_time_s == pytest.approx(a.iteration_time_s, rel=0.02)
    assert {r.iteration_time_s for r in s.workers} == {s.workers[0].iteration_time_s}
    assert s.workers[0].wait_s == pytest.approx(0.06)  # 120 ms vs 60 ms of compute
    assert s.workers[3].wait_s == 0


# -- overlap ----------------------------------------------------------------------------------

layers = st.lists(
    st.tuples(st.floats(1e-4, 0.02), st.floats(1e-4, 0.04),
              st.lists(st.integers(1_000, 3_000_000), min_size=1, max_size=3)),
    min_size=1, max_size=6,
)


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(layers, st.integers(1, 6), st.integers(1, 3), st.sampled_from(["bsp", "asp", "ssp"]),
       st.sampled_from(["round_robin", "even", "greedy"]),
       st.sampled_from(["100Mbps", "1Gbps", "10Gbps"]), st.booleans())
def test_overlap_never_slower(spec, n, k, sync, sharding, bandwidth, mixed):
    # Dedicated PS shards. BSP: never slower, exactly (none in 500 random cases). ASP/SSP:
    # identical workers fall into a common phase (see test_deterministic_asp_workers_stay_in_
    # phase), and which phase depends on the start, so over a short window overlap may come
    # out up to ~1.5% slower (5 of 1000 random cases); 3% is allowed for them.
    # Colocated shards are left out on purpose: there a host's NIC carries its worker's pushes
    # and its shard's pulls, and fair sharing lets early, non-urgent pulls slow the pushes on
    # the critical path, so overlap can really be slower (no priorities, as in P3/TicTac).
    w = make_workload(spec, update_s_per_byte=1e-10)
    cluster = ({"workers": [{"count": n - 1}, {"count": 1, "speed": 0.6}]} if mixed and n > 1
               else {"workers": [{"count": n}]})
    kw = dict(cluster=cluster, ps=k, sync=sync, sharding=sharding, bandwidth=bandwidth,
              iterations=8, warmup=2, staleness=1 if sync == "ssp" else None)
    on = sim(w, overlap=True, **kw)
    off = sim(w, overlap=False, **kw)
    slack = 1e-9 if sync == "bsp" else 0.03
    assert on.iteration_time_s <= off.iteration_time_s * (1 + slack)


def test_overlap_hides_push_behind_backward():
    w = make_workload([(0.01, 0.05, [1_000_000]), (0.01, 0.05, [5_000_000])])
    on = sim(w, workers=2, ps=1, bandwidth="1Gbps", overlap=True)
    off = sim(w, workers=2, ps=1, bandwidth="1Gbps", overlap=False)
    assert on.iteration_time_s < 0.9 * off.iteration_time_s


# -- ASP and SSP -------------------------------------------------------------------------------

COMPUTE_BOUND = make_workload(
    [(0.01, 0.02, [100_000]), (0.005, 0.01, [200_000, 1_000]), (0.02, 0.03, [300_000])],
    update_s_per_byte=1e-10)
MIXED = {"workers": [{"count": 3}, {"name": "slow", "count": 1, "speed": 0.5}]}


def test_asp_slow_worker_does_not_hold_back_fast_ones():
    homo = sim(COMPUTE_BOUND, workers=4, ps=1, sync="asp")
    mixed = sim(COMPUTE_BOUND, cluster=MIXED, ps=1, sync="asp")
    reference = homo.workers[0].iteration_time_s
    for fast in mixed.workers[:3]:
        assert fast.iteration_time_s == pytest.approx(reference, rel=0.05)
    assert mixed.workers[3].iteration_time_s > 1.8 * reference  # it is half as fast
    assert all(r.wait_s == 0 for r in mixed.workers)
    # BSP, by contrast, makes everyone as slow as the straggler.
    bsp = sim(COMPUTE_BOUND, cluster=MIXED, ps=1)
    assert bsp.workers[0].iteration_time_s > 1.8 * reference


def test_ssp_zero_is_bsp_and_large_staleness_is_asp():
    kw = dict(cluster=MIXED, ps=1, bandwidth="1Gbps")
    bsp = sim(COMPUTE_BOUND, **kw)
    asp = sim(COMPUTE_BOUND, sync="asp", **kw)
    ssp0 = sim(COMPUTE_BOUND, sync="ssp", staleness=0, **kw)
    ssp1 = sim(COMPUTE_BOUND, sync="ssp", staleness=1, **kw)
    big = sim(COMPUTE_BOUND, sync="ssp", staleness=1000, **kw)
    assert ssp0.iteration_time_s == bsp.iteration_time_s
    assert [r.iteration_time_s for r in ssp0.workers] == [r.iteration_time_s for r in bsp.workers]
    # s = 1000: the fast workers would need ~2000 iterations to reach the bound, more than the
    # warm-up budget — ASP's rates, and the output says the run is too short for SSP's steady
    # state
    # (ASP starts its identical workers at random phases and averages 8 draws, SSP starts them
    # together: 1.6% apart here)
    assert [r.iteration_time_s for r in big.workers] == pytest.approx(
        [r.iteration_time_s for r in asp.workers], rel=0.02)
    assert any("not in steady state" in note for note in big.notes)
    # in between: fast workers wait at the bound
    assert bsp.throughput_samples_per_s < ssp1.throughput_samples_per_s
    assert ssp1.throughput_samples_per_s <= asp.throughput_samples_per_s * (1 + 1e-9)
    assert max(r.wait_s for r in ssp1.workers[:3]) > 0
    assert ssp1.workers[3].wait_s == 0


def test_ssp_bound_holds_fast_workers_to_the_slowest_rate():
    # Over a long run a worker at most s ahead cannot be faster on average than the slowest.
    p = sim(COMPUTE_BOUND, cluster=MIXED, ps=1, sync="ssp", staleness=2, iterations=40)
    slow = p.workers[3].iteration_time_s
    for fast in p.workers[:3]:
        assert fast.iteration_time_s >= slow * (1 - 2.5 / 40)


def test_asp_saturates_at_ps_link():
    # 10 layers of 0.4 MB: each iteration moves 4 MB down and 4 MB up the PS's link, so the
    # cluster can do at most B / 4 MB iterations per second, whatever the number of workers.
    w = make_workload([(0.01, 0.02, [400_000])] * 10)
    bound = 32 * B_1G / 4e6
    kw = dict(ps=1, bandwidth="1Gbps", sync="asp", jitter=0.1, iterations=40)
    rates = [sim(w, workers=n, **kw).throughput_samples_per_s for n in (1, 4, 16)]
    assert rates[0] < rates[1] < rates[2] <= bound * 1.001
    assert rates[2] >= 0.9 * bound


def test_deterministic_asp_workers_start_at_random_phases_not_in_lockstep():
    # Identical noiseless workers started together would share the PS link fairly, finish
    # their pushes together and then pull together: the link's two directions would take
    # turns, about half of the bound. Real runs leave that lockstep within 10-15 iterations,
    # so every worker starts at a random phase: near the bound, as with jitter.
    w = make_workload([(0.01, 0.02, [400_000])] * 10)
    bound = 32 * B_1G / 4e6
    kw = dict(workers=16, ps=1, bandwidth="1Gbps", sync="asp", iterations=40)
    phased = sim(w, **kw)
    noisy = sim(w, jitter=0.1, **kw).throughput_samples_per_s
    assert 0.8 * bound < phased.throughput_samples_per_s < bound * 1.001  # (window edges)
    assert 0.8 * bound < noisy
    # draws stop once their mean is sure to 0.5% (16 workers: nearly the same every draw),
    # and a user's replications are all made
    assert 2 <= phased.inputs["simulate"]["replications"] < 8
    assert sim(w, replications=10, **kw).inputs["simulate"]["replications"] == 10
    assert any("random phase" in note for note in phased.notes)
    # seeded: the same seed draws the same phases, another seed others
    assert sim(w, **kw).iteration_time_s == phased.iteration_time_s
    assert sim(w, seed=1, **kw).iteration_time_s != phased.iteration_time_s
    # nor do the processes change them
    assert sim(w, jobs=1, **kw).iteration_time_s == phased.iteration_time_s


@pytest.mark.parametrize("kw", [
    dict(workers=6, ps=2),
    dict(workers=6, ps=2, overlap=False),
    dict(workers=6, ps=2, step_barrier=True),
    dict(workers=8, gpus_per_node=2, intra="NVLink2", ps=2, transport="40MB/s"),
    dict(cluster={"workers": [{"count": 3}, {"name": "slow", "count": 2, "speed": 0.6}]},
         ps=2),
])
@pytest.mark.pure_python  # patches ps.merged_pulls
def test_merged_bsp_pulls_move_as_each_worker_pull_would(kw, monkeypatch):
    """With noise, a group's BSP pulls run as one weighted connection per shard: the same
    seed gives the same run as one connection per worker (up to rounding)."""
    from ddlperf.predictors.simulate import ps

    common = dict(workload=make_workload([(0.002, 0.004, [300_000, 2_048])] * 4), jitter=0.05,
                  iterations=5, warmup=1, seed=3, method="simulate", **kw)
    sc = api_scenario(workload=common["workload"], **kw)
    assert ps.merged_pulls(sc, make_units(sc, individual=True))
    merged = predict(**common)
    monkeypatch.setattr(ps, "merged_pulls", lambda sc, units: False)
    separate = predict(**common)
    assert merged.iteration_time_s == pytest.approx(separate.iteration_time_s, rel=1e-9)
    for a, b in zip(merged.workers, separate.workers):
        assert (a.name, a.iteration_time_s) == (b.name, pytest.approx(b.iteration_time_s,
                                                                       rel=1e-9))
    assert dict((r.name, r.utilization) for r in merged.resources) == pytest.approx(
        dict((r.name, r.utilization) for r in separate.resources), rel=1e-9)


# -- early pulls: who is woken at a gate's last arrival -----------------------------------------


EVENT_SAVING = {
    "asp": dict(workers=4, sync="asp"),
    "asp-no-overlap": dict(workers=4, sync="asp", overlap=False),
    "bsp": dict(workers=4),
    "ssp-mixed": dict(cluster={"workers": [{"count": 2}, {"count": 2, "speed": 0.5}]},
                      sync="ssp", staleness=1),
}


@pytest.mark.pure_python  # patches PSWorker, PSModel, Connection
@pytest.mark.parametrize("name", list(EVENT_SAVING))
def test_noisy_ps_runs_save_events_and_equal_the_per_flow_network(monkeypatch, name) -> None:
    # Noisy runs skip events nobody needs. Early pulls count a part at its last byte; a worker
    # is poked at the gate's last arrival only if it waits there then (by the pull, or by
    # itself if it got there first: with a long α, a fast first layer on one shard and a big
    # second one on the other, ASP workers reach the second gate between its last byte and
    # its arrival). With overlap, backward chains queue their gradients ahead, and under ASP
    # and SSP an update booked at a gradient's last byte queues its pull (SSP: once the gate
    # allows) to go out at its end. The run is the per-flow network's (an event for each of
    # these) seed by seed: times, utilisations and the SSP hold.
    from ddlperf.predictors.simulate import run
    from ddlperf.predictors.simulate.connection import Connection
    from ddlperf.predictors.simulate.ps import PSModel, PSWorker

    counts = {"wasted": 0, "self": 0, "push ahead": 0, "pull ahead": 0}
    poke, gate_closed = PSWorker.poke, PSWorker.gate_closed
    send_at, pull_at = Connection.send_at, PSModel._pull_at

    def counted_send_at(conn: Connection, ready, size, payload, *args) -> None:
        counts["push ahead"] += len(payload) == 4  # (tensor, shard, unit, iteration)
        send_at(conn, ready, size, payload, *args)

    def counted_poke(worker: PSWorker) -> None:
        was = (worker.running, worker.t, worker.i)
        poke(worker)
        counts["wasted"] += was == (worker.running, worker.t, worker.i) and not was[0]

    def counted_gate_closed(worker: PSWorker, layer: int) -> None:
        before = worker.wake_at
        gate_closed(worker, layer)
        counts["self"] += worker.wake_at != before

    def counted(key: str, method):
        def call(model: PSModel, *args) -> None:
            counts[key] += 1
            method(model, *args)
        return call

    workload = make_workload([(2e-4, 1e-3, [20_000]), (2e-4, 1e-3, [2_000_000]),
                              (2e-4, 1e-3, [20_000]), (2e-4, 1e-3, [1_000_000])],
                             update_s_per_byte=2e-10)
    kw = dict(EVENT_SAVING[name], ps=2, latency="3ms", jitter=0.05, iterations=4, warmup=1,
              jobs=1)
    for seed in (0, 1):
        with monkeypatch.context() as m:
            m.setattr(PSWorker, "poke", counted_poke)
            m.setattr(PSWorker, "gate_closed", counted_gate_closed)
            m.setattr(Connection, "send_at", counted_send_at)
            m.setattr(PSModel, "_pull_at", counted("pull ahead", pull_at))
            early = sim(workload, seed=seed, **kw)
        with monkeypatch.context() as m:
            m.setattr(run, "Network", lambda engine, local=False: Network(engine))
            exact = sim(workload, seed=seed, **kw)
        assert early.iteration_time_s == pytest.approx(exact.iteration_time_s, rel=1e-9)
        for key, value in exact.breakdown_s.items():
            assert early.breakdown_s[key] == pytest.approx(value, rel=1e-9, abs=1e-12)
        for got, want in zip(early.resources, exact.resources, strict=True):
            assert got.utilization == pytest.approx(want.utilization, rel=1e-9, abs=1e-12)
    assert counts["wasted"] == 0
    overlap = kw.get("overlap", True)
    assert (counts["push ahead"] > 0) == overlap
    assert (counts["pull ahead"] > 0) == (overlap and name != "bsp")
    if name == "asp":
        assert counts["self"] > 0
    if name == "ssp-mixed":
        assert exact.breakdown_s["wait"] > 0.0  # the bound held someone


_times = st.sampled_from([0.5, 1.0, 1.5])


@pytest.mark.pure_python  # a PSWorker made by hand, with a stand-in model
@settings(max_examples=100, deadline=None)
@given(st.data())
def test_a_chains_forward_gates_stop_where_layer_ready_says(data) -> None:
    # PSWorker.open_until (layer_ready inlined) against Worker.open_until, which asks
    # layer_ready per operation: random parts missing and arrivals, overlap on and off.
    from ddlperf.predictors.simulate.ps import PSWorker
    from ddlperf.predictors.simulate.worker import BWD, FWD, Worker

    n = data.draw(st.integers(1, 5))
    worker = object.__new__(PSWorker)
    worker.engine = Engine(start=1.0)
    worker.ops = [(FWD, layer) for layer in range(n)] + [(BWD, n - 1 - k) for k in range(n)]
    worker.model = SimpleNamespace(overlap=data.draw(st.booleans()))
    worker.missing = data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    worker.ready_at = data.draw(st.lists(_times, min_size=n, max_size=n))
    worker.missing_total = data.draw(st.integers(0, 1))
    worker.ready_total = data.draw(_times)
    i = data.draw(st.integers(0, 2 * n - 1))
    j = data.draw(st.integers(i, 2 * n - 1))
    assert worker.open_until(i, j) == Worker.open_until(worker, i, j)
