"""Result types shared by predictors and measurements, with one JSON shape.

Keys and units (also in the README):
- ``iteration_time_s``: mean over workers of each worker's steady-state step period (s).
- ``throughput_samples_per_s``: Σ_i batch_i / iteration_time_i over all workers.
- ``speedup``: cluster throughput / throughput of the fastest worker alone, no communication.
- ``scaling_efficiency``: cluster throughput / Σ_i (worker i's throughput alone).
- ``breakdown_s``: mean over workers of compute, exposed communication and sync wait (s).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, overload


@dataclass(slots=True)
class WorkerResult:
    """One worker's steady state; compute + communication + wait = iteration time."""

    name: str
    group: str
    device: str | None
    batch_size: int
    iteration_time_s: float
    throughput_samples_per_s: float
    compute_s: float
    communication_s: float
    wait_s: float


class WorkerGroups(Sequence[WorkerResult]):
    """Workers stored as (first worker, count) runs of identical results, expanded on demand.

    A 1024-worker homogeneous prediction then costs one result, not 1024, until someone
    iterates over it (tables collapse runs anyway; JSON lists every worker). ``name`` turns a
    global worker index into its name (``w3``, or ``node0/gpu3`` on multi-GPU servers).
    """

    def __init__(self, runs: list[tuple[WorkerResult, int, int]],
                 name: Callable[[int], str] | None = None) -> None:
        self._runs = runs  # (template, first global index, count)
        self._len = sum(count for _t, _f, count in runs)
        self._name = name or _plain_name

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> WorkerResult: ...
    @overload
    def __getitem__(self, index: slice) -> list[WorkerResult]: ...
    def __getitem__(self, index: int | slice) -> WorkerResult | list[WorkerResult]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._len))]
        if index < 0:
            index += self._len
        for template, first, count in self._runs:
            if first <= index < first + count:
                return template if count == 1 else replace(template, name=self._name(index))
        raise IndexError(index)

    def __iter__(self) -> Iterator[WorkerResult]:
        for template, first, count in self._runs:
            if count == 1:
                yield template
            else:
                for i in range(first, first + count):
                    yield replace(template, name=self._name(i))


def _plain_name(index: int) -> str:
    return f"w{index}"


_WORKER_FIELDS = [f.name for f in fields(WorkerResult)]


@dataclass(slots=True)
class ResourceUse:
    """A link or processor: seconds busy per iteration and its utilization (busy / period)."""

    name: str
    busy_s: float
    utilization: float


TIE_SHARE = 0.01  # resources within 1% of the busiest one's utilization are equally busy


def _canonical(name: str) -> tuple[int, tuple[tuple[str, int], ...], int, str]:
    """Order among equally busy resources: PS shards, then rack links (shared by many hosts),
    then worker hosts; hosts in natural order, and the push path first (a shard's downlink,
    uplink, update, push and pull connection; a worker host's or server NIC's uplink,
    downlink). ``ring (…)`` is
    ordered by the link it names."""
    inner = name[6:-1] if name.startswith("ring (") and name.endswith(")") else name
    words = inner.split()
    if len(words) > 2 and words[-1] == "connection":  # ``ps0 push connection``: one part
        words = [*words[:-2], " ".join(words[-2:])]
    part = words[-1] if words else ""
    shard = re.fullmatch(r"ps\d+", words[0]) is not None if words else False
    rank = (("downlink", "uplink", "update", "push connection", "pull connection") if shard
            else ("uplink", "downlink", "intra"))
    host = tuple((re.sub(r"\d+", "", w), int(re.sub(r"\D", "", w) or -1)) for w in words[:-1])
    kind = 0 if shard else 1 if words and words[0].startswith("rack") else 2
    return (kind, host, rank.index(part) if part in rank else len(rank), name)


def busiest(resources: list[ResourceUse]) -> ResourceUse:
    """The most utilized resource, with one tie rule for every method (analytic, simulate,
    measured): resources within :data:`TIE_SHARE` of the highest utilization are equally busy
    (a PS's uplink and downlink carry the same bytes; so do a ring's links) and the first of
    them in canonical order is named."""
    top = max(r.utilization for r in resources)
    tied = [r for r in resources if r.utilization >= top * (1 - TIE_SHARE)]
    return min(tied, key=lambda r: _canonical(r.name))


@dataclass
class Prediction:
    """What a predictor (or, with ``kind='measurement'``, a real run) says about a scenario."""

    method: str
    iteration_time_s: float
    throughput_samples_per_s: float
    speedup: float
    scaling_efficiency: float
    bottleneck: str
    breakdown_s: dict[str, float]
    workers: Sequence[WorkerResult]
    single_worker: dict[str, Any]
    resources: list[ResourceUse] = field(default_factory=list)
    inputs: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    percentiles: dict[str, dict[str, float]] | None = None
    kind: str = "prediction"
    # measurements: how sure the mean is (``iteration_time_s``: ``half_width_s`` of its 95%
    # interval, see ddlperf.measure.mean_interval); None for predictions
    uncertainty: dict[str, dict[str, Any]] | None = None
    # predictions of ASP (or never-held SSP) with identical workers: the job's time in
    # lockstep, an arrangement measured runs took on some clusters (predictors/arrangement.py);
    # None elsewhere
    arrangement: dict[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        workers = self.workers
        self.workers = []
        try:
            data = asdict(self)
        finally:
            self.workers = workers
        data["workers"] = [{k: getattr(w, k) for k in _WORKER_FIELDS} for w in workers]
        if data["percentiles"] is None:
            del data["percentiles"]
        if data["uncertainty"] is None:
            del data["uncertainty"]
        if data["arrangement"] is None:
            del data["arrangement"]
        return data

    def summary(self) -> dict[str, Any]:
        """The headline numbers only (for tables and sweeps)."""
        return {
            "iteration_time_s": self.iteration_time_s,
            "throughput_samples_per_s": self.throughput_samples_per_s,
            "speedup": self.speedup,
            "scaling_efficiency": self.scaling_efficiency,
            "bottleneck": self.bottleneck,
        }
