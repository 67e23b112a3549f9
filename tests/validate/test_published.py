"""The published check: published values in ddlperf's units, entries predicted as ``ddlperf
predict`` would, the single-GPU compute check pinned, winners judged, baselines resolved."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddlperf.errors import InputError
from ddlperf.validate.published import (
    check_published,
    entry_cluster,
    entry_gpus,
    judge,
    plan_published,
    published_values,
    summarize_published,
)
from ddlperf.validate.published_file import load_published
from ddlperf.workload import zoo
from tests.validate.helpers import PUBLISHED_TINY

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "scenarios" / "published.yaml"

TINY = PUBLISHED_TINY + """
entries:
  - {name: one, source: X, model: resnet18, device: V100, batch_size: 32, dtype: fp32,
     published_s: 0.05}
  - {name: ring x4, setup: ring, servers: 2, model: resnet18, batch_size: 32, dtype: fp32,
     published: 1000}
  - {name: ps x4, setup: ps, servers: 2, ps: 2, model: resnet18, batch_size: 32, dtype: fp32,
     published: 2000}
  - {name: cpu x4, setup: cpu, servers: 2, model: resnet18, batch_size: 32, dtype: fp32,
     published: 500}
compare:
  - {what: PS vs all-reduce, entries: [ps x4, ring x4]}
  - {what: host vs ring, entries: [cpu x4, ring x4]}
"""


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    return path


def test_published_values_are_the_whole_jobs_iteration_time_and_throughput(tiny: Path) -> None:
    f = load_published(tiny)
    one, ring = f.entries[0], f.entries[1]
    assert published_values(f, one) == pytest.approx((0.05, 32 / 0.05))
    assert entry_gpus(f, ring) == 4
    assert published_values(f, ring) == pytest.approx((4 * 32 / 1000, 1000))


def test_an_entry_sets_servers_gpus_and_shards_on_its_setups_cluster(tiny: Path) -> None:
    f = load_published(tiny)
    ps = f.entries[2]
    cluster = entry_cluster(f, ps, speed=0.5)
    assert cluster["nodes"][0] == {"gpus": 2, "device": "V100", "intra": "NVLink2",
                                   "count": 2, "speed": 0.5}
    assert cluster["ps"] == {"placement": "colocated", "count": 2}
    assert "count" not in f.setups["ps"].cluster["nodes"][0]  # the set-up is not changed


def test_tiny_file_end_to_end(tiny: Path) -> None:
    run = check_published(tiny)
    rows = {r["name"]: r for r in run.rows}
    one = rows["one"]["predicted"]
    # one GPU alone is the compute model's figure, both methods
    expected = zoo.single_device_throughput("resnet18", "V100", 32)
    for method in ("analytic", "simulate"):
        assert one[method]["throughput_samples_per_s"] == pytest.approx(expected, rel=1e-6)
        assert one[method]["throughput_error_pct"] == pytest.approx(
            100 * (expected / 640 - 1), rel=1e-6)
    assert rows["cpu x4"]["status"] == "not expressible"
    assert rows["cpu x4"]["error"] == "not modelled"
    # compute from the one-GPU figure: each GPU runs at the published one-GPU speed
    scaled = rows["ring x4"]["scaled"]["analytic"]
    assert scaled["speed"] == pytest.approx(640 / expected, rel=1e-6)
    assert scaled["throughput_samples_per_s"] <= 4 * 640 * (1 + 1e-9)
    judged = {tuple(c["entries"]): c for c in run.comparisons}
    assert judged[("cpu x4", "ring x4")]["status"] == "not expressible"
    ps_ring = judged[("ps x4", "ring x4")]
    assert ps_ring["published_winner"] == "ps x4"
    assert ps_ring["margin_pct"] == pytest.approx(100.0)
    s = run.summary
    assert s["not_expressible"] == ["cpu x4"]
    assert s["single"]["analytic"]["entries"] == 1
    assert s["cluster"]["analytic"]["entries"] == 2
    assert s["cluster"]["analytic"]["entries_network_stated"] == 1  # the PS network is not
    w = s["winners"]["analytic"]
    assert (w["right"] + w["wrong"], w["not_expressible"]) == (1, 1)


def test_a_winner_is_wrong_when_the_prediction_orders_the_pair_the_other_way() -> None:
    def row(name: str, published: float, predicted: float) -> dict:
        entry = {"throughput_samples_per_s": predicted, "throughput_error_pct": 0.0}
        return {"name": name, "status": "ok", "kind": "cluster", "network_stated": True,
                "source": "X", "setup": {"arch": "ps"},
                "measured": {"throughput_samples_per_s": published},
                "predicted": {"analytic": entry, "simulate": entry}}

    from ddlperf.validate.published_file import Comparison, PublishedFile

    f = PublishedFile.model_construct(compare=[Comparison(what="x", entries=["a", "b"])])
    rows = {"a": row("a", 100, 90), "b": row("b", 80, 95)}
    (c,) = judge(f, rows)
    assert c["published_winner"] == "a"
    assert c["predicted_winner"]["analytic"] == "b"
    assert c["right"] == {"analytic": False, "simulate": False}
    summary = summarize_published(list(rows.values()), [c])
    assert summary["winners"]["analytic"] == {"right": 0, "wrong": 1, "not_expressible": 0}


def test_two_matching_single_gpu_entries_need_a_named_baseline(tmp_path: Path) -> None:
    text = TINY.replace("compare:", "  - {name: one again, source: X, model: resnet18, "
                        "device: V100, batch_size: 32, dtype: fp32, published: 700}\ncompare:")
    path = tmp_path / "two.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match=r"entries\[1\] \(ring x4\)\.baseline"):
        plan_published(path)
    with pytest.raises(InputError, match="--only"):
        plan_published(PUBLISHED, ["no such entry"])


def test_single_gpu_check_set_errors_stay_where_they_were_measured() -> None:
    """The published single-GPU entries (check set): this pins the figures reported in
    docs/published.md and docs/compute.md so a change to the compute model shows up here."""
    plan = plan_published(PUBLISHED)
    singles = [e.name for e in plan.file.entries if e.single]
    assert len(singles) == 20
    run = check_published(PUBLISHED, singles)
    s = run.summary["single"]["analytic"]
    assert s["median_abs_error_pct"] == pytest.approx(9.6, abs=0.5)
    assert s["worst_error_pct"] == pytest.approx(-25.6, abs=0.5)
    assert s["within_25pct"] == 18
