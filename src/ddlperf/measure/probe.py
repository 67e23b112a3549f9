"""Measure achieved TCP goodput between emulated hosts with tiny Python senders/receivers.

No iperf: the scripts below run as ``python -c`` inside the host namespaces, so nothing has to
be installed there. All flows of one probe start at the same wall-clock instant and every
receiver counts the bytes that arrive inside the same window, which skips the ramp-up and makes
concurrent flows directly comparable (fairness). The instant is set once every sender has
started and connected, so the start-up of the Python processes (slow on a busy machine) does not
eat into the window.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Any

from ddlperf.errors import InputError
from ddlperf.measure.emulated import EmulatedCluster

GOODPUT_FACTOR = 1448 / 1514  # TCP payload per full Ethernet frame (timestamps on): ≈ 0.956
# probe_until_steady: a link further than this from its expected goodput is probed again
# (the 90th percentile of the dev matrix's recorded probes, 8.9%; the median was 1.6%), after
# a wait, at most this many times
PROBE_RETRY_DEVIATION = 0.08
PROBE_RETRY_WAIT_S = 5.0
PROBE_RETRIES = 2

_RECEIVER = r"""
import json, socket, sys, time
ip, seconds, warm, timeout = sys.argv[1], *map(float, sys.argv[2:5])
srv = socket.socket()
srv.bind((ip, 0))
srv.listen(1)
srv.settimeout(timeout)
print(srv.getsockname()[1], flush=True)
start = float(sys.stdin.readline())
conn, _ = srv.accept()
conn.settimeout(timeout)
buf = bytearray(1 << 18)
lo, hi = start + warm, start + seconds
total = window = 0
first = last = None
while True:
    n = conn.recv_into(buf)
    if not n:
        break
    now = time.time()
    first = now if first is None else first
    last = now
    total += n
    if lo <= now <= hi:
        window += n
print(json.dumps({"bytes": total, "window_bytes": window, "window_s": hi - lo,
                  "first": first, "last": last}), flush=True)
"""

_SENDER = r"""
import json, socket, sys, time
ip, port, seconds, timeout = sys.argv[1], int(sys.argv[2]), *map(float, sys.argv[3:5])
sock = socket.create_connection((ip, port), timeout=timeout)
chunk = bytes(1 << 17)
print("ready", flush=True)
start = float(sys.stdin.readline())
late = time.time() - start
while time.time() < start:
    time.sleep(min(0.01, max(0.0, start - time.time())))
end = start + seconds
sent = 0
while time.time() < end:
    sock.sendall(chunk)
    sent += len(chunk)
sock.shutdown(socket.SHUT_WR)
sock.recv(1)
print(json.dumps({"sent": sent, "late_s": late}), flush=True)
"""


@dataclass(frozen=True)
class FlowResult:
    """One probed TCP flow; ``goodput_bps`` is payload bits/s inside the common window."""

    src: str
    dst: str
    sent_bytes: int
    received_bytes: int
    window_bytes: int
    window_s: float
    goodput_bps: float
    late_s: float


def probe_flows(
    cluster: EmulatedCluster,
    flows: list[tuple[str, str]],
    seconds: float = 1.0,
    warmup_s: float | None = None,
) -> list[FlowResult]:
    """Run all ``(src, dst)`` TCP flows at once for ``seconds``; measure each one's goodput."""
    if not flows:
        raise InputError("flows", "no flows to probe")
    if not 0.2 <= seconds <= 600:
        raise InputError("seconds", f"probe duration must be in [0.2, 600] s, got {seconds}")
    for src, dst in flows:
        if src == dst:
            raise InputError("flows", f"{src} -> {dst} does not cross the network")
        cluster.ip(src), cluster.ip(dst)  # unknown names raise InputError
    warm = min(0.2, seconds / 4) if warmup_s is None else warmup_s
    if not 0 <= warm < seconds:
        raise InputError("warmup_s", f"must be in [0, {seconds}) s, got {warm}")
    timeout = seconds + 30.0
    procs: list[subprocess.Popen] = []
    try:
        receivers = []
        for _, dst in flows:
            argv = [
                sys.executable,
                "-c",
                _RECEIVER,
                cluster.ip(dst),
                str(seconds),
                str(warm),
                str(timeout),
            ]
            receivers.append(_spawn(cluster, dst, argv, procs, stdin=subprocess.PIPE))
        ports = [int(_read_line(p, timeout, "receiver")) for p in receivers]
        senders = []
        for (src, dst), port in zip(flows, ports, strict=True):
            argv = [sys.executable, "-c", _SENDER, cluster.ip(dst), str(port), str(seconds),
                    str(timeout)]
            senders.append(_spawn(cluster, src, argv, procs, stdin=subprocess.PIPE))
        for proc in senders:  # each is connected and ready: Python's start-up is behind us
            if _read_line(proc, timeout, "sender") != "ready":
                raise RuntimeError("probe sender failed: it did not say ready")
        # One common start instant, shortly ahead of now.
        start = time.time() + 0.05 + 0.01 * len(flows)
        for proc in receivers + senders:
            assert proc.stdin is not None
            proc.stdin.write(f"{start!r}\n")
            proc.stdin.close()
        sent = [json.loads(_read_line(p, timeout, "sender")) for p in senders]
        received = [json.loads(_read_line(p, timeout, "receiver")) for p in receivers]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream and not stream.closed:
                    stream.close()
    late = max(float(s["late_s"]) for s in sent)
    if late > warm / 2:
        warnings.warn(
            f"a probe sender started {late:.2f} s late (CPU busy?); goodput is underestimated",
            stacklevel=2,
        )
    return [
        _result(src, dst, s, r, seconds, warm)
        for (src, dst), s, r in zip(flows, sent, received, strict=True)
    ]


