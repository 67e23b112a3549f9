"""Timeline tracks a run fills while it simulates (only when a trace was asked for).

A :class:`Track` is one row of the Chrome trace: a thread (``compute``, ``uplink → ps0``, …) of
one or more processes (the workers of a unit share the unit's records, so every worker gets its
own copy of the events). Models append :data:`~.compute.OpRecord` tuples to ``records``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ddlperf.predictors.simulate.compute import OpRecord


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
