"""The links a worker's traffic crosses on its way to a PS shard: fabric, NIC, rack link.

One :class:`ServerLinks` per parameter-server run builds every link once, shared by whatever
crosses it, so max-min fairness splits them as they are split for real:

* a GPU's fabric link (per unit, ``copies`` = its workers; a ``workers:`` host has none);
* a server's NICs as one link per direction (``nics`` × the NIC rate): a unit of whole servers
  owns its NICs (``copies`` = its servers); units that are parts of one server (single GPUs
  under jitter, a colocated shard's host GPU) share that server's NIC object;
* a rack's uplink and downlink: one object per rack, or one with ``copies`` = its racks for a
  unit that is a run of whole racks in lockstep (its flows load every rack alike).

Copies are exact because every flow of a unit loads all copies of every link on its path alike
(see :mod:`.units`).

``shared_down``: every worker of a group receives the same messages at the same times (BSP
pulls), so the group's NIC and fabric downlinks are one link each (``copies`` = its servers,
its workers), which the shards' pull connections to the group cross as one weighted flow.
"""

from __future__ import annotations

from collections.abc import Callable

from ddlperf.predictors.simulate.network import Link, Network, Nic
from ddlperf.predictors.simulate.units import Unit
from ddlperf.scenario import Scenario, ShardPlan


class ServerLinks:
    """Fabric, NIC and rack links of every unit, and the paths between units and shards."""

    def __init__(self, sc: Scenario, units: list[Unit], net: Network,
                 shared_down: bool = False) -> None:
        self.sc = sc
        self.units = units
        self._server_nics: dict[int, Nic] = {}
        #: per group (by id): its downlinks as one link (NIC, fabric or None), see shared_down
        self.group_down: dict[int, tuple[Link, Link | None]] = {}
        if shared_down:
            for g in sc.groups:
                self.group_down[id(g)] = (
                    net.add_link(g.nic_down, f"{g.nic_name('nic')}–… down", copies=g.servers),
                    None if g.intra is None else
                    net.add_link(g.intra, f"{g.intra_name()}–… down", copies=g.count))
        self._rack_links: dict[int, Nic] = {}
        self.nic: list[Nic] = []
        self.intra: list[Nic | None] = []
        self.rack: list[Nic | None] = []
        self.rack_of: list[int | None] = []  # rack of each unit's first server
        racks = sc.racks
        for unit in units:
            g = unit.group
            shared = self.group_down.get(id(g))
            if unit.servers:
                self.nic.append(self._nic(net, g.nic_name("nic", unit.server - g.first_server),
                                          g.nic_up, g.nic_down, unit.servers, shared))
            else:
                nic = self._server_nics.get(unit.server)
                if nic is None:
                    nic = self._server_nics[unit.server] = self._nic(
                        net, g.nic_name("nic", unit.server - g.first_server), g.nic_up,
                        g.nic_down, 1, shared)
                self.nic.append(nic)
            self.intra.append(None if g.intra is None else self._nic(
                net, f"{unit.label} intra", g.intra, g.intra, unit.count,
                None if shared is None else (shared[1], None)))
            if racks is None:
                self.rack.append(None)
                self.rack_of.append(None)
                continue
            first = racks.of(unit.server)
            last = racks.of(unit.server + max(unit.servers, 1) - 1)
            self.rack_of.append(first)
            if first == last:
                link = self._rack_links.get(first)
                if link is None:
                    link = self._rack_links[first] = net.add_nic(
                        f"rack{first}", racks.up, racks.down)
                self.rack.append(link)
            else:  # a lockstep run of whole racks: one object for all of them
                self.rack.append(net.add_nic(f"rack{first}–{last}", racks.up, racks.down,
                                             copies=last - first + 1))

    @staticmethod
    def _nic(net: Network, name: str, up: float, down: float, copies: int,
             shared: tuple[Link | None, Link | None] | None) -> Nic:
        """A NIC (or fabric link) pair; its downlink the group's shared one where there is."""
        if shared is None:
            return net.add_nic(name, up, down, copies=copies)
        assert shared[0] is not None
        return Nic(net.add_link(up, f"{name}.up", copies), shared[0])

    def group_from_shard(self, unit: Unit, shard_nic: Nic) -> tuple[Link, ...]:
        """Links from a dedicated shard to every GPU of ``unit``'s group (``shared_down``)."""
        nic, intra = self.group_down[id(unit.group)]
        return (shard_nic.up, nic) if intra is None else (shard_nic.up, nic, intra)

    def to_shard(self, u: int, shard: ShardPlan, shard_nic: Nic) -> tuple[Link, ...]:
        """Links from unit ``u``'s GPUs to ``shard`` (empty: no link at all, a one-GPU host
        talking to its own shard)."""
        intra = self.intra[u]
        if self._same_server(u, shard):
            return () if intra is None else (intra.up,)
        cross = self._crosses_racks(u, shard)
        path = [] if intra is None else [intra.up]
        path.append(self.nic[u].up)
        if cross:
            path.append(self.rack[u].up)  # type: ignore[union-attr]
            if shard.host is not None:
                path.append(self.rack[self._host_unit(shard)].down)  # type: ignore[union-attr]
        path.append(shard_nic.down)
        return tuple(path)

    def from_shard(self, u: int, shard: ShardPlan, shard_nic: Nic) -> tuple[Link, ...]:
        """Links from ``shard`` to unit ``u``'s GPUs (the reverse of :meth:`to_shard`)."""
        intra = self.intra[u]
        if self._same_server(u, shard):
            return () if intra is None else (intra.down,)
        cross = self._crosses_racks(u, shard)
        path = [shard_nic.up]
        if cross:
            if shard.host is not None:
                path.append(self.rack[self._host_unit(shard)].up)  # type: ignore[union-attr]
            path.append(self.rack[u].down)  # type: ignore[union-attr]
        path.append(self.nic[u].down)
        if intra is not None:
            path.append(intra.down)
        return tuple(path)

    def host_nic(self, shard: ShardPlan) -> Nic:
        """A colocated shard's NICs: its server's."""
        return self.nic[self._host_unit(shard)]

    def _same_server(self, u: int, shard: ShardPlan) -> bool:
        unit = self.units[u]
        return (shard.host_server is not None and unit.servers <= 1
                and unit.server == shard.host_server)

    def _crosses_racks(self, u: int, shard: ShardPlan) -> bool:
        """Dedicated shards sit on the core switch: reaching them always leaves the rack."""
        racks = self.sc.racks
        if racks is None:
            return False
        where = None if shard.host_server is None else racks.of(shard.host_server)
        return where != self.rack_of[u]

    def _host_unit(self, shard: ShardPlan) -> int:
        return next(i for i, unit in enumerate(self.units) if unit.first == shard.host)


