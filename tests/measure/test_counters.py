"""Counters of an emulated run: TCP segments each host sent and resent."""

from __future__ import annotations

import pytest

from ddlperf.measure.counters import parse_tcp_snmp, tcp_resent

TCP_NAMES = ("RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails "
             "EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors")
SNMP = (
    "Ip: Forwarding DefaultTTL InReceives\nIp: 1 64 12345\n"
    f"Tcp: {TCP_NAMES}\nTcp: 1 200 120000 -1 12 10 0 1 8 539878 538765 3627 0 4 0\n"
    "Udp: InDatagrams NoPorts\nUdp: 5 0\n"
)


def test_the_tcp_lines_give_sent_and_resent_segments() -> None:
    assert parse_tcp_snmp(SNMP) == {"sent": 538765, "resent": 3627}


@pytest.mark.parametrize("text", ["", "Tcp: OutSegs\n", "Ip: 1\nIp: 2\n",
                                  "Tcp: OutSegs RetransSegs\nTcp: 10 x\n"])
def test_missing_or_malformed_counters_give_nothing(text: str) -> None:
    assert parse_tcp_snmp(text) == {}


def test_resent_share_per_host_while_the_trainers_ran() -> None:
    before = {"w0": {"sent": 1000, "resent": 10}, "w1": {"sent": 50, "resent": 0},
              "ps0": {"sent": 7, "resent": 0}}
    after = {"w0": {"sent": 11000, "resent": 110}, "w1": {"sent": 50, "resent": 0},
             "ps0": {"sent": 4007, "resent": 2}, "late": {"sent": 9, "resent": 9}}
    out = tcp_resent(before, after)
    assert out["hosts"]["w0"] == {"sent_segments": 10000, "resent_segments": 100,
                                  "resent_pct": pytest.approx(1.0)}
    assert out["hosts"]["w1"]["resent_pct"] == 0.0  # sent nothing: no share
    assert "late" not in out["hosts"]  # no reading before the run
    assert out["max_resent_pct"] == pytest.approx(1.0)


def test_no_readings_give_no_maximum() -> None:
    assert tcp_resent({}, {})["max_resent_pct"] is None
