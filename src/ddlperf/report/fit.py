"""Tables that fit the terminal: drop the least useful columns, never cut a number.

Every table of the CLI is built here. Numbers and names never wrap or get an ellipsis; text
columns (sources, errors, notes) may wrap down to a readable minimum. When even that is too
wide for the console, columns go in the order of their ``drop`` rank (highest first) and the
caller can say where the rest is (``--wide``, ``--json``).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # rich loads when a table is built, not when a command module is imported
    from rich.table import Table

TEXT_MIN_WIDTH = 18  # a wrapping text column keeps at least this many characters per line


@dataclass(frozen=True)
class Row:
    """A row with a style or a rule under it (totals); plain rows are just lists of cells."""

    cells: Sequence[str]
    style: str | None = None
    end_section: bool = False

    def __getitem__(self, index: int) -> str:
        return self.cells[index]

    def __len__(self) -> int:
        return len(self.cells)

    def keep(self, indices: Sequence[int]) -> Row:
        return Row([self.cells[i] for i in indices], self.style, self.end_section)


@dataclass(frozen=True)
class Col:
    """A column: ``drop`` 0 is always kept; higher ranks are dropped first when too wide."""

    header: str
    justify: Literal["left", "right"] = "right"
    drop: int = 0
    wrap: bool = False  # free text that may wrap (never numbers)
    style: str | None = None


def fit_table(
    columns: Sequence[Col], rows: Sequence[Sequence[str] | Row], width: int,
    title: str | None = None,
    **table_options: object,
) -> tuple[Table, list[str]]:
    """A compact table with every column that fits in ``width``; and the headers dropped."""
    kept = list(range(len(columns)))
    dropped: list[str] = []
    while True:
        cols = [columns[i] for i in kept]
        cells = [r.keep(kept) if isinstance(r, Row) else [r[i] for i in kept] for r in rows]
        table = _build(cols, cells, title, table_options)
        droppable = [i for i in kept if columns[i].drop > 0]
        if _narrowest(cols, cells, table_options) <= width or not droppable:
            return table, dropped
        worst = max(droppable, key=lambda i: (columns[i].drop, i))
        kept.remove(worst)
        dropped.append(columns[worst].header)


def _build(columns: Sequence[Col], rows: Sequence[Sequence[str] | Row], title: str | None,
           options: dict[str, object]) -> Table:
    from rich import box
    from rich.table import Table

    table = Table(title=title, title_justify="left", header_style="bold", box=box.SIMPLE_HEAD,
                  pad_edge=False, show_edge=False, **options)  # type: ignore[arg-type]
    for i, col in enumerate(columns):
        longest = max((len(r[i]) for r in rows), default=0)
        table.add_column(col.header, justify=col.justify, no_wrap=not col.wrap,
                         overflow="fold" if col.wrap else "ellipsis",
                         min_width=min(longest, TEXT_MIN_WIDTH) if col.wrap else None,
                         style=col.style)
    for row in rows:
        if isinstance(row, Row):
            table.add_row(*row.cells, style=row.style, end_section=row.end_section)
        else:
            table.add_row(*row)
    return table


def _narrowest(columns: Sequence[Col], rows: Sequence[Sequence[str] | Row],
               options: dict[str, object]) -> int:
    """The width of the table with every wrapping column at its minimum and every other
    column whole (rich's own minimum would let numbers be cut)."""
    def cut(text: str, col: Col) -> str:
        return text[:TEXT_MIN_WIDTH] if col.wrap else text

    table = _build(columns, [[cut(r[i], col) for i, col in enumerate(columns)] for r in rows],
                   None, options)
    from rich.console import Console
    from rich.measure import Measurement

    console = Console(width=100_000, file=io.StringIO())
    return Measurement.get(console, console.options, table).maximum


def dropped_line(dropped: list[str], where: str = "--json") -> str | None:
    """``not shown at this width: source (see --wide or --json)``, or None."""
    if not dropped:
        return None
    return f"not shown at this width: {', '.join(dropped)} (see {where})"
