"""What every trainer process shares: the run spec, its rank table, records, faults, gloo set-up.

A trainer is one process per rank started as ``python -m ddlperf.measure.ps_trainer --spec
FILE`` (or ``ddp_trainer``). Rendezvous is torchrun's: ``RANK``, ``WORLD_SIZE``,
``MASTER_ADDR`` and ``MASTER_PORT`` come from the environment, so the same command runs under
the emulated-cluster launcher and under ``torchrun`` on real machines. The spec is plain JSON
(no ddlperf scenario objects), written by :func:`ddlperf.measure.launcher.build_spec`.

Rank table (the same on every rank, derived from the spec):
- PS, dedicated: ranks ``w0 … wN-1`` then ``ps0 … psK-1``, each on its own host.
- PS, colocated: per worker host ``wi`` the worker (local rank 0) and, for i < K, shard ``psi``
  (local rank 1) — the order torchrun assigns with ``--nproc-per-node 2`` on those hosts.
- all-reduce: ``w0 … wN-1``.
On servers (a ``nodes:`` cluster) the workers are named ``node0/gpu0 …`` and sit on host
``node0`` … with local ranks 0 … G−1, server by server (so a flat ring visits the servers in
order); dedicated shards follow on their own hosts, a colocated shard k after server k's GPUs.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

SPEC_FORMAT = "ddlperf.measure-spec/1"
EMULATED_LABEL = "emulated device time"
REAL_LABEL = "real CPU compute"
REAL_GPU_LABEL = "real GPU compute (CUDA)"
GRAD_TAG = 1 << 20  # gradient messages use tag GRAD_TAG + tensor index; parameters use the index
FAULT_ENV = "DDLPERF_FAULT"
TORCH_DTYPES = {"float32": "float32", "tf32": "float32", "float16": "float16",
                "bfloat16": "bfloat16"}


# ----------------------------------------------------------------------------- rank table


def rank_table(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per rank: ``role`` (worker | ps), ``name``, ``index``, ``host``, ``local_rank``."""
    workers = len(spec["workers"])
    shards = int(spec.get("shards", 0))
    table: list[dict[str, Any]] = []

    def add(role: str, index: int, host: str, local: int) -> None:
        name = (spec["workers"][index].get("name", f"w{index}") if role == "worker"
                else f"ps{index}")
        table.append({"rank": len(table), "role": role, "name": name, "index": index,
                      "host": host, "local_rank": local})

    def host(i: int) -> str:
        return str(spec["workers"][i].get("host", f"w{i}"))

    hosts = list(dict.fromkeys(host(i) for i in range(workers)))
    colocated = spec["arch"] == "ps" and spec.get("placement") == "colocated"
    for server, name in enumerate(hosts):
        on = [i for i in range(workers) if host(i) == name]
        for local, i in enumerate(on):
            add("worker", i, name, local)
        if colocated and server < shards:
            add("ps", server, name, len(on))
    if not colocated:
        for k in range(shards):
            add("ps", k, f"ps{k}", 0)
    return table


def slice_bounds(numel: int, local: int, gpus: int) -> tuple[int, int]:
    """[start, stop) of the ``local``-th of ``gpus`` near-equal slices of a tensor: what that
    GPU reduces, pushes, pulls and gathers in local aggregation and hierarchical all-reduce."""
    return round(numel * local / gpus), round(numel * (local + 1) / gpus)


def aggregation_pieces(parts: list[list[int]], numel: int, local: int, gpus: int
                       ) -> list[tuple[int, int, int]]:
    """(shard, start, numel) pieces of one tensor that GPU ``local`` of a server pushes and
    pulls with local aggregation: its slice cut at the shard parts' boundaries."""
    lo, hi = slice_bounds(numel, local, gpus)
    pieces = []
    for k, start, n in parts:
        a, b = max(start, lo), min(start + n, hi)
        if b > a:
            pieces.append((int(k), a, b - a))
    return pieces


def file_name(rank_name: str) -> str:
    """A rank's name as a file name (``node0/gpu1`` → ``node0.gpu1``)."""
    return rank_name.replace("/", ".")


def hosts_of(table: list[dict[str, Any]]) -> list[str]:
    """Host names in rank order, each once."""
    return list(dict.fromkeys(entry["host"] for entry in table))


def shard_rank(table: list[dict[str, Any]], shard: int) -> int:
    return next(e["rank"] for e in table if e["role"] == "ps" and e["index"] == shard)


def worker_rank(table: list[dict[str, Any]], worker: int) -> int:
    return next(e["rank"] for e in table if e["role"] == "worker" and e["index"] == worker)


