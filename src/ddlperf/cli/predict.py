"""``ddlperf predict``: one scenario, a table or JSON."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from ddlperf.cli.app import app
from ddlperf.cli.common import console, handle_input_errors, print_json


class Arch(str, Enum):
    ps = "ps"
    allreduce = "allreduce"


class Sync(str, Enum):
    bsp = "bsp"
    asp = "asp"
    ssp = "ssp"


class ShardingPolicy(str, Enum):
    round_robin = "round_robin"
    greedy = "greedy"
    even = "even"


class AllreduceAlgorithm(str, Enum):
    ring = "ring"
    hierarchical = "hierarchical"


class Method(str, Enum):
    analytic = "analytic"
    simulate = "simulate"


class Placement(str, Enum):
    dedicated = "dedicated"
    colocated = "colocated"


@app.command()
@handle_input_errors
def predict(
    model: Annotated[str | None, typer.Option(help="zoo model (see 'ddlperf models'); default resnet50")] = None,
    workload: Annotated[Path | None, typer.Option(help="workload JSON (from 'ddlperf profile' or by hand)")] = None,
    batch_size: Annotated[int | None, typer.Option(help="samples per worker per iteration; default 32 (zoo)")] = None,
    device: Annotated[str | None, typer.Option(help="device of every worker: catalog name (see 'ddlperf devices') or name=X,peak=50TFLOPS,bw=900GB/s; default V100")] = None,
    dtype: Annotated[str | None, typer.Option(help="compute dtype: fp32, tf32, fp16 or bf16 (mixed precision); default fp32")] = None,
    math: Annotated[str | None, typer.Option(help="fp32 math: default (PyTorch: TF32 convolutions on Ampere+, FP32 matmuls), tf32 or ieee")] = None,
    grad_dtype: Annotated[str | None, typer.Option(help="dtype gradients are exchanged in; default --dtype")] = None,
    accumulation: Annotated[int | None, typer.Option(help="micro-batches per synchronisation (gradient accumulation); default 1")] = None,
    workers: Annotated[int | None, typer.Option(help="number of workers; default 8")] = None,
    ps: Annotated[int | None, typer.Option(help="parameter-server shards; default 2 (ps), 0 (allreduce)")] = None,
    placement: Annotated[Placement | None, typer.Option(help="PS on own hosts or one on each worker host")] = None,
    arch: Annotated[Arch, typer.Option(help="parameter server or ring all-reduce")] = Arch.ps,
    sync: Annotated[Sync, typer.Option(help="bulk synchronous, asynchronous or stale synchronous")] = Sync.bsp,
    staleness: Annotated[int | None, typer.Option(help="SSP bound: iterations a worker may run ahead")] = None,
    bandwidth: Annotated[str | None, typer.Option(help="line rate of every NIC, e.g. 10Gbps, 25GbE; default 10Gbps")] = None,
    latency: Annotated[str | None, typer.Option(help="per-message latency, e.g. 50us; default 50us")] = None,
    sharding: Annotated[ShardingPolicy, typer.Option(help="how tensors are placed on PS shards")] = ShardingPolicy.round_robin,
    overlap: Annotated[bool, typer.Option(help="overlap communication with backward/forward")] = True,
    bucket_size: Annotated[str | None, typer.Option(help="all-reduce bucket, e.g. 25MB; default 25MiB (PyTorch DDP)")] = None,
    goodput: Annotated[float | None, typer.Option(help="payload share of the line rate; default 0.956 (TCP/Ethernet)")] = None,
    method: Annotated[Method, typer.Option(help="analytic (closed form/queueing) or simulate (discrete events)")] = Method.analytic,
    config: Annotated[Path | None, typer.Option(help="cluster YAML (heterogeneous workers, PS, links)")] = None,
    gpus_per_node: Annotated[int | None, typer.Option(help="GPUs per server: --workers N GPUs on N/G servers sharing their NICs; default 1")] = None,
    intra: Annotated[str | None, typer.Option(help="intra-node fabric per GPU: a name (see 'ddlperf fabrics') or a rate such as 150GB/s")] = None,
    nics: Annotated[int | None, typer.Option(help="NICs per server, each at --bandwidth; default 1")] = None,
    rack_size: Annotated[int | None, typer.Option(help="servers per rack (with --rack-uplink)")] = None,
    rack_uplink: Annotated[str | None, typer.Option(help="rack uplink to the core switch, e.g. 100Gbps (both directions)")] = None,
    allreduce: Annotated[AllreduceAlgorithm, typer.Option(help="ring: flat over all GPUs; hierarchical: inside servers, then across them")] = AllreduceAlgorithm.ring,
    local_aggregation: Annotated[bool, typer.Option(help="PS: sum each server's gradients over its fabric, push and pull once per server")] = False,
    iterations: Annotated[int | None, typer.Option(help="simulate: measured iterations (default 20)")] = None,
    warmup: Annotated[int | None, typer.Option(help="simulate: warm-up iterations excluded (default 3)")] = None,
    seed: Annotated[int | None, typer.Option(help="simulate: random seed (default 0)")] = None,
    replications: Annotated[int | None, typer.Option(help="simulate: independent runs for p5/p95 (default 1)")] = None,
    jitter: Annotated[float | None, typer.Option(help="simulate: per-op coefficient of variation (default: the workload's)")] = None,
    trace: Annotated[Path | None, typer.Option(help="simulate: write a Chrome trace (open in Perfetto)")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="print one JSON object instead of tables")] = False,
) -> None:
    """Predict iteration time, throughput, speedup and the bottleneck of one scenario."""
    from ddlperf.api import predict as run_predict

    simulate: dict[str, Any] = {
        k: v for k, v in (("iterations", iterations), ("warmup", warmup), ("seed", seed),
                          ("replications", replications), ("jitter", jitter), ("trace", trace))
        if v is not None
    }
    prediction = run_predict(
        model, workload=workload, cluster=config, method=method.value, batch_size=batch_size,
        device=device, workers=workers, ps=ps, placement=placement.value if placement else None,
        arch=arch.value, sync=sync.value, staleness=staleness, sharding=sharding.value,
        overlap=overlap, bucket_size=bucket_size, bandwidth=bandwidth, latency=latency,
        goodput=goodput, gpus_per_node=gpus_per_node, intra=intra, nics=nics,
        rack_size=rack_size, rack_uplink=rack_uplink, allreduce=allreduce.value,
        local_aggregation=local_aggregation, dtype=dtype, math=math, grad_dtype=grad_dtype,
        accumulation=accumulation, **simulate,
    )
    if json_output:
        print_json(prediction.to_dict())
        return
    from ddlperf.report.table import render

    render(prediction, console)
    if trace is not None:
        console.print(f"trace written to {trace} (open it at https://ui.perfetto.dev)")
