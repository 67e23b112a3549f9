"""Speed of the simulation kernel: event loop vs SimPy, and the flow-level network.

Run: ``PYTHONPATH=src python benchmarks/bench_kernel.py``. Not a test; prints figures only.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from ddlperf.predict.simulate.engine import Engine
from ddlperf.predict.simulate.network import Network, max_min_rates

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


# -- network ----------------------------------------------------------------------------------------


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


def snapshot(n_senders: int, n_receivers: int, seed: int = 0) -> tuple[Network, list[list[int]]]:
    """A network with one active flow per sender to a random receiver (after allocation)."""
    rng = random.Random(seed)
    eng = Engine()
    net = Network(eng)
    senders = [net.add_nic(f"w{i}", up=10 * GBIT) for i in range(n_senders)]
    receivers = [net.add_nic(f"ps{k}", up=10 * GBIT) for k in range(n_receivers)]
    paths = []
    for i in range(n_senders):
        dst = receivers[rng.randrange(n_receivers)]
        link_path = (senders[i].up, dst.down)
        net.start(1e12, link_path, weight=rng.choice([1.0, 2.0]))
        paths.append([link.index for link in link_path])
    eng.run(until=1e-9)
    return net, paths


def bench_allocation() -> None:
    """One full reallocation: pure-Python component filling vs the dense numpy version."""
    for n_senders, n_receivers in [(16, 1), (64, 4), (512, 8)]:
        net, paths = snapshot(n_senders, n_receivers)
        caps = [link.capacity for link in net.links]

        def python_alloc(net: Network = net) -> None:
            net._dirty = dict.fromkeys(net.links)
            net._reallocate()

        def numpy_alloc(paths: list[list[int]] = paths, caps: list[float] = caps) -> None:
            max_min_rates(paths, caps)

        reps = 200
        t_py = best_of(lambda f=python_alloc: [f() for _ in range(reps)]) / reps
        t_np = best_of(lambda f=numpy_alloc: [f() for _ in range(reps)]) / reps
        print(
            f"realloc : {n_senders:4d} flows / {len(caps):4d} links, whole network:"
            f" python {t_py * 1e6:8.1f} us   numpy (dense, from paths) {t_np * 1e6:8.1f} us"
        )


def ring(n_workers: int, iterations: int, symmetric: bool, bucket: float = 25e6) -> float:
    """Ring all-reduce of one bucket per iteration: 2(N-1) steps of bucket/N bytes per worker."""
    eng = Engine()
    net = Network(eng)
    steps = 2 * (n_workers - 1) * iterations
    chunk = bucket / n_workers
    if symmetric:
        nic = net.add_nic("worker", up=10 * GBIT, copies=n_workers)

        def step_sym(left: int) -> None:
            if left:
                net.start(chunk, (nic.up, nic.down), latency=20e-6, weight=n_workers,
                          on_complete=lambda _f: step_sym(left - 1))

        step_sym(steps)
    else:
        nics = [net.add_nic(f"w{i}", up=10 * GBIT) for i in range(n_workers)]
        pending = [0]

        def step_all(left: int) -> None:
            if not left:
                return
            pending[0] = n_workers

            def one_done(_f: object) -> None:
                pending[0] -= 1
                if not pending[0]:
                    step_all(left - 1)

            for i in range(n_workers):
                net.start(chunk, (nics[i].up, nics[(i + 1) % n_workers].down),
                          latency=20e-6, on_complete=one_done)

        step_all(steps)
    eng.run()
    return eng.now


def bench_ring() -> None:
    n, it = 1024, 10
    wall = best_of(lambda: ring(n, it, symmetric=True))
    flows = 2 * (n - 1) * it
    print(f"ring    : {n} workers x {it} iterations, symmetric (1 weighted flow per step):"
          f" {flows} flows in {wall * 1e3:6.1f} ms")
    n_small, it_small = 1024, 1
    steps = 8
    eng_flows = n_small * steps

    def few_steps() -> None:
        # only a few steps of the per-worker version: it is N times more flows
        eng = Engine()
        net = Network(eng)
        nics = [net.add_nic(f"w{i}", up=10 * GBIT) for i in range(n_small)]
        for _ in range(steps):
            for i in range(n_small):
                net.start(25e6 / n_small, (nics[i].up, nics[(i + 1) % n_small].down))
            eng.run()

    wall = best_of(few_steps)
    print(f"ring    : {n_small} workers, per-worker flows, {steps} steps: {eng_flows} flows in"
          f" {wall * 1e3:6.1f} ms = {eng_flows / wall / 1e3:5.1f} k flows/s")
    del it_small


def main() -> None:
    bench_engine()
    bench_network()
    bench_allocation()
    bench_ring()


if __name__ == "__main__":
    main()
