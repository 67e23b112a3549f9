"""Speed of the simulation kernel: event loop vs SimPy, and the flow-level network.

Run: ``PYTHONPATH=src python benchmarks/bench_kernel.py``. Not a test; prints figures only.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import numpy as np

from ddlperf.predictors.simulate.engine import Engine
from ddlperf.predictors.simulate.network import Network, max_min_dense

GBIT = 1e9 / 8  # bytes/s


def best_of(fn: Callable[[], object], repeat: int = 3) -> float:
    """Best wall time of ``repeat`` runs (the least disturbed by other load)."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


# -- event loop -----------------------------------------------------------------------------------


def engine_timeouts(n_events: int, n_procs: int = 100) -> None:
    """``n_procs`` callback "processes", each a loop of unit timeouts, ``n_events`` in total."""
    eng = Engine()
    per_proc = n_events // n_procs

    def step(left: int) -> None:
        if left > 1:
            eng.schedule(1.0, step, left - 1)

    for i in range(n_procs):
        eng.schedule(i * 1e-3, step, per_proc)
    eng.run()


def simpy_timeouts(n_events: int, n_procs: int = 100) -> None:
    import simpy

    env = simpy.Environment()
    per_proc = n_events // n_procs

    def proc(env: simpy.Environment, delay: float):
        yield env.timeout(delay)
        for _ in range(per_proc - 1):
            yield env.timeout(1.0)

    for i in range(n_procs):
        env.process(proc(env, i * 1e-3))
    env.run()


def bench_engine(n: int = 100_000) -> None:
    ours = best_of(lambda: engine_timeouts(n))
    print(f"engine  : {n} timeouts in {ours * 1e3:7.1f} ms = {n / ours / 1e6:5.2f} M events/s")
    try:
        theirs = best_of(lambda: simpy_timeouts(n))
    except ImportError:
        print("simpy   : not installed")
        return
    print(
        f"simpy   : {n} timeouts in {theirs * 1e3:7.1f} ms = {n / theirs / 1e6:5.2f} M events/s"
        f"  (ours is {theirs / ours:.1f}x faster)"
    )


# -- network ---------------------------------------------------------------------------------------


def sequential_senders(
    n_senders: int = 64, n_flows: int = 160, n_receivers: int = 4, seed: int = 0
) -> tuple[Network, float]:
    """Each sender sends ``n_flows`` flows one after another, round-robin over the receivers.

    Sizes are log-uniform 4 KB..4 MB, so completions rarely coincide: every start and end
    triggers its own reallocation (the expensive case).
    """
    rng = random.Random(seed)
    eng = Engine()
    net = Network(eng)
    senders = [net.add_nic(f"w{i}", up=10 * GBIT) for i in range(n_senders)]
    receivers = [net.add_nic(f"ps{k}", up=10 * GBIT) for k in range(n_receivers)]
    sizes = [[4e3 * 1000 ** rng.random() for _ in range(n_flows)] for _ in range(n_senders)]

    def send(i: int, j: int) -> None:
        if j < n_flows:
            dst = receivers[(i + j) % n_receivers]
            net.start(
                sizes[i][j],
                (senders[i].up, dst.down),
                latency=50e-6,
                on_complete=lambda _f: send(i, j + 1),
            )

    for i in range(n_senders):
        send(i, 0)
    eng.run()
    return net, eng.now


def bench_network() -> None:
    n = 64 * 160
    holder: list[Network] = []
    wall = best_of(lambda: holder.append(sequential_senders()[0]))
    net = holder[-1]
    print(
        f"network : 64 senders x 160 sequential flows -> 4 receivers: {n} flows in"
        f" {wall * 1e3:6.1f} ms = {n / wall / 1e3:5.1f} k flows/s,"
        f" {net.reallocations} reallocations ({wall / net.reallocations * 1e6:.1f} us each,"
        " events included)"
    )


def snapshot(n_senders: int, n_receivers: int, seed: int = 0) -> Network:
    """A network with one active flow per sender to a random receiver (after allocation)."""
    rng = random.Random(seed)
    eng = Engine()
    net = Network(eng)
    senders = [net.add_nic(f"w{i}", up=10 * GBIT) for i in range(n_senders)]
    receivers = [net.add_nic(f"ps{k}", up=10 * GBIT) for k in range(n_receivers)]
    for i in range(n_senders):
        dst = receivers[rng.randrange(n_receivers)]
        net.start(1e12, (senders[i].up, dst.down), weight=rng.choice([1.0, 2.0]))
    eng.run(until=1e-9)
    return net


