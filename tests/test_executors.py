"""Executors: results in input order, streamed; Ray and Dask on a local cluster of the engine
give the same plan and sweep (``ddlperf sweep --executor``) as this process; an engine that
cannot be reached is one line."""

from __future__ import annotations

import importlib.util

import pytest

from ddlperf.errors import InputError
from ddlperf.executors import Executor, LocalExecutor, make_executor, map_grouped
from ddlperf.plan import SearchSpace, Target, plan
from ddlperf.plan.prices import PriceTable
from tests.plan.conftest import TABLE


def square(x: int) -> int:
    return x * x


def slow_square(x: int) -> int:
    import time

    time.sleep(0.01 * (x % 3))  # finish out of order
    return x * x


def test_serial_and_local_keep_the_input_order():
    for executor in (Executor(), LocalExecutor(jobs=2)):
        with executor:
            assert list(executor.map(slow_square, ((i,) for i in range(40)))) == [
                i * i for i in range(40)]


def test_grouped_map_gives_one_result_per_chunk():
    class Grouping(Executor):
        chunks_per_task = 3

    out = list(map_grouped(Grouping(), square, ((i,) for i in range(10))))
    assert out == [i * i for i in range(10)]


def test_a_slow_reader_holds_a_bounded_number_of_chunks():
    """Chunks are taken from the input only as results are read: a reader that stops (writing
    a file, say) does not make the executor pull the rest of the grid into memory."""
    import time

    from ddlperf.executors import IN_FLIGHT_PER_WORKER

    taken = 0

    def chunks():
        nonlocal taken
        for i in range(5000):
            taken += 1
            yield (i,)

    with LocalExecutor(jobs=2) as executor:
        results = executor.map(square, chunks())
        assert next(results) == 0
        time.sleep(0.5)  # give the pool every chance to run ahead (not a timing assertion)
        assert taken <= 1 + IN_FLIGHT_PER_WORKER * 2
        assert list(results) == [i * i for i in range(1, 5000)]


def test_local_pool_is_gone_after_close():
    executor = LocalExecutor(jobs=2)
    results = executor.map(square, ((i,) for i in range(1000)))
    next(results)
    executor.close()  # what plan does on Ctrl-C
    assert executor._pool is None


@pytest.mark.parametrize(("name", "address"), [("spark", None), ("local", "tcp://x:1")])
def test_bad_executor_choice(name, address):
    with pytest.raises(InputError):
        make_executor(name, address)


def _small_plan(executor):
    table = PriceTable.model_validate(TABLE)
    space = SearchSpace(instances=table.instances, servers=range(1, 9), ps=(1, 2))
    return plan(Target(throughput=2000), space, prices=table, fixed={"model": "resnet50"},
                executor=executor, recheck=0)


def _same_answers(a, b):
    strip = lambda r: {k: v for k, v in r.items() if k != "kwargs"}  # noqa: E731
    assert strip(a.cheapest) == strip(b.cheapest)
    assert [strip(r) for r in a.front] == [strip(r) for r in b.front]
    assert a.evaluated == b.evaluated == a.total


ENGINES = [
    pytest.param("ray", "ray", marks=pytest.mark.skipif(
        importlib.util.find_spec("ray") is None, reason="needs ray ('ddlperf[ray]')")),
    pytest.param("dask", "distributed", marks=pytest.mark.skipif(
        importlib.util.find_spec("distributed") is None,
        reason="needs dask.distributed ('ddlperf[dask]')")),
]


def _sweep_csv(path, *extra: str) -> list[dict[str, str]]:
    import csv

    from typer.testing import CliRunner

    import ddlperf.cli  # noqa: F401  (registers the commands)
    from ddlperf.cli.app import app

    result = CliRunner().invoke(app, ["sweep", "--workers", "1,2,4,8", "--ps", "1,2", "--sync",
                                      "bsp,asp", "--csv", str(path), *extra])
    assert result.exit_code == 0, result.output
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
@pytest.mark.parametrize(("name", "module"), ENGINES)
def test_engine_on_a_local_cluster_gives_the_same_plan_and_sweep(name, module, tmp_path):
    """A plan, and ``ddlperf sweep --executor NAME --jobs 2``, on a local cluster of the engine
    equal this process's. Starting a cluster (and warming its workers) is most of the time, so
    the sweep joins the one started here: Ray's running in this process, Dask's by address."""
    import signal

    reference = _small_plan(Executor())
    local_rows = _sweep_csv(tmp_path / "local.csv")
    handler = signal.getsignal(signal.SIGTERM)
    with make_executor(name, jobs=2) as executor:
        assert executor.name == name
        address = (["--executor-address", executor._cluster.scheduler_address]
                   if name == "dask" else [])
        engine_rows = _sweep_csv(tmp_path / "engine.csv", "--executor", name, "--jobs", "2",
                                 *address)
        result = _small_plan(executor)  # last: a plan closes its executor
    _same_answers(reference, result)
    assert engine_rows == local_rows
    assert signal.getsignal(signal.SIGTERM) == handler  # the engine left no handler behind


@pytest.mark.parametrize(("name", "module"), ENGINES)
def test_unreachable_engine_is_one_line(name, module):
    address = "127.0.0.1:9" if name == "ray" else "tcp://127.0.0.1:9"
    with pytest.raises(InputError) as info:
        make_executor(name, address)
    assert info.value.field == "--executor-address" and "127.0.0.1:9" in str(info.value)


def test_a_local_ray_cluster_that_cannot_start_is_one_line_without_an_address():
    pytest.importorskip("ray")
    from ddlperf.executors import RayExecutor

    with pytest.raises(InputError) as info:
        RayExecutor(jobs=-1)  # ray.init refuses a negative CPU count before starting anything
    assert info.value.field == "--executor"
    assert "could not start a local Ray cluster" in str(info.value)
    assert "None" not in str(info.value)
