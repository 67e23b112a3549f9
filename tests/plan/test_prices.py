"""Price tables: the bundled example is labelled and sourced; bad tables are one line."""

from __future__ import annotations

import pytest
import yaml

from ddlperf.errors import InputError
from ddlperf.plan.prices import EXAMPLE, load_prices


def test_the_example_is_labelled_and_every_price_has_a_source_and_date():
    raw = yaml.safe_load(EXAMPLE.read_text())
    assert raw["example"] is True and "EXAMPLE" in EXAMPLE.read_text().splitlines()[0]
    table = load_prices()
    assert table.example and table.instances and table.ps_hosts
    for entry in (*table.instances, *table.ps_hosts):
        assert entry.source.strip() and entry.date[:4].isdigit()
        assert entry.price_per_hour > 0


def test_cheapest_ps_host_fast_enough(tmp_path):
    table = load_prices()
    host = table.ps_host_for(10e9)
    assert host.bandwidth >= 10e9
    assert all(h.price_per_hour >= host.price_per_hour for h in table.ps_hosts
               if h.bandwidth >= 10e9)
    assert table.ps_host_for(1e15) is None


@pytest.mark.parametrize(("text", "message"), [
    ("instances: []\n", "instances"),
    ("instances:\n  - {name: x, device: NOPE, bandwidth: 10Gbps, price_per_hour: 1, "
     "source: s, date: '2024'}\n", "NOPE"),
    ("instances:\n  - {name: x, device: V100, gpus: 8, bandwidth: 10Gbps, "
     "price_per_hour: 1, source: s, date: '2024'}\n", "intra"),
    ("instances:\n  - {name: x, device: V100, bandwidth: 10Gbps, price_per_hour: 1}\n",
     "source"),
    ("format: other/1\ninstances: []\n", "format"),
])
def test_bad_tables_are_one_line(tmp_path, text, message):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        load_prices(path)
    assert message in str(info.value) and "\n" not in str(info.value)
