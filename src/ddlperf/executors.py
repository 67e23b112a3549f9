"""Where the chunks of a big sweep or plan run: here in processes, or on a Ray or Dask cluster.

An executor maps a module-level function over chunks of work and yields the results in input
order as they become ready, with a bounded number of chunks in flight, so a caller can write
millions of rows to a file as they come without holding them (and, on Ctrl-C, keep what has
finished). ``local`` uses forked processes on this machine (one per core by default); ``ray``
and ``dask`` connect to an existing cluster (``address``), or start a local one when none is
given. Both engines are optional installs (``pip install 'ddlperf[ray]'`` / ``'ddlperf[dask]'``).
"""

from __future__ import annotations

import os
import signal
import socket
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from ddlperf.errors import InputError
from ddlperf.forked_pool import ForkedPool

EXECUTORS = ("local", "ray", "dask")
# Chunks in flight per worker process: enough to keep workers busy, few enough to stream.
IN_FLIGHT_PER_WORKER = 4


class Executor:
    """Base: run in this process (one job, or too little work to share)."""

    name = "serial"
    # Chunks sent as one task: a remote task costs milliseconds of scheduling and transfer
    # (measured: docs/executors.md), so distributed engines get more work per task.
    chunks_per_task = 1

    def __init__(self, jobs: int = 1) -> None:
        self.jobs = jobs

    def map(self, func: Callable[..., Any], chunks: Iterable[tuple[Any, ...]]
            ) -> Iterator[Any]:
        """``func(*chunk)`` for every chunk, yielded in order."""
        for chunk in chunks:
            yield func(*chunk)

    def close(self) -> None:
        """Release workers (also after Ctrl-C: nothing keeps running)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def sigint_deferred() -> Iterator[None]:
    """Hold Ctrl-C while finished results are written and counted: a KeyboardInterrupt raised
    half-way through would leave a chunk half in the file and uncounted. A Ctrl-C that arrives
    meanwhile is raised on leaving. (Off the main thread signals cannot be caught: a no-op.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


def _call(args: tuple[Callable[..., Any], tuple[Any, ...]]) -> Any:
    func, chunk = args
    return func(*chunk)


class _WindowedExecutor(Executor):
    """Submit up to ``window`` chunks ahead; yield results in order (local, Ray, Dask)."""

    chunks_per_task = 8

    def _submit(self, func: Callable[..., Any], chunk: tuple[Any, ...]) -> Any:
        raise NotImplementedError

    def _result(self, handle: Any) -> Any:
        raise NotImplementedError

    def _cancel(self, handles: Iterable[Any]) -> None:
        """Drop work still in flight (after Ctrl-C or an error)."""

    def map(self, func: Callable[..., Any], chunks: Iterable[tuple[Any, ...]]
            ) -> Iterator[Any]:
        window = max(2, IN_FLIGHT_PER_WORKER * self.jobs)
        pending: deque[Any] = deque()
        try:
            for chunk in chunks:
                pending.append(self._submit(func, chunk))
                if len(pending) >= window:
                    yield self._result(pending.popleft())
            while pending:
                yield self._result(pending.popleft())
        finally:
            if pending:
                self._cancel(pending)


class LocalExecutor(_WindowedExecutor):
    """Forked worker processes on this machine, ``IN_FLIGHT_PER_WORKER`` chunks each at most
    (``Pool.imap`` would read the whole input ahead and queue every result a slow reader has
    not taken yet). A :class:`ddlperf.forked_pool.ForkedPool`, not ``multiprocessing.Pool``,
    whose ``terminate()`` can hang for good on a Ctrl-C (the module says why)."""

    name = "local"
    chunks_per_task = 1  # a task costs almost nothing here

    def __init__(self, jobs: int | None = None) -> None:
        super().__init__(jobs or os.cpu_count() or 1)
        self._pool: ForkedPool | None = None

    def map(self, func: Callable[..., Any], chunks: Iterable[tuple[Any, ...]]
            ) -> Iterator[Any]:
        if self.jobs <= 1:
            yield from Executor.map(self, func, chunks)
            return
        self._pool = ForkedPool(self.jobs)
        yield from super().map(func, chunks)
        self.close()

    def _submit(self, func: Callable[..., Any], chunk: tuple[Any, ...]) -> Any:
        assert self._pool is not None
        return self._pool.submit(func, chunk)

    def _result(self, handle: Any) -> Any:
        assert self._pool is not None
        return self._pool.result(handle)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None


class RayExecutor(_WindowedExecutor):
    """Tasks on a Ray cluster (``address``: ``ray://host:10001`` or ``host:6379``; none: a
    local cluster started for this run)."""

    name = "ray"

    def __init__(self, address: str | None = None, jobs: int | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise InputError("--executor", "ray is not installed",
                             "pip install 'ddlperf[ray]' (or use --executor local)") from None
        self._ray = ray
        self._started = not ray.is_initialized()
        # ray.init installs its own SIGTERM handler in this process; closing puts ours back
        self._sigterm = signal.getsignal(signal.SIGTERM)
        if address and address != "auto":
            check_reachable(address, 6379, "Ray", "start one (ray start --head) or check the "
                            "address (host:port of its GCS, default port 6379)")
        if self._started:
            try:
                ray.init(address=address, num_cpus=None if address else jobs,
                         include_dashboard=False, log_to_driver=False,
                         configure_logging=False)
            except Exception as exc:  # ray raises ConnectionError, RuntimeError, ValueError…
                if not address:  # no address: ray.init starts a local cluster in-process
                    raise InputError("--executor", "could not start a local Ray cluster: "
                                     f"{_first_line(exc)}", "give --executor-address of a "
                                     "running cluster, or use --executor local") from None
                raise InputError("--executor-address", f"cannot reach the Ray cluster at "
                                 f"{address}: {_first_line(exc)}",
                                 "start one (ray start --head) or check the address") from None
        super().__init__(jobs or int(ray.cluster_resources().get("CPU", 1)))
        self._remote = ray.remote(_call)

    def _submit(self, func: Callable[..., Any], chunk: tuple[Any, ...]) -> Any:
        return self._remote.remote((func, chunk))

    def _result(self, handle: Any) -> Any:
        return self._ray.get(handle)

    def _cancel(self, handles: Iterable[Any]) -> None:
        for handle in handles:
            self._ray.cancel(handle, force=True)

    def close(self) -> None:
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()
        if (self._started and self._sigterm is not None
                and threading.current_thread() is threading.main_thread()):
            signal.signal(signal.SIGTERM, self._sigterm)  # only the main thread may set it


class DaskExecutor(_WindowedExecutor):
    """Futures on a Dask distributed cluster (``address``: ``tcp://host:8786``; none: a local
    cluster of processes started for this run)."""

    name = "dask"

    def __init__(self, address: str | None = None, jobs: int | None = None) -> None:
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise InputError("--executor", "dask.distributed is not installed",
                             "pip install 'ddlperf[dask]' (or use --executor local)") from None
        self._cluster = None
        if address:
            check_reachable(address, 8786, "Dask", "start one (dask scheduler) or check the "
                            "address (tcp://host:8786)")
        try:
            if address:
                self._client = Client(address, timeout="10s")
            else:
                self._cluster = LocalCluster(n_workers=jobs or os.cpu_count() or 1,
                                             threads_per_worker=1, processes=True,
                                             dashboard_address=None)
                self._client = Client(self._cluster)
        except (OSError, TimeoutError) as exc:
            raise InputError("--executor-address", f"cannot reach the Dask scheduler at "
                             f"{address}: {_first_line(exc)}",
                             "start one (dask scheduler) or check the address") from None
        workers = len(self._client.scheduler_info().get("workers", {})) or 1
        super().__init__(jobs or workers)

    def _submit(self, func: Callable[..., Any], chunk: tuple[Any, ...]) -> Any:
        return self._client.submit(_call, (func, chunk), pure=False)

    def _result(self, handle: Any) -> Any:
        return handle.result()

    def _cancel(self, handles: Iterable[Any]) -> None:
        self._client.cancel(list(handles))

    def close(self) -> None:
        self._client.close()
        if self._cluster is not None:
            self._cluster.close()


def check_reachable(address: str, default_port: int, engine: str, fix: str) -> None:
    """Fail at once, in one line, when nothing listens at ``address`` (the engines' own
    clients retry for a long time, Ray's without end)."""
    rest = address.split("://", 1)[-1]
    host, _, port = rest.rpartition(":")
    if not host:
        host, port = rest, str(default_port)
    try:
        with socket.create_connection((host, int(port)), timeout=5):
            pass
    except (OSError, ValueError) as exc:
        raise InputError("--executor-address", f"cannot reach the {engine} cluster at "
                         f"{address}: {_first_line(exc)}", fix) from None


def _call_many(func: Callable[..., Any], chunks: list[tuple[Any, ...]]) -> list[Any]:
    return [func(*chunk) for chunk in chunks]


def map_grouped(executor: Executor, func: Callable[..., Any],
                chunks: Iterable[tuple[Any, ...]]) -> Iterator[Any]:
    """``executor.map`` with :attr:`Executor.chunks_per_task` chunks per task; still one
    result per chunk, in order."""
    size = executor.chunks_per_task
    if size <= 1:
        yield from executor.map(func, chunks)
        return

    def groups() -> Iterator[tuple[Any, ...]]:
        group: list[tuple[Any, ...]] = []
        for chunk in chunks:
            group.append(chunk)
            if len(group) == size:
                yield (func, group)
                group = []
        if group:
            yield (func, group)

    for results in executor.map(_call_many, groups()):
        yield from results


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def make_executor(name: str = "local", address: str | None = None,
                  jobs: int | None = None) -> Executor:
    """The executor called ``name`` (one-line errors for an unknown name or a bad address)."""
    if name not in EXECUTORS:
        raise InputError("--executor", f"unknown executor {name!r}",
                         f"use one of {', '.join(EXECUTORS)}")
    if jobs is not None and jobs < 1:
        raise InputError("--jobs", f"must be ≥ 1, got {jobs}")
    if name == "local":
        if address:
            raise InputError("--executor-address", "only applies to --executor ray or dask")
        return LocalExecutor(jobs)
    if name == "ray":
        return RayExecutor(address, jobs)
    return DaskExecutor(address, jobs)
