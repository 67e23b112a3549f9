import csv
import itertools
import json

import pytest
from typer.testing import CliRunner

import ddlperf.cli  # noqa: F401
from ddlperf.api import predict
from ddlperf.cli.app import app
from ddlperf.errors import InputError
from ddlperf.sweep import grid, sweep

runner = CliRunner()


def test_grid_normalises_allreduce_and_staleness():
    points = grid({"arch": ["ps", "allreduce"], "ps": [1, 2], "sync": ["bsp", "asp"]})
    # allreduce: no PS and synchronous, so its four combinations collapse into one
    assert points.count({"arch": "allreduce", "ps": 0, "sync": "bsp"}) == 1
    assert len(points) == 4 + 1
    assert {"sync": "bsp", "staleness": None} in grid({"sync": ["bsp", "ssp"], "staleness": [2]})


def _grid_by_memory(axes, fixed=()):
    """The first-seen rule spelled out: normalise every point, keep each once."""
    import itertools

    from ddlperf.sweep import _normalise

    seen, out = [], []
    for values in itertools.product(*axes.values()):
        point = dict(zip(axes, values))
        _normalise(point, fixed)
        if point not in seen:
            seen.append(point)
            out.append(point)
    return out


@pytest.mark.parametrize("fixed", [(), ("ps",)])
def test_grid_keeps_the_first_of_each_normalised_point_in_grid_order(fixed):
    axes = {"staleness": [4, 2], "arch": ["allreduce", "ps"], "sync": ["ssp", "bsp", "asp"],
            "ps": [3, 1], "gpus_per_node": [1, 4], "intra": ["PCIe3", "NVLink2"],
            "allreduce": ["hierarchical", "ring"], "local_aggregation": [True, False],
            "step_barrier": [True, False], "workers": [2, 8]}
    assert grid(axes, fixed) == _grid_by_memory(axes, fixed)


def test_grid_of_normalised_points_remembers_nothing():
    """A grid where most points are normalised (all-reduce × PS counts, staleness of BSP)
    streams in the same memory whatever its size: no set of the points seen."""
    import tracemalloc

    from ddlperf.sweep import iter_grid

    def peak(rates: int) -> int:
        axes = {"arch": ["ps", "allreduce"], "ps": list(range(1, 9)),
                "sync": ["bsp", "ssp"], "staleness": [1, 2], "workers": list(range(1, 51)),
                "bandwidth": [1e9 * (k + 1) for k in range(rates)]}
        tracemalloc.start()
        count = sum(1 for _ in iter_grid(axes))
        top = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert count == rates * 50 * (8 * 3 + 1)
        return top

    small, big = peak(1), peak(20)  # 1,250 and 25,000 points
    assert big < small + 32_000  # (remembering the points seen took megabytes)


def test_rows_equal_single_predictions():
    rows = sweep({"workers": [2, 8], "bandwidth": ["1Gbps", "10Gbps"]}, model="resnet18")
    assert len(rows) == 4
    for row in rows:
        p = predict("resnet18", workers=row["workers"], bandwidth=row["bandwidth"])
        assert row["iteration_time_s"] == p.iteration_time_s
        assert row["bottleneck"] == p.bottleneck and row["error"] is None


def test_impossible_point_is_reported_not_raised():
    rows = sweep({"workers": [1, 4]}, ps=2, placement="colocated")
    assert rows[0]["error"] and "colocated" in rows[0]["error"]
    assert rows[0]["iteration_time_s"] is None
    assert rows[1]["error"] is None


def test_parallel_equals_serial(monkeypatch):
    monkeypatch.setattr("ddlperf.sweep.MIN_POINTS_PER_JOB", 2)
    axes = {"workers": [1, 2, 4, 8], "ps": [1, 2]}
    assert sweep(axes, jobs=2) == sweep(axes, jobs=1)


def test_unknown_axis():
    with pytest.raises(InputError, match="not a scenario parameter"):
        sweep({"nodes": [1]})



def test_simulate_options_reach_every_simulated_point():
    """Before: sweep(method='simulate', jitter=…, seed=…) gave the noise-free figure."""
    options = dict(iterations=10, jitter=0.2, seed=3)
    rows = sweep({"workers": [2, 3]}, method="simulate", model="resnet18", ps=1, **options)
    for row in rows:
        p = predict("resnet18", workers=row["workers"], ps=1, method="simulate", **options)
        assert row["iteration_time_s"] == p.iteration_time_s
    plain = sweep({"workers": [2]}, method="simulate", model="resnet18", ps=1, iterations=10)
    assert plain[0]["iteration_time_s"] != rows[0]["iteration_time_s"]


