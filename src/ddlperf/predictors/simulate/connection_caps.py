"""The transport's per-connection cap, fine-grained: a private virtual link per connection.

A PS connection (a worker process and a shard, one direction; :mod:`ddlperf.transport`)
gets one extra link on its path whose capacity is the cap: max-min fairness then gives each
connection min(its fair share of the real links, the cap), with no change to the network
kernel. Who owns a connection:

* without local aggregation every GPU is a process of its own: a unit's link has ``copies`` =
  its workers, so each GPU's stream is capped on its own;
* with local aggregation one process per server pushes and pulls the server's sum: a unit of
  whole servers gets ``copies`` = its servers (the G slice-streams of a server share one cap),
  and units that are parts of one server (a colocated shard's host GPU, jitter) share that
  server's link object, as they share its NIC.

Resources: ``ps0 push connection`` / ``ps0 pull connection``, the busiest connection of each
shard and direction (busy share of one connection), as the analytic model names them.

The transport's receive cap is one more link shared by every connection into one process: a
shard's (all pushes to it, loopback ones too) and a worker's (all its pulls; a server's with
local aggregation, whose units share it as they share the per-server connection links).
Resources: ``ps0 receive`` and ``<group> receive`` (the busiest such process of the group).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ddlperf.predictors.server_links import aggregates
from ddlperf.predictors.simulate.network import Link, Network
from ddlperf.predictors.simulate.units import Unit
from ddlperf.scenario import Scenario, ShardPlan

DIRECTIONS = ("push", "pull")


class ConnectionCaps:
    """Builds each PS connection's cap link (none when the transport sets no cap)."""

    def __init__(self, sc: Scenario, net: Network) -> None:
        self.sc = sc
        self.net = net
        self.cap = sc.connection_cap
        self._per_server: dict[tuple[int, int, str], Link] = {}
        self.by_resource: dict[str, list[Link]] = {}
        self._receivers: dict[object, Link] = {}

    def link(self, unit: Unit, shard: ShardPlan, direction: str,
             copies: int | None = None) -> tuple[Link, ...]:
        """The cap link of ``unit``'s connection to (push) or from (pull) ``shard``;
        ``copies``: the GPUs of a connection that stands for more than ``unit`` (merged BSP
        pulls of a group, without local aggregation)."""
        if not math.isfinite(self.cap):
            return ()
        name = f"{shard.name} {direction} connection"
        if not aggregates(self.sc, unit.group):
            link = self.net.add_link(self.cap, name, copies=copies or unit.count)
        elif unit.servers:
            link = self.net.add_link(self.cap, name, copies=unit.servers)
        else:
            key = (unit.server, shard.index, direction)
            found = self._per_server.get(key)
            if found is not None:
                return (found,)
            link = self._per_server[key] = self.net.add_link(self.cap, name)
        self.by_resource.setdefault(name, []).append(link)
        return (link,)

    def shard_receive(self, shard: ShardPlan) -> tuple[Link, ...]:
        """The receive-cap link of ``shard``'s process, shared by every push into it."""
        return self._receive_link(("shard", shard.index), f"{shard.name} receive", 1)

    def worker_receive(self, unit: Unit, key: object, copies: int) -> tuple[Link, ...]:
        """The receive-cap link of the process(es) pulling for ``unit`` (``key``: a unit or a
        merged group's first unit; ``copies``: the GPUs it stands for), shared by its pulls
        from every shard; with local aggregation a server's process."""
        name = f"{unit.group.name} receive"
        if not aggregates(self.sc, unit.group):
            return self._receive_link(("pull", key), name, copies)
        if unit.servers:
            return self._receive_link(("pull", key), name, unit.servers)
        return self._receive_link(("server", unit.server), name, 1)

    def _receive_link(self, key: object, name: str, copies: int) -> tuple[Link, ...]:
        if not math.isfinite(self.sc.receive_cap):
            return ()
        link = self._receivers.get(key)
        if link is None:
            link = self._receivers[key] = self.net.add_link(self.sc.receive_cap, name,
                                                            copies=copies)
            self.by_resource.setdefault(name, []).append(link)
        return (link,)

    def shares(self, share: Callable[[Link], float]) -> list[tuple[str, float]]:
        """(resource, busy share) of the busiest connection of each shard and direction, and
        of the busiest receiving process of each shard and group."""
        out = []
        for shard in self.sc.shards:
            for direction in DIRECTIONS:
                links = self.by_resource.get(f"{shard.name} {direction} connection")
                if links:
                    out.append((f"{shard.name} {direction} connection",
                                max(share(link) for link in links)))
        for name in [f"{shard.name} receive" for shard in self.sc.shards] + list(dict.fromkeys(
                f"{group.name} receive" for group in self.sc.groups)):
            links = self.by_resource.get(name)
            if links:
                out.append((name, max(share(link) for link in links)))
        return out
