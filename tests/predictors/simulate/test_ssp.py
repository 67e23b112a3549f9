"""SSP in the simulator: the shards' read rule (Ho et al., per tensor) and the steady state."""

from __future__ import annotations

import pytest

from ddlperf.api import predict
from ddlperf.predictors.simulate.ssp import (
    StalenessGate,
    UnitRun,
    by_class,
    in_steady_state,
    periods_agree,
    steady_warmup,
)
from tests.conftest import make_workload

# 8 × 1 MB, 10 ms forward + 20 ms backward per layer: the dev matrix's uniform model.
UNIFORM8 = make_workload([(0.01, 0.02, [1_000_000])] * 8, update_s_per_byte=0.3e-9)
# The case: staleness 2, two shards, one worker 3× slower.
SLOW3X = {"bandwidth": "200Mbps", "ps": 2,
          "workers": [{"name": "fast", "count": 2}, {"name": "slow", "count": 1, "speed": 1 / 3}]}


def test_a_read_waits_until_every_worker_is_within_the_bound():
    released: list[tuple] = []
    holds: list[tuple] = []
    gate = StalenessGate(1, 2, lambda key, u, v: released.append((u, v)),
                         lambda u, v, s: holds.append((u, v, s)))
    # worker 0 runs ahead: version 1 needs nobody else's update (1 − 1 − 1 < 0) …
    gate.applied("t", "ps0", 0, now=1.0)
    assert released == [(0, 1)]
    # … version 2 needs worker 1's gradient of iteration 0
    gate.applied("t", "ps0", 0, now=2.0)
    assert released == [(0, 1)]
    gate.applied("t", "ps0", 1, now=5.0)  # worker 1's iteration 0 arrives: both reads go
    assert released == [(0, 1), (0, 2), (1, 1)]
    assert holds == [(0, 2, pytest.approx(3.0))]  # worker 0 was held from 2 s to 5 s


def test_keys_are_independent_and_holds_add_up_per_shard_version():
    holds: list[tuple] = []
    gate = StalenessGate(0, 2, lambda *_: None, lambda u, v, s: holds.append((u, v, s)))
    for key, t_own, t_other in (("a", 1.0, 2.0), ("b", 1.5, 4.0)):
        gate.applied(key, "ps0", 0, now=t_own)
        gate.applied(key, "ps0", 1, now=t_other)
    # tensor a held 1 → 2 s, tensor b from the previous release (2 s) to 4 s: 1 + 2 s in all
    assert [h[2] for h in holds] == [pytest.approx(1.0), pytest.approx(3.0)]


def test_slow_worker_pulls_together_with_the_released_fast_ones():
    # In steady state the fast workers are held until the slow one's gradients are applied,
    # and then pull at the same moment as it: its communication is as exposed as under BSP.
    ssp = predict(workload=UNIFORM8, cluster=SLOW3X, sync="ssp", staleness=2,
                  method="simulate", iterations=14, warmup=2)
    bsp = predict(workload=UNIFORM8, cluster=SLOW3X, method="simulate", iterations=14,
                  warmup=2)
    slow_ssp, slow_bsp = ssp.workers[2], bsp.workers[2]
    assert slow_ssp.communication_s == pytest.approx(slow_bsp.communication_s, rel=0.05)
    periods = [w.iteration_time_s for w in ssp.workers]
    assert max(periods) / min(periods) - 1 <= 0.005  # steady state: one rate
    assert ssp.workers[0].wait_s > 0 and slow_ssp.wait_s == 0


def test_ssp_is_reported_in_steady_state_whatever_the_run_length():
    short, long = (predict(workload=UNIFORM8, cluster=SLOW3X, sync="ssp", staleness=2,
                           method="simulate", iterations=n, warmup=2) for n in (14, 100))
    assert short.iteration_time_s == pytest.approx(long.iteration_time_s, rel=0.005)
    assert any("warm-up extended" in note for note in short.notes)


def test_steady_warmup_grows_until_the_faster_workers_are_held_or_gives_up():
    # A faster worker (period 0.5) gains on the slowest (1.0) until it is s = 2 ahead: its
    # period equals the slowest's, and it is held, once the warm-up covers 2·0.5/0.5 = 2.
    def catching_up(warm: int) -> list[UnitRun]:
        return [UnitRun(1.0, False, "slow"),
                UnitRun(1.0, True, "fast") if warm >= 5 else UnitRun(0.5, False, "fast")]

    assert steady_warmup(catching_up, 2, 2, limit=100) == (7, True, 0.0)
    never = steady_warmup(lambda _w: [UnitRun(1.0, False, "a"), UnitRun(0.5, False, "b")],
                          2, 2, limit=100)
    assert never == (100, False, pytest.approx(0.5))


def test_periods_that_agree_during_a_slow_catch_up_are_not_the_steady_state():
    slow_gain = [UnitRun(1.0, False, "slow"), UnitRun(0.998, False, "fast")]
    assert not in_steady_state(slow_gain)
    assert in_steady_state([UnitRun(1.0, False, "w"), UnitRun(0.999, False, "w")])  # identical
    assert in_steady_state([UnitRun(1.0, False, "slow"), UnitRun(1.0, True, "fast")])


