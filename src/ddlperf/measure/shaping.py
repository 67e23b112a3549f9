"""HTB shaping of the emulated links (this kernel has no netem, fq_codel or sfq).

Egress of a host is shaped on the host's ``eth0``: a parent class at the uplink rate and one
child class per destination (u32 match on the destination IP), so what a host sends to several
peers shares its uplink fairly — what a real sender's per-flow fair queueing (``fq``, the
usual qdisc for BBR's pacing) does. Ingress of a host is shaped on the bridge-side veth the same
way with one class per sender (u32 on the source IP), so senders share a receiver's downlink
max-min fairly as the models assume. Leaves are ``bfifo`` queues of ~``buffer_s`` of the rate,
so queueing delay stays short.

A switch's buffer is a number of bytes, not a time: shared-memory datacenter switches give a
congested port a few hundred kB to several MB, whatever the link rate. At the slow emulated
rates, ``buffer_s`` of the rate is far less (20 ms at 50 Mbit is 125 kB), while the senders'
TCP windows do not shrink with the rate (BBR kept 90–230 segments in flight here). Four
workers pushing into one PS at 50 Mbit then lost 36–53% of their pushed bytes to the receiver's
per-sender leaves and iterations ran 16–25% longer than the loss-free models, which (like the
seed papers' models and like the lossless or ECN-managed fabrics DL clusters run on) have no
loss. So the per-sender leaves of a *downlink* (the switch port) hold at least
``SWITCH_PORT_BUFFER_BYTES``; with it the same run resent nothing. A host's own egress keeps
``buffer_s`` (what a sending host's per-flow queue holds; TCP small queues keep it short).

Small packets (under 128 bytes: TCP ACKs, SYNs, control messages) go to a priority class on
every shaped link. Without it, the ACKs of the flows in one direction of a full-duplex link
wait behind the data of the other direction in the same ~20 ms queue — a coupling of the two
directions that real NICs with fair queueing and shallow switch buffers do not have, and that
slowed a parameter server's pushes whenever its pulls were running.
"""

from __future__ import annotations

from ddlperf.measure.netns import tc, tc_batch

MTU_FRAME = 1514  # Ethernet frame without FCS, what HTB charges per full-size packet
MIN_BUFFER_BYTES = 16 * MTU_FRAME
QUANTUM = 60_000  # equal DRR quantum: siblings borrow spare rate in equal shares
DEFAULT_SHARE = 0.01  # guaranteed share of unmatched traffic (ARP) on a shaped downlink
SWITCH_PORT_BUFFER_BYTES = 1_000_000  # least bytes a switch port's per-sender leaf holds


def buffer_bytes(rate_bps: float, buffer_s: float, floor: int = MIN_BUFFER_BYTES) -> int:
    """bfifo limit holding ~``buffer_s`` of traffic at ``rate_bps``, at least ``floor`` bytes."""
    return max(floor, int(rate_bps / 8.0 * buffer_s))