def test_misspelt_or_per_run_keywords_are_refused():
    """Before: a misspelt keyword (bandwith=) silently ran the default 10 Gbit/s."""
    with pytest.raises(TypeError, match="did you mean 'bandwidth'"):
        sweep({"workers": [2]}, model="resnet18", bandwith="1Gbps")
    with pytest.raises(InputError, match="'trace'"):
        sweep({"workers": [2]}, method="simulate", trace="t.json")
    with pytest.raises(InputError, match="--iterations"):
        sweep({"workers": [2]}, method="simulate", iterations=0)
    with pytest.warns(UserWarning, match="only apply to method='simulate'"):
        rows = sweep({"workers": [2]}, model="resnet18", seed=4)
    assert rows[0]["iteration_time_s"] == predict("resnet18", workers=2).iteration_time_s

def test_cli_csv_plot_json(tmp_path):
    out_csv, out_png = tmp_path / "s.csv", tmp_path / "s.png"
    result = runner.invoke(app, ["sweep", "--workers", "1,4", "--ps", "1,2", "--csv",
                                 str(out_csv), "--plot", str(out_png)])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == 4 and float(rows[0]["throughput_samples_per_s"]) > 0
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    data = json.loads(runner.invoke(app, ["sweep", "--workers", "2", "--json"]).stdout)
    assert data[0]["workers"] == 2


@pytest.mark.parametrize(
    ("args", "needle"),
    [(["--workers", "two"], "--workers"),
     (["--workers", "2", "--sync", "bsp,lazy"], "--sync: 'lazy' is not one of"),
     (["--csv", "/nonexistent/dir/x.csv"], "--csv"), (["--x", "ps", "--plot", "p.png"], "--x")],
)
def test_cli_bad_input(args, needle):
    result = runner.invoke(app, ["sweep", *args])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and needle in result.stderr


def test_server_axes_equal_single_predictions():
    rows = sweep({"arch": ["ps", "allreduce"], "gpus_per_node": [1, 4], "intra": ["PCIe3"],
                  "allreduce": ["ring", "hierarchical"], "local_aggregation": [False, True]},
                 model="resnet18", workers=8, ps=1)
    # ps: the algorithm collapses to ring; allreduce: aggregation to off; one GPU: no fabric
    assert len(rows) == 2 * 2 + 2 * 2
    for row in rows:
        kw = {k: v for k, v in row.items() if k in ("arch", "gpus_per_node", "intra",
                                                   "allreduce", "local_aggregation")}
        p = predict("resnet18", workers=8, ps=0 if row["arch"] == "allreduce" else 1, **kw)
        assert row["error"] is None, row["error"]
        assert row["iteration_time_s"] == p.iteration_time_s
        assert row["bottleneck"] == p.bottleneck


@pytest.mark.parametrize("batched", [True, False])
def test_step_barrier_axis_equals_single_predictions(batched, monkeypatch):
    monkeypatch.setattr("ddlperf.sweep.BATCH", batched)
    rows = sweep({"arch": ["ps", "allreduce"], "sync": ["bsp", "asp"],
                  "step_barrier": [True, False], "workers": [4, 8]},
                 model="resnet18", ps=2)
    # the barrier is a BSP PS's: all-reduce and ASP points keep it off (and collapse)
    assert list(dict.fromkeys((r["arch"], r["sync"], r["step_barrier"]) for r in rows)) == [
        ("ps", "bsp", True), ("ps", "bsp", False), ("ps", "asp", False),
        ("allreduce", "bsp", False)]
    assert len(rows) == 8
    for row in rows:
        p = predict("resnet18", workers=row["workers"], arch=row["arch"], sync=row["sync"],
                    ps=0 if row["arch"] == "allreduce" else 2,
                    step_barrier=row["step_barrier"])
        assert row["error"] is None, row["error"]
        assert row["iteration_time_s"] == pytest.approx(p.iteration_time_s, rel=1e-12)
        assert row["bottleneck"] == p.bottleneck
    barrier = {r["workers"]: r["iteration_time_s"] for r in rows if r["step_barrier"]}
    free = {r["workers"]: r["iteration_time_s"] for r in rows
            if r["arch"] == "ps" and r["sync"] == "bsp" and not r["step_barrier"]}
    assert all(barrier[w] > free[w] for w in barrier)  # the pulls no longer overlap backward


