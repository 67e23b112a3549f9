"""Mean value analysis of a closed queueing network (the ASP parameter-server model's solver)."""

from __future__ import annotations

import numpy as np


def mva(
    think: np.ndarray, demand: np.ndarray, population: np.ndarray, iterations: int = 500,
    floor: np.ndarray | None = None, copies: np.ndarray | None = None,
    together: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Closed multi-class queueing network by mean value analysis.

    ``think`` (C,) delay-station time per class, ``demand`` (S, C) service demand of a class at
    each queueing station, ``population`` (C,) customers per class. Returns throughput per
    class (C,) and residence times (S, C). One class: exact MVA (unless its stations stand for
    different numbers of copies); several: Bard–Schweitzer.

    ``floor`` (S, C): the least time a visit takes however idle the station, when a customer
    cannot use the whole station alone (a flow capped by its sender's link below the link it
    crosses, which serves c = floor/demand such flows at full speed): residence is
    max(floor, demand · (1 + queue seen)), i.e. a flow slows only when more than c are
    present. A floor at or below the demand changes nothing (bit for bit).

    ``copies`` (S,): a station that stands for that many identical stations, each visited by
    an equal share of its classes' customers (a server's NIC, met only by its own GPUs): a
    customer sees one copy's queue, less itself (Bard–Schweitzer, also for one class).

    ``together`` (S,): stations with one label are crossed at once by one transfer (a GPU's
    push through its server's NIC and the shard's link): the transfer takes the longest of
    their residences, and the customer sits in the queue of each of them for all of it.
    Without it every station is visited on its own (the labels 0 … S−1). Labels of shape
    (S, C) differ by class (a colocated host's NIC is crossed by the others' pushes and its
    own worker's pulls, different transfers of theirs); with them a customer counts in each
    station's queue only for its own residence there, not the transfer's longest (a flow held
    back at one link takes only its bytes' worth of another: max-min sharing).
    """
    stations, classes = demand.shape
    if classes > 1:
        merged = _merge_identical(think, demand, population, floor, together)
        if merged is not None:
            index, (z, d, n, f, t) = merged
            x, r = mva(z, d, n, iterations, f, copies, t)
            return x[index] * population / n[index], r[:, index]
    split = np.ones((stations, 1)) if copies is None else np.asarray(copies, float)[:, None]
    # one class whose every station stands for the same k copies: k networks side by side,
    # each of population / k, solved exactly (the recursion below)
    k = 1.0 if copies is None else float(np.asarray(copies, float)[0])
    uniform = copies is None or bool(np.all(np.asarray(copies, float) == k))
    if classes == 1 and uniform and float(population[0]) % k == 0 and (
            together is None or np.ndim(together) == 1):
        each = np.array([float(population[0]) / k])
        if together is None:
            throughput, residence = _one_class(think, demand, each, floor)
        else:
            throughput, residence = _one_class_together(think, demand, each, floor,
                                                        np.asarray(together))
        return throughput * k, residence
    visits: list[np.ndarray] = []
    by_class: list[np.ndarray] = []  # (S, C) masks, one per label, for per-class labels
    if together is not None:
        labels = np.asarray(together)
        crossed = demand > 0 if floor is None else (demand > 0) | (floor > 0)
        if labels.ndim == 2:
            by_class = [(labels == label) & crossed for label in np.unique(labels)]
        else:
            visits = [labels == label for label in dict.fromkeys(labels.tolist())]
    queue = demand * population / max(demand.shape[0], 1)  # initial guess (S, C)
    throughput = np.zeros(classes)
    residence = demand.copy()
    for _ in range(iterations):
        seen = queue.sum(axis=1, keepdims=True) / split - queue / population
        residence = demand * (1.0 + seen)
        if floor is not None:
            residence = np.maximum(floor, residence)
        spent = residence.sum(axis=0)
        if visits:  # a transfer lasts its longest station's residence
            spent = sum(residence[rows].max(axis=0) for rows in visits)
            for rows in visits:
                residence[rows] = np.where(crossed[rows], residence[rows].max(axis=0), 0.0)
        elif by_class:  # residences are never negative: 0 stands for "not crossed"
            longest = [np.where(mask, residence, 0.0).max(axis=0) for mask in by_class]
            spent = np.sum(longest, axis=0)
        throughput = population / (think + spent)
        new_queue = residence * throughput
        if np.allclose(new_queue, queue, rtol=1e-10, atol=1e-12):
            queue = new_queue
            break
        queue = new_queue
    return throughput, residence


def _one_class(think: np.ndarray, demand: np.ndarray, population: np.ndarray,
               floor: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Exact MVA of one class: the recursion over the population (plain floats beat numpy
    for a few stations)."""
    stations = demand.shape[0]
    d = demand[:, 0].tolist()
    low = [0.0] * stations if floor is None else floor[:, 0].tolist()
    z = float(think[0])
    queue = [0.0] * stations
    residence = d
    throughput = 0.0
    for n in range(1, int(population[0]) + 1):
        residence = [max(fi, di * (1.0 + qi)) for di, qi, fi in zip(d, queue, low)]
        throughput = n / (z + sum(residence))
        queue = [throughput * r for r in residence]
    return np.array([throughput]), np.array(residence)[:, None]


def _one_class_together(think: np.ndarray, demand: np.ndarray, population: np.ndarray,
                        floor: np.ndarray | None, labels: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`mva` of one class whose stations are crossed together by label (no copies):
    the exact recursion over the population, as without labels, each transfer lasting its
    longest station's residence and sitting in each crossed station's queue for all of it.
    Not Bard–Schweitzer's fixed point: a station that never holds anyone back (a fast rack
    link next to a slow shard) then changes nothing, where the approximation moved a
    two-worker job by 5%."""
    d = demand[:, 0]
    low = np.zeros_like(d) if floor is None else floor[:, 0]
    crossed = (d > 0) | (low > 0)
    groups = [labels == label for label in dict.fromkeys(labels.tolist())]
    z = float(think[0])
    queue = np.zeros_like(d)
    residence = d.copy()
    throughput = 0.0
    for n in range(1, int(population[0]) + 1):
        residence = np.maximum(low, d * (1.0 + queue))
        spent = 0.0
        for rows in groups:
            longest = float(residence[rows].max())
            spent += longest
            residence[rows] = np.where(crossed[rows], longest, 0.0)
        throughput = n / (z + spent)
        queue = throughput * residence
    return np.array([throughput]), residence[:, None]


def _merge_identical(
    think: np.ndarray, demand: np.ndarray, population: np.ndarray, floor: np.ndarray | None,
    together: np.ndarray | None,
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None,
                               np.ndarray | None]] | None:
    """Classes that are one in all but name (think time, demands, floors, labels) as one class
    of their summed population, and each class's merged class; None when all differ. Their
    customers are interchangeable, so the network is the same; solved apart, a one-class job
    listed as two groups (three hosts in racks of one, 2 + 1) took Bard–Schweitzer's
    approximation where one group takes the exact recursion (4% apart)."""
    keys = []
    for c in range(len(think)):
        parts = [np.asarray(think[c]).tobytes(), demand[:, c].tobytes(),
                 b"" if floor is None else floor[:, c].tobytes(),
                 b"" if together is None or np.ndim(together) == 1
                 else np.asarray(together)[:, c].tobytes()]
        keys.append(b"|".join(parts))
    first: dict[bytes, int] = {}  # each distinct key: the first class that has it
    for c, key in enumerate(keys):
        first.setdefault(key, c)
    if len(first) == len(keys):
        return None
    reps = list(first.values())
    merged = {key: m for m, key in enumerate(first)}
    index = np.array([merged[key] for key in keys])
    n = np.array([population[index == m].sum() for m in range(len(first))], dtype=float)
    t = together
    if together is not None and np.ndim(together) == 2:
        t = np.asarray(together)[:, reps]
    return index, (think[reps], demand[:, reps], n,
                   None if floor is None else floor[:, reps], t)
