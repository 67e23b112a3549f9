"""The intra-node fabric catalog and how a fabric is named or given as a rate."""

import pytest

from ddlperf.errors import InputError
from ddlperf.fabrics import fabric_catalog, parse_intra


def test_catalog_has_the_issue_fabrics_each_with_a_source():
    catalog = fabric_catalog()
    assert {"PCIe3", "PCIe4", "PCIe5", "NVLink2", "NVLink3", "NVLink4", "NVSwitch",
            "shm"} <= set(catalog)
    for fabric in catalog.values():
        assert fabric.rate_bps > 0 and len(fabric.source) > 20 and fabric.description


def test_rates_follow_from_the_specifications():
    catalog = fabric_catalog()
    # PCIe 3.0 x16: 16 lanes × 8 GT/s × 128/130 (encoding) = 126 Gbit/s per direction
    assert catalog["PCIe3"].rate_bps == pytest.approx(16 * 8e9 * 128 / 130, rel=2e-3)
    assert catalog["PCIe4"].rate_bps == 2 * catalog["PCIe3"].rate_bps
    # NVLink 2: 6 links × 25 GB/s per direction
    assert catalog["NVLink2"].rate_bps == 6 * 25e9 * 8


def test_parse_intra_names_rates_and_unknown():
    assert parse_intra("nvlink3") == 2.4e12
    assert parse_intra("150GB/s") == 1.2e12
    assert parse_intra(1e11) == 1e11
    with pytest.raises(InputError, match=r"intra: unknown fabric 'PCIe6' — did you mean"):
        parse_intra("PCIe6")


@pytest.mark.parametrize("value", ["-5GB/s", "0GB/s", "0"])
def test_a_rate_out_of_range_is_named_as_a_rate_not_an_unknown_fabric(value):
    with pytest.raises(InputError, match=r"intra: bandwidth must be a finite number > 0"):
        parse_intra(value)
