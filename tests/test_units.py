import pytest
from hypothesis import given
from hypothesis import strategies as st

from ddlperf.errors import InputError
from ddlperf.units import (
    format_bandwidth,
    format_duration,
    format_size,
    parse_bandwidth,
    parse_duration,
    parse_size,
)


@pytest.mark.parametrize(
    ("text", "bits"),
    [("10Gbps", 10e9), ("100Mbps", 100e6), ("100Mbit", 100e6), ("1.25GB/s", 10e9),
     ("1Gibps", 2**30), (5e6, 5e6), ("2.5e9", 2.5e9)],
)
def test_parse_bandwidth(text, bits):
    assert parse_bandwidth(text) == pytest.approx(bits)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("50us", 50e-6), ("50µs", 50e-6), ("2ms", 2e-3), ("1.5s", 1.5), ("0", 0.0), (0.25, 0.25)],
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "n"), [("25MB", 25e6), ("25MiB", 25 * 2**20), ("4kB", 4e3), (1000, 1000.0)]
)
def test_parse_size(text, n):
    assert parse_size(text) == pytest.approx(n)


@pytest.mark.parametrize("bad", ["-3Gbps", "0Gbps", "fast", "10 parsecs", "nan"])
def test_bad_bandwidth_names_the_field(bad):
    with pytest.raises(InputError) as info:
        parse_bandwidth(bad, "--bandwidth")
    assert str(info.value).startswith("--bandwidth: ")


def test_bits_are_not_a_size():
    with pytest.raises(InputError, match="bits"):
        parse_size("25Mb", "--bucket-size")


def test_negative_latency_rejected():
    with pytest.raises(InputError):
        parse_duration("-5us", "--latency")


def test_formatting():
    assert format_bandwidth(10e9) == "10Gbps"
    assert format_size(25e6) == "25MB"
    assert format_duration(50e-6) == "50us"


@given(st.floats(min_value=1e3, max_value=1e13, allow_nan=False))
def test_bandwidth_round_trip(bits):
    assert parse_bandwidth(format_bandwidth(bits, digits=12)) == pytest.approx(bits, rel=1e-9)


@pytest.mark.parametrize(("seconds", "text"), [
    (0.05, "50ms"), (59.0, "59s"), (90.0, "2min"), (3599.0, "1h"), (28800.0, "8h"),
    (28500.0, "7h 55min"), (100_000.0, "27h 47min"),
    (1.131e6, "13d 2h"), (172_800.0, "2d"),
])
def test_job_lengths_in_hours_and_days(seconds, text):
    from ddlperf.units import format_long_duration

    assert format_long_duration(seconds) == text
