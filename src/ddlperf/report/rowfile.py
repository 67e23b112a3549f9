"""Rows streamed to CSV or Parquet as they are computed, never all in memory; and read back.

Rows go to a temporary file beside the target and are renamed into place when the writer
closes, so a reader never sees half a file. A run stopped early (Ctrl-C) closes the writer
too: the rows that finished are kept under the target name, and the caller says how many.
Parquet (by the ``.parquet`` suffix) needs pyarrow (``pip install 'ddlperf[parquet]'``) and
writes one row group per :data:`BATCH` rows.
"""

from __future__ import annotations

import csv
import os
import tempfile
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import Any

from ddlperf.errors import InputError
from ddlperf.io import check_writable

BATCH = 20_000  # Parquet rows per row group (CSV rows are written as they come)


def row_format(path: str | Path, field: str) -> str:
    suffix = Path(path).suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in (".parquet", ".pq"):
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise InputError(field, "Parquet needs pyarrow",
                             "pip install 'ddlperf[parquet]', or give a .csv file") from None
        return "parquet"
    raise InputError(field, f"{Path(path).name!r}: unknown format", "use .csv or .parquet")


class RowWriter:
    """``write(rows)`` appends; the columns are fixed by the first rows written."""

    def __init__(self, path: str | Path, field: str, columns: Sequence[str] | None = None,
                 numbers: Collection[str] = ()) -> None:
        self.path = check_writable(path, field)
        self.format = row_format(path, field)
        self.columns: list[str] | None = list(columns) if columns else None
        # columns that hold numbers even where the first rows have none (Parquet types)
        self.numbers = frozenset(numbers)
        self.rows = 0
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp",
                                   dir=self.path.parent or ".")
        os.close(fd)
        self._tmp = Path(tmp)
        self._handle: Any = None
        self._csv: Any = None
        self._parquet: Any = None
        self._buffer: list[dict[str, Any]] = []

    def write(self, rows: Iterable[dict[str, Any]]) -> None:
        for row in rows:
            if self.columns is None:
                self.columns = list(row)
            self._buffer.append(row)
            self.rows += 1
            if len(self._buffer) >= BATCH:
                self._flush()
        if self.format == "csv":
            self._flush()

    def _flush(self) -> None:
        rows, self._buffer = self._buffer, []  # written once, even if interrupted half-way
        if not rows:
            return
        if self.format == "csv":
            if self._csv is None:
                self._handle = self._tmp.open("w", newline="")
                self._csv = csv.DictWriter(self._handle, fieldnames=self.columns,
                                           extrasaction="ignore", lineterminator="\n")
                self._csv.writeheader()
            self._csv.writerows({k: ("" if v is None else v) for k, v in r.items()}
                                for r in rows)
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            if self._parquet is None:
                # types from the first rows; a column that is all None there holds text,
                # or numbers where the caller says so
                first = pa.Table.from_pylist(rows).select(self.columns or [])
                schema = pa.schema([
                    pa.field(f.name, pa.float64() if f.name in self.numbers else pa.string())
                    if pa.types.is_null(f.type) else f for f in first.schema])
                self._parquet = pq.ParquetWriter(self._tmp, schema)
            table = pa.Table.from_pylist(rows, schema=self._parquet.schema)
            self._parquet.write_table(table)

    def close(self) -> Path:
        """Flush, and put the file in place (with whatever rows were written)."""
        try:
            if self.columns is None:
                self.columns = []
            self._flush()
            if self._handle is None and self._parquet is None and self.format == "csv":
                self._tmp.write_text(",".join(self.columns) + "\n" if self.columns else "")
            if self._handle is not None:
                self._handle.flush()
                os.fsync(self._handle.fileno())
                self._handle.close()
            if self._parquet is not None:
                self._parquet.close()
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(self._tmp, 0o666 & ~umask)
            os.replace(self._tmp, self.path)
        except BaseException:
            self._tmp.unlink(missing_ok=True)
            raise
        return self.path

    def discard(self) -> None:
        """Drop the temporary file (bad input found after opening: nothing is written)."""
        if self._handle is not None:
            self._handle.close()
        if self._parquet is not None:
            self._parquet.close()
        self._tmp.unlink(missing_ok=True)


def read_rows(path: str | Path, field: str, limit: int) -> list[dict[str, Any]]:
    """The rows of a CSV or Parquet file written by :class:`RowWriter`, with the values it
    wrote (CSV text back to numbers, booleans and None), or a one-line error; more than
    ``limit`` rows is an error found before they are all read."""
    p = Path(path)
    fmt = row_format(p, field)
    if not p.is_file():
        raise InputError(field, f"file {str(p)!r} does not exist", "check the path")
    fix = f"give at most {limit:,} rows (a smaller sweep, or part of this one)"
    if fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            rows = pq.ParquetFile(p).metadata.num_rows
        except (OSError, ValueError) as exc:  # pyarrow's errors for a file that is not Parquet
            raise InputError(field, f"cannot read {p.name} as Parquet: {exc}") from None
        if rows > limit:  # (outside the try: InputError is a ValueError too)
            raise InputError(field, f"has {rows:,} rows, more than are drawn ({limit:,})", fix)
        try:
            return pq.read_table(p).to_pylist()
        except (OSError, ValueError) as exc:
            raise InputError(field, f"cannot read {p.name} as Parquet: {exc}") from None
    out: list[dict[str, Any]] = []
    try:
        with p.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            for row in reader:
                if len(out) == limit:
                    raise InputError(field, f"has more than {limit:,} rows, more than are "
                                     "drawn", fix)
                if None in row or None in row.values():
                    raise InputError(field, f"line {reader.line_num} of {p.name} does not have "
                                     f"the header's {len(reader.fieldnames or [])} fields",
                                     "give the file as ddlperf wrote it")
                out.append({k: _value(v) for k, v in row.items()})
    except (UnicodeDecodeError, csv.Error) as exc:
        raise InputError(field, f"cannot read {p.name} as CSV: {exc}") from None
    return out


def _value(text: str) -> Any:
    """A CSV cell as RowWriter had it: '' → None, 'True' → True, '8' → 8, '0.5' → 0.5."""
    if text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
