"""Rendering of predictions and measurements: tables, JSON, CSV, plots, traces."""