def socket_queue_bytes(rate_bps: float, buffer_s: float) -> int:
    """How much of one socket's data TCP's small queues may put into a host's shaped egress
    (``net.ipv4.tcp_limit_output_bytes`` of the host's namespace): half its leaf, so that no
    socket overflows it.

    A real host keeps about a millisecond of a socket's data in its qdisc (TSQ at the pacing
    rate) and its NIC never makes it overflow. Here the veth is infinitely fast and the HTB
    releases bursts, so BBR's bandwidth estimate runs at 2.7–7 Gbit/s on 100–400 Mbit links
    (``ss -ti``) and TSQ let a socket queue up to the kernel's 4 MB into a 20 ms leaf: ASP runs
    resent up to 1.9% of their segments, dropped by their own hosts (BSP and all-reduce runs
    none), and measured 5–9% slower than with no loss (ps-asp-4w-2s 0.71–0.74 s, lossless
    0.68 s; docs/models.md). The models, and the fabrics DL clusters run on, have no loss."""
    return max(MIN_BUFFER_BYTES // 2, buffer_bytes(rate_bps, buffer_s) // 2)


def _bits(rate_bps: float) -> str:
    return f"{max(1, round(rate_bps))}bit"


def _class(
    ns: str, dev: str, parent: str, classid: str, rate: float, ceil: float, prio: str = "1",
    burst: int | None = None,
) -> None:
    extra = [] if burst is None else ["burst", f"{burst}b", "cburst", f"{burst}b"]
    tc(ns, "class", "add", "dev", dev, "parent", parent, "classid", classid, "htb",
       "rate", _bits(rate), "ceil", _bits(ceil), *extra, "quantum", str(QUANTUM), "prio", prio)


def _leaf(ns: str, dev: str, parent: str, handle: str, limit: int) -> None:
    tc(
        ns,
        "qdisc",
        "add",
        "dev",
        dev,
        "parent",
        parent,
        "handle",
        handle,
        "bfifo",
        "limit",
        str(limit),
    )


def _filter(ns: str, dev: str, prio: str, match: list[str], flowid: str) -> None:
    tc(ns, "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", prio,
       "u32", *match, "flowid", flowid)


def _shape(
    ns: str, dev: str, rate_bps: float, peers: list[str], direction: str, buffer_s: float,
    floor: int = MIN_BUFFER_BYTES,
) -> None:
    """Parent class at ``rate_bps``; an ACK class; one fair class per peer (``src``/``dst``)."""
    tc(ns, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "2")
    _class(ns, dev, "1:", "1:1", rate_bps, rate_bps)
    limit = buffer_bytes(rate_bps, buffer_s, floor)
    default_rate = rate_bps * DEFAULT_SHARE
    _class(ns, dev, "1:1", "1:2", default_rate, rate_bps)
    _leaf(ns, dev, "1:2", "2:", limit)
    _class(ns, dev, "1:1", "1:3", default_rate, rate_bps, prio="0")
    _leaf(ns, dev, "1:3", "3:", limit)
    # IPv4 total length (bytes 2–3 of the header) below 128: ACKs and other small packets.
    _filter(ns, dev, "1", ["match", "u16", "0x0000", "0xff80", "at", "2"], "1:3")
    if not peers:
        return
    share = rate_bps * (1.0 - 2 * DEFAULT_SHARE) / len(peers)
    for index, peer in enumerate(peers):
        minor = f"{0x100 + index:x}"
        _class(ns, dev, "1:1", f"1:{minor}", share, rate_bps)
        _leaf(ns, dev, f"1:{minor}", f"{minor}:", limit)
        _filter(ns, dev, "2", ["match", "ip", direction, f"{peer}/32"], f"1:{minor}")


def shape_egress(
    ns: str, dev: str, rate_bps: float, buffer_s: float, receiver_ips: list[str] | None = None
) -> None:
    """Limit what ``dev`` sends to ``rate_bps`` (the host's uplink), fair per destination."""
    _shape(ns, dev, rate_bps, list(receiver_ips or []), "dst", buffer_s)


def shape_ingress(
    ns: str, dev: str, rate_bps: float, sender_ips: list[str], buffer_s: float
) -> None:
    """Limit what ``dev`` delivers to its host to ``rate_bps``, one fair class per sender IP
    (leaves of at least :data:`SWITCH_PORT_BUFFER_BYTES`: a switch port's buffer)."""
    _shape(ns, dev, rate_bps, sender_ips, "src", buffer_s, SWITCH_PORT_BUFFER_BYTES)


# ------------------------------------------------------------------ loopback (intra-node)

LOOPBACK = "lo"
LOOPBACK_PACKET = 65_536  # lo's MTU: TCP over loopback moves ~64 kB packets
# On lo, TCP's ~64 kB packets carry 0 in the IPv4 total-length field (seen here on 6.x), so
# "length < 128" would take them for ACKs: a shaped lo's ACK class takes lengths 32–127 only.
_LOOPBACK_SMALL = (("0x0020", "0xffe0"), ("0x0040", "0xffc0"))
# A fabric does not drop, so neither should a rank's queue on lo: TCP's start-up bursts of
# 64 kB packets overflowed 1 MB now and then (a drop on lo can cost a 200 ms timeout).
LOOPBACK_BUFFER_BYTES = 4_000_000
UNSHAPED_BPS = 100e9  # the default class of a shaped lo: traffic of no rank (never the data)
RANK_CLASS_BASE = 0x100


def rank_class(local_rank: int) -> str:
    """HTB class of the ``local_rank``-th rank's sends on a shaped loopback."""
    return f"1:{RANK_CLASS_BASE + local_rank:x}"


def shape_loopback(ns: str, rate_bps: float, ranks: int, buffer_s: float) -> None:
    """One class per rank of the host at ``rate_bps`` on ``lo`` (its link into the server's
    fabric, sending direction), an ACK class and an unshaped default class.

    Ranks of one host share its IP address (gloo binds the host's eth0 address and connects
    without binding a source), so a rank's packets are told apart by their TCP source port:
    :func:`classify_ports` adds those filters once the ranks have connected. Until then, and
    for traffic of no rank (the rendezvous store, probes), lo is unshaped. Fabric rates are
    data rates (lo's 64 kB packets carry ~0.1% headers). Leaves hold at least
    :data:`LOOPBACK_BUFFER_BYTES`.
    """
    dev = LOOPBACK
    burst = max(2 * LOOPBACK_PACKET, int(rate_bps / 8 / 1000))  # ≥ 1 ms of the rate
    tc(ns, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "2")
    top = UNSHAPED_BPS + ranks * rate_bps
    _class(ns, dev, "1:", "1:1", top, top, burst=burst)
    _class(ns, dev, "1:1", "1:2", UNSHAPED_BPS, UNSHAPED_BPS, burst=burst)
    _leaf(ns, dev, "1:2", "2:", SWITCH_PORT_BUFFER_BYTES)
    _class(ns, dev, "1:1", "1:3", UNSHAPED_BPS, UNSHAPED_BPS, prio="0", burst=burst)
    _leaf(ns, dev, "1:3", "3:", SWITCH_PORT_BUFFER_BYTES)
    for value, mask in _LOOPBACK_SMALL:
        _filter(ns, dev, "1", ["match", "u16", value, mask, "at", "2"], "1:3")
    limit = buffer_bytes(rate_bps, buffer_s, LOOPBACK_BUFFER_BYTES)
    for local in range(ranks):
        classid = rank_class(local)
        _class(ns, dev, "1:1", classid, rate_bps, rate_bps, burst=burst)
        _leaf(ns, dev, classid, f"{RANK_CLASS_BASE + local:x}:", limit)


def classify_ports(ns: str, ports: dict[int, str]) -> None:
    """Send what leaves local TCP port P (key) on ``lo`` to class ``ports[P]`` (one ``tc``
    batch: a host has a few dozen such sockets)."""
    if not ports:
        return
    lines = [f"filter add dev {LOOPBACK} parent 1: protocol ip prio 2 u32 match ip sport "
             f"{port} 0xffff flowid {classid}" for port, classid in sorted(ports.items())]
    tc_batch(ns, lines)


# ------------------------------------------- rank pairs (hosts that run several ranks)

PAIR_CLASS_BASE = 0x1000

Connection = tuple[str, int, str, int]  # source IP, source port, destination IP, port


def add_pair_classes(ns: str, dev: str, rate_bps: float, limit: int,
                     pairs: list[list[Connection]]) -> None:
    """One fair class per pair of ranks whose traffic crosses ``dev`` (their connections by
    4-tuple, after the ACK filter), beside the per-host classes of :func:`_shape`.

    Ranks of one host share its IP address, so per-host classes put both GPUs' flows (or a
    worker's and its colocated shard's) to the same peer in one FIFO, where TCP shares them
    unevenly (a PS on 2 servers × 2 GPUs ran 17% slower than on 4 hosts, its workers' pulls
    0.4–1.1 s apart); the models share every
    link max-min fairly between the workers' flows, as fair queueing on hosts and switch
    ports does. Equal quanta: backlogged classes share the link equally.
    """
    if not pairs:
        return
    share = rate_bps * (1.0 - 2 * DEFAULT_SHARE) / len(pairs)
    lines = []
    for k, connections in enumerate(pairs):
        minor = f"{PAIR_CLASS_BASE + k:x}"
        lines.append(f"class add dev {dev} parent 1:1 classid 1:{minor} htb rate "
                     f"{_bits(share)} ceil {_bits(rate_bps)} quantum {QUANTUM} prio 1")
        lines.append(f"qdisc add dev {dev} parent 1:{minor} handle {minor}: bfifo limit {limit}")
        for src, sport, dst, dport in connections:
            lines.append(f"filter add dev {dev} parent 1: protocol ip prio 1 u32 match ip src "
                         f"{src}/32 match ip sport {sport} 0xffff match ip dst {dst}/32 match "
                         f"ip dport {dport} 0xffff flowid 1:{minor}")
    tc_batch(ns, lines)
