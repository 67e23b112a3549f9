"""Byte counters of an emulated cluster: switch ports, rack links, each server's loopback.

What the wire check compares with the payload the trainers had to move. Port and rack counts
are kernel skb lengths (a GSO packet counts its headers once: between payload and payload /
0.956); loopback counts are bytes each rank's HTB class sent (64 kB packets: ~0.1% headers).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ddlperf.measure import netns, shaping
from ddlperf.measure.loopback import class_bytes
from ddlperf.measure.netns import CommandError

if TYPE_CHECKING:
    from ddlperf.measure.emulated import EmulatedCluster

RACK_UPLINK = "uplink"  # a rack switch's veth to the core switch


def _link_stats(ns: str) -> dict[str, Any]:
    """Interface name → its ``stats64`` in namespace ``ns``."""
    out = netns.ip(ns, "-j", "-s", "link", "show")
    return {link["ifname"]: link.get("stats64", {}) for link in json.loads(out)}


def port_bytes(cluster: EmulatedCluster) -> dict[str, dict[str, int]]:
    """Bytes per host counted on its bridge port.

    ``downlink_bytes`` = sent by the port to the host, ``uplink_bytes`` = received from it.
    These are kernel skb lengths: a GSO super-packet counts its headers once, so the counts
    lie between payload and payload / 0.956.
    """
    switches = {cluster.switch_of(h.name) for h in cluster.hosts}
    stats = {sw: _link_stats(sw) for sw in switches}
    result: dict[str, dict[str, int]] = {}
    for host in cluster.hosts:
        switch = cluster.switch_of(host.name)
        link = stats[switch].get(cluster.port(host.name))
        if link is None:
            raise CommandError(["ip", "-n", switch, "link"], 1,
                               f"port {cluster.port(host.name)} is missing")
        result[host.name] = {
            "downlink_bytes": int(link["tx"]["bytes"]),
            "uplink_bytes": int(link["rx"]["bytes"]),
        }
    return result

def rack_bytes(cluster: EmulatedCluster) -> dict[int, dict[str, int]]:
    """Bytes per rack counted on its uplink veth in the rack switch: ``uplink_bytes`` sent
    to the core switch, ``downlink_bytes`` received from it (skb lengths, as ports)."""
    result = {}
    for rack in range(len(cluster.racks)):
        link = _link_stats(cluster.rack_namespace(rack)).get(RACK_UPLINK)
        if link is None:
            raise CommandError(["ip", "-n", cluster.rack_namespace(rack), "link"], 1,
                               f"{RACK_UPLINK} of rack {rack} is missing")
        result[rack] = {"uplink_bytes": int(link["tx"]["bytes"]),
                        "downlink_bytes": int(link["rx"]["bytes"])}
    return result

def loopback_bytes(cluster: EmulatedCluster) -> dict[str, dict[str, int]]:
    """Per host with a shaped loopback: bytes each rank's class sent on ``lo``
    (``rank<i>``), and ``other`` (traffic of no rank: rendezvous, ACKs)."""
    result = {}
    for host in cluster.hosts:
        if not host.intra_bps:
            continue
        counts = class_bytes(cluster.namespace(host.name))
        ranks = {f"rank{i}": counts.get(shaping.rank_class(i), 0) for i in range(host.ranks)}
        ranks["other"] = counts.get("1:2", 0) + counts.get("1:3", 0)
        result[host.name] = ranks
    return result


def link_counts(cluster: EmulatedCluster, links: dict[str, str]) -> dict[str, int]:
    """Every counted link by the predictors' name (``links``: host → the name its NIC links
    go by, :func:`ddlperf.measure.traffic.host_links`): ``node0 nic0 uplink``, ``rack1
    downlink``, ``node0 intra`` (all of the server's rank classes on lo) and ``node0 loopback
    other`` (lo traffic of no rank)."""
    out: dict[str, int] = {}
    for host, counts in port_bytes(cluster).items():
        name = links.get(host, host)
        out[f"{name} uplink"] = counts["uplink_bytes"]
        out[f"{name} downlink"] = counts["downlink_bytes"]
    for rack, counts in rack_bytes(cluster).items():
        out[f"rack{rack} uplink"] = counts["uplink_bytes"]
        out[f"rack{rack} downlink"] = counts["downlink_bytes"]
    for host, counts in loopback_bytes(cluster).items():
        out[f"{host} intra"] = sum(v for k, v in counts.items() if k != "other")
        out[f"{host} loopback other"] = counts["other"]
    return out


# ------------------------------------------------------------ TCP segments resent per host

def parse_tcp_snmp(text: str) -> dict[str, int]:
    """``OutSegs`` and ``RetransSegs`` from the text of ``/proc/net/snmp`` (its two ``Tcp:``
    lines: names, then values); empty where they are missing."""
    lines = [line.split()[1:] for line in text.splitlines() if line.startswith("Tcp:")]
    if len(lines) < 2:
        return {}
    values = dict(zip(lines[0], lines[1]))
    try:
        return {"sent": int(values["OutSegs"]), "resent": int(values["RetransSegs"])}
    except (KeyError, ValueError):
        return {}


def tcp_segments(cluster: EmulatedCluster) -> dict[str, dict[str, int]]:
    """Per emulated host, the TCP segments its namespace has sent and resent so far (a host
    whose counters cannot be read is left out)."""
    out: dict[str, dict[str, int]] = {}
    for host in cluster.hosts:
        try:
            text = netns.run(cluster.command(host.name, ["cat", "/proc/net/snmp"],
                                             in_cgroup=False))
        except CommandError:
            continue
        counts = parse_tcp_snmp(text)
        if counts:
            out[host.name] = counts
    return out


def tcp_resent(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]
               ) -> dict[str, Any]:
    """Segments each host sent and resent while the trainers ran, and the largest share
    resent. The models have no loss (DL fabrics are lossless or ECN-managed), so a run whose
    emulated links dropped packets is slower than they can be: ASP runs here resent up to
    1.9% of their segments when the senders' own queues overflowed, before each host's TCP
    small queues were capped (:func:`ddlperf.measure.shaping.socket_queue_bytes`), and the
    wire check cannot see a packet a host dropped before sending it."""
    hosts: dict[str, dict[str, Any]] = {}
    for name, end in after.items():
        start = before.get(name)
        if start is None:
            continue
        sent = end["sent"] - start["sent"]
        resent = end["resent"] - start["resent"]
        hosts[name] = {"sent_segments": sent, "resent_segments": resent,
                       "resent_pct": 100.0 * resent / sent if sent > 0 else 0.0}
    worst = max((h["resent_pct"] for h in hosts.values()), default=None)
    return {"hosts": hosts, "max_resent_pct": worst,
            "note": "TCP segments per emulated host (/proc/net/snmp of its namespace) while "
                    "the trainers ran; resent = retransmitted after a loss or a timeout"}
