"""Shared by the validate and report tests: a small matrix file and result rows made from
Prediction objects built here (unit tests of the comparison and report code, not of a
measurement)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddlperf.errors import InputError
from ddlperf.prediction import Prediction, WorkerResult
from ddlperf.validate import compare, plan_matrix

MINIMAL = """
defaults:
  bandwidth: 200Mbps
  iterations: 4
  synthetic:
    layers:
      - {count: 2, forward_ms: 5, backward_ms: 10, tensor_mb: 0.5}
scenarios:
  - name: a
    workers: 2
    ps: 1
  - name: b
    arch: allreduce
    workers: 3
    model: mobilenet_v2
    batch_size: 8
"""


def write(tmp_path: Path, text: str, name: str = "m.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def error_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(InputError) as info:
        plan_matrix(write(tmp_path, text))
    message = str(info.value)
    assert "\n" not in message
    return message


def fake(period: float, *, kind: str = "prediction", workers: int = 2,
         bottleneck: str = "ps0 downlink", percentiles: bool = False,
         probe: dict | None = None) -> Prediction:
    ws = [WorkerResult(f"w{i}", "w", "V100", 32, period, 32 / period, 0.2, period - 0.2, 0.0)
          for i in range(workers)]
    pct = {"iteration_time_s": {"p5": 0.9 * period, "p25": period, "p50": period,
                                "p75": period, "p95": 1.1 * period}} if percentiles else None
    inputs = {"measure": {"probe": probe or {}, "wire_check": {"ok": True},
                          "ps_update_s_per_byte": 3e-9, "out": "/x"}} if kind != "prediction" \
        else {}
    return Prediction(
        method="measured" if kind != "prediction" else "analytic", iteration_time_s=period,
        throughput_samples_per_s=workers * 32 / period, speedup=1.0, scaling_efficiency=0.5,
        bottleneck=bottleneck, breakdown_s={"compute": 0.2, "communication": period - 0.2,
                                            "wait": 0.0},
        workers=ws, single_worker={"throughput_samples_per_s": 160.0}, inputs=inputs,
        percentiles=pct, kind=kind)


def row(name: str, measured: float, analytic: float, simulate: float) -> dict:
    info = {"name": name, "index": 0, "note": f"{name} note", "fingerprint": "f",
            "setup": {"arch": "ps", "sync": "bsp", "workers": 2, "ps": 1, "compute": "emulated",
                      "bandwidth_bps": 2e8, "parameter_bytes": 8e6, "batch_size": 32,
                      "sharding": "round_robin", "speeds": [1.0]},
            "inputs": {"rates": "configured"}}
    probe = {"w0": {"uplink_bps": 190e6, "uplink_expected_bps": 191.2e6,
                    "downlink_bps": 195e6, "downlink_expected_bps": 191.2e6}}
    return compare(info, fake(measured, kind="measurement", percentiles=True, probe=probe),
                   {"analytic": fake(analytic), "simulate": fake(simulate, percentiles=True)})


# A small published-check file: a single GPU, a ring, a PS with local aggregation on
# colocated shards, and a set-up ddlperf cannot express (tests of --published).
PUBLISHED_TINY = """
sources: {X: {title: t, where: w, date: d}}
setups:
  ring: {source: X, what: ring, network_stated: true,
         cluster: {bandwidth: 1Gbps, nodes: [{gpus: 2, device: V100, intra: NVLink2}]},
         strategy: {arch: allreduce}}
  ps: {source: X, what: ps, network_stated: false,
       cluster: {bandwidth: 1Gbps, nodes: [{gpus: 2, device: V100, intra: NVLink2}],
                 ps: {placement: colocated}},
       strategy: {arch: ps, local_aggregation: true}}
  cpu: {source: X, what: host all-reduce, network_stated: true, unsupported: not modelled}
"""