def test_batch_size_sweeps_a_workload_file(tmp_path):
    path = tmp_path / "w.json"
    path.write_text(json.dumps({
        "format": "ddlperf.workload/1", "name": "toy", "batch_size": 32, "device": "V100",
        "layers": [{"name": "fc", "forward_s": 0.01, "backward_s": 0.02,
                    "tensors": [{"name": "fc.weight", "bytes": 400_000}]}]}))
    rows = sweep({"batch_size": [16, 32, 64]}, workload=str(path), workers=2)
    times = [r["iteration_time_s"] for r in rows]
    assert times[0] < times[1] < times[2]
    single = predict(workload=str(path), batch_size=64, workers=2)
    assert rows[2]["iteration_time_s"] == single.iteration_time_s
    result = runner.invoke(app, ["sweep", "--workload", str(path), "--batch-size", "16,32,64",
                                 "--json"])
    assert result.exit_code == 0, result.output
    assert len({r["throughput_samples_per_s"] for r in json.loads(result.stdout)}) == 3


@pytest.mark.slow
def test_streamed_sweeps_hold_a_chunk_not_the_grid(tmp_path):
    """Memory of a streamed sweep does not grow with the grid (rows go to the file)."""
    import tracemalloc

    from ddlperf.report.rowfile import RowWriter
    from ddlperf.sweep import iter_sweep

    sweep({"workers": [1, 2]}, model="resnet50")  # warm caches outside the measurement

    def peak(workers: int) -> tuple[int, float]:
        axes = {"workers": list(range(1, workers + 1)), "ps": [1, 2], "sync": ["bsp", "asp"],
                "bandwidth": [1e9, 1e10]}
        tracemalloc.start()
        writer = RowWriter(tmp_path / f"rows{workers}.csv", "--csv")
        count = 0
        for rows in iter_sweep(axes, model="resnet50", chunk_points=100):
            writer.write(rows)
            count += len(rows)
        writer.close()
        top = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return count, top

    # Eight times the rows, about the same memory (+3-5% measured); holding the chunks
    # instead doubles it. The time of a point grows with its workers: keep the grid small.
    small, big = peak(50), peak(400)
    assert (small[0], big[0]) == (400, 3200)
    assert big[1] < 1.5 * small[1]
    with open(tmp_path / "rows400.csv") as f:
        assert sum(1 for _ in f) == 3201


def test_templates_built_from_other_templates_equal_resolved_ones(monkeypatch):
    """A batchable template that differs from known ones only in its rates (batch key) and
    only in its strategy (point values) is not resolved again; both equal a fresh resolve."""
    from ddlperf import sweep as sweep_module
    from ddlperf.api import make_cluster
    from ddlperf.predictors.analytic_batch import batch_key, point_values
    from ddlperf.scenario import resolve

    resolves = []

    def counted(*args):
        resolves.append(args)
        return resolve(*args)

    monkeypatch.setattr(sweep_module, "resolve", counted)
    axes = {"arch": ["ps", "allreduce"], "ps": [1, 3], "bandwidth": ["1Gbps", 25e9],
            "latency": ["5us", 0.0], "goodput": [None, 0.9], "sync": ["bsp", "asp"],
            "sharding": ["round_robin", "greedy"], "workers": [1, 4]}
    state = sweep_module._State()
    for point in grid(axes):
        spec = {"model": "resnet18", **point}
        key, _template, workers, values = sweep_module._plan(spec, state)
        workload, strategy = sweep_module._workload_and_strategy(spec, state)
        cluster = make_cluster(None, workers, spec["ps"], spec["bandwidth"], spec["latency"],
                               spec["goodput"], None, strategy.arch)
        scenario = resolve(workload, cluster, strategy)
        assert key == batch_key(scenario)
        assert values == point_values(scenario)
    assert len(resolves) < len(state.templates) / 2


