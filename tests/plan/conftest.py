"""A small price table for plan tests (made-up test inputs, not prices of anything)."""

from __future__ import annotations

import pytest

from ddlperf.plan.prices import PriceTable

TABLE = {
    "currency": "test units",
    "instances": [
        {"name": "v1", "device": "V100", "gpus": 1, "bandwidth": "10Gbps",
         "price_per_hour": 3.0, "source": "test input", "date": "2026-12-01"},
        {"name": "a1", "device": "A100", "gpus": 1, "bandwidth": "25Gbps",
         "price_per_hour": 4.0, "source": "test input", "date": "2026-12-01"},
        {"name": "v4", "device": "V100", "gpus": 4, "intra": "NVLink2", "bandwidth": "25Gbps",
         "price_per_hour": 11.0, "source": "test input", "date": "2026-12-01"},
    ],
    "ps_hosts": [
        {"name": "cpu10", "bandwidth": "10Gbps", "price_per_hour": 0.5, "source": "test input",
         "date": "2026-12-01"},
        {"name": "cpu25", "bandwidth": "25Gbps", "price_per_hour": 1.5, "source": "test input",
         "date": "2026-12-01"},
    ],
}


@pytest.fixture
def table() -> PriceTable:
    return PriceTable.model_validate(TABLE)
