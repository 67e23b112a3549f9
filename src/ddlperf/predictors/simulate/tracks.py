"""Timeline tracks a run fills while it simulates (only when a trace was asked for).

A :class:`Track` is one row of the Chrome trace: a thread (``compute``, ``uplink → ps0``, …) of
one or more processes (the workers of a unit share the unit's records, so every worker gets its
own copy of the events). Models append :data:`~.compute.OpRecord` tuples to ``records``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ddlperf.predictors.simulate.compute import OpRecord
from ddlperf.predictors.simulate.units import Unit


@dataclass
class Track:
    processes: list[str]
    thread: str
    category: str
    records: list[OpRecord] = field(default_factory=list)


@dataclass
class TrackLog:
    """All tracks of one run, in the order they should appear."""

    tracks: list[Track] = field(default_factory=list)

    def add(self, processes: list[str], thread: str, category: str,
            records: list[OpRecord] | None = None) -> list[OpRecord]:
        """A new track (sharing ``records`` if given); returns its record list."""
        track = Track(list(processes), thread, category, [] if records is None else records)
        self.tracks.append(track)
        return track.records


def connection_tracks(
    log: TrackLog | None, unit: Unit, shard: str, kind: str,
    records: list[OpRecord] | None = None,
) -> list[OpRecord] | None:
    """Trace rows of a unit's push (``kind`` "push") or pull connection with PS ``shard``
    (sharing ``records`` if given): on the workers' processes for one-GPU hosts, on the
    servers' (one track per server NIC) for multi-GPU servers. None without a trace."""
    if log is None:
        return None
    if unit.group.kind == "workers":
        owners, prefix = unit.names, ""
    else:
        owners = unit.server_names
        prefix = "nic " + ("" if unit.servers else f"({unit.label}) ")
    if kind == "push":
        rows = log.add(owners, f"{prefix}uplink → {shard}", "push", records)
        log.add([shard], f"downlink ← {unit.label}", "push", rows)
    else:
        rows = log.add(owners, f"{prefix}downlink ← {shard}", "pull", records)
        log.add([shard], f"uplink → {unit.label}", "pull", rows)
    return rows