def server_link_shares(
    units: list[Unit], links: ServerLinks, share: Callable[[Link], float], skip: set[int],
) -> list[tuple[str, float]]:
    """Busy shares of the workers' NICs (each object once, not those in ``skip``), fabric
    links (the busier direction) and rack links, under the names the analytic model uses."""
    out: dict[str, float] = {}
    seen = set(skip)
    for unit, nic in zip(units, links.nic):
        if id(nic) in seen:
            continue
        seen.add(id(nic))
        g = unit.group
        offset = unit.server - g.first_server
        out[g.nic_name("uplink", offset)] = share(nic.up)
        out[g.nic_name("downlink", offset)] = share(nic.down)
    for unit, intra in zip(units, links.intra):
        if intra is not None:
            name = unit.group.intra_name(unit.server - unit.group.first_server)
            out[name] = max(out.get(name, 0.0), share(intra.up), share(intra.down))
    for rack, where in zip(links.rack, links.rack_of):
        if rack is not None and id(rack) not in seen:
            seen.add(id(rack))
            out[f"rack{where} uplink"] = share(rack.up)
            out[f"rack{where} downlink"] = share(rack.down)
    return list(out.items())


def merged_pulls(sc: Scenario, units: list[Unit]) -> bool:
    """Whether a group's BSP pulls run as one connection per shard (exact).

    Under BSP every worker gets every update at the same time, so the pulls of one group's
    workers are identical message streams over identical links (a dedicated shard's uplink,
    the workers' NIC and fabric downlinks, which carry nothing else): max-min fairness gives
    them identical rates, and one flow of weight = the group's workers over downlinks with
    that many copies moves exactly as they do. Worth it only where a group was split into
    units (noise); not with colocated shards, local aggregation or racks (their downlinks
    carry other traffic too).
    """
    return (sc.strategy.effective_sync == "bsp" and not sc.strategy.local_aggregation
            and sc.racks is None and all(shard.host is None for shard in sc.shards)
            and len(units) > len(sc.groups))
