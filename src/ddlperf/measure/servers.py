"""A resolved scenario as emulated hosts and racks, and what the emulation cannot do.

One emulated host per server (a ``workers:`` host is a server of one GPU), named as the
predictors name servers (``w3``, ``node1``), plus one per dedicated PS shard (``ps0``).

- A server's ``nics`` NICs are emulated as one eth0 at ``nics`` × the NIC rate: the
  predictors' model of several NICs (NCCL spreads its rings over them, a PS its
  connections). How real flows hash onto NICs is not emulated.
- Its intra-node fabric is ``lo``, shaped to the ``intra`` rate per rank
  (:func:`~ddlperf.measure.shaping.shape_loopback`), at most :func:`max_link_bps` per rank:
  this machine drove two ranks exchanging at 2 Gbit/s each within 2% (3 Gbit/s each with
  plain sockets), while NVLink's 1.2 Tbit/s is far beyond any emulation here — a faster
  fabric is refused, naming the largest rate honoured.
- Racks are rack switches whose uplinks are shaped to the rack's rates.
- Colocated PS shards on servers of several GPUs are refused: how a shard's loopback traffic
  with the GPUs should share their fabric links has no faithful emulation here.
"""

from __future__ import annotations

import os
from typing import Any

from ddlperf.cluster import ServerGroup
from ddlperf.errors import InputError
from ddlperf.measure.hosts import HostSpec, RackSpec
from ddlperf.measure.trainer_common import hosts_of
from ddlperf.scenario import Scenario
from ddlperf.units import format_bandwidth


def max_link_bps() -> float:
    """What this machine can drive per emulated link: about 1 Gbit/s per core (2 Gbit/s on 2)."""
    return 1e9 * (os.cpu_count() or 1)


def server_groups(sc: Scenario) -> dict[str, ServerGroup]:
    """Server host name → its group (``w3`` / ``node1``, as :class:`~ddlperf.scenario.
    GroupPlan` names servers)."""
    out: dict[str, ServerGroup] = {}
    kind = "w" if sc.cluster.workers else "node"
    for group in sc.cluster.servers():
        for _ in range(group.count):
            out[f"{kind}{len(out)}"] = group
    return out


def _too_fast(field: str, what: str, rate: float, fix: str | None = None) -> InputError:
    limit = max_link_bps()
    return InputError(field, f"{format_bandwidth(rate)} ({what}) is more than this machine can "
                      f"drive (about {format_bandwidth(limit)} per emulated link on "
                      f"{os.cpu_count()} cores)", fix or f"use at most {format_bandwidth(limit)}")


def check_emulatable(sc: Scenario) -> None:
    """What the emulated cluster refuses (one line each, exit 2); see the module docstring."""
    cluster = sc.cluster
    limit = max_link_bps()
    if cluster.ps.placement == "colocated" and cluster.ps.count and sc.multi_gpu:
        raise InputError("placement", "colocated PS shards on servers of several GPUs are not "
                         "emulated (no faithful class for a shard's loopback traffic)",
                         "use placement: dedicated")
    for name, group in server_groups(sc).items():
        for rate, what in ((group.nics * group.up, "NIC uplink"),
                           (group.nics * group.down, "NIC downlink")):
            if rate > limit:
                nics = f"{group.nics} NICs together, " if group.nics > 1 else ""
                raise _too_fast("--bandwidth", f"{nics}{what} of {name}", rate)
        if group.intra is not None and group.gpus > 1 and group.intra > limit:
            raise _too_fast("intra", f"intra-node fabric per GPU of {name}, shaped on its "
                            "loopback", group.intra,
                            f"use intra: {format_bandwidth(limit)} or less (predict with the "
                            "same rate to compare)")
    if cluster.racks is not None:
        for rate, what in ((cluster.racks.uplink, "rack uplink"),
                           (cluster.racks.down, "rack downlink")):
            if rate > limit:
                raise _too_fast("racks", what, rate)
    if cluster.ps.count and max(cluster.ps_up(), cluster.ps_down()) > limit:
        raise _too_fast("--bandwidth", "PS link", max(cluster.ps_up(), cluster.ps_down()))


