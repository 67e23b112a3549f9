"""Sweep plots: placed by value, labelled in table units, titled, with ideal scaling."""

from __future__ import annotations

import pytest

from ddlperf.errors import InputError
from ddlperf.report.sweep_plot import plot_sweep, result_key, series, sweep_figure
from ddlperf.sweep import sweep

GIVEN = ["100Gbps", "10Gbps", "1Gbps", "25Gbps", "40Gbps"]


def test_a_bandwidth_axis_is_ordered_by_value_not_text() -> None:
    rows = sweep({"bandwidth": GIVEN}, model="resnet18")
    ax = sweep_figure(rows, "bandwidth", "throughput_samples_per_s").axes[0]
    xs = list(ax.get_lines()[0].get_xdata())
    assert xs == [1e9, 1e10, 25e9, 40e9, 1e11]
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks == ["1Gbps", "10Gbps", "25Gbps", "40Gbps", "100Gbps"]
    ys = list(ax.get_lines()[0].get_ydata())
    assert ys == sorted(ys)  # faster links never slow a BSP iteration down: no fake V


def test_latency_is_ordered_by_value_and_text_axes_keep_their_order() -> None:
    rows = sweep({"latency": ["1ms", "50us", "5us"]}, model="resnet18")
    assert [p[0] for p in series(rows, "latency", "iteration_time_s")["iteration time"]] == \
        pytest.approx([5e-6, 50e-6, 1e-3])
    rows = sweep({"model": ["vgg16", "alexnet", "resnet18"]})
    assert [p[0] for p in series(rows, "model", "speedup")["speedup (×)"]] == \
        ["vgg16", "alexnet", "resnet18"]


def test_title_and_ideal_scaling_line() -> None:
    rows = sweep({"workers": [1, 2, 4, 8]}, model="resnet18")
    ax = sweep_figure(rows, "workers", "speedup", title="resnet18 · V100 · PS").axes[0]
    assert ax.get_title().startswith("resnet18 · V100 · PS\nspeedup")
    ideal = next(line for line in ax.get_lines() if line.get_label() == "ideal (linear)")
    assert list(ideal.get_ydata()) == [1, 2, 4, 8]
    ax = sweep_figure(rows, "workers", "throughput_samples_per_s").axes[0]
    ideal = next(line for line in ax.get_lines() if line.get_label().startswith("ideal"))
    one = rows[0]["throughput_samples_per_s"] / rows[0]["speedup"]  # one worker alone
    assert list(ideal.get_ydata()) == pytest.approx([one, 2 * one, 4 * one, 8 * one])


def test_efficiency_is_in_percent_like_the_tables() -> None:
    rows = sweep({"workers": [1, 8]}, model="resnet18")
    ax = sweep_figure(rows, "workers", "scaling_efficiency").axes[0]
    assert ax.get_lines()[0].get_ydata()[0] == pytest.approx(100 * rows[0]["scaling_efficiency"])


@pytest.mark.parametrize(("suffix", "magic"), [(".png", b"\x89PNG"), (".pdf", b"%PDF"),
                                               (".svg", b"<?xml")])
def test_the_suffix_picks_the_format(tmp_path, suffix: str, magic: bytes) -> None:
    rows = sweep({"workers": [1, 2]}, model="resnet18")
    path = plot_sweep(rows, "workers", "throughput", tmp_path / f"p{suffix}")
    assert path.read_bytes().startswith(magic)


def test_unknown_result_and_format_are_refused(tmp_path) -> None:
    with pytest.raises(InputError, match="--y: 'foo' is not a result"):
        result_key("foo")
    rows = sweep({"workers": [1, 2]}, model="resnet18")
    with pytest.raises(InputError, match=r"--plot: cannot write \.jpg"):
        plot_sweep(rows, "workers", "speedup", tmp_path / "p.jpg")
    assert not (tmp_path / "p.jpg").exists()
