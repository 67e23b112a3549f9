"""results.json written and read back."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ddlperf.errors import InputError
from ddlperf.validate import ValidationRun, load_results, summarize
from tests.validate.helpers import row


def test_results_round_trip_and_bad_results(tmp_path: Path) -> None:
    rows = [row("a", 1.0, 0.9, 1.02)]
    run = ValidationRun(tmp_path, "m.yaml", rows, summarize(rows), {"rates": "configured"})
    (tmp_path / "results.json").write_text(json.dumps(run.to_dict()))
    back = load_results(tmp_path)
    assert back.rows == rows and back.meta["rates"] == "configured"
    assert math.isclose(back.summary["simulate"]["mape_pct"], 2.0)
    with pytest.raises(InputError, match="no validation results"):
        load_results(tmp_path / "nowhere")
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(InputError, match=r"not a ddlperf\.validation/1"):
        load_results(tmp_path / "bad.json")
