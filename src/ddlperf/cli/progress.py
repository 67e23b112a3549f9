"""A progress bar for long sweeps and plans, on stderr (stdout stays clean for --json).

Shown when stderr is a terminal, or always with ``--progress``; never with
``--no-progress``. The bar is updated from the search's progress callback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


@contextmanager
def progress_bar(what: str, total: int, show: bool | None = None
                 ) -> Iterator[Callable[[int, int], None]]:
    """Yields ``update(done, total)``; a no-op when the bar is not shown."""
    if show is None:
        show = sys.stderr.isatty()
    if not show:
        yield lambda done, total: None
        return
    console = Console(stderr=True, force_terminal=show or None)
    with Progress(TextColumn(what), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("eta"), TimeRemainingColumn(), console=console,
                  transient=False) as bar:
        task = bar.add_task(what, total=total)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update
