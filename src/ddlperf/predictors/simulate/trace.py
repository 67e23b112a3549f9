"""Synthetic timeline in Chrome trace format (opens in Perfetto and chrome://tracing).

Layout: a process per node — each worker ``wN`` (``nodeS/gpuG`` on servers, after a process
``nodeS`` per server whose threads are the server's NIC traffic: ``nic uplink → ps0``,
``nic uplink → ring``) and each PS shard ``psK`` — with a thread per stream: ``compute``
(forward/backward/optimizer; a colocated shard's updates too), one thread per connection
direction (``uplink → ps0``, ``downlink ← ps0``, ``uplink → ring``, …) and, for a
dedicated shard, ``update``. Events are complete ("X") events in microseconds with the
iteration in ``args``; a message's event spans its transmission (its α is not drawn).

Identical workers simulated as one unit each get a copy of the unit's events, so every worker
has its own tracks; a shard's connection to such a unit is one thread labelled with the worker
range (``downlink ← w0–w63``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ddlperf.io import write_atomic
from ddlperf.predictors.simulate.tracks import TrackLog


def _process_order(name: str) -> tuple[int, int, int, str]:
    """Workers by index (a server, then its GPUs), then shards by index, then the rest."""
    server, _, gpu = name.partition("/gpu")
    if server.startswith("node") and server[4:].isdigit() and (not gpu or gpu.isdigit()):
        return (0, int(server[4:]), int(gpu) + 1 if gpu else 0, name)
    for rank, prefix in enumerate(("w", "ps")):
        if name.startswith(prefix) and name[len(prefix):].isdigit():
            return (rank, int(name[len(prefix):]), 0, name)
    return (2, 0, 0, name)


def chrome_trace(log: TrackLog, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """The trace as a JSON-ready dict ``{"traceEvents": [...], "displayTimeUnit": "ms"}``."""
    processes = sorted({p for track in log.tracks for p in track.processes}, key=_process_order)
    pid = {name: i + 1 for i, name in enumerate(processes)}
    events: list[dict[str, Any]] = []
    for name in processes:
        events.append({"name": "process_name", "ph": "M", "pid": pid[name], "tid": 0,
                       "args": {"name": name}})
        events.append({"name": "process_sort_index", "ph": "M", "pid": pid[name], "tid": 0,
                       "args": {"sort_index": pid[name]}})
    tids: dict[tuple[int, str], int] = {}
    for track in log.tracks:
        for process in track.processes:
            p = pid[process]
            key = (p, track.thread)
            if key not in tids:
                tids[key] = tid = sum(1 for q, _ in tids if q == p) + 1
                events.append({"name": "thread_name", "ph": "M", "pid": p, "tid": tid,
                               "args": {"name": track.thread}})
                events.append({"name": "thread_sort_index", "ph": "M", "pid": p, "tid": tid,
                               "args": {"sort_index": tid}})
            tid = tids[key]
            cat = track.category
            for label, start, end, iteration in track.records:
                ts = round(start * 1e6, 3)  # rounding both ends keeps back-to-back events apart
                events.append({"name": label, "cat": cat, "ph": "X", "pid": p, "tid": tid,
                               "ts": ts, "dur": round(end * 1e6, 3) - ts,
                               "args": {"iteration": iteration}})
    trace: dict[str, Any] = {"traceEvents": events, "displayTimeUnit": "ms"}
    if metadata:
        trace["otherData"] = metadata
    return trace


def write_trace(path: str | Path, log: TrackLog, metadata: dict[str, Any] | None = None) -> Path:
    """Write the trace atomically (a reader never sees half a file)."""
    text = json.dumps(chrome_trace(log, metadata), separators=(",", ":"), allow_nan=False)
    return write_atomic(path, text + "\n")
