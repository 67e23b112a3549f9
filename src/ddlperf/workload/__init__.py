"""What one worker does per iteration: layers, their times and their parameter tensors."""

from ddlperf.workload.model import WORKLOAD_FORMAT, Layer, Tensor, Workload, load_workload

__all__ = ["WORKLOAD_FORMAT", "Layer", "Tensor", "Workload", "load_workload"]
