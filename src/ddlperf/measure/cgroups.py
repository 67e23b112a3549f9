"""cgroup v1 CPU quotas for emulated hosts of different speed.

Quotas use a 10 ms period (``cpu.cfs_period_us = 10000``), short enough that a throttled process
does not stall for long in one piece. The slowdown is not exactly 1/quota: measure it.
Processes join a cgroup through :func:`wrap`, a ``sh`` that writes its own pid to
``cgroup.procs`` and then execs, so the argv also works when typed into a shell.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ddlperf.measure import cpu_precedence
from ddlperf.measure.netns import kill_pids

CPU_ROOT = Path("/sys/fs/cgroup/cpu")
PERIOD_US = 10_000
MIN_QUOTA_US = 1_000  # the kernel refuses quotas below 1 ms


def quota_us(fraction: float) -> int:
    """Quota in microseconds per period for ``fraction`` of one core."""
    return max(MIN_QUOTA_US, round(fraction * PERIOD_US))


def available() -> bool:
    return (CPU_ROOT / "cpu.cfs_quota_us").exists()


def create(path: Path, fraction: float | None) -> None:
    """Make the cgroup at ``path`` (parents too); set a quota when ``fraction`` is given, and
    the emulated cluster's precedence over other jobs (:mod:`ddlperf.measure.cpu_precedence`)
    as its weight and its parents' below the root (a weight counts among siblings only), so
    that the quota is what its processes get."""
    path.mkdir(parents=True, exist_ok=True)
    if fraction is not None:
        (path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (path / "cpu.cfs_quota_us").write_text(str(quota_us(fraction)))
        for group in (path, *path.parents):
            if not (group / "cpu.shares").exists() or group == CPU_ROOT:
                break
            (group / "cpu.shares").write_text(str(cpu_precedence.WEIGHT))


def add_pid(path: Path, pid: int) -> None:
    """Move process ``pid`` (all its threads) into the cgroup."""
    (path / "cgroup.procs").write_text(str(pid))


def wrap(path: Path, argv: list[str]) -> list[str]:
    """argv that joins the cgroup at ``path`` and then execs ``argv``."""
    script = 'echo $$ > "$1" && shift && exec "$@"'
    return ["sh", "-c", script, "ddlperf-cgexec", str(path / "cgroup.procs"), *argv]


def pids(path: Path) -> list[int]:
    try:
        text = (path / "cgroup.procs").read_text()
    except (FileNotFoundError, OSError):
        return []
    return [int(tok) for tok in text.split()]


def remove(path: Path, grace_s: float = 1.0) -> None:
    """Kill what runs in ``path`` and below, then remove the directories; gone is fine."""
    if not path.exists():
        return
    children = sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
    for group in [*children, path]:
        kill_pids(pids(group), grace_s)
        deadline = time.monotonic() + grace_s
        while True:
            try:
                os.rmdir(group)
                break
            except FileNotFoundError:
                break
            except OSError:  # EBUSY while exiting tasks leave
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
