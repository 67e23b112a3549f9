"""The host's CPU around a measurement: the probe, /proc/stat's steal, the window."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddlperf.validate.host_speed import HostWindow, cpu_probe_s, cpu_ticks, steal_pct


def test_the_probe_times_fixed_work_and_more_work_takes_longer() -> None:
    short, long = cpu_probe_s(repeats=3, loops=20_000), cpu_probe_s(repeats=3, loops=400_000)
    assert 0 < short < long


def test_ticks_come_from_the_aggregate_cpu_line(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 5 50 800 10 1 4 30 0 0\ncpu0 50 2 25 400 5 0 2 15 0 0\n")
    ticks = cpu_ticks(stat)
    assert ticks == {"user": 100, "nice": 5, "system": 50, "idle": 800, "iowait": 10,
                     "irq": 1, "softirq": 4, "steal": 30}
    assert cpu_ticks(tmp_path / "missing") is None
    stat.write_text("cpu  not numbers\n")
    assert cpu_ticks(stat) is None


def test_steal_is_a_share_of_all_cpu_time_between_two_readings() -> None:
    before = dict.fromkeys(("user", "nice", "system", "idle", "iowait", "irq", "softirq",
                            "steal"), 0)
    after = {**before, "user": 60, "idle": 30, "steal": 10}
    assert steal_pct(before, after) == pytest.approx(10.0)
    assert steal_pct(before, before) is None  # no time passed
    assert steal_pct(None, after) is None


def test_a_window_reads_before_and_after() -> None:
    window = HostWindow.start()
    readings = window.finish()
    assert readings["probe_before_s"] > 0 and readings["probe_after_s"] > 0
    if cpu_ticks() is not None:  # Linux: the kernel says how much was stolen
        assert readings["steal_pct"] is None or 0 <= readings["steal_pct"] <= 100