def bench_allocation() -> None:
    """One reallocation of a whole network: pure-Python component filling vs dense numpy.

    The numpy side gets its incidence matrix prebuilt (as if maintained incrementally), so this
    is its best case.
    """
    for n_senders, n_receivers in [(4, 1), (16, 1), (64, 4), (512, 8)]:
        net = snapshot(n_senders, n_receivers)
        flows = [f for link in net.links for f in link.flows if link.name.endswith(".up")]
        incidence = np.zeros((len(flows), len(net.links)))
        for i, f in enumerate(flows):
            incidence[i, [link.index for link in f.links]] = 1.0
        total = np.array([link.capacity * link.copies for link in net.links])
        weight = np.array([f.weight for f in flows])
        rates = np.array([f.rate for f in flows])
        assert np.allclose(max_min_dense(incidence, total, weight), rates, rtol=1e-9)

        def python_alloc(net: Network = net) -> None:
            net._dirty = dict.fromkeys(net.links)
            net._reallocate()

        def numpy_alloc(
            a: np.ndarray = incidence, b: np.ndarray = total, c: np.ndarray = weight
        ) -> None:
            max_min_dense(a, b, c)

        reps = max(20, 4000 // n_senders)
        t_py = best_of(lambda f=python_alloc, r=reps: [f() for _ in range(r)]) / reps
        t_np = best_of(lambda f=numpy_alloc, r=reps: [f() for _ in range(r)]) / reps
        print(
            f"realloc : {n_senders:4d} flows / {len(total):4d} links, all recomputed:"
            f" python {t_py * 1e6:7.1f} us   numpy dense {t_np * 1e6:7.1f} us"
        )


def ring_symmetric(n_workers: int, iterations: int, bucket: float = 25e6) -> int:
    """Ring all-reduce of one bucket per iteration, 2(N-1) steps, each one flow of weight N."""
    eng = Engine()
    net = Network(eng)
    nic = net.add_nic("worker", up=10 * GBIT, copies=n_workers)
    chunk = bucket / n_workers

    def step(left: int) -> None:
        if left:
            net.start(
                chunk,
                (nic.up, nic.down),
                latency=20e-6,
                weight=n_workers,
                on_complete=lambda _f: step(left - 1),
            )

    step(2 * (n_workers - 1) * iterations)
    eng.run()
    return net.flows_completed


def ring_per_worker(n_workers: int, steps: int, bucket: float = 25e6) -> int:
    """The same ring with one flow per worker and step (no symmetry): N x more flows."""
    eng = Engine()
    net = Network(eng)
    nics = [net.add_nic(f"w{i}", up=10 * GBIT) for i in range(n_workers)]
    chunk = bucket / n_workers
    pending = [0]

    def step(left: int) -> None:
        if left:
            pending[0] = n_workers
            for i in range(n_workers):
                net.start(
                    chunk,
                    (nics[i].up, nics[(i + 1) % n_workers].down),
                    latency=20e-6,
                    on_complete=lambda _f: done(left),
                )

    def done(left: int) -> None:
        pending[0] -= 1
        if not pending[0]:
            step(left - 1)

    step(steps)
    eng.run()
    return net.flows_completed


def bench_ring() -> None:
    n, it = 1024, 10
    flows = [0]
    wall = best_of(lambda: flows.__setitem__(0, ring_symmetric(n, it)))
    print(
        f"ring    : {n} workers x {it} iterations x 1 bucket, one weighted flow per step:"
        f" {flows[0]} flows in {wall * 1e3:6.1f} ms = {flows[0] / wall / 1e3:5.1f} k flows/s"
    )
    steps = 16
    wall = best_of(lambda: flows.__setitem__(0, ring_per_worker(n, steps)))
    print(
        f"ring    : {n} workers, one flow per worker, {steps} steps:"
        f" {flows[0]} flows in {wall * 1e3:6.1f} ms = {flows[0] / wall / 1e3:5.1f} k flows/s"
    )


def main() -> None:
    bench_engine()
    bench_network()
    bench_allocation()
    bench_ring()


if __name__ == "__main__":
    main()
