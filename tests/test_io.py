"""Output paths are checked before any work (ddlperf.io.check_writable)."""

from __future__ import annotations

import pytest

from ddlperf.errors import InputError
from ddlperf.io import check_writable


def test_a_writable_path_passes_and_leaves_nothing(tmp_path):
    assert check_writable(tmp_path / "out.json", "--out") == tmp_path / "out.json"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("make", "needle"), [
    (lambda d: d / "file.json" / "t.json", "is a file, not a directory"),
    (lambda d: d / "file.json" / "sub" / "t.json", "lies under a file"),
    (lambda d: d / "nodir" / "t.json", "does not exist"),
    (lambda d: d, "is a directory"),
])
def test_paths_that_cannot_be_written_are_one_line_errors(tmp_path, make, needle):
    (tmp_path / "file.json").write_text("{}")
    with pytest.raises(InputError, match=needle):
        check_writable(make(tmp_path), "--out")


def test_what_access_cannot_tell_is_tried():
    # as root os.access says yes to /proc, where no file can be created
    with pytest.raises(InputError, match="not writable"):
        check_writable("/proc/ddlperf-probe.json", "--trace")