# ------------------------------------------------------------------ steady state with jitter

def test_classes_of_identical_workers_are_compared_not_single_workers():
    # Identical workers differ only by where each is in its rotation: their mean agrees.
    rotating = [UnitRun(1.00, False, "w"), UnitRun(0.97, False, "w"), UnitRun(1.03, False, "w")]
    (mean,) = by_class(rotating)
    assert (mean.period, mean.held, mean.group, mean.noise) == (pytest.approx(1.0), False, "w",
                                                               0.0)
    assert in_steady_state(rotating)
    # a class is held only if all its workers were
    assert not by_class([UnitRun(1.0, True, "f"), UnitRun(1.0, False, "f")])[0].held


def test_periods_agree_within_the_noise_of_their_means_and_not_beyond():
    # 2% apart: too far for noiseless runs, within z·(se + se) for se = 0.5% of the period
    noisy = [UnitRun(1.00, False, "slow", 0.005), UnitRun(0.98, True, "fast", 0.005)]
    assert periods_agree(noisy)
    assert not periods_agree([UnitRun(1.00, False, "slow"), UnitRun(0.98, True, "fast")])
    # 8% apart is a catch-up, not noise
    assert not periods_agree([UnitRun(1.00, False, "slow", 0.005),
                              UnitRun(0.92, True, "fast", 0.005)])


def test_steady_warmup_steps_on_when_a_faster_class_is_held_but_still_gaining():
    # held late in the window, period still 25% short: grow by s·p/(P − p) = 3, not to the
    # limit
    def late_hold(warm: int) -> list[UnitRun]:
        return [UnitRun(1.0, False, "slow"),
                UnitRun(1.0 if warm >= 7 else 0.75, True, "fast")]

    assert steady_warmup(late_hold, 2, 1, limit=100) == (2 + 1 + 1 + 3, True, 0.0)


def test_identical_noisy_workers_are_in_steady_state_without_a_longer_warmup():
    p = predict(workload=UNIFORM8, workers=6, ps=2, bandwidth="200Mbps", sync="ssp",
                staleness=2, method="simulate", iterations=10, warmup=2, jitter=0.05)
    assert p.inputs["simulate"]["warmup"] == 2
    assert not any("SSP" in note and "steady" in note for note in p.notes)


def test_a_noisy_catch_up_ends_within_the_limit_and_says_so():
    p = predict(workload=UNIFORM8, cluster=SLOW3X, sync="ssp", staleness=2,
                method="simulate", iterations=10, warmup=2, jitter=0.05)
    warm = p.inputs["simulate"]["warmup"]
    assert 2 < warm < 200
    assert any("warm-up extended" in n and "noise" in n for n in p.notes)
    # the search's last run is the reported replication: asking for that warm-up repeats it
    again = predict(workload=UNIFORM8, cluster=SLOW3X, sync="ssp", staleness=2,
                    method="simulate", iterations=10, warmup=warm, jitter=0.05)
    assert again.iteration_time_s == p.iteration_time_s


def test_a_run_too_short_for_a_slow_catch_up_says_so():
    # 0.1% faster workers need s·p/(P − p) ≈ 2000 iterations to reach the bound
    nearly = {"bandwidth": "200Mbps", "ps": 2,
              "workers": [{"name": "fast", "count": 2},
                          {"name": "slow", "count": 1, "speed": 0.999}]}
    p = predict(workload=UNIFORM8, cluster=nearly, sync="ssp", staleness=2,
                method="simulate", iterations=4, warmup=2)
    assert any("not in steady state after 200 warm-up iterations" in n for n in p.notes)


# the dev matrix's biglast9: six small layers, then a 4 MB and a 1 MB tensor first in backward
BIGLAST = make_workload([(0.015, 0.030, [250_000])] * 6
                        + [(0.003, 0.006, [4_000_000]), (0.001, 0.002, [1_000_000])])


# ps-ssp-hetero of the dev matrix with this session's PS update cost: without noise its three
# workers share the saturated PS link equally and run at one rate, the faster ones never held
BALANCED = {"bandwidth": "200Mbps", "latency": "50us",
            "ps": {"count": 1, "update_s_per_byte": 4.676e-10},
            "workers": [{"name": "fast", "count": 2}, {"name": "slow", "count": 1, "speed": 0.4}]}


def test_a_noise_free_balance_is_searched_again_with_noise():
    kw = dict(workload=UNIFORM8, cluster=BALANCED, sync="ssp", staleness=2,
              method="simulate", iterations=80, warmup=2)
    kept = predict(**kw, jitter=0)  # asked for no noise: the balance is reported, and says so
    assert any("not in steady state" in n for n in kept.notes)
    spread = [w.iteration_time_s for w in kept.workers]
    assert max(spread) / min(spread) < 1.005 and all(w.wait_s == 0 for w in kept.workers)
    escaped = predict(**kw)
    assert any("SSP with 0.01 compute jitter (the workload has none)" in n
               for n in escaped.notes)
    assert escaped.inputs["simulate"]["jitter"] == 0.01
    # the same as asking for that jitter, and the faster workers now wait at the bound
    assert escaped.iteration_time_s == predict(**kw, jitter=0.01).iteration_time_s
    assert escaped.iteration_time_s > 1.3 * kept.iteration_time_s
    assert max(w.wait_s for w in escaped.workers[:2]) > 0
    analytic = predict(**{**kw, "method": "analytic"})
    assert escaped.iteration_time_s == pytest.approx(analytic.iteration_time_s, rel=0.02)


