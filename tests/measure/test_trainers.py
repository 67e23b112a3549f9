"""The trainers on loopback (no root): PS BSP/ASP/SSP, even sharding, DDP, real compute,
faults named by the launcher, and torchrun's rendezvous (the BSP run). Small models, few
iterations; every trainer process imports torch (seconds each), so runs are few."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ddlperf.api import make_cluster, make_strategy, make_workload
from ddlperf.measure.launcher import RunFailed, build_spec, run_emulated
from ddlperf.measure.records import read_records, steady_state, worker_iterations
from ddlperf.scenario import resolve
from tests.conftest import make_workload as toy_workload
from tests.conftest import needs_torchrun

pytest.importorskip("torch")

FWD, BWD = 0.005, 0.010


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Loopback:
    """Stand-in for EmulatedCluster: every host is this machine, gloo on ``lo``."""

    interface = "lo"

    def __init__(self) -> None:
        self.master_port = free_port()

    def ip(self, host: str) -> str:
        return "127.0.0.1"

    def popen(self, host: str, argv: list[str], **kwargs: Any) -> subprocess.Popen:
        return subprocess.Popen(argv, **kwargs)


def _spec(tmp_path: Path, workers: int = 2, ps: int = 1, arch: str = "ps", sync: str = "bsp",
          staleness: int | None = None, sharding: str = "round_robin", iterations: int = 3,
          warmup: int = 1, compute: str = "emulated", model: str | None = None,
          batch_size: int | None = None, overlap: bool = True) -> dict[str, Any]:
    if model is None:
        wl = toy_workload([(FWD, BWD, [200_000]), (FWD, BWD, [120_000, 4_000]),
                           (FWD, BWD, [80_000])])
    else:
        wl = make_workload(model, batch_size=batch_size)
    strategy = make_strategy(arch=arch, sync=sync, staleness=staleness, sharding=sharding,
                             overlap=overlap)
    cluster = make_cluster(workers=workers, ps=ps, bandwidth="100Mbps", arch=arch)
    spec = build_spec(resolve(wl, cluster, strategy), compute=compute, iterations=iterations,
                      warmup=warmup, model=model)
    spec.update(records=str(tmp_path / "records.jsonl"), status_dir=str(tmp_path / "status"),
                op_timeout_s=60)
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    return spec


def _run(tmp_path: Path, spec: dict[str, Any], timeout: float = 30.0) -> list[dict[str, Any]]:
    run_emulated(Loopback(), spec, tmp_path / "spec.json", tmp_path, timeout)
    records, skipped = read_records(tmp_path / "records.jsonl")
    assert skipped == 0
    return records


def _check_iterations(records: list[dict[str, Any]], spec: dict[str, Any]) -> None:
    total = spec["iterations"] + spec["warmup"]
    its = worker_iterations(records)
    assert sorted(its) == [w["name"] for w in spec["workers"]]
    for rows in its.values():
        assert [r["iteration"] for r in rows] == list(range(total))
        for r in rows:
            assert r["end"] > r["start"] and r["duration_s"] >= r["compute_s"] > 0
            assert r["payload_sent_bytes"] > 0 and "wire_sent_bytes" in r


def _run_torchrun(tmp_path: Path, spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The ranks started by torchrun (its rendezvous, not the launcher's environment)."""
    env_cmd = ["env", "GLOO_SOCKET_IFNAME=lo", "OMP_NUM_THREADS=1"]
    ranks = len(spec["workers"]) + spec["shards"]
    argv = [*env_cmd, "torchrun", "--nnodes=1", f"--nproc-per-node={ranks}",
            f"--master-port={free_port()}", "-m", "ddlperf.measure.ps_trainer", "--spec",
            str(tmp_path / "spec.json")]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    records, skipped = read_records(tmp_path / "records.jsonl")
    assert skipped == 0
    return records


@pytest.mark.parametrize("sync,staleness,ps,sharding,overlap", [
    # BSP runs under torchrun: its rendezvous is checked on the same run (one start-up less)
    pytest.param("bsp", None, 1, "round_robin", True, marks=needs_torchrun),
    ("asp", None, 1, "greedy", True),
    ("ssp", 1, 2, "even", False),  # every tensor sliced over both shards, no overlap
])
def test_ps_trainer_runs_every_sync_mode(tmp_path: Path, sync: str, staleness: int | None,
                                         ps: int, sharding: str, overlap: bool) -> None:
    spec = _spec(tmp_path, sync=sync, staleness=staleness, ps=ps, sharding=sharding,
                 overlap=overlap)
    if sharding == "even":
        assert all(len(parts) == 2 for parts in spec["parts"])
    records = _run_torchrun(tmp_path, spec) if sync == "bsp" else _run(tmp_path, spec)
    _check_iterations(records, spec)
    total = spec["iterations"] + spec["warmup"]
    serves = [r for r in records if r["type"] == "serve"]
    assert len(serves) == 2 * total * ps  # one per shard, worker and iteration
    size = 4 * sum(t["numel"] for t in spec["tensors"])
    assert sum(r["payload_sent_bytes"] for r in serves) == 2 * total * size
    # Emulated device time: forward + backward waits of the workload, a few ms of overhead.
    expected = 3 * (FWD + BWD)
    for r in records:
        if r["type"] == "iteration":
            assert r["compute"] == "emulated device time"
            assert expected - 1e-3 <= r["compute_s"] <= expected + 0.02
    if sync == "bsp":  # lock step: no worker starts version t + 1 before all pushed t
        for t in range(1, total):
            starts = [r["end"] for r in serves if r["iteration"] == t - 1]
            begun = [r["start"] for r in records if r["type"] == "iteration"
                     and r["iteration"] == t]
            assert min(begun) >= max(starts) - 0.05


