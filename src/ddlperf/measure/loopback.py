"""Loopback of a multi-rank host: whose packets are whose, and how many bytes each rank sent.

Ranks of one emulated server share its network namespace and its IP address, so their
traffic to each other crosses the namespace's ``lo`` (see :func:`ddlperf.measure.shaping.
shape_loopback`). gloo binds listeners to the host's address but connects without binding a
source, so addresses cannot tell ranks apart; TCP source ports can. Once every rank has
connected (the trainers wait at a gate, :func:`ddlperf.measure.trainer_common.loopback_gate`),
:func:`rank_ports` reads each rank process's sockets from ``/proc/<pid>`` (its own network
namespace's view) and the launcher sends each local port's packets to that rank's class.
"""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path

from ddlperf.measure.netns import tc

_SOCKET = re.compile(r"^socket:\[(\d+)\]$")
_ESTABLISHED = "01"


def socket_inodes(pid: int) -> set[int]:
    """Inodes of the sockets process ``pid`` holds open."""
    inodes = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return inodes
    for name in names:
        try:
            match = _SOCKET.match(os.readlink(fd_dir / name))
        except OSError:
            continue
        if match:
            inodes.add(int(match.group(1)))
    return inodes


def _address(text: str) -> tuple[str, int]:
    """``0100007F:1F90`` (/proc/net/tcp, IPv4 in host byte order) → ("127.0.0.1", 8080)."""
    host, port = text.split(":")
    packed = int(host, 16).to_bytes(4, "little")
    return str(ipaddress.IPv4Address(packed)), int(port, 16)


def connections(pid: int) -> list[tuple[str, int, str, int]]:
    """``pid``'s established TCP connections: (local IP, port, remote IP, port)."""
    mine = socket_inodes(pid)
    out = []
    try:
        lines = Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return out
    for line in lines:
        fields = line.split()
        if len(fields) < 10 or fields[3] != _ESTABLISHED or int(fields[9]) not in mine:
            continue
        local, remote = _address(fields[1]), _address(fields[2])
        out.append((*local, *remote))
    return out


def local_ports(pid: int, peers: set[str]) -> set[int]:
    """Local TCP ports of ``pid``'s established connections to an address in ``peers`` (the
    host's own addresses: those connections run over ``lo``)."""
    return {lport for (_lip, lport, rip, _rport) in connections(pid)
            if rip in peers or rip.startswith("127.")}


def rank_ports(pids: dict[int, int], peers: set[str]) -> dict[int, int]:
    """Local port → local rank, for every loopback connection of the ranks (``pids``: local
    rank → process id). A port two ranks claim (cannot happen on one address) is dropped."""
    owner: dict[int, int] = {}
    clash: set[int] = set()
    for local_rank, pid in sorted(pids.items()):
        for port in local_ports(pid, peers):
            if port in owner and owner[port] != local_rank:
                clash.add(port)
            owner[port] = local_rank
    return {p: r for p, r in owner.items() if p not in clash}


def class_bytes(ns: str, dev: str = "lo") -> dict[str, int]:
    """Bytes each HTB class of ``dev`` has sent (``tc -s class show``): classid → bytes."""
    out = tc(ns, "-s", "class", "show", "dev", dev)
    counts: dict[str, int] = {}
    current = None
    for line in out.splitlines():
        words = line.split()
        if len(words) > 2 and words[0] == "class" and words[1] == "htb":
            current = words[2]
        elif current and words[:1] == ["Sent"]:
            counts[current] = int(words[1])
            current = None
    return counts
