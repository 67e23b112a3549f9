"""In-session calibration: what this machine's CPU does, timed right before a measurement.

- the PS processor: seconds per gradient byte of the shards' optimizer step;
- real compute: the zoo model's profile in a fresh one-thread process;
- CPU quotas: a quota'd worker's training step, timed beside an unrestricted copy as the run
  has them (in lockstep for synchronous strategies, free-running for ASP).

``python -m ddlperf.validate time-steps …`` is the step timer these start.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ddlperf.errors import InputError
from ddlperf.measure import cpu_precedence
from ddlperf.validate.plan import Plan
from ddlperf.workload import Workload, load_workload


def _single_thread() -> Any:
    import torch

    class _One:
        def __enter__(self) -> None:
            self.before = torch.get_num_threads()
            torch.set_num_threads(1)

        def __exit__(self, *exc: object) -> None:
            torch.set_num_threads(self.before)

    return _One()


def calibrate_ps_update(megabytes: float = 16.0, repetitions: int = 15) -> dict[str, Any]:
    """Seconds per gradient byte of the PS's update (SGD with momentum 0.9) on this CPU, one
    thread: the same optimizer step the profile times for a model's parameters. Timed in this
    thread's CPU seconds: the validating process has no precedence over other jobs (the PS
    process in the run has, see :mod:`ddlperf.measure.cpu_precedence`), and a wait for a CPU
    is not the update's cost."""
    import torch

    with _single_thread():
        sizes = [1_000_000] * max(1, round(megabytes / 4))
        params = [torch.nn.Parameter(torch.zeros(n)) for n in sizes]
        for p in params:
            p.grad = torch.rand_like(p) * 1e-3
        opt = torch.optim.SGD(params, lr=1e-3, momentum=0.9)
        opt.step()
        times = []
        for _ in range(repetitions):
            began = time.thread_time()
            opt.step()
            times.append(time.thread_time() - began)
    total = sum(4 * n for n in sizes)
    return {"update_s_per_byte": statistics.median(times) / total, "bytes": total,
            "repetitions": repetitions,
            "how": "torch.optim.SGD(momentum=0.9).step() on one thread, median CPU seconds"}


def _env_one_thread() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def profile_real(plan: Plan, path: Path) -> Workload:
    """Profile the zoo model on this CPU at the scenario's batch size: ``ddlperf profile`` in a
    fresh process with one thread, as every trainer rank is (a long-lived parent process is not
    a fair stand-in for them), written to ``path``."""
    argv = [sys.executable, "-m", "ddlperf", "profile", "--model", str(plan.model),
            "--batch-size", str(plan.workload.batch_size), "--threads", "1", "--warmup", "3",
            "--repetitions", str(plan.profile_repetitions), "--out", str(path)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env_one_thread(), start_new_session=True)
    cpu_precedence.claim(proc.pid)  # the ranks it stands for run with precedence too
    try:
        _, stderr = proc.communicate(timeout=600)
    finally:
        _stop([proc])
    if proc.returncode != 0:
        tail = (stderr.strip().splitlines() or ["?"])[-1]
        raise RuntimeError(f"profiling {plan.model} failed: {tail}")
    workload = load_workload(path, field="profile")
    provenance = dict(workload.provenance)
    # measure() runs the zoo model named in provenance["model"]; keep the builder text too.
    provenance.update(model=plan.model, model_source=provenance.get("model"),
                      profiled_for="ddlperf validate (same session as the measurement)")
    # the profile is one micro-batch; the scenario's accumulation applies on top of it
    workload = workload.with_updates(provenance=provenance,
                                     accumulation=plan.workload.accumulation)
    workload.save(path)
    return workload


def _timer_argv(model: str, batch: int, warm_s: float, window_s: float,
                lockstep: bool = False) -> list[str]:
    return [sys.executable, "-m", "ddlperf.validate", "time-steps", model, str(batch),
            str(warm_s), str(window_s), *(["lockstep"] if lockstep else [])]


def _start_timers(commands: list[list[str]]) -> list[subprocess.Popen[str]]:
    """Start the timers and wait until each has loaded its model (it prints ``ready``); the
    caller kills what is left (see :func:`_stop`)."""
    procs: list[subprocess.Popen[str]] = []
    for command in commands:
        procs.append(subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=_env_one_thread(),
            start_new_session=True))
        cpu_precedence.claim(procs[-1].pid)
    for proc in procs:  # each prints "ready" once torch and the model are loaded
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            proc.wait(timeout=10)
            raise RuntimeError("timing the training step failed: " + _last_error(proc))
    return procs


def _last_error(proc: subprocess.Popen[str]) -> str:
    err = (proc.stderr.read() if proc.stderr else "").strip().splitlines()
    return err[-1] if err else "no output"


def _stop(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _results(procs: list[subprocess.Popen[str]], timeout: float) -> list[dict[str, Any]]:
    results = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=timeout)
        if proc.returncode != 0:
            tail = (stderr.strip().splitlines() or ["?"])[-1]
            raise RuntimeError(f"timing the training step failed: {tail}")
        results.append(json.loads(stdout.strip().splitlines()[-1]))
    return results


def _timed_together(commands: list[list[str]], timeout: float) -> list[dict[str, Any]]:
    """Free-running: start the loaded timers at one instant; each steps until its window
    ends."""
    procs = _start_timers(commands)
    try:
        begin = time.time() + 0.2
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(f"{begin!r}\n")
            proc.stdin.flush()  # communicate() closes it
        return _results(procs, timeout)
    finally:
        _stop(procs)


