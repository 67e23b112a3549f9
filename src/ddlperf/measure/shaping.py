"""HTB shaping of the emulated links (this kernel has no netem, fq_codel or sfq).

Egress of a host is one HTB class on the host's ``eth0``. Ingress of a host is shaped on the
bridge-side veth: a parent class at the downlink rate and one child class per sender (u32 match
on the source IP), so senders share a receiver's downlink max-min fairly as the models assume.
Leaves are small ``bfifo`` queues (~``buffer_s`` of the rate) so queueing delay stays short.
"""

from __future__ import annotations

from ddlperf.measure.netns import tc

MTU_FRAME = 1514  # Ethernet frame without FCS, what HTB charges per full-size packet
MIN_BUFFER_BYTES = 16 * MTU_FRAME
QUANTUM = 60_000  # equal DRR quantum: siblings borrow spare rate in equal shares
DEFAULT_SHARE = 0.01  # guaranteed share of unmatched traffic (ARP) on a shaped downlink


def buffer_bytes(rate_bps: float, buffer_s: float) -> int:
    """bfifo limit holding ~``buffer_s`` of traffic at ``rate_bps``, at least a few frames."""
    return max(MIN_BUFFER_BYTES, int(rate_bps / 8.0 * buffer_s))


def _bits(rate_bps: float) -> str:
    return f"{max(1, round(rate_bps))}bit"


def _class(ns: str, dev: str, parent: str, classid: str, rate: float, ceil: float) -> None:
    tc(
        ns,
        "class",
        "add",
        "dev",
        dev,
        "parent",
        parent,
        "classid",
        classid,
        "htb",
        "rate",
        _bits(rate),
        "ceil",
        _bits(ceil),
        "quantum",
        str(QUANTUM),
    )


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


def shape_egress(ns: str, dev: str, rate_bps: float, buffer_s: float) -> None:
    """Limit everything ``dev`` sends to ``rate_bps`` (the host's uplink)."""
    tc(ns, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1")
    _class(ns, dev, "1:", "1:1", rate_bps, rate_bps)
    _leaf(ns, dev, "1:1", "10:", buffer_bytes(rate_bps, buffer_s))


def shape_ingress(
    ns: str, dev: str, rate_bps: float, sender_ips: list[str], buffer_s: float
) -> None:
    """Limit what ``dev`` delivers to its host to ``rate_bps``, one fair class per sender IP."""
    tc(ns, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "2")
    _class(ns, dev, "1:", "1:1", rate_bps, rate_bps)
    default_rate = rate_bps * DEFAULT_SHARE
    _class(ns, dev, "1:1", "1:2", default_rate, rate_bps)
    _leaf(ns, dev, "1:2", "2:", buffer_bytes(rate_bps, buffer_s))
    if not sender_ips:
        return
    share = rate_bps * (1.0 - DEFAULT_SHARE) / len(sender_ips)
    for index, src in enumerate(sender_ips):
        minor = f"{0x100 + index:x}"
        _class(ns, dev, "1:1", f"1:{minor}", share, rate_bps)
        _leaf(ns, dev, f"1:{minor}", f"{minor}:", buffer_bytes(rate_bps, buffer_s))
        tc(
            ns,
            "filter",
            "add",
            "dev",
            dev,
            "parent",
            "1:",
            "protocol",
            "ip",
            "prio",
            "1",
            "u32",
            "match",
            "ip",
            "src",
            f"{src}/32",
            "flowid",
            f"1:{minor}",
        )
