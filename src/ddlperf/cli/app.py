"""The typer application object; command modules register themselves on it."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="ddlperf",
    help=(
        "Predict iteration time, throughput, speedup and bottleneck of data-parallel DNN "
        "training (parameter server or all-reduce), and check predictions against real runs."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
