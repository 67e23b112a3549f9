"""Forked worker processes, each with a pipe of its own: the ``local`` executor's engine.

Why not ``multiprocessing.Pool``: all its workers write results into one shared pipe under one
shared lock, and ``Pool.terminate()`` (what a Ctrl-C needs) writes a sentinel into that pipe
under the same lock after its result thread has stopped reading. A worker that finished a
large chunk at that moment blocks writing its result, holding the lock, and the command hangs
for good (seen with ``ddlperf plan --jobs 2``; tests/test_forked_pool.py reproduces it). Here
nothing is shared between processes: each worker reads tasks from and writes results to its
own pipe, and stopping is a SIGKILL to each worker — nothing to wait for, whatever a worker
was doing. Each worker holds ``PER_WORKER`` tasks, so it starts the next one while the parent
is still busy with a result (writing rows); a thread in the worker reads its tasks as they
come, so the parent never blocks sending one while the worker blocks sending a result. A
parent busy with work of its own between tasks calls :meth:`ForkedPool.drain` now and then:
a result larger than the pipe holds its worker until the parent reads it (the simulator's
replications: the parent runs its share and drains after each).
"""

from __future__ import annotations

import queue
import signal
import threading
from collections import deque
from collections.abc import Callable
from multiprocessing import get_context
from multiprocessing.connection import Connection, wait
from typing import Any

PER_WORKER = 2  # tasks handed to a worker at once: one running, one waiting


def _serve(conn: Connection, inherited: list[Connection]) -> None:
    """A worker: run tasks from ``conn`` until told to stop (``None``) or the parent is gone.
    Ctrl-C goes to the whole process group; the parent stops the workers itself."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for other in inherited:  # the parent's ends: so that its death reads as EOF here
        other.close()
    tasks: queue.SimpleQueue[Any] = queue.SimpleQueue()
    threading.Thread(target=_read_tasks, args=(conn, tasks), daemon=True).start()
    while (task := tasks.get()) is not None:
        func, args = task
        try:
            reply: tuple[str, Any] = ("ok", func(*args))
        except Exception as exc:
            reply = ("error", exc)
        try:
            conn.send(reply)
        except Exception as exc:  # a result or an exception that cannot be pickled
            conn.send(("error", RuntimeError(f"a worker's reply could not be sent: {exc!r}")))


def _read_tasks(conn: Connection, tasks: queue.SimpleQueue[Any]) -> None:
    """In a worker: take tasks off the pipe as soon as they come (``None``: stop)."""
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            task = None
        tasks.put(task)
        if task is None:
            return


class ForkedPool:
    """``size`` forked workers; :meth:`submit` queues ``func(*args)`` and returns a ticket,
    :meth:`result` waits for a ticket's value (re-raising the worker's exception)."""

    def __init__(self, size: int, per_worker: int = PER_WORKER) -> None:
        from ddlperf.executors import sigint_deferred

        self._per_worker = per_worker  # tasks handed to a worker at once

        context = get_context("fork")
        self._conns: list[Connection] = []
        self._procs: list[Any] = []
        self._running: list[deque[int]] = [deque() for _ in range(size)]  # tickets, in order
        self._queued: deque[tuple[int, Callable[..., Any], tuple[Any, ...]]] = deque()
        self._done: dict[int, tuple[str, Any]] = {}
        self._next_ticket = 0
        # A Ctrl-C while forking would raise in a worker before it ignores SIGINT (a traceback
        # on the terminal): hold it, here and in the child, until the workers are up.
        with sigint_deferred():
            try:
                for _ in range(size):
                    parent_end, child_end = context.Pipe()
                    proc = context.Process(target=_serve, daemon=True,
                                           args=(child_end, [*self._conns, parent_end]))
                    self._conns.append(parent_end)
                    self._procs.append(proc)
                    proc.start()
                    child_end.close()
            except BaseException:
                self.close()
                raise

    def submit(self, func: Callable[..., Any], args: tuple[Any, ...]) -> int:
        ticket = self._next_ticket
        self._next_ticket += 1
        self._queued.append((ticket, func, args))
        self._dispatch()
        return ticket

    def result(self, ticket: int) -> Any:
        while ticket not in self._done:
            self._collect()
        status, value = self._done.pop(ticket)
        if status == "error":
            raise value
        return value

    def _dispatch(self) -> None:
        while self._queued:
            worker = min(range(len(self._running)), key=lambda w: len(self._running[w]))
            if len(self._running[worker]) >= self._per_worker:
                return
            ticket, func, args = self._queued.popleft()
            self._running[worker].append(ticket)
            self._conns[worker].send((func, args))

    def drain(self) -> None:
        """Take the replies that have arrived, without waiting (frees workers blocked on
        sending a large one)."""
        if any(self._running):
            self._collect(timeout=0.0)

    def _collect(self, timeout: float | None = None) -> None:
        """Wait until at least one running task has finished (at most ``timeout`` seconds);
        take the finished replies."""
        busy = {self._conns[w]: w for w, tickets in enumerate(self._running) if tickets}
        if not busy:
            raise RuntimeError("ForkedPool: waiting for a task that was never submitted")
        for conn in wait(list(busy), timeout):
            worker = busy[conn]  # type: ignore[index]
            try:
                reply = conn.recv()  # type: ignore[union-attr]
            except EOFError:
                proc = self._procs[worker]
                proc.join(1)
                raise RuntimeError(f"a worker process died (exit code {proc.exitcode}) "
                                   "while running a task") from None
            self._done[self._running[worker].popleft()] = reply  # a worker keeps the order
        self._dispatch()

    def close(self) -> None:
        """Stop every worker at once (SIGKILL: no lock or pipe can hold this up) and reap
        them; tasks not yet read are dropped. Safe to call twice."""
        for proc in self._procs:
            if proc.is_alive():
                proc.kill()
        for proc in self._procs:
            if proc.pid is not None:  # started
                proc.join()
        for conn in self._conns:
            conn.close()
        self._procs, self._conns = [], []
        self._running.clear()
        self._queued.clear()
        self._done.clear()