def total_iterations(spec: dict[str, Any], worker: int | None = None) -> int:
    """Warm-up plus measured iterations; under ASP a faster worker may run more (its own
    ``iterations``, :mod:`ddlperf.measure.asp_counts`)."""
    own = None if worker is None else spec["workers"][worker].get("iterations")
    return int(spec["warmup"]) + int(spec["iterations"] if own is None else own)


def micro_batches(spec: dict[str, Any]) -> int:
    """Micro-batches per iteration (gradient accumulation): all but the last compute and
    accumulate gradients without communicating."""
    return int(spec.get("accumulation", 1))


# ----------------------------------------------------------------------------- records


class Recorder:
    """Appends one JSON object per line with a single ``write`` (O_APPEND): lines from many
    processes never interleave and every line is on disk as soon as it is written, so an
    interrupted run keeps what it recorded."""

    def __init__(self, path: str | Path | None, base: dict[str, Any] | None = None) -> None:
        self.base = dict(base or {})
        self.fd: int | None = None
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, record: dict[str, Any]) -> None:
        if self.fd is None:
            return
        line = json.dumps({**self.base, **record}, separators=(",", ":")) + "\n"
        os.write(self.fd, line.encode())

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class Status:
    """A one-line status file per rank (phase, iteration, since): lets the launcher tell a rank
    that is stuck in its own work from one that waits on a peer.

    ``set`` runs per tensor on the compute thread and in the PS's receive loop, so it must not
    perturb what is measured: the file stays open and a changed state overwrites one
    fixed-width record in place (a few µs; rewriting the file was ~160 µs per call here, about
    50 ms per iteration of a 158-tensor model). An unchanged state is not written again, so
    ``since`` stays the moment the phase began.
    """

    WAITING = ("pull", "push", "gate", "recv", "send", "allreduce", "barrier", "init")
    RECORD_BYTES = 64

    def __init__(self, directory: str | Path | None, name: str) -> None:
        self.path = (None if directory is None
                     else Path(directory) / f"{file_name(name)}.status")
        self._fd: int | None = None
        self._last: tuple[str, int] | None = None
        self._lock = threading.Lock()
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(OSError):
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)

    def set(self, phase: str, iteration: int = -1) -> None:
        if self._fd is None:
            return
        with self._lock:  # the PS's receiver and sender threads share one file
            if self._last == (phase, iteration):
                return
            self._last = (phase, iteration)
            line = f"{phase} {iteration} {time.time():.6f}"
            record = line.ljust(self.RECORD_BYTES - 1)[: self.RECORD_BYTES - 1] + "\n"
            with contextlib.suppress(OSError):
                os.pwrite(self._fd, record.encode(), 0)


def read_status(path: Path) -> tuple[str, int, float] | None:
    try:
        phase, iteration, since = path.read_text().split()
        return phase, int(iteration), float(since)
    except (OSError, ValueError):
        return None


class NetCounter:
    """Bytes the host's NIC sent/received, from this process's network namespace
    (``/proc/self/net/dev`` follows the namespace; ``/sys/class/net`` would not)."""

    def __init__(self, interface: str | None) -> None:
        self.interface = interface

    def read(self) -> tuple[int, int] | None:
        if not self.interface:
            return None
        try:
            with open("/proc/self/net/dev") as fh:
                for line in fh:
                    name, _, rest = line.partition(":")
                    if name.strip() == self.interface:
                        fields = rest.split()
                        return int(fields[8]), int(fields[0])  # tx bytes, rx bytes
        except OSError:
            return None
        return None


class CpuClock:
    """CPU seconds of this process and of the calling thread (its kernel part too), and the
    seconds the thread waited on a run queue (``/proc/thread-self/schedstat``), read at phase
    boundaries.

    They tell the ways a step can be slower than its profile apart: a thread that waited for
    a CPU (``runqueue_s``: the machine was oversubscribed, other ranks or jobs ran), one that
    ran longer (``thread_cpu_s``: slower per instruction, or more work), kernel work done on
    the thread (``thread_sys_s``: sockets, and on veth the receiver's network stack too), and
    what the rank's other threads (gloo's, the PS's senders) cost (``process_cpu_s`` −
    thread). One read is a few µs: per phase, never per tensor. Where schedstat is missing
    the wait is absent.
    """

    def __init__(self) -> None:
        self._mark = self.now()

    @staticmethod
    def now() -> tuple[float, float, float, float | None]:
        """(process CPU s, thread CPU s, thread kernel CPU s, thread run-queue wait s or
        None)."""
        import resource

        process = time.process_time()
        usage = resource.getrusage(getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF))
        try:
            with open("/proc/thread-self/schedstat") as fh:
                wait_ns = fh.read().split()[1]
            wait: float | None = int(wait_ns) / 1e9
        except (OSError, ValueError, IndexError):
            wait = None
        return process, usage.ru_utime + usage.ru_stime, usage.ru_stime, wait

    def lap(self, prefix: str) -> dict[str, float]:
        """CPU figures since the previous lap (or creation), as record fields
        ``<prefix>_process_cpu_s``, ``<prefix>_thread_cpu_s``, ``<prefix>_thread_sys_s``,
        ``<prefix>_runqueue_s``."""
        now, before = self.now(), self._mark
        self._mark = now
        out = {f"{prefix}_process_cpu_s": now[0] - before[0],
               f"{prefix}_thread_cpu_s": now[1] - before[1],
               f"{prefix}_thread_sys_s": now[2] - before[2]}
        if now[3] is not None and before[3] is not None:
            out[f"{prefix}_runqueue_s"] = now[3] - before[3]
        return out


