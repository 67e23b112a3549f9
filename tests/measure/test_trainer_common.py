"""What every trainer shares: the per-rank status file the launcher reads to tell a hung rank
from a waiting one, the rank table and slices on servers, the compute device."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from ddlperf.measure.trainer_common import (
    Status,
    aggregation_pieces,
    compute_device,
    file_name,
    hosts_of,
    local_rings,
    rank_table,
    read_status,
    slice_bounds,
)


def test_status_is_one_fixed_record_overwritten_in_place(tmp_path: Path) -> None:
    status = Status(tmp_path, "w0")
    path = tmp_path / "w0.status"
    status.set("pull", 3)
    phase, iteration, since = read_status(path)
    assert (phase, iteration) == ("pull", 3)
    status.set("compute", 3)
    status.set("barrier")
    assert read_status(path)[:2] == ("barrier", -1)
    assert path.stat().st_size == Status.RECORD_BYTES
    assert since > 0


def test_an_unchanged_state_keeps_the_moment_its_phase_began(tmp_path: Path) -> None:
    status = Status(tmp_path, "ps0")
    status.set("recv", 7)
    first = read_status(tmp_path / "ps0.status")
    for _ in range(50):
        status.set("recv", 7)
    assert read_status(tmp_path / "ps0.status") == first


def test_threads_sharing_a_status_leave_a_whole_record(tmp_path: Path) -> None:
    status = Status(tmp_path, "ps0")

    def work(phase: str) -> None:
        for i in range(300):
            status.set(phase, i)

    threads = [threading.Thread(target=work, args=(p,)) for p in ("recv", "gate", "send")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    phase, iteration, _since = read_status(tmp_path / "ps0.status")
    assert phase in ("recv", "gate", "send") and iteration == 299


def test_no_directory_means_no_file(tmp_path: Path) -> None:
    Status(None, "w0").set("pull", 1)
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------- servers


def _spec(workers: list[dict], shards: int = 0, arch: str = "ps", placement: str = "dedicated"
          ) -> dict:
    return {"arch": arch, "shards": shards, "placement": placement, "workers": workers}


def _servers(count: int, gpus: int) -> list[dict]:
    return [{"name": f"node{s}/gpu{g}", "host": f"node{s}", "local": g, "gpus": gpus}
            for s in range(count) for g in range(gpus)]


def test_rank_table_puts_a_servers_gpus_together_then_the_shards() -> None:
    table = rank_table(_spec(_servers(2, 2), shards=1))
    assert [(e["name"], e["host"], e["local_rank"]) for e in table] == [
        ("node0/gpu0", "node0", 0), ("node0/gpu1", "node0", 1),
        ("node1/gpu0", "node1", 0), ("node1/gpu1", "node1", 1), ("ps0", "ps0", 0)]
    assert hosts_of(table) == ["node0", "node1", "ps0"]
    assert local_rings(_spec(_servers(2, 2), arch="allreduce")) == {0: [0, 2], 1: [1, 3]}


def test_file_names_of_server_ranks_have_no_slash(tmp_path: Path) -> None:
    assert file_name("node1/gpu3") == "node1.gpu3"
    Status(tmp_path, "node1/gpu3").set("compute", 0)
    assert read_status(tmp_path / "node1.gpu3.status")[:2] == ("compute", 0)


def test_slices_cover_a_tensor_and_pieces_cut_them_at_shard_boundaries() -> None:
    assert [slice_bounds(10, g, 3) for g in range(3)] == [(0, 3), (3, 7), (7, 10)]
    parts = [[0, 0, 6], [1, 6, 4]]  # shard 0 holds [0, 6), shard 1 [6, 10)
    assert aggregation_pieces(parts, 10, 0, 2) == [(0, 0, 5)]
    assert aggregation_pieces(parts, 10, 1, 2) == [(0, 5, 1), (1, 6, 4)]


def test_nccl_without_a_cuda_gpu_is_one_line(monkeypatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit, match="nccl needs a CUDA GPU"):
        compute_device({"backend": "nccl", "compute": "emulated"})
    assert compute_device({"backend": "gloo", "compute": "real"}) == "cpu"


def test_cpu_clock_separates_running_from_sleeping() -> None:
    """A busy loop is the thread's CPU; a sleep is not (CPU seconds, not wall-clock)."""
    import time

    from ddlperf.measure.trainer_common import CpuClock

    clock = CpuClock()
    x = 0
    for i in range(300_000):
        x += i * i
    busy = clock.lap("busy")
    time.sleep(0.05)
    idle = clock.lap("idle")
    assert set(busy) >= {"busy_process_cpu_s", "busy_thread_cpu_s", "busy_thread_sys_s"}
    assert busy["busy_thread_cpu_s"] > 0
    assert busy["busy_process_cpu_s"] >= busy["busy_thread_cpu_s"] * 0.9
    assert idle["idle_thread_cpu_s"] < busy["busy_thread_cpu_s"]
    if Path("/proc/thread-self/schedstat").exists():
        assert busy["busy_runqueue_s"] >= 0
