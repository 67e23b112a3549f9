"""A real Measurement without a run: the launcher's own spec, context and summary code over
records of two one-second iterations (what a run would have appended)."""

from __future__ import annotations

from pathlib import Path

from ddlperf.measure import records as rec
from ddlperf.measure.launcher import build_spec
from ddlperf.measure.run import host_specs, measurement_context, resolve_scenario
from ddlperf.measure.trainer_common import rank_table
from ddlperf.prediction import Prediction


def make_measurement(tmp_path: Path, compute: str, launcher: str = "emulated") -> Prediction:
    """resnet18 on two workers and a PS at 100Mbps, summarized by the real code."""
    sc = resolve_scenario("resnet18", None, None, None, None, None, 2, 1, None, "ps", "bsp",
                          None, "round_robin", True, None, "100Mbps", None)
    spec = build_spec(sc, compute=compute, iterations=2, warmup=0,
                      model="resnet18" if compute == "real" else None)
    hosts = host_specs(sc, rank_table(spec), {})
    single = None if compute == "emulated" else {
        "worker": "w0", "device": spec["workers"][0]["device_label"], "iteration_time_s": 0.5,
        "throughput_samples_per_s": 64.0, "source": "measured"}
    records = [{"type": "iteration", "name": f"w{i}", "role": "worker", "iteration": t,
                "start": float(t), "end": t + 1.0, "duration_s": 1.0, "compute_s": 0.4}
               for t in range(2) for i in range(2)]
    context = measurement_context(sc, spec, records, {}, single, hosts,
                                  {"ok": True, "message": "ok"}, {}, tmp_path, "r1", 0,
                                  launcher=launcher)
    return rec.summarize(records, context)