# ----------------------------------------------------------------------------- faults


def fault_for(name: str) -> tuple[str, int] | None:
    """``DDLPERF_FAULT=w1:crash@3`` (or ``hang@3``, ``exit@3``): a test hook that makes rank
    ``w1`` fail at the start of iteration 3."""
    text = os.environ.get(FAULT_ENV, "")
    for item in filter(None, (part.strip() for part in text.split(","))):
        who, _, what = item.partition(":")
        kind, _, when = what.partition("@")
        if who == name and kind in ("crash", "hang", "exit"):
            return kind, int(when or 0)
    return None


class InjectedFault(RuntimeError):
    pass


def maybe_fault(fault: tuple[str, int] | None, iteration: int, status: Status) -> None:
    if fault is None or fault[1] != iteration:
        return
    kind = fault[0]
    if kind == "crash":
        raise InjectedFault(f"injected crash at iteration {iteration} ({FAULT_ENV})")
    if kind == "exit":
        os._exit(17)
    status.set("hang", iteration)
    while True:  # "hang": stuck in its own work, never talks to peers again
        time.sleep(3600)


# ----------------------------------------------------------------------------- process set-up


def single_thread() -> None:
    """One compute thread per process (2 cores are shared by every rank)."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    import torch

    torch.set_num_threads(1)
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(1)


def env_rank() -> tuple[int, int]:
    missing = [v for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
               if v not in os.environ]
    if missing:
        raise SystemExit(f"error: set {', '.join(missing)} (torchrun does) to start a trainer")
    return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])


def init_group(spec: dict[str, Any], world: int) -> dict[int, Any]:
    """Join the job (``spec["backend"]``: gloo, or nccl on CUDA) and create every group the
    trainer needs before the first byte of training: a hierarchical all-reduce's rings of the
    servers' GPUs with one local index (returned, by local index). Then wait at the loopback
    gate (see :func:`loopback_gate`), when the launcher set one."""
    import torch.distributed as dist

    timeout = datetime.timedelta(seconds=float(spec.get("op_timeout_s", 600)))
    backend = spec.get("backend", "gloo")
    if backend == "nccl":
        import torch

        torch.cuda.set_device(compute_device(spec))
    dist.init_process_group(backend, timeout=timeout, world_size=world,
                            rank=int(os.environ["RANK"]))
    groups: dict[int, Any] = {}
    if spec["arch"] == "allreduce" and spec.get("allreduce") == "hierarchical":
        for local, ranks in sorted(local_rings(spec).items()):
            groups[local] = dist.new_group(ranks)
    loopback_gate(spec)
    return groups


def local_rings(spec: dict[str, Any]) -> dict[int, list[int]]:
    """Local index → ranks of the servers' GPUs with that index, server by server."""
    rings: dict[int, list[int]] = {}
    for entry in rank_table(spec):
        if entry["role"] == "worker":
            rings.setdefault(entry["local_rank"], []).append(entry["rank"])
    return rings


GATE_ENV = "DDLPERF_LOOPBACK_GATE"
GO_FILE = "go"


def loopback_gate(spec: dict[str, Any]) -> None:
    """On a shaped loopback (the emulated launcher sets ``DDLPERF_LOOPBACK_GATE`` to a
    directory): say "connected" with this process's id, then wait until the launcher has
    sent this rank's sockets to its class on ``lo`` (it writes ``go``), so that no byte of
    training crosses the loopback unshaped. Without the variable (torchrun): nothing."""
    gate = os.environ.get(GATE_ENV)
    if not gate:
        return
    directory = Path(gate)
    me = table_entry(spec)
    ready = directory / f"{file_name(me['name'])}.pid"
    tmp = ready.with_suffix(".tmp")
    tmp.write_text(str(os.getpid()))
    os.replace(tmp, ready)
    deadline = time.monotonic() + float(spec.get("op_timeout_s", 600))
    while not (directory / GO_FILE).exists():
        if time.monotonic() > deadline:
            raise TimeoutError("the launcher never opened the loopback gate")
        time.sleep(0.01)