def _timed_lockstep(commands: list[list[str]], warm_s: float, window_s: float,
                    timeout: float) -> list[dict[str, Any]]:
    """In lockstep: every timer starts each step at once and the next step starts when the
    slowest has finished, as the workers of a synchronous run do (the faster ones wait,
    their CPU idle, while the slowest computes on alone). Steps that begin after ``warm_s``
    count until ``window_s`` more have passed (at least two)."""
    procs = _start_timers(commands)
    try:
        began, counted = time.monotonic(), 0
        deadline = began + timeout
        while True:
            now = time.monotonic()
            if now > deadline:
                raise RuntimeError(f"timing the training step took over {timeout:.0f} s")
            if now >= began + warm_s + window_s and counted >= 2:
                break
            command = "count" if now >= began + warm_s else "warm"
            counted += command == "count"
            for proc in procs:
                assert proc.stdin is not None
                proc.stdin.write(command + "\n")
                proc.stdin.flush()
            for proc in procs:
                assert proc.stdout is not None
                if not proc.stdout.readline():
                    proc.wait(timeout=10)
                    raise RuntimeError("timing the training step failed: "
                                       + _last_error(proc))
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("stop\n")
            proc.stdin.flush()
        return _results(procs, timeout)
    finally:
        _stop(procs)


def synchronous(plan: Plan) -> bool:
    """Do the run's workers wait for the slowest every iteration (BSP, SSP in steady state,
    all-reduce)? Then a quota'd worker computes much of its step alone."""
    return plan.strategy.arch == "allreduce" or plan.strategy.sync != "asp"


def quota_speeds(plan: Plan, warm_s: float = 1.5, window_s: float = 8.0
                 ) -> dict[str, dict[str, Any]]:
    """Per quota'd worker: its training step inside a cgroup with the quota, timed beside an
    unrestricted copy of the same step as the run has them — in lockstep when the run is
    synchronous (the copy finishes first and waits: the quota'd step then runs alone on the
    cores, which is slower than beside a busy copy, as a throttled process leaves its vCPU
    idle), free-running for ASP (the others never wait). Both are timed at the same moment of
    this machine's speed, which drifts by ~10% from process to process; ``speed`` = free
    median step / quota'd median step. Workers with the same quota share one timing."""
    from ddlperf.measure import cgroups

    if not cgroups.available():
        raise InputError("cpu_quota", "cgroup v1 cpu controller not found at "
                         f"{cgroups.CPU_ROOT}", "run on a machine with cgroup v1 cpu")
    lockstep = synchronous(plan)
    argv = _timer_argv(str(plan.model), plan.workload.batch_size, warm_s, window_s, lockstep)
    out: dict[str, dict[str, Any]] = {}
    for host, share in sorted(plan.cpu_quota.items()):
        same = next((t for t in out.values() if t["quota"] == share), None)
        if same is not None:  # the same model under the same quota: one timing serves both
            out[host] = dict(same)
            continue
        path = cgroups.CPU_ROOT / f"ddlperf-validate-{os.getpid()}-{host.replace('/', '-')}"
        cgroups.create(path, share)
        try:
            commands = [cgroups.wrap(path, argv), argv]
            timeout = 180 + warm_s + window_s
            quota, free = (_timed_lockstep(commands, warm_s, window_s, timeout) if lockstep
                           else _timed_together(commands, timeout))
        finally:
            cgroups.remove(path)
        out[host] = {"quota": share, "step_free_s": float(free["median"]),
                     "step_quota_s": float(quota["median"]),
                     "speed": float(free["median"]) / float(quota["median"]),
                     "steps_quota": len(quota["durations"]),
                     "steps_free": len(free["durations"]), "window_s": window_s,
                     "timing": "lockstep" if lockstep else "free-running"}
    return out


def time_steps_main(argv: list[str]) -> None:
    """``python -m ddlperf.validate time-steps MODEL BATCH WARM_S WINDOW_S [lockstep]``:
    builds the zoo model, prints ``ready``, then times forward + loss + backward on one
    thread and prints the median of the counted steps (JSON).

    Free-running: reads a wall-clock start from stdin and steps until start + WARM_S +
    WINDOW_S, counting the steps that began after start + WARM_S. ``lockstep``: one step per
    line read (``warm`` or ``count``; it prints the step's seconds), until ``stop``."""
    import torch

    from ddlperf.workload import torch_models

    model_name, batch, warm_s, window_s = argv[0], int(argv[1]), float(argv[2]), float(argv[3])
    torch.set_num_threads(1)
    torch.manual_seed(0)
    spec = torch_models.spec(model_name)
    model = spec.build()
    inputs, target = torch_models.make_batch(spec, batch)
    loss_fn = torch_models.loss_function(spec)
    loss_fn(model(*inputs), target).backward()  # first-step allocations before "ready"

    def step() -> float:
        model.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        loss_fn(model(*inputs), target).backward()
        return time.perf_counter() - t0

    print("ready", flush=True)
    times: list[float] = []
    if argv[4:] == ["lockstep"]:
        for line in sys.stdin:
            command = line.strip()
            if command == "stop":
                break
            seconds = step()
            if command == "count":
                times.append(seconds)
            print(f"{seconds!r}", flush=True)
    else:
        begin = float(sys.stdin.readline())
        while time.time() < begin:
            time.sleep(0.001)
        end = begin + warm_s + window_s
        while True:
            started = time.time()
            if started >= end and len(times) >= 2:
                break
            seconds = step()
            if started >= begin + warm_s:
                times.append(seconds)
    print(json.dumps({"median": statistics.median(times), "durations": times}))
