"""The local executor's pool: results by ticket, a worker's exception or death reaches the
caller, and closing never hangs, whatever the workers are doing."""

from __future__ import annotations

import os
import threading

import pytest

from ddlperf.executors import LocalExecutor
from ddlperf.forked_pool import ForkedPool

RESULT_BYTES = 400_000  # far more than a pipe holds (64 kB): a writer blocks until read


def square(x: int) -> int:
    return x * x


def fail(x: int) -> int:
    raise ValueError(f"bad chunk {x}")


def die(code: int) -> int:
    os._exit(code)


def big(i: int) -> bytes:
    return bytes([i % 256]) * RESULT_BYTES


def test_results_by_ticket_in_any_order():
    pool = ForkedPool(2)
    try:
        tickets = [pool.submit(square, (i,)) for i in range(20)]
        assert [pool.result(t) for t in reversed(tickets)] == [i * i for i in reversed(range(20))]
    finally:
        pool.close()


def test_a_workers_exception_is_raised_and_the_pool_goes_on():
    pool = ForkedPool(2)
    try:
        with pytest.raises(ValueError, match="bad chunk 3"):
            pool.result(pool.submit(fail, (3,)))
        assert pool.result(pool.submit(square, (4,))) == 16
    finally:
        pool.close()


def test_a_worker_that_dies_is_an_error_not_a_hang():
    pool = ForkedPool(2)
    try:
        with pytest.raises(RuntimeError, match="exit code 7"):
            pool.result(pool.submit(die, (7,)))
    finally:
        pool.close()


def _closes(close) -> bool:
    """Whether ``close()`` returns; a generous limit only to tell a hang from slowness."""
    thread = threading.Thread(target=close, daemon=True)
    thread.start()
    thread.join(timeout=120)
    return not thread.is_alive()


def test_closing_while_workers_write_results_nobody_reads():
    """Workers blocked writing large results that are never read: close still returns and
    leaves no process behind."""
    pool = ForkedPool(2)
    for i in range(6):
        pool.submit(big, (i,))
    procs = list(pool._procs)
    assert pool.result(0) == bytes([0]) * RESULT_BYTES  # the workers are running
    assert _closes(pool.close)
    assert not any(p.is_alive() for p in procs)


def test_ctrl_c_mid_stream_never_hangs_the_close():
    """What a Ctrl-C does to ``plan --jobs 2``: stop reading large results, close at once.
    ``multiprocessing.Pool.terminate()`` hung here about one time in ten (its sentinel write
    waits for the result pipe's lock, held by a worker blocked writing a result that its
    stopped result thread will never read); repeated so that the race would show."""
    for attempt in range(30):
        executor = LocalExecutor(jobs=2)
        results = executor.map(big, ((i,) for i in range(100)))
        for _ in range(1 + attempt % 4):
            next(results)
        assert _closes(executor.close), f"close hung on attempt {attempt}"
        assert executor._pool is None


def pid_and_big(i: int) -> tuple[int, bytes]:
    return os.getpid(), big(i)


def test_all_tasks_handed_out_at_once_and_drained_while_the_parent_works():
    # the simulator's replications: the parent runs its own share and cannot hand out more
    # work meanwhile, so a worker gets all of its tasks at once; results larger than the pipe
    # would hold it after its first, so the parent drains between its own pieces of work
    pool = ForkedPool(1, per_worker=6)
    try:
        tickets = [pool.submit(pid_and_big, (i,)) for i in range(6)]
        for _ in range(12):
            pool.drain()  # never waits, whatever has arrived
            threading.Event().wait(0.02)
        results = [pool.result(t) for t in tickets]
        assert [r[1] for r in results] == [big(i) for i in range(6)]
        assert len({r[0] for r in results}) == 1 and results[0][0] != os.getpid()
    finally:
        pool.close()


def test_drain_with_nothing_running_is_a_no_op():
    pool = ForkedPool(1)
    try:
        pool.drain()
        assert pool.result(pool.submit(square, (3,))) == 9
        pool.drain()
    finally:
        pool.close()