def _counting_resolves(monkeypatch) -> list[object]:
    from ddlperf import sweep as sweep_module
    from ddlperf.scenario import resolve

    calls: list[object] = []

    def counted(*args):
        calls.append(args)
        return resolve(*args)

    monkeypatch.setattr(sweep_module, "resolve", counted)
    return calls


def test_chunks_of_a_sweep_share_its_templates_and_another_sweep_starts_afresh(monkeypatch):
    """Worker counts vary slowest: each 24-point chunk holds one worker count, and yet every
    template is resolved once per sweep, not once per chunk."""
    from ddlperf.sweep import iter_sweep

    axes = {"workers": [1, 2, 4, 8], "ps": [1, 2], "bandwidth": [1e9, 1e10, 4e10],
            "sync": ["bsp", "asp"], "overlap": [True, False]}
    resolves = _counting_resolves(monkeypatch)
    chunked = [row for rows in iter_sweep(axes, model="resnet50", chunk_points=24)
               for row in rows]
    once = len(resolves)
    assert 0 < once <= 24
    whole = [row for rows in iter_sweep(axes, model="resnet50", chunk_points=96)
             for row in rows]
    assert len(resolves) == 2 * once  # a new sweep resolves its templates again
    assert chunked == whole and len(whole) == 96


def test_caches_stay_within_their_bound_and_give_the_same_rows(monkeypatch):
    """A grid with ten times more templates than the caches hold: they are started again
    when full, never exceed the bound, and the rows equal those of unbounded caches."""
    from ddlperf import sweep as sweep_module
    from ddlperf.sweep import iter_sweep

    axes = {"workers": [1, 3, 8], "ps": [1, 2, 4], "bandwidth": [1e9 * k for k in range(1, 21)],
            "sync": ["bsp", "asp"], "sharding": ["round_robin", "greedy"]}
    fresh = sweep(axes, model="resnet50")
    sizes, states = [], []
    plan = sweep_module._plan

    def watched(spec, state):
        planned = plan(spec, state)
        sizes.append(state.size())
        states.append(state)
        return planned

    monkeypatch.setattr(sweep_module, "_plan", watched)
    monkeypatch.setattr(sweep_module, "MAX_CACHED", 40)
    bounded = [row for rows in iter_sweep(axes, model="resnet50", chunk_points=100)
               for row in rows]
    assert bounded == fresh and len(fresh) == 3 * 3 * 20 * 2 * 2
    assert len(set(map(id, states))) == 1  # one sweep, one set of caches in this process
    assert max(sizes) <= 40
    assert sum(b < a for a, b in itertools.pairwise(sizes)) >= 10  # started again many times


def test_default_jobs_depend_on_the_path(monkeypatch):
    """Left to choose, a sweep starts processes from far more points on the batched analytic
    path than for points predicted one by one; an explicit ``jobs`` keeps the low floor."""
    from ddlperf.sweep import MIN_BATCHED_POINTS_PER_JOB, MIN_POINTS_PER_JOB, min_points_per_job

    axes = {"workers": [1, 2]}
    assert min_points_per_job(axes, "analytic") == MIN_BATCHED_POINTS_PER_JOB
    assert min_points_per_job(axes, "simulate") == MIN_POINTS_PER_JOB
    assert min_points_per_job({**axes, "gpus_per_node": [1, 4]}, "analytic") == \
        MIN_POINTS_PER_JOB
    assert min_points_per_job(axes, "analytic", placement="colocated") == MIN_POINTS_PER_JOB
    assert min_points_per_job(axes, "analytic", placement="dedicated") == \
        MIN_BATCHED_POINTS_PER_JOB
    assert min_points_per_job(axes, "analytic", cluster="c.yaml") == MIN_POINTS_PER_JOB
    monkeypatch.setattr("ddlperf.sweep.BATCH", False)
    assert min_points_per_job(axes, "analytic") == MIN_POINTS_PER_JOB


def _toy_workload(tmp_path, cv=0.0):
    path = tmp_path / f"toy{cv}.json"
    path.write_text(json.dumps({
        "format": "ddlperf.workload/1", "name": "toy", "batch_size": 32, "device": "V100",
        "layers": [{"name": f"l{k}", "forward_s": 0.004, "backward_s": 0.008,
                    "forward_cv": cv, "backward_cv": cv,
                    "tensors": [{"name": f"l{k}.weight", "bytes": 2_000_000}]}
                   for k in range(6)]}))
    return str(path)


