"""The per-rank status file the launcher reads to tell a hung rank from a waiting one."""

from __future__ import annotations

import threading
from pathlib import Path

from ddlperf.measure.trainer_common import Status, read_status


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