def host_specs(sc: Scenario, table: list[dict[str, Any]], quotas: dict[str, float],
               emulated: bool = True) -> list[HostSpec]:
    """Each host's line rates, loopback, rack (and CPU quota); ``emulated``: refuse what this
    machine cannot emulate (real machines under torchrun have real NICs)."""
    hosts = hosts_of(table)
    unknown = sorted(set(quotas) - set(hosts))
    if unknown:
        raise InputError("--cpu-quota", f"no host named {', '.join(unknown)}",
                         f"hosts of this run: {', '.join(hosts)}")
    if emulated:
        check_emulatable(sc)
    groups = server_groups(sc)
    cluster = sc.cluster
    ranks = {h: sum(1 for e in table if e["host"] == h) for h in hosts}
    specs = []
    for host in hosts:
        group = groups.get(host)
        if group is None:  # a dedicated PS shard, on the core switch
            specs.append(HostSpec(host, cluster.ps_up(), cluster.ps_down(), quotas.get(host)))
            continue
        server = list(groups).index(host)
        rack = None if cluster.racks is None else server // cluster.racks.servers
        intra = group.intra if group.gpus > 1 and ranks[host] > 1 else None
        specs.append(HostSpec(host, group.nics * group.up, group.nics * group.down,
                              quotas.get(host), intra, ranks[host] if intra else 1, rack))
    return specs


def rack_specs(sc: Scenario) -> list[RackSpec]:
    """One rack switch per rack of the scenario (none without ``racks:``)."""
    racks = sc.cluster.racks
    if racks is None:
        return []
    count = -(-sc.server_count // racks.servers)
    return [RackSpec(racks.uplink, racks.down) for _ in range(count)]


def notes(sc: Scenario) -> list[str]:
    """What a reader of a server measurement must know about the emulation."""
    out = []
    for name, group in server_groups(sc).items():
        if group.nics > 1:
            out.append(f"{name}: {group.nics} NICs emulated as one link of {group.nics} × "
                       f"{format_bandwidth(group.up)} (the predictors' model of several NICs)")
            break
    if sc.multi_gpu:
        out.append("intra-node fabric: each GPU rank's sends on its server's loopback shaped "
                   "to the intra rate (HTB class per rank, by TCP source port)")
    return out


def split_communication(measurement: Any, spec: dict[str, Any],
                        records: list[dict[str, Any]]) -> None:
    """Add ``communication_intra``/``communication_inter`` to a server measurement's
    breakdown where they can be measured: with nothing crossing the servers' loopback (a PS
    without local aggregation) all exposed communication is inter-node; a hierarchical
    all-reduce times its phases, and exposed communication is split in their proportion (the
    predictors' rule: by time). A flat ring or local aggregation overlaps the two inside one
    collective or pipeline: no split, and a note says so."""
    from ddlperf.measure.traffic import expected_flows, link_loads

    if not any(int(w.get("gpus", 1)) > 1 for w in spec["workers"]):
        return
    comm = float(measurement.breakdown_s.get("communication", 0.0))
    intra_bytes = sum(sum(v.values()) for k, v in link_loads(spec, expected_flows(spec)).items()
                      if k.endswith(" intra"))
    warmup = int(spec["warmup"])
    phases = [(float(r["allreduce_intra_s"]), float(r["allreduce_inter_s"])) for r in records
              if r.get("type") == "iteration" and "allreduce_intra_s" in r
              and int(r["iteration"]) >= warmup]
    if intra_bytes == 0:
        share = 0.0
    elif phases and sum(a + b for a, b in phases) > 0:
        share = sum(a for a, _ in phases) / sum(a + b for a, b in phases)
    else:
        measurement.notes.append("communication is not split into intra- and inter-node: "
                                 "they overlap inside one collective or pipeline here")
        return
    measurement.breakdown_s["communication_intra"] = comm * share
    measurement.breakdown_s["communication_inter"] = comm * (1.0 - share)
