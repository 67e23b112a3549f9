"""Fine-grained predictor: discrete-event simulation of compute ops and network flows.

Li et al. (TPDS 2022)'s fine-grained model class: every layer's forward/backward, every tensor's
push/update/pull (parameter server) or every bucket's ring all-reduce is an operation with its
dependencies, on a flow-level max-min fair network (:mod:`.network`) driven by a small event
kernel (:mod:`.engine`). Overlap, contention and stragglers come out of the dependencies rather
than from formulas. Entry point: :func:`predict_simulate`.
"""

from ddlperf.predictors.simulate.runner import predict_simulate

__all__ = ["predict_simulate"]
