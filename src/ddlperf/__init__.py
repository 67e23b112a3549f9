"""ddlperf: predict data-parallel DNN training performance before you build the cluster.

>>> import ddlperf
>>> p = ddlperf.predict("resnet50", workers=8, ps=2, bandwidth="10Gbps")
>>> p.iteration_time_s, p.speedup, p.bottleneck
"""

from __future__ import annotations

from typing import Any

from ddlperf.api import make_cluster, make_strategy, make_workload, predict
from ddlperf.cluster import Cluster, NodeGroup, PSGroup, Racks, WorkerGroup
from ddlperf.errors import InputError
from ddlperf.prediction import Prediction
from ddlperf.strategy import Strategy
from ddlperf.workload import Layer, Tensor, Workload, load_workload

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # torch-backed parts load only when asked for, so the prediction path stays torch-free.
    if name == "profile":
        from ddlperf.workload.profile import profile

        return profile
    if name == "measure":
        from ddlperf.measure.run import measure

        return measure
    raise AttributeError(f"module 'ddlperf' has no attribute {name!r}")


__all__ = [
    "Cluster", "InputError", "Layer", "NodeGroup", "PSGroup", "Prediction", "Racks",
    "Strategy", "Tensor",
    "WorkerGroup", "Workload", "load_workload", "make_cluster", "make_strategy",
    "make_workload", "measure", "predict", "profile",
]