@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("cv", [0.0, 0.1])
def test_lockstep_figures_equal_single_predictions(batched, cv, tmp_path, monkeypatch):
    """Every sweep row carries the lockstep figure a single prediction has (ASP and SSP that
    runs as ASP of identical workers; None elsewhere), on both paths and with compute noise
    (where lockstep itself cannot be batched)."""
    monkeypatch.setattr("ddlperf.sweep.BATCH", batched)
    workload = _toy_workload(tmp_path, cv)
    axes = {"sync": ["bsp", "asp", "ssp"], "workers": [1, 2, 6], "bandwidth": ["1Gbps", "10Gbps"],
            "staleness": [0, 3]}
    rows = sweep(axes, workload=workload, ps=2)
    figures = 0
    for row in rows:
        assert row["error"] is None, row["error"]
        p = predict(workload=workload, ps=2, sync=row["sync"], workers=row["workers"],
                    bandwidth=row["bandwidth"], staleness=row.get("staleness"))
        assert row["iteration_time_s"] == pytest.approx(p.iteration_time_s, rel=1e-12)
        expected = (p.arrangement or {}).get("lockstep_iteration_time_s")
        if expected is None:
            assert row["lockstep_iteration_time_s"] is None, row
        else:
            figures += 1
            assert row["lockstep_iteration_time_s"] == pytest.approx(expected, rel=1e-12)
    # ASP at 2 and 6 workers on both rates at least; BSP and one worker never
    assert figures >= 4
    assert all(r["lockstep_iteration_time_s"] is None for r in rows
               if r["sync"] == "bsp" or r["workers"] == 1)


def test_lockstep_column_in_csv_json_and_reports(tmp_path):
    out_csv, page = tmp_path / "s.csv", tmp_path / "s.html"
    result = runner.invoke(app, ["sweep", "--model", "resnet18", "--workers", "4,8",
                                 "--sync", "asp,bsp", "--csv", str(out_csv), "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    asp = [r for r in rows if r["sync"] == "asp"]
    assert all(r["lockstep_iteration_time_s"] > r["iteration_time_s"] for r in asp)
    assert all(r["lockstep_iteration_time_s"] is None for r in rows if r["sync"] == "bsp")
    with out_csv.open() as handle:
        header = next(csv.reader(handle))
    assert header[-2:] == ["lockstep_iteration_time_s", "error"]
    # the report reads it back as a result, not as a swept axis
    result = runner.invoke(app, ["report", "--sweep", str(out_csv), "--out", str(page)])
    assert result.exit_code == 0, result.output
    assert "4 rows over model × workers × sync<" in page.read_text()


def test_sweep_rows_of_older_versions_without_the_lockstep_column_still_report(tmp_path):
    out_csv, page = tmp_path / "old.csv", tmp_path / "old.html"
    out_csv.write_text("workers,iteration_time_s,throughput_samples_per_s,speedup,"
                       "scaling_efficiency,bottleneck,error\n"
                       "2,0.1,640,1.9,0.95,compute,\n4,0.1,1280,3.8,0.95,compute,\n")
    result = runner.invoke(app, ["report", "--sweep", str(out_csv), "--out", str(page)])
    assert result.exit_code == 0, result.output
    assert "lockstep" not in page.read_text()


def test_a_failed_sweep_leaves_existing_files_as_they_were(tmp_path):
    """Before: every row failing deleted a --csv file that was there before; a failing --plot
    path came after the CSV had been renamed into place; a bad --parquet name left the CSV's
    temporary file behind."""
    out = tmp_path / "s.csv"
    out.write_text("keep\n")
    result = runner.invoke(app, ["sweep", "--workers", "1,2", "--ps", "3",
                                 "--placement", "colocated", "--csv", str(out)])
    assert result.exit_code == 2 and out.read_text() == "keep\n"
    for args in (["--plot", str(tmp_path / "s.csv" / "p.png")],
                 ["--parquet", str(tmp_path / "x.pq2")],
                 ["--html", "/proc/h.html"]):
        result = runner.invoke(app, ["sweep", "--workers", "1,2", "--csv", str(out), *args])
        assert result.exit_code == 2, args
        assert out.read_text() == "keep\n", args
        assert sorted(p.name for p in tmp_path.iterdir()) == ["s.csv"], args
