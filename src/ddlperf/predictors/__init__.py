"""Predictors: ``analytic`` (coarse-grained, closed form / queueing) and ``simulate``."""