def test_a_jitter_draw_that_keeps_the_balance_too_is_drawn_again():
    # ps-ssp-hetero with another session's PS update cost: seed 0's 1% jitter keeps the
    # balance for 820 iterations (1.00 s); the bound must line the workers up there (one
    # distinct slowest: the analytic model's BSP schedule), so the next draw is tried and
    # leaves it (1.38 s, as measured)
    cluster = {**BALANCED, "ps": {"count": 1, "update_s_per_byte": 2.61e-10}}
    kw = dict(workload=UNIFORM8, cluster=cluster, sync="ssp", staleness=2,
              method="simulate", iterations=80, warmup=2)
    trapped = predict(**kw, jitter=0.01, seed=0)
    assert any("not in steady state" in n for n in trapped.notes)
    escaped = predict(**kw)
    assert any("kept such a balance" in n and "so the jitter of seed 1 was used" in n
               for n in escaped.notes)
    assert escaped.inputs["simulate"]["seed"] == 1
    assert escaped.iteration_time_s == pytest.approx(
        predict(**kw, jitter=0.01, seed=1).iteration_time_s, rel=1e-12)
    assert escaped.iteration_time_s > 1.3 * trapped.iteration_time_s
    assert escaped.iteration_time_s == pytest.approx(
        predict(**{**kw, "method": "analytic"}).iteration_time_s, rel=0.02)


def test_other_draws_are_tried_only_where_the_bound_must_line_the_workers_up():
    from ddlperf.api import scenario
    from ddlperf.predictors.analytic import ssp_lines_up

    hetero = {**BALANCED, "ps": {"count": 1, "update_s_per_byte": 2.61e-10}}
    assert ssp_lines_up(scenario(workload=UNIFORM8, cluster=hetero, sync="ssp", staleness=2))
    # identical workers, colocated shards on three of four (fresh9-ssp-coloc-3s): the
    # slowest are apart, the runs stay unheld, and a draw that lines them up would be wrong
    apart = scenario(workload=BIGLAST, workers=4, ps=3, placement="colocated",
                     bandwidth="200Mbps", sync="ssp", staleness=1)
    assert not ssp_lines_up(apart)
    p = predict(workload=BIGLAST, workers=4, ps=3, placement="colocated",
                bandwidth="200Mbps", sync="ssp", staleness=1, method="simulate",
                iterations=60, warmup=15)
    assert p.inputs["simulate"]["seed"] == 0
    assert not any("kept such a balance" in n for n in p.notes)


def test_identical_workers_are_not_left_in_the_lockstep_of_their_common_start():
    # fresh9-ssp3-coloc-1s of the dev matrix: four identical workers, the only shard on w0.
    # Without noise the three remote workers start together and stay in lockstep, pushing
    # through w0's NIC at once: BSP's period (0.974 s). Noise parts them (measured 0.550 s);
    # only a run with noise can tell, so SSP is simulated with 1% jitter unless --jitter
    # says otherwise.
    kw = dict(workload=BIGLAST, workers=4, ps=1, placement="colocated", sharding="greedy",
              bandwidth="300Mbps", sync="ssp", staleness=3, method="simulate",
              iterations=60, warmup=15)
    quiet = predict(**kw, jitter=0)
    bsp = predict(**{**kw, "sync": "bsp", "staleness": None})
    assert quiet.iteration_time_s == pytest.approx(bsp.iteration_time_s, rel=1e-3)
    default = predict(**kw)
    assert default.inputs["simulate"]["jitter"] == 0.01
    assert default.iteration_time_s == predict(**kw, jitter=0.01).iteration_time_s
    assert default.iteration_time_s < 0.7 * quiet.iteration_time_s
    assert any("identical workers in lockstep" in n for n in default.notes)


def test_a_trace_shows_the_run_the_ssp_figure_comes_from(tmp_path):
    # fresh9-ssp1-2w-2s: SSP(1) that ASP's rates would never hold. With the 1% jitter every
    # worker starts together, as the steady-state search does; --trace must not start them at
    # ASP's random phases instead (it re-runs replication 0 to fill the timeline)
    kw = dict(workload=BIGLAST, workers=2, ps=2, bandwidth="300Mbps", sync="ssp",
              staleness=1, method="simulate", iterations=60, warmup=15)
    plain = predict(**kw)
    traced = predict(**kw, trace=tmp_path / "trace.json")
    assert (tmp_path / "trace.json").stat().st_size > 0
    assert traced.iteration_time_s == plain.iteration_time_s