@pytest.mark.parametrize("arch", ["ps", "allreduce"])
def test_emulated_layers_take_the_workloads_spread(tmp_path: Path, arch: str) -> None:
    """A layer with a cv waits a fresh lognormal draw each iteration, the same draws a
    LayerNoise of the worker's seed and index gives (both trainers' emulated compute)."""
    from ddlperf.measure.emulated_noise import layer_noise
    from ddlperf.workload import Workload

    wl = Workload.from_dict({"format": "ddlperf.workload/1", "name": "noisy", "batch_size": 8,
                             "layers": [{"name": f"l{i}", "forward_s": 0.01, "backward_s": 0.02,
                                         "forward_cv": 0.4, "backward_cv": 0.4,
                                         "tensors": [{"name": f"l{i}.t", "bytes": 40_000}]}
                                        for i in range(3)]})
    cluster = make_cluster(workers=2, ps=1 if arch == "ps" else 0, bandwidth="1Gbps", arch=arch)
    spec = build_spec(resolve(wl, cluster, make_strategy(arch=arch, sync="asp" if arch == "ps"
                                                         else "bsp")),
                      compute="emulated", iterations=5, warmup=1)
    assert spec["workers"][1]["forward_cv"] == [0.4] * 3
    spec.update(records=str(tmp_path / "records.jsonl"), status_dir=str(tmp_path / "status"),
                op_timeout_s=60)
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    its = worker_iterations(_run(tmp_path, spec))
    for worker in spec["workers"]:
        noise = layer_noise(spec, worker)
        expected = [sum(f) + sum(b) for f, b in (noise.draw() for _ in range(6))]
        measured = [r["compute_s"] for r in its[worker["name"]]]
        assert len(measured) == 6
        for want, got in zip(expected, measured):
            assert want - 1e-3 <= got <= want + 0.015, (expected, measured)
    assert len({round(r["compute_s"], 3) for r in its["w0"]}) > 3  # not one fixed time


def test_ddp_trainer(tmp_path: Path) -> None:
    spec = _spec(tmp_path, workers=2, ps=0, arch="allreduce")
    records = _run(tmp_path, spec)
    _check_iterations(records, spec)
    size = 4 * sum(t["numel"] for t in spec["tensors"])
    row = next(r for r in records if r["type"] == "iteration")
    assert row["payload_sent_bytes"] == size  # 2(N−1)/N × S with N = 2
    steady, _ = steady_state(worker_iterations(records), spec["warmup"])
    assert set(steady) == {"w0", "w1"}


@pytest.mark.slow
def test_real_compute_ps(tmp_path: Path) -> None:
    # one worker: the real-compute path is the same for each, and each rank loads the model
    spec = _spec(tmp_path, workers=1, compute="real", model="mobilenet_v2", batch_size=2,
                 iterations=1, warmup=1)
    records = _run(tmp_path, spec, timeout=120)
    _check_iterations(records, spec)
    assert {r["compute"] for r in records if r["type"] == "iteration"} == {"real CPU compute"}


@pytest.mark.parametrize("fault,named", [("w1:crash@1", "exited with status 1"),
                                         ("w1:hang@1", "made no progress")])
def test_a_failing_worker_stops_the_run_and_is_named(tmp_path: Path, monkeypatch:
                                                     pytest.MonkeyPatch, fault: str,
                                                     named: str) -> None:
    monkeypatch.setenv("DDLPERF_FAULT", fault)
    spec = _spec(tmp_path, iterations=20)
    with pytest.raises(RunFailed) as info:
        run_emulated(Loopback(), spec, tmp_path / "spec.json", tmp_path, timeout=3)
    assert info.value.rank_name == "w1"
    assert str(info.value).startswith("rank w1 (worker on host w1)") and named in str(info.value)
    records, _ = read_records(tmp_path / "records.jsonl")
    assert [r["iteration"] for r in records if r.get("name") == "w1"
            and r["type"] == "iteration"] == [0]  # what it did before failing is kept
    ps = subprocess.run(["pgrep", "-f", str(tmp_path / "spec.json")], capture_output=True)
    assert ps.stdout.strip() == b""  # every rank process is gone


def test_trainer_without_rendezvous_env_says_what_is_missing(tmp_path: Path) -> None:
    _spec(tmp_path)
    env = {"PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "ddlperf.measure.ps_trainer", "--spec",
                           str(tmp_path / "spec.json")], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode != 0 and "RANK" in proc.stderr
