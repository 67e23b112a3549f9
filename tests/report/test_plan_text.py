"""The plan on a terminal: the front's table shows where the target starts to be met, and
each re-checked row names its cluster."""

from __future__ import annotations

import io

from rich.console import Console

from ddlperf.plan import SearchSpace, Target, plan
from ddlperf.report.plan_text import MAX_FRONT_ROWS, front_rows_shown, render
from tests.plan.conftest import TABLE


def test_front_table_keeps_the_threshold_rows():
    rows = [{"meets": i >= 17} for i in range(40)]
    shown = front_rows_shown(rows)
    assert 16 in shown and 17 in shown  # the last that misses, the first that meets
    assert shown[0] == 0 and shown[-1] == 39 and len(shown) <= MAX_FRONT_ROWS + 2
    assert front_rows_shown(rows[:5]) == [0, 1, 2, 3, 4]


def test_rechecked_rows_name_their_cluster_within_80_columns():
    from ddlperf.plan.prices import PriceTable

    table = PriceTable.model_validate(TABLE)
    space = SearchSpace(instances=table.instances[:2], servers=range(1, 9), ps=(1, 2))
    result = plan(Target(throughput=2000), space, prices=table, fixed={"model": "resnet50"},
                  recheck=2, simulate_options={"iterations": 2, "warmup": 1})
    out = io.StringIO()
    render(result, Console(file=out, width=80))
    text = out.getvalue()
    cheapest = result.cheapest
    assert f"cheapest: {cheapest['servers']} × {cheapest['instance']}" in text
    assert max(len(line) for line in text.splitlines()) <= 80