def probe_bandwidth(cluster: EmulatedCluster, src: str, dst: str, seconds: float = 1.0) -> float:
    """Goodput in bit/s of one TCP stream ``src`` -> ``dst``.

    Expect about ``GOODPUT_FACTOR`` (0.956) x min(src uplink, dst downlink).
    """
    return probe_flows(cluster, [(src, dst)], seconds)[0].goodput_bps


def expected_goodput(cluster: EmulatedCluster, src: str, dst: str) -> float:
    """What one lone flow should reach: 0.956 x the narrower of the two line rates."""
    up = cluster.hosts[_index(cluster, src)].uplink_bps
    down = cluster.hosts[_index(cluster, dst)].downlink_bps
    return GOODPUT_FACTOR * min(up, down)


def probe_all(cluster: EmulatedCluster, seconds: float = 1.0) -> dict[str, dict[str, Any]]:
    """Probe every host's uplink and downlink as *its own* rate, one link at a time.

    A path's rate is the narrower of its two ends, so a link faster than every peer's (a PS
    NIC at 1 Gbit among 100 Mbit workers) cannot be measured by one flow: it is probed with
    concurrent flows to (or from) as many peers, fastest first, as it takes for their
    rates to add up to its own (:func:`probe_peers`). Per direction the result holds the
    summed goodput (``uplink_bps``), the peers, what they should reach together
    (``uplink_expected_bps``) and ``uplink_own``: whether that is this link's own rate
    (false only when all peers together are slower; then the figure is theirs, not the
    link's, and a measurement uses the configured rate instead).
    """
    if len(cluster.hosts) < 2:
        raise InputError("hosts", "probing needs at least two hosts")
    result: dict[str, dict[str, Any]] = {}
    for host in cluster.hosts:
        others = [h for h in cluster.hosts if h.name != host.name]
        entry: dict[str, Any] = {}
        for direction, own, peer_rate in (
                ("uplink", host.uplink_bps, lambda h: h.downlink_bps),
                ("downlink", host.downlink_bps, lambda h: h.uplink_bps)):
            peers = probe_peers(own, others, peer_rate)
            flows = [(host.name, peer.name) if direction == "uplink" else (peer.name, host.name)
                     for peer in peers]
            results = probe_flows(cluster, flows, seconds)
            reach = cluster.reach(host.name, [peer.name for peer in peers], direction)
            entry.update({
                f"{direction}_bps": sum(flow.goodput_bps for flow in results),
                f"{direction}_peers": [peer.name for peer in peers],
                f"{direction}_expected_bps": GOODPUT_FACTOR * min(own, reach),
                f"{direction}_own": reach >= own,
            })
        result[host.name] = entry
    return result


def max_deviation(probed: dict[str, dict[str, Any]] | None) -> float | None:
    """Largest |probed / expected − 1| over every link and direction of a :func:`probe_all`
    result (a fraction; None where nothing was probed)."""
    worst = None
    for link in (probed or {}).values():
        for direction in ("uplink", "downlink"):
            got, expected = link.get(f"{direction}_bps"), link.get(f"{direction}_expected_bps")
            if got and expected:
                dev = abs(float(got) / float(expected) - 1)
                worst = dev if worst is None else max(worst, dev)
    return worst


