"""ddlperf: predict data-parallel DNN training performance before you build the cluster.

>>> import ddlperf
>>> p = ddlperf.predict("resnet50", workers=8, ps=2, bandwidth="10Gbps")
>>> p.iteration_time_s, p.speedup, p.bottleneck
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Public names load on first use (PEP 562): ``import ddlperf.cli`` runs this file, and
# ``ddlperf --version`` or ``ddlperf models`` should not pay for numpy, pydantic models and the
# predictors. torch-backed parts (profile, measure) stay out of the prediction path the same way.
_PUBLIC: dict[str, tuple[str, str]] = {
    "make_cluster": ("ddlperf.api", "make_cluster"),
    "make_strategy": ("ddlperf.api", "make_strategy"),
    "make_workload": ("ddlperf.api", "make_workload"),
    "predict": ("ddlperf.api", "predict"),
    "Cluster": ("ddlperf.cluster", "Cluster"),
    "NodeGroup": ("ddlperf.cluster", "NodeGroup"),
    "PSGroup": ("ddlperf.cluster", "PSGroup"),
    "Racks": ("ddlperf.cluster", "Racks"),
    "WorkerGroup": ("ddlperf.cluster", "WorkerGroup"),
    "InputError": ("ddlperf.errors", "InputError"),
    "Prediction": ("ddlperf.prediction", "Prediction"),
    "Strategy": ("ddlperf.strategy", "Strategy"),
    "Layer": ("ddlperf.workload", "Layer"),
    "Tensor": ("ddlperf.workload", "Tensor"),
    "Workload": ("ddlperf.workload", "Workload"),
    "load_workload": ("ddlperf.workload", "load_workload"),
    "profile": ("ddlperf.workload.profile", "profile"),
    "measure": ("ddlperf.measure.run", "measure"),
}

if TYPE_CHECKING:  # for type checkers and IDEs: the names as if imported eagerly
    from ddlperf.api import make_cluster, make_strategy, make_workload, predict
    from ddlperf.cluster import Cluster, NodeGroup, PSGroup, Racks, WorkerGroup
    from ddlperf.errors import InputError
    from ddlperf.measure.run import measure
    from ddlperf.prediction import Prediction
    from ddlperf.strategy import Strategy
    from ddlperf.workload import Layer, Tensor, Workload, load_workload
    from ddlperf.workload.profile import profile


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _PUBLIC[name]
    except KeyError:
        raise AttributeError(f"module 'ddlperf' has no attribute {name!r}") from None
    return getattr(importlib.import_module(module), attribute)


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})


__all__ = [
    "Cluster", "InputError", "Layer", "NodeGroup", "PSGroup", "Prediction", "Racks",
    "Strategy", "Tensor",
    "WorkerGroup", "Workload", "load_workload", "make_cluster", "make_strategy",
    "make_workload", "measure", "predict", "profile",
]
