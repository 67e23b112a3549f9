"""How far to trust a prediction, from the published validation results of its class."""

from __future__ import annotations

import csv

import pytest

from ddlperf.api import scenario
from ddlperf.explain import trust


def _rows_of(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_published_results_are_package_data():
    rows = trust._rows("validation.csv")
    assert rows and "heterogeneous" in rows[0]


def test_class_rows_and_numbers_come_from_the_published_file():
    cluster = {"workers": [{"name": "fast", "count": 2}, {"name": "slow", "count": 1,
                                                          "speed": 0.4}], "ps": 1}
    sc = scenario(model="resnet18", cluster=cluster, sync="ssp", staleness=2)
    t = trust.trust_for(sc, "simulate")
    assert t["class"] == {"arch": "ps", "sync": "ssp", "heterogeneous": True,
                          "colocated": False}
    rows = [r for r in trust._rows("validation.csv")
            if r["method"] == "simulate" and r["arch"] == "ps" and r["sync"] == "ssp"
            and r["heterogeneous"] == "True" and r["status"] == "ok"
            and r["placement"] != "colocated"]
    source = t["sources"][0]
    assert source["runs"] == len(rows) > 0
    worst = max((float(r["error_pct"]) for r in rows), key=abs)
    assert source["within_pct"] == pytest.approx(abs(worst))
    assert f"within {abs(worst):.1f}%" in t["text"]
    assert "PS + SSP with mixed workers" in t["text"]


def test_outside_the_validated_scale_is_said(tmp_path, monkeypatch):
    sc = scenario(model="resnet50", workers=1024, ps=2, bandwidth="400Gbps")
    t = trust.trust_for(sc, "analytic")
    assert "outside the validated range" in t["text"]


def test_a_class_without_runs_falls_back_to_the_architecture(tmp_path, monkeypatch):
    path = tmp_path / "validation.csv"
    fields = ["scenario", "method", "status", "arch", "sync", "staleness", "heterogeneous",
              "workers", "bandwidth_bps", "error_pct"]
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerow({"scenario": "a", "method": "analytic", "status": "ok", "arch": "ps",
                         "sync": "bsp", "staleness": "", "heterogeneous": "False",
                         "workers": 2, "bandwidth_bps": 1e8, "error_pct": -3.0})
    monkeypatch.setattr(trust, "DATA", tmp_path)
    monkeypatch.setattr(trust, "DOCS", tmp_path)
    trust._rows.cache_clear()
    try:
        t = trust.trust_for(scenario(model="resnet50", workers=2, ps=1, sync="asp"),
                            "analytic")
        assert t["sources"][0]["scope"] == "architecture"
        assert t["text"].startswith("No emulated dev matrix run of this class (PS + ASP")
        none = trust.trust_for(scenario(model="resnet50", workers=2, arch="allreduce"),
                               "analytic")
        assert none["sources"] == [] and "unchecked estimate" in none["text"]
    finally:
        trust._rows.cache_clear()


def test_published_cluster_results_are_a_second_source(tmp_path, monkeypatch):
    fields = ["scenario", "method", "status", "arch", "sync", "staleness", "workers",
              "bandwidth_bps", "error_pct"]
    for name, error, workers in (("validation.csv", -2.0, 3), ("published.csv", 12.5, 64)):
        with (tmp_path / name).open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=fields)
            writer.writeheader()
            writer.writerow({"scenario": name, "method": "analytic", "status": "ok",
                             "arch": "allreduce", "sync": "bsp", "staleness": "",
                             "workers": workers, "bandwidth_bps": 1e10, "error_pct": error})
    monkeypatch.setattr(trust, "DATA", tmp_path)
    monkeypatch.setattr(trust, "DOCS", tmp_path)
    trust._rows.cache_clear()
    try:
        t = trust.trust_for(scenario(model="resnet50", workers=64, arch="allreduce"),
                            "analytic")
        assert [s["source"] for s in t["sources"]] == ["emulated dev matrix",
                                                       "published cluster"]
        assert "within 12.5%" in t["text"] and "published cluster run with 64 workers" in t[
            "text"]
        assert "outside the validated range" not in t["text"]  # the published run covers 64
    finally:
        trust._rows.cache_clear()


def test_a_class_missing_from_one_source_only_names_that_source(tmp_path, monkeypatch):
    """Runs of the class in the dev matrix but not among the published clusters: the text
    must not say the class was never validated."""
    fields = ["scenario", "method", "status", "arch", "sync", "staleness", "workers",
              "bandwidth_bps", "error_pct"]
    for name, sync in (("validation.csv", "ssp"), ("published.csv", "bsp")):
        with (tmp_path / name).open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=fields)
            writer.writeheader()
            writer.writerow({"scenario": name, "method": "analytic", "status": "ok",
                             "arch": "ps", "sync": sync, "staleness": "2", "workers": 4,
                             "bandwidth_bps": 1e10, "error_pct": 3.0})
    monkeypatch.setattr(trust, "DATA", tmp_path)
    monkeypatch.setattr(trust, "DOCS", tmp_path)
    trust._rows.cache_clear()
    try:
        t = trust.trust_for(scenario(model="resnet50", workers=4, ps=1, sync="ssp",
                                     staleness=2), "analytic")
        assert [s["scope"] for s in t["sources"]] == ["class", "architecture"]
        assert "No validated run" not in t["text"]
        assert "No published cluster run of this class (PS + SSP" in t["text"]
    finally:
        trust._rows.cache_clear()


def test_colocated_shards_are_a_class_of_their_own():
    """The analytic ASP/SSP model is far off with colocated shards on some measured rows; a
    prediction with dedicated shards must not borrow those errors, nor the reverse."""
    rows = [r for r in trust._rows("validation.csv") if r["status"] == "ok"
            and r["method"] == "analytic" and r["arch"] == "ps" and r["sync"] == "ssp"
            and r["heterogeneous"] == "False"]
    colocated = {r["scenario"] for r in rows if r["placement"] == "colocated"}
    dedicated = {r["scenario"] for r in rows if r["placement"] == "dedicated"}
    assert colocated and dedicated
    for placement, want in (("colocated", colocated), ("dedicated", dedicated)):
        sc = scenario(model="resnet18", workers=4, ps=1, placement=placement, sync="ssp",
                      staleness=2)
        source = trust.trust_for(sc, "analytic")["sources"][0]
        assert set(source["scenarios"]) == want
    text = trust.trust_for(scenario(model="resnet18", workers=4, ps=1, placement="colocated",
                                    sync="ssp", staleness=2), "analytic")["text"]
    assert "identical workers and colocated shards" in text
