"""Records, steady state, summaries, the spec and the wire check: no root, no processes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from ddlperf.api import make_cluster, make_strategy
from ddlperf.measure import records as rec
from ddlperf.measure.launcher import build_spec, expected_traffic, split_parts, torchrun_commands
from ddlperf.measure.run import wire_check
from ddlperf.measure.trainer_common import Recorder, fault_for, hosts_of, rank_table
from ddlperf.scenario import resolve
from tests.conftest import make_workload


def _iteration(name: str, t: int, start: float, duration: float, compute: float = 0.1,
               **extra: float) -> dict:
    return {"type": "iteration", "name": name, "role": "worker", "iteration": t,
            "start": start, "end": start + duration, "duration_s": duration,
            "compute_s": compute, **extra}


# ----------------------------------------------------------------------------- JSONL


def test_recorder_appends_one_line_per_record_and_reader_skips_a_truncated_last_line(
        tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    a = Recorder(path, {"name": "w0"})
    b = Recorder(path, {"name": "w1"})
    a.write({"type": "iteration", "iteration": 0})
    b.write({"type": "iteration", "iteration": 0})
    a.write({"type": "iteration", "iteration": 1})
    a.close()
    b.close()
    lines = path.read_text().splitlines()
    assert [json.loads(line)["name"] for line in lines] == ["w0", "w1", "w0"]
    with open(path, "a") as handle:  # a rank killed in the middle of a write
        handle.write('{"type": "iteration", "name": "w1", "itera')
    records, skipped = rec.read_records(path)
    assert len(records) == 3 and skipped == 1
    assert records[-1] == {"name": "w0", "type": "iteration", "iteration": 1}


def test_records_are_on_disk_as_soon_as_written(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    recorder = Recorder(path)
    recorder.write({"type": "x"})
    # Not closed: another process (the launcher) must already see the line.
    assert rec.read_records(path)[0] == [{"type": "x"}]
    recorder.close()


def test_missing_records_file_reads_as_empty(tmp_path: Path) -> None:
    assert rec.read_records(tmp_path / "none.jsonl") == ([], 0)


# ----------------------------------------------------------------------------- steady state


def test_quantiles_match_numpy() -> None:
    values = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6]
    for q in (0.05, 0.25, 0.5, 0.95):
        assert rec.quantile(values, q) == pytest.approx(float(np.quantile(values, q)))


def test_steady_state_excludes_warmup_and_iterations_outside_the_common_window() -> None:
    its = {
        # w0 is fast (ASP): its last iterations run after w1 stopped; they are excluded.
        "w0": [_iteration("w0", t, 10.0 + t, 1.0) for t in range(15)],
        "w1": [_iteration("w1", t, 10.0 + 2 * t, 2.0) for t in range(5)],
    }
    steady, notes = rec.steady_state(its, warmup=2)
    assert [r["iteration"] for r in steady["w1"]] == [2, 3, 4]
    # Window: from w1's first steady start (14) to w1's last end (20), ± half the median
    # duration (1 s): w0's iterations 4…9 (its 2 and 3 ran before w1 was steady).
    assert [r["iteration"] for r in steady["w0"]] == [4, 5, 6, 7, 8, 9]
    assert not notes


def test_steady_state_says_so_when_a_worker_has_nothing_after_warmup() -> None:
    its = {"w0": [_iteration("w0", t, t, 1.0) for t in range(5)],
           "w1": [_iteration("w1", 0, 0.0, 1.0)]}
    steady, notes = rec.steady_state(its, warmup=2)
    assert "w1" not in steady and "w1" in notes[0]


def _asp_run(periods: list[float]) -> dict[str, list]:
    """Two ASP workers with the same sequence of periods."""
    its: dict[str, list] = {}
    for name in ("w0", "w1"):
        start, its[name] = 0.0, []
        for t, period in enumerate(periods):
            its[name].append(_iteration(name, t, start, period))
            start += period
    return its


def test_asp_says_when_the_run_still_leaves_its_lockstep_start() -> None:
    # periods falling from 0.97 to 0.72 s (a lockstep start dissolving): a transient
    leaving = rec.asp_trend_note(_asp_run([0.97, 0.93, 0.9, 0.85, 0.8, 0.75, 0.72, 0.72]))
    assert len(leaving) == 1 and "too short for the steady state" in leaving[0]
    # steady but noisy, or too few iterations to tell: nothing to say
    assert rec.asp_trend_note(_asp_run([0.72, 0.78, 0.7, 0.75, 0.74, 0.7, 0.77, 0.72])) == []
    assert rec.asp_trend_note(_asp_run([0.97, 0.9, 0.8, 0.72])) == []


def _ssp_run(held_from: int, iterations: int) -> tuple[dict, dict]:
    """w1 (period 1 s) and w0, twice as fast until the bound holds it from ``held_from`` on."""
    its: dict[str, list] = {"w0": [], "w1": []}
    waits: dict[tuple[str, int], float] = {}
    start = 0.0
    for t in range(iterations):
        period = 0.5 if t < held_from else 1.0
        its["w0"].append(_iteration("w0", t, start, period))
        if t >= held_from:
            waits[("w0", t)] = 0.5  # held before its next version: inside this iteration
        start += period
    its["w1"] = [_iteration("w1", t, float(t), 1.0) for t in range(iterations)]
    return its, waits


def test_ssp_steady_state_starts_once_every_faster_worker_was_held() -> None:
    its, waits = _ssp_run(held_from=4, iterations=14)
    steady, notes = rec.ssp_steady(its, waits)
    assert notes == []
    assert all(float(r["duration_s"]) == 1.0 for r in steady["w0"])
    assert len(steady["w0"]) >= 8


def test_ssp_run_too_short_for_the_steady_state_is_said() -> None:
    its, _waits = _ssp_run(held_from=30, iterations=14)  # never held: still catching up
    steady, notes = rec.ssp_steady(its, {})
    assert steady == its
    assert "too short" in notes[0] and "50%" in notes[0]


def _context(arch: str = "ps") -> dict:
    return {
        "workers": [{"name": "w0", "group": "w", "batch_size": 32, "device_label": "V100 (x)"},
                    {"name": "w1", "group": "w", "batch_size": 32, "device_label": "V100 (x)"}],
        "arch": arch, "warmup": 1, "label": "emulated device time",
        "single_worker": {"worker": "w0", "iteration_time_s": 0.25,
                          "throughput_samples_per_s": 128.0},
        "standalone": {"w0": 128.0, "w1": 128.0},
        "links": {"ps0 downlink": {"rate_Bps": 10e6, "bytes": {"w0": 4e6, "w1": 4e6}},
                  "w0 uplink": {"rate_Bps": 10e6, "bytes": {"w0": 4e6}}},
        "inputs": {"workload": {"name": "toy"}}, "notes": ["n"],
    }


def test_summary_uses_medians_and_has_every_prediction_key() -> None:
    durations = [9.0, 1.0, 1.1, 0.9, 1.0, 5.0, 1.0]  # warm-up 9.0, one outlier 5.0
    records = []
    start = 0.0
    for t, d in enumerate(durations):
        for name in ("w0", "w1"):
            records.append(_iteration(name, t, start, d, compute=0.2 if name == "w0" else 0.3))
            records.append({"type": "serve", "name": "ps0", "worker": name, "iteration": t,
                            "gate_wait_s": 0.1 if name == "w0" else 0.0})
        start += d
    m = rec.summarize(records, _context())
    assert m.kind == "measurement" and m.method == "measured"
    assert m.iteration_time_s == pytest.approx(1.0)  # median, outlier and warm-up ignored
    assert m.throughput_samples_per_s == pytest.approx(64.0)
    assert m.speedup == pytest.approx(0.5)
    assert m.scaling_efficiency == pytest.approx(0.25)
    w0 = m.workers[0]
    assert (w0.compute_s, w0.wait_s) == pytest.approx((0.2, 0.1))
    assert w0.compute_s + w0.communication_s + w0.wait_s == pytest.approx(w0.iteration_time_s)
    assert m.percentiles["iteration_time_s"]["p95"] > m.percentiles["iteration_time_s"]["p50"]
    assert "iteration_time_s.w1" in m.percentiles
    # 8 MB per second-long iteration into a 10 MB/s downlink: 80% busy, the bottleneck.
    util = {r.name: r.utilization for r in m.resources}
    assert util["ps0 downlink"] == pytest.approx(0.8)
    assert m.bottleneck == "ps0 downlink"
    from ddlperf.api import predict

    assert set(m.to_dict()) == set(predict(workers=2, ps=1).to_dict()) | {"percentiles"}


@pytest.mark.parametrize("label,cv,want", [
    ("emulated device time", 0.3, (1.0 + 1.1 + 0.9 + 1.0 + 5.0 + 1.0) / 6),  # drawn: mean
    ("emulated device time", 0.0, 1.0),  # fixed layer times: the median
    ("CPU (real)", 0.3, 1.0),  # real compute: a profile's spread is this machine's too
])
def test_random_emulated_compute_is_summarized_by_its_mean_step(label, cv, want) -> None:
    durations = [9.0, 1.0, 1.1, 0.9, 1.0, 5.0, 1.0]
    records, start = [], 0.0
    for t, d in enumerate(durations):
        for name in ("w0", "w1"):
            records.append(_iteration(name, t, start, d))
        start += d
    context = _context("allreduce")
    context["label"] = label
    for w in context["workers"]:
        w.update(forward_cv=[cv], backward_cv=[0.0])
    m = rec.summarize(records, context)
    assert m.iteration_time_s == pytest.approx(want)
    assert any("mean step" in n for n in m.notes) is (want != 1.0)


def test_summary_bottleneck_compute_and_straggler() -> None:
    records = [_iteration(n, t, t, 1.0, compute=0.99) for t in range(4) for n in ("w0", "w1")]
    assert rec.summarize(records, _context("allreduce")).bottleneck == "compute"
    records = [_iteration(n, t, t, 1.0, compute=0.9 if n == "w0" else 0.2)
               for t in range(4) for n in ("w0", "w1")]
    m = rec.summarize(records, _context("allreduce"))
    assert m.bottleneck == "straggler w0"
    assert m.workers[1].wait_s == pytest.approx(0.7)


def test_summary_notes_workers_that_waited_for_a_cpu() -> None:
    """The trainers' run-queue seconds per phase: a worker that waited for a CPU 30% of its
    iteration is named with its share; one at 1% is not."""
    records = []
    for t in range(5):
        for name, wait in (("w0", 0.15), ("w1", 0.005)):
            r = _iteration(name, t, t, 1.0, compute=0.5)
            r.update(forward_runqueue_s=wait, backward_runqueue_s=wait)
            records.append(r)
    notes = [n for n in rec.summarize(records, _context("allreduce")).notes
             if "waited for a CPU" in n]
    assert len(notes) == 1 and "w0 30%" in notes[0] and "w1" not in notes[0]
    plain = [_iteration(n, t, t, 1.0, compute=0.5) for t in range(5) for n in ("w0", "w1")]
    assert not any("CPU" in n for n in rec.summarize(plain, _context("allreduce")).notes)


def test_a_ring_link_bottleneck_is_named_like_the_predictors_name_it() -> None:
    records = [_iteration(n, t, t, 1.0, compute=0.2) for t in range(4) for n in ("w0", "w1")]
    assert rec.summarize(records, _context("allreduce")).bottleneck == "ring (ps0 downlink)"
    assert rec.summarize(records, _context("ps")).bottleneck == "ps0 downlink"


def test_summary_is_written_atomically_and_reads_back(tmp_path: Path) -> None:
    records = [_iteration(n, t, t, 1.0) for t in range(3) for n in ("w0", "w1")]
    m = rec.summarize(records, _context())
    path = tmp_path / "measurement.json"
    path.write_text("old")
    rec.write_summary(path, m)
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
    back = rec.load_summary(path)
    assert back.to_dict() == json.loads(json.dumps(m.to_dict()))


# ----------------------------------------------------------------------------- spec & traffic


@pytest.fixture
def scenario():
    def build(workers=2, ps=1, arch="ps", sharding="round_robin", placement=None, **kw):
        wl = make_workload([(0.001, 0.002, [4_000_000]), (0.003, 0.006, [8_000_000, 4_000]),
                            (0.001, 0.001, [1_000_000])])
        strategy = make_strategy(arch=arch, sharding=sharding, **kw)
        cluster = make_cluster(workers=workers, ps=ps, bandwidth="100Mbps", arch=arch,
                               placement=placement)
        return resolve(wl, cluster, strategy)
    return build


def test_split_parts_covers_every_element_once() -> None:
    assert split_parts(10, np.array([0.0, 40.0, 0.0])) == [(1, 0, 10)]
    parts = split_parts(1001, np.array([1.0, 1.0, 1.0]))
    assert sum(n for _, _, n in parts) == 1001
    assert [s for _, s, _ in parts] == [0, parts[0][2], parts[0][2] + parts[1][2]]


@pytest.mark.parametrize("sharding", ["round_robin", "greedy", "even"])
def test_spec_sharding_is_the_scenarios_placement(scenario, sharding: str) -> None:
    sc = scenario(workers=2, ps=2, sharding=sharding)
    spec = build_spec(sc, compute="emulated", iterations=3, warmup=1)
    per_shard = np.zeros(2)
    for tensor, parts in zip(spec["tensors"], spec["parts"]):
        assert sum(n for _, _, n in parts) == tensor["numel"]
        for k, _s, n in parts:
            per_shard[k] += 4 * n
    assert per_shard == pytest.approx(sc.placement.sum(axis=0), abs=8)
    assert [t["name"] for t in spec["tensors"]] == list(sc.tensor_names)
    # Forward order: layer by layer.
    layers = [spec["tensors"][j]["layer"] for j in spec["forward_order"]]
    assert layers == sorted(layers)


def test_rank_table_layouts(scenario) -> None:
    ded = build_spec(scenario(workers=3, ps=2), compute="emulated", iterations=1, warmup=0)
    assert [e["name"] for e in rank_table(ded)] == ["w0", "w1", "w2", "ps0", "ps1"]
    assert hosts_of(rank_table(ded)) == ["w0", "w1", "w2", "ps0", "ps1"]
    col = build_spec(scenario(workers=3, ps=2, placement="colocated"), compute="emulated",
                     iterations=1, warmup=0)
    table = rank_table(col)
    assert [(e["name"], e["host"], e["local_rank"]) for e in table] == [
        ("w0", "w0", 0), ("ps0", "w0", 1), ("w1", "w1", 0), ("ps1", "w1", 1), ("w2", "w2", 0)]
    commands = torchrun_commands(col, "spec.json", ["a", "b", "c"])
    assert "--nproc-per-node=2" in commands[0][1] and "--nproc-per-node=1" in commands[2][1]
    assert all("--master-addr=a" in c for _, c in commands)


def test_expected_traffic_ps_and_ring(scenario) -> None:
    sc = scenario(workers=2, ps=1)
    spec = build_spec(sc, compute="emulated", iterations=1, warmup=0)
    total = 4 * sum(t["numel"] for t in spec["tensors"])
    traffic = expected_traffic(spec, pushes=3, pulls=4)
    assert sum(traffic["w0"]["uplink"].values()) == 3 * total
    assert sum(traffic["w0"]["downlink"].values()) == 4 * total
    assert sum(traffic["ps0"]["downlink"].values()) == 2 * 3 * total
    ring = build_spec(scenario(workers=4, ps=0, arch="allreduce"), compute="emulated",
                      iterations=1, warmup=0)
    traffic = expected_traffic(ring)
    assert sum(traffic["w3"]["uplink"].values()) == pytest.approx(2 * 3 / 4 * total)
    # Colocated: a worker's traffic to its own host's shard never crosses the network.
    col = build_spec(scenario(workers=2, ps=1, placement="colocated"), compute="emulated",
                     iterations=1, warmup=0)
    traffic = expected_traffic(col)
    assert sum(traffic["w0"]["uplink"].values()) == total  # ps0 sends w1 its parameters
    assert sum(traffic["w1"]["uplink"].values()) == total  # w1 pushes to ps0


def test_wire_check_passes_headers_and_fails_a_shortcut(scenario) -> None:
    spec = build_spec(scenario(workers=2, ps=1), compute="emulated", iterations=2, warmup=1)
    traffic = expected_traffic(spec, pushes=3, pulls=4)
    zero = {f"{h} {d}": 0 for h in traffic for d in ("uplink", "downlink")}

    def counts(scale_up: float, scale_down: float) -> dict:
        return {f"{h} {d}": int((scale_up if d == "uplink" else scale_down)
                                * sum(traffic[h][d].values()))
                for h in traffic for d in ("uplink", "downlink")}

    assert wire_check(spec, zero, counts(1.04, 1.01))["ok"]
    bad = wire_check(spec, zero, counts(0.02, 0.02))  # traffic bypassed the bridge
    assert not bad["ok"] and "more than 10%" in bad["message"]
    assert not wire_check(spec, zero, counts(1.0, 1.2))["ok"]  # 20% too much delivered


def test_fault_hook_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DDLPERF_FAULT", "w1:crash@3, ps0:hang@0")
    assert fault_for("w1") == ("crash", 3)
    assert fault_for("ps0") == ("hang", 0)
    assert fault_for("w0") is None


def test_links_faster_than_configured_are_called_out() -> None:
    records = [_iteration(n, t, t, 0.1, compute=0.02) for t in range(4) for n in ("w0", "w1")]
    m = rec.summarize(records, _context())  # 8 MB per 0.1 s through a 10 MB/s link
    assert max(r.utilization for r in m.resources) == pytest.approx(8.0)
    assert any("ps0 downlink carried 800% of its configured rate" in n for n in m.notes)
    calm = rec.summarize([_iteration(n, t, t, 1.0) for t in range(4) for n in ("w0", "w1")],
                         _context())
    assert not any("configured rate" in n for n in calm.notes)
