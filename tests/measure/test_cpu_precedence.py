"""Ground-truth processes get precedence over other jobs on the machine's CPU."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ddlperf.measure import cpu_precedence


def _sleeper(new_session: bool) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "30"], start_new_session=new_session)


@pytest.mark.root
def test_claim_gives_the_process_and_its_session_the_precedence() -> None:
    proc = _sleeper(new_session=True)
    try:
        assert cpu_precedence.claim(proc.pid)
        assert os.getpriority(os.PRIO_PROCESS, proc.pid) == cpu_precedence.NICE
        autogroup = Path(f"/proc/{proc.pid}/autogroup")
        if autogroup.exists():
            assert autogroup.read_text().split()[-1] == str(cpu_precedence.NICE)
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.root
def test_claim_never_renices_the_parents_session() -> None:
    """A child in its parent's session: only its threads, not the group the parent (and the
    user's shell) share."""
    mine = Path("/proc/self/autogroup")
    before = mine.read_text() if mine.exists() else None
    proc = _sleeper(new_session=False)
    try:
        cpu_precedence.claim(proc.pid)
        assert os.getpriority(os.PRIO_PROCESS, proc.pid) == cpu_precedence.NICE
        if before is not None:
            assert mine.read_text() == before
    finally:
        proc.kill()
        proc.wait()


def test_claim_of_a_process_that_is_gone_is_false() -> None:
    proc = _sleeper(new_session=True)
    proc.kill()
    proc.wait()
    assert cpu_precedence.claim(proc.pid) is False
