"""Stopping ranks: every rank's process group goes, also where the launched wrapper has
already exited and left its trainer running (no root, plain processes)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from ddlperf.measure.launcher import _Rank, stop_ranks


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _rank(tmp_path: Path, script: str) -> _Rank:
    proc = subprocess.Popen(["sh", "-c", script], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return _Rank({"name": "w1"}, proc, tmp_path / "w1.log", time.monotonic())


def test_a_trainer_left_behind_by_its_exited_wrapper_is_stopped(tmp_path: Path) -> None:
    rank = _rank(tmp_path, "sleep 60 & exit 0")  # the wrapper exits, its child runs on
    rank.proc.wait(timeout=10)
    assert _group_alive(rank.proc.pid)
    stop_ranks([rank], grace_s=0.5)
    deadline = time.monotonic() + 5
    while _group_alive(rank.proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _group_alive(rank.proc.pid)
    assert rank.killed is False  # its launched process had ended on its own


def test_a_running_rank_that_ignores_sigterm_is_killed_and_marked(tmp_path: Path) -> None:
    rank = _rank(tmp_path, "trap '' TERM; sleep 60 & wait")
    time.sleep(0.2)
    stop_ranks([rank], grace_s=0.3)
    assert rank.proc.poll() is not None and rank.killed
    deadline = time.monotonic() + 5
    while _group_alive(rank.proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _group_alive(rank.proc.pid)


def test_finished_ranks_are_no_error(tmp_path: Path) -> None:
    rank = _rank(tmp_path, "exit 0")
    rank.proc.wait(timeout=10)
    stop_ranks([rank], grace_s=0.1)
    with pytest.raises(ProcessLookupError):
        os.killpg(rank.proc.pid, 0)
