"""Servers and racks on the emulated cluster: ranks of one host on a shaped loopback (one
class per rank, told apart by TCP source port), rack switches behind shaped uplinks.

Root-only tests build real namespaces; link tests allow ~10% (2 shared cores).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest

from ddlperf.errors import InputError
from ddlperf.measure import counters, netns, shaping
from ddlperf.measure.emulated import EmulatedCluster
from ddlperf.measure.hosts import HostSpec, RackSpec
from ddlperf.measure.loopback import _address
from ddlperf.measure.probe import GOODPUT_FACTOR, probe_flows
from ddlperf.measure.rank_classes import Rank
from tests.conftest import leftovers, netns_skip_reason

MBPS = 1e6
_SKIP = netns_skip_reason()
root = pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")

# Two ranks on one host: each listens, connects to the other, says "connected", waits for a
# line on stdin, then sends to its peer for SECONDS (or not at all) and prints what it got.
_RANK = textwrap.dedent(
    """
    import json, socket, sys, threading, time
    ip, port, peer_port, seconds, send = sys.argv[1], *map(int, sys.argv[2:4]), \\
        float(sys.argv[4]), sys.argv[5] == "1"
    srv = socket.socket(); srv.bind((ip, port)); srv.listen(1)
    out = None
    for _ in range(200):
        try:
            out = socket.create_connection((ip, peer_port)); break
        except OSError:
            time.sleep(0.02)
    conn, _ = srv.accept()
    print("connected", flush=True)
    start = float(sys.stdin.readline())
    got = [0]
    def recv():
        buf = bytearray(1 << 18)
        while True:
            n = conn.recv_into(buf)
            if not n:
                break
            if start + 0.3 <= time.time() <= start + seconds:
                got[0] += n
    t = threading.Thread(target=recv); t.start()
    while time.time() < start:
        time.sleep(0.005)
    chunk = bytes(1 << 16)
    while send and time.time() < start + seconds:
        out.sendall(chunk)
    time.sleep(max(0.0, start + seconds - time.time()) + 0.2)
    out.close(); t.join()
    print(json.dumps({"bps": 8 * got[0] / (seconds - 0.3)}), flush=True)
    """
)


def _exchange(cluster: EmulatedCluster, host: str, senders: tuple[bool, bool],
              seconds: float = 1.5) -> list[float]:
    """Run the two ranks; classify their sockets; return each rank's *received* rate."""
    ip = cluster.ip(host)
    ports = (41001, 41002)
    procs = [cluster.popen(host, [sys.executable, "-c", _RANK, ip, str(ports[i]),
                                  str(ports[1 - i]), str(seconds), "1" if senders[i] else "0"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for i in range(2)]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "connected"
        ranks = [Rank(f"r{i}", host, i, p.pid) for i, p in enumerate(procs)]
        assert cluster.classify_ranks(ranks)[host] >= 2
        start = time.time() + 0.3
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(f"{start!r}\n")
            proc.stdin.flush()
        return [json.loads(p.communicate(timeout=30)[0].splitlines()[-1])["bps"] for p in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_proc_net_tcp_addresses_read_in_host_byte_order():
    assert _address("0100007F:1F90") == ("127.0.0.1", 8080)
    assert _address("011212C6:A02A") == ("198.18.18.1", 41002)


def test_a_host_in_a_rack_that_does_not_exist_is_bad_input():
    with pytest.raises(InputError, match="no rack 1"):
        EmulatedCluster([HostSpec("a", MBPS, MBPS, rack=1)], racks=[RackSpec(MBPS, MBPS)])
    with pytest.raises(InputError, match="ranks"):
        HostSpec("a", MBPS, MBPS, ranks=0)
    with pytest.raises(InputError, match="intra_bps"):
        HostSpec("a", MBPS, MBPS, intra_bps=float("inf"), ranks=2)


@pytest.fixture(scope="module")
def racked():
    """Rack 0: a0, a1 (server of 2 ranks, loopback 200 Mbit each); rack 1: b0; core: c.
    NICs 100 Mbit, rack links 50 Mbit."""
    hosts = [HostSpec("a0", 100 * MBPS, 100 * MBPS, intra_bps=200 * MBPS, ranks=2, rack=0),
             HostSpec("a1", 100 * MBPS, 100 * MBPS, rack=0),
             HostSpec("b0", 100 * MBPS, 100 * MBPS, rack=1),
             HostSpec("c", 100 * MBPS, 100 * MBPS)]
    with EmulatedCluster(hosts, racks=[RackSpec(50 * MBPS, 50 * MBPS)] * 2) as cluster:
        yield cluster
    assert leftovers(cluster.run_id) == []


@root
@pytest.mark.root
def test_inside_a_rack_flows_run_at_the_nic_rate_across_racks_at_the_rack_link(racked):
    [inside] = probe_flows(racked, [("a0", "a1")], seconds=1.0)
    [across] = probe_flows(racked, [("a0", "b0")], seconds=1.0)
    [to_core] = probe_flows(racked, [("c", "a1")], seconds=1.0)
    assert inside.goodput_bps == pytest.approx(GOODPUT_FACTOR * 100 * MBPS, rel=0.1)
    assert across.goodput_bps == pytest.approx(GOODPUT_FACTOR * 50 * MBPS, rel=0.1)
    assert to_core.goodput_bps == pytest.approx(GOODPUT_FACTOR * 50 * MBPS, rel=0.1)


@root
@pytest.mark.root
def test_two_servers_of_a_rack_share_its_uplink_fairly_and_it_is_counted(racked):
    before = counters.rack_bytes(racked)
    flows = probe_flows(racked, [("a0", "c"), ("a1", "b0")], seconds=1.5)
    after = counters.rack_bytes(racked)
    rates = [f.goodput_bps for f in flows]
    assert sum(rates) == pytest.approx(GOODPUT_FACTOR * 50 * MBPS, rel=0.1), rates
    assert min(rates) / max(rates) > 0.8, rates
    sent = after[0]["uplink_bytes"] - before[0]["uplink_bytes"]
    payload = sum(f.received_bytes for f in flows)
    assert payload <= sent <= payload / GOODPUT_FACTOR * 1.02 + 20_000
    assert after[1]["downlink_bytes"] - before[1]["downlink_bytes"] >= flows[1].received_bytes


@root
@pytest.mark.root
def test_loopback_gives_each_rank_its_own_intra_rate(racked):
    both = _exchange(racked, "a0", (True, True))
    alone = _exchange(racked, "a0", (True, False))
    for rate in both:  # each direction has its own 200 Mbit class (not one shared lo)
        assert rate == pytest.approx(200 * MBPS, rel=0.1), both
    assert alone[1] == pytest.approx(200 * MBPS, rel=0.1), alone  # no borrowing when alone
    counts = counters.loopback_bytes(racked)["a0"]
    assert counts["rank0"] > 10e6 and counts["rank1"] > 10e6, counts
    assert counts["other"] < 0.05 * counts["rank0"], counts


@root
@pytest.mark.root
def test_loopback_classes_and_filters_are_in_place(racked):
    classes = netns.tc(racked.namespace("a0"), "class", "show", "dev", "lo")
    for rank in range(2):
        assert f"class htb {shaping.rank_class(rank)} " in classes
    assert "htb" not in netns.tc(racked.namespace("a1"), "qdisc", "show", "dev", "lo")
