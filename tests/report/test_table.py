"""The predict/measure tables at 80 and 160 columns: they fit, numbers are whole."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from ddlperf.api import predict
from ddlperf.report.table import percent, render
from tests.report.conftest import make_measurement


def rendered(p, width: int) -> str:
    console = Console(width=width, file=io.StringIO(), highlight=False)
    render(p, console)
    return console.file.getvalue()  # type: ignore[attr-defined]


@pytest.mark.parametrize("width", [80, 160])
def test_measurement_device_cells_stay_on_one_line(tmp_path: Path, width: int) -> None:
    text = rendered(make_measurement(tmp_path, "emulated"), width)
    assert max(len(line) for line in text.splitlines()) <= width
    assert "…" not in text
    row = next(line for line in text.splitlines() if line.startswith("w0"))
    assert "V100" in row and "emulated" not in row  # the header says what is emulated
    assert "compute: emulated device time" in " ".join(text.split())


@pytest.mark.parametrize("width", [80, 160])
def test_many_groups_fit(width: int) -> None:
    p = predict("resnet50", ps=2, cluster={"workers": [
        {"name": "gpu-fast", "count": 4, "device": "A100"},
        {"name": "gpu-slow", "count": 2, "device": "K80", "batch_size": 16}]})
    text = rendered(p, width)
    assert max(len(line) for line in text.splitlines()) <= width and "…" not in text
    assert ("gpu-fast" in text) == (width == 160)
    assert ("not shown at this width: group" in text) == (width == 80)


@pytest.mark.parametrize(("share", "text"), [(0.182, "18.2%"), (0.0, "0.0%"),
                                             (0.0000123, "0.0012%"), (1.0, "100.0%")])
def test_percent_keeps_small_shares(share: float, text: str) -> None:
    assert percent(share) == text


@pytest.mark.parametrize("width", [80, 160])
def test_a_measured_mean_shows_its_95_percent_interval(tmp_path: Path, width: int) -> None:
    from dataclasses import replace

    m = make_measurement(tmp_path, "emulated")
    sure = replace(m, uncertainty={"iteration_time_s": {
        "half_width_s": 0.042 * m.iteration_time_s, "batches": 5}})
    text = " ".join(rendered(sure, width).split())
    assert "mean ±4.2% (95%)" in text
    assert max(len(line) for line in rendered(sure, width).splitlines()) <= width
    assert "(95%)" not in rendered(replace(m, uncertainty=None), width)
