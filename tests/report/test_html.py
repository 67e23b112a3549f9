"""The HTML report: self-contained, and rendered by headless Chromium with its figures."""

from __future__ import annotations

import re

import numpy as np
import pytest

from ddlperf.explain import explain, simulated_iteration
from ddlperf.io import write_atomic
from ddlperf.report.html import scenario_report
from tests.report import chromium

SCENARIO = {"model": "resnet50", "workers": 16, "ps": 2}


@pytest.fixture(scope="module")
def report_html():
    e = explain(**SCENARIO)
    return scenario_report(e, simulated_iteration(**SCENARIO), "ddlperf report --workers 16")


def test_page_is_self_contained(report_html):
    references = re.findall(r'(?:src|href)="([^"]*)"', report_html)
    assert references and all(r.startswith("data:image/png;base64,") for r in references)
    assert "http://" not in report_html.split("<body>")[1].replace("http://www.w3.org", "")
    assert "@import" not in report_html and "url(" not in report_html


def test_sections_and_figures_are_there(report_html):
    for heading in ("Prediction", "Inputs", "Where the time goes",
                    "One steady-state iteration (simulator)", "What-ifs", "How far to trust"):
        assert f">{heading}" in report_html
    figures = set(re.findall(r'<figure id="([^"]+)"', report_html))
    assert figures == {"fig-breakdown", "fig-resources", "fig-timeline", "fig-whatifs"}


def test_a_scenario_the_simulator_refuses_gets_a_page_without_timeline():
    e = explain(**SCENARIO)
    text = scenario_report(e, None)
    assert "No timeline" in text and 'id="fig-timeline"' not in text


@pytest.mark.skipif(chromium.skip_reason() is not None, reason=str(chromium.skip_reason()))
def test_chromium_renders_the_page_offline_with_its_figures(report_html, tmp_path):
    page = write_atomic(tmp_path / "report.html", report_html)
    dom = chromium.run(page, tmp_path / "profile", "--dump-dom")
    count = report_html.count("<figure ")
    assert f'data-figures-rendered="{count}"' in dom  # every <img> decoded, none broken
    assert dom.count('data-rendered="yes"') == count
    shot = tmp_path / "shot.png"
    chromium.run(page, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1200,3000")
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)[..., :3]
    ink = (pixels.mean(axis=2) < 0.9).mean()  # share of pixels that are not (near) white
    assert ink > 0.05, "the page rendered blank"
    rgb = (pixels * 255).astype(np.uint8).astype(np.uint32)  # one integer per colour: a
    colours = (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]  # 1-D unique is fast
    assert np.unique(colours).size > 50


@pytest.mark.skipif(chromium.skip_reason() is not None, reason=str(chromium.skip_reason()))
def test_chromium_renders_plan_and_sweep_pages(tmp_path):
    from ddlperf.plan import SearchSpace, Target, plan
    from ddlperf.plan.prices import PriceTable
    from ddlperf.report.html import plan_report, sweep_report
    from ddlperf.result_keys import columns
    from ddlperf.sweep import sweep
    from tests.plan.conftest import TABLE

    table = PriceTable.model_validate(TABLE)
    result = plan(Target(throughput=2000), SearchSpace(instances=table.instances,
                                                       servers=range(1, 9), ps=(1, 2)),
                  prices=table, fixed={"model": "resnet50"}, recheck=0)
    rows = sweep({"workers": [1, 2, 4, 8], "ps": [1, 2]}, model="resnet50")
    pages = {"plan": plan_report(result),
             "sweep": sweep_report(rows, columns(rows), "workers", "throughput_samples_per_s",
                                   "resnet50")}
    for name, text in pages.items():
        page = write_atomic(tmp_path / f"{name}.html", text)
        dom = chromium.run(page, tmp_path / f"profile-{name}", "--dump-dom")
        assert f'data-figures-rendered="{text.count("<figure ")}"' in dom, name
        assert text.count("<figure ") == 1
