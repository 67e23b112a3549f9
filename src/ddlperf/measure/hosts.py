"""What an emulated cluster is made of: hosts (servers) and racks, checked on creation."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ddlperf.errors import InputError

MAX_HOSTS = 200
_HOST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.]{0,31}$")


@dataclass(frozen=True)
class HostSpec:
    """One emulated host. Rates are line rates in bit/s; ``cpu_quota`` is a share of one core."""

    name: str
    uplink_bps: float
    downlink_bps: float
    cpu_quota: float | None = None
    intra_bps: float | None = None  # each rank's loopback rate (None: lo unshaped)
    ranks: int = 1  # ranks that get a loopback class (with intra_bps)
    rack: int | None = None  # rack switch it hangs off (None: the core switch)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _HOST_NAME.match(self.name):
            raise InputError(
                "host name",
                f"{self.name!r} is not a usable host name",
                "use 1-32 letters, digits, '_' or '.', starting with a letter or digit",
            )
        fields = ("uplink_bps", "downlink_bps", *(("intra_bps",) if self.intra_bps else ()))
        for field in fields:
            _check_rate(f"{self.name}.{field}", getattr(self, field))
        if isinstance(self.ranks, bool) or not isinstance(self.ranks, int) or self.ranks < 1:
            raise InputError(f"{self.name}.ranks", f"must be a whole number ≥ 1, got "
                             f"{self.ranks!r}")
        if self.rack is not None and (isinstance(self.rack, bool)
                                      or not isinstance(self.rack, int) or self.rack < 0):
            raise InputError(f"{self.name}.rack", f"must be a rack index ≥ 0, got {self.rack!r}")
        if self.cpu_quota is not None:
            check_quota(f"{self.name}.cpu_quota", self.cpu_quota)


def check_quota(field: str, quota: object) -> None:
    """A CPU quota is a share of one core between 0.1 and this machine's cores."""
    cores = os.cpu_count() or 1
    bad_type = isinstance(quota, bool) or not isinstance(quota, (int, float))
    if bad_type or not math.isfinite(quota) or not 0.1 <= quota <= cores:  # type: ignore[arg-type]
        raise InputError(
            field,
            f"must be a share of one core between 0.1 and {cores}, got {quota!r}",
            "e.g. 0.5 for half a core, or leave it out for no limit",
        )


def _check_rate(field: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(field, f"must be a number, got {value!r}")
    if not math.isfinite(value) or value < 1e3:
        raise InputError(field, f"must be a finite rate of at least 1kbps, got {value!r}",
                         "give a line rate such as 100Mbps")


@dataclass(frozen=True)
class RackSpec:
    """A rack switch and its link to the core switch (line rates in bit/s)."""

    uplink_bps: float
    downlink_bps: float

    def __post_init__(self) -> None:
        for field in ("uplink_bps", "downlink_bps"):
            _check_rate(f"rack.{field}", getattr(self, field))


def validate_hosts(hosts: Sequence[HostSpec]) -> list[HostSpec]:
    """Check the host list as a whole (HostSpec checks each host)."""
    hosts = list(hosts)
    if not hosts:
        raise InputError("hosts", "the cluster has no hosts", "give at least one host")
    if len(hosts) > MAX_HOSTS:
        raise InputError("hosts", f"{len(hosts)} hosts is more than {MAX_HOSTS}")
    seen: set[str] = set()
    for host in hosts:
        if not isinstance(host, HostSpec):
            raise InputError("hosts", f"expected HostSpec, got {type(host).__name__}")
        if host.name in seen:
            raise InputError("hosts", f"host name {host.name!r} appears twice", "rename one")
        seen.add(host.name)
    return hosts


def reach(hosts: Sequence[HostSpec], racks: Sequence[RackSpec], host_name: str,
          peers: Sequence[str], direction: str) -> float:
    """The line rate that flows between host ``host_name`` and ``peers`` (all at once) can
    reach together beyond the host's own link: the peers' links, capped per rack by the rack
    links they cross — what a probe of the host's ``direction`` link can fill."""
    by_name = {h.name: h for h in hosts}
    host = by_name[host_name]
    out = direction == "uplink"  # the host sends; else it receives
    inside, core = 0.0, 0.0
    per_rack: dict[int, float] = {}
    for name in peers:
        peer = by_name[name]
        rate = peer.downlink_bps if out else peer.uplink_bps
        if peer.rack == host.rack:
            inside += rate
        elif peer.rack is None:
            core += rate
        else:
            per_rack[peer.rack] = per_rack.get(peer.rack, 0.0) + rate
    leaving = core + sum(
        min(total, racks[r].downlink_bps if out else racks[r].uplink_bps)
        for r, total in per_rack.items())
    if host.rack is not None:
        spec = racks[host.rack]
        leaving = min(leaving, spec.uplink_bps if out else spec.downlink_bps)
    return inside + leaving