def probe_until_steady(cluster: EmulatedCluster, seconds: float, *,
                       tolerance: float = PROBE_RETRY_DEVIATION, retries: int = PROBE_RETRIES,
                       wait_s: float = PROBE_RETRY_WAIT_S, say: Any = lambda _m: None
                       ) -> tuple[dict[str, Any], list[float]]:
    """:func:`probe_all`, again after ``wait_s`` (at most ``retries`` times) while some link
    misses its expected goodput by more than ``tolerance``; returns the probe that missed
    least and every attempt's largest deviation (fractions, in order).

    Why: a link that cannot reach its rate is a testbed that is not the configured cluster,
    and on this 2-core machine that happens in spells (another process, the hypervisor): over
    339 recorded probes of the dev matrix the median deviation was 1.6% and the 90th
    percentile 8.9%, and the runs that followed the worst probes measured deterministic rows
    up to 8% slower than their other runs did (fresh3-bsp-coloc-4s at 14% deviation,
    ps-bsp-colocated-3w-2s at 19%). A spell passes; a link that never reaches its rate keeps
    the best attempt, and the deviation is reported with the measurement as before.
    """
    attempts: list[tuple[float, dict[str, Any]]] = []
    for attempt in range(retries + 1):
        if attempt:
            say(f"a link missed its rate by {100 * attempts[-1][0]:.1f}% "
                f"(over {100 * tolerance:g}%): probing again in {wait_s:g} s")
            time.sleep(wait_s)
        probed = probe_all(cluster, seconds=seconds)
        deviation = max_deviation(probed)
        attempts.append((0.0 if deviation is None else deviation, probed))
        if deviation is None or deviation <= tolerance:
            break
    best = min(attempts, key=lambda item: item[0])[1]
    return best, [dev for dev, _p in attempts]


def probe_peers(own_bps: float, others: list[Any], rate_of: Any) -> list[Any]:
    """The fewest peers, fastest first, whose rates together reach ``own_bps`` (all of them
    when even that is not enough)."""
    chosen, reach = [], 0.0
    for peer in sorted(others, key=rate_of, reverse=True):
        chosen.append(peer)
        reach += rate_of(peer)
        if reach >= own_bps:
            break
    return chosen


def own_rate_bps(probe: dict[str, Any] | None, direction: str) -> float | None:
    """The probed goodput of a link when the probe measured the link itself, else None
    (then, and for probes recorded before the ``*_own`` flag, use the configured rate)."""
    if not probe or not probe.get(f"{direction}_own") or not probe.get(f"{direction}_bps"):
        return None
    return float(probe[f"{direction}_bps"])


def _index(cluster: EmulatedCluster, name: str) -> int:
    cluster.ip(name)  # raises InputError for unknown hosts
    return [h.name for h in cluster.hosts].index(name)


def _result(
    src: str,
    dst: str,
    sent: dict[str, Any],
    got: dict[str, Any],
    seconds: float,
    warm: float,
) -> FlowResult:
    return FlowResult(
        src=src,
        dst=dst,
        sent_bytes=int(sent["sent"]),
        received_bytes=int(got["bytes"]),
        window_bytes=int(got["window_bytes"]),
        window_s=seconds - warm,
        goodput_bps=8.0 * got["window_bytes"] / (seconds - warm),
        late_s=float(sent["late_s"]),
    )


def _spawn(
    cluster: EmulatedCluster,
    host: str,
    argv: list[str],
    procs: list[subprocess.Popen],
    stdin: int | None = subprocess.DEVNULL,
) -> subprocess.Popen:
    # Outside the host's CPU cgroup: a probe measures the link, not the host's CPU share.
    proc = cluster.popen(
        host,
        argv,
        in_cgroup=False,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    procs.append(proc)
    return proc


def _read_line(proc: subprocess.Popen, timeout: float, what: str) -> str:
    """First stdout line of ``proc``; a crash or silence raises with the process's stderr."""
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
        err = proc.stderr.read() if proc.stderr else ""
        raise RuntimeError(f"probe {what} failed (exit {proc.returncode}): {err.strip()}")
    return line.strip()