def table_entry(spec: dict[str, Any]) -> dict[str, Any]:
    """This process's rank-table entry (from ``RANK``)."""
    return rank_table(spec)[int(os.environ["RANK"])]


def compute_device(spec: dict[str, Any]) -> str:
    """Where this rank computes: its GPU (``cuda:<LOCAL_RANK>``) on a CUDA host with real
    compute or NCCL, else the CPU. NCCL without a CUDA GPU is an error (one line)."""
    import torch

    nccl = spec.get("backend") == "nccl"
    if not torch.cuda.is_available():
        if nccl:
            raise SystemExit("error: --backend nccl needs a CUDA GPU for every rank and this "
                             "host has none; use --backend gloo")
        return "cpu"
    if nccl or spec["compute"] == "real":
        count = torch.cuda.device_count()
        return f"cuda:{int(os.environ.get('LOCAL_RANK', '0')) % count}"
    return "cpu"


def synchronize(device: str) -> None:
    """Wait for the GPU's queued work, so host clocks time it (nothing on the CPU)."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)


def torch_dtype(name: str) -> Any:
    import torch

    return getattr(torch, TORCH_DTYPES.get(name, "float32"))


def element_size(name: str) -> int:
    return 2 if TORCH_DTYPES.get(name, "float32") in ("float16", "bfloat16") else 4


def sleep_until(deadline: float) -> None:
    """Sleep to an absolute ``time.perf_counter()`` deadline (no drift across many layers)."""
    remaining = deadline - time.perf_counter()
    if remaining > 0:
        time.sleep(remaining)


def load_spec(path: str | Path) -> dict[str, Any]:
    spec = json.loads(Path(path).read_text())
    if spec.get("format") != SPEC_FORMAT:
        raise SystemExit(f"error: {path} is not a {SPEC_FORMAT} spec")
    return spec


def parse_args(argv: list[str] | None, prog: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=prog, description="ddlperf measure trainer rank")
    parser.add_argument("--spec", required=True, help="run spec JSON (from ddlperf measure)")
    parser.add_argument("--records", help="JSONL records file (default: the spec's)")
    parser.add_argument("--status-dir", help="per-rank status files (launcher hang detection)")
    return parser.parse_args(argv)


def run_rank(argv: list[str] | None, prog: str,
             body: Callable[[dict[str, Any], dict[str, Any], Recorder, Status], None]) -> None:
    """Common ``main``: spec, env rendezvous, records; any failure is recorded, then exits 1."""
    args = parse_args(argv, prog)
    spec = load_spec(args.spec)
    rank, world = env_rank()
    table = rank_table(spec)
    if world != len(table):
        raise SystemExit(f"error: WORLD_SIZE={world} but the spec has {len(table)} ranks "
                         f"({', '.join(e['name'] for e in table)})")
    me = table[rank]
    records_path = args.records or spec.get("records")
    status_dir = args.status_dir or spec.get("status_dir")
    recorder = Recorder(records_path, {"name": me["name"], "rank": rank, "role": me["role"]})
    status = Status(status_dir, me["name"])
    status.set("init")
    try:
        single_thread()
        body(spec, me, recorder, status)
        status.set("done")
    except BaseException as exc:
        status.set("failed")
        recorder.write({"type": "error", "time": time.time(), "error": f"{type(exc).__name__}: "
                        f"{exc}", "peer": is_peer_error(exc),
                        "traceback": traceback.format_exc(limit=6)})
        recorder.close()
        if isinstance(exc, SystemExit):
            raise
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)  # skip gloo's destructors, which can block on dead peers
    recorder.close()
    # Done and recorded: exit without gloo's destructors too. Once the peers have exited
    # they can block (seen in CI: a PS whose status said "done" was still alive 30 s after
    # its workers had left, and the launcher stopped the finished run as hung).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def is_peer_error(exc: BaseException) -> bool:
    """True when the error says a *peer* went away (a consequence, not the cause)."""
    text = str(exc).lower()
    return any(s in text for s in ("connection closed", "connection reset", "broken pipe",
                                   "read error", "write error", "timed out", "timeout",
                                   "connection refused", "epipe", "socket closed",
                                   "transport error", "ecconnreset", "peer"))
