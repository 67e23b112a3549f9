"""Rows streamed to CSV/Parquet: atomic, batched, typed; partial on close, nothing on discard."""

from __future__ import annotations

import csv
import importlib.util

import pytest

from ddlperf.errors import InputError
from ddlperf.report import rowfile
from ddlperf.report.rowfile import RowWriter


def _rows(n, start=0):
    return ({"i": i, "x": i / 2, "name": f"r{i}", "error": None if i % 3 else "bad"}
            for i in range(start, start + n))


def test_csv_streams_in_batches_and_appears_only_on_close(tmp_path, monkeypatch):
    monkeypatch.setattr(rowfile, "BATCH", 7)
    path = tmp_path / "out.csv"
    writer = RowWriter(path, "--rows")
    writer.write(_rows(20))
    assert not path.exists()  # a reader never sees half a file
    writer.write(_rows(5, 20))
    writer.close()
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["i"]) for r in rows] == list(range(25))
    assert rows[1]["error"] == "" and rows[0]["error"] == "bad"
    assert not list(tmp_path.glob(".out.csv.*"))


def test_discard_leaves_nothing(tmp_path):
    writer = RowWriter(tmp_path / "out.csv", "--rows")
    writer.write(_rows(3))
    writer.discard()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(importlib.util.find_spec("pyarrow") is None,
                    reason="needs pyarrow ('ddlperf[parquet]')")
def test_parquet_row_groups_keep_types(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    monkeypatch.setattr(rowfile, "BATCH", 4)
    path = tmp_path / "out.parquet"
    writer = RowWriter(path, "--rows")
    writer.write({"i": i, "error": None} for i in range(4))  # first batch: all None
    writer.write({"i": i, "error": "bad"} for i in range(4, 9))
    writer.close()
    table = pq.read_table(path)
    assert table.num_rows == 9 and pq.ParquetFile(path).num_row_groups == 3
    assert table.column("error").to_pylist()[-1] == "bad"


def test_unknown_suffix_is_bad_input(tmp_path):
    with pytest.raises(InputError, match=r"use \.csv or \.parquet"):
        RowWriter(tmp_path / "out.xlsx", "--rows")


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_rows_read_back_as_written(tmp_path, suffix):
    if suffix == ".parquet" and importlib.util.find_spec("pyarrow") is None:
        pytest.skip("needs pyarrow")
    rows = [{"workers": 4, "bandwidth": "10Gbps", "overlap": True, "x": 0.25, "error": None},
            {"workers": 8, "bandwidth": "1Gbps", "overlap": False, "x": None, "error": "bad"}]
    writer = RowWriter(tmp_path / f"rows{suffix}", "--csv")
    writer.write(rows)
    assert rowfile.read_rows(writer.close(), "--sweep", 10) == rows


def test_reading_more_rows_than_the_limit_or_a_ragged_file_is_one_error(tmp_path):
    writer = RowWriter(tmp_path / "rows.csv", "--csv")
    writer.write(_rows(11))
    path = writer.close()
    with pytest.raises(InputError, match="--sweep: has more than 10 rows"):
        rowfile.read_rows(path, "--sweep", 10)
    path.write_text("i,x\n1,2\n3,4,5\n")
    with pytest.raises(InputError, match=r"line 3 of rows\.csv does not have the header's 2"):
        rowfile.read_rows(path, "--sweep", 10)


def test_a_parquet_file_over_the_limit_is_named_as_such(tmp_path):
    if importlib.util.find_spec("pyarrow") is None:
        pytest.skip("needs pyarrow")
    writer = RowWriter(tmp_path / "rows.parquet", "--parquet")
    writer.write(_rows(11))
    path = writer.close()
    with pytest.raises(InputError) as caught:
        rowfile.read_rows(path, "--sweep", 10)
    assert str(caught.value).startswith("--sweep: has 11 rows, more than are drawn (10)")
    path.write_bytes(b"not parquet")
    with pytest.raises(InputError, match=r"cannot read rows\.parquet as Parquet"):
        rowfile.read_rows(path, "--sweep", 10)
