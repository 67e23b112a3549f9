"""How workers synchronize: PS or ring all-reduce; BSP, ASP or SSP(s); sharding; overlap.

SSP(s), the one definition the PS trainer, the simulator and the analytic model implement
(Ho et al., NIPS 2013, applied per tensor at the shard that holds it): a worker at clock c —
its iteration c, which reads parameter version c — may read tensor j only once every worker's
gradients of j from iterations ≤ c − s − 1 are applied at the shard, and its own gradient of j
from iteration c − 1 is. The shard then sends it the tensor with every update applied so far.
BSP is s = 0 (the N gradients averaged into one update); ASP is s = ∞ (own gradient only). In
steady state every worker runs at the slowest one's rate, the faster ones s iterations ahead
and held by the bound.

BSP with a step barrier (``step_barrier``): no pull of iteration c + 1 starts before every
shard has applied every update of iteration c, as in TensorFlow 1.x's synchronous PS (one
``session.run`` per step, ended by SyncReplicasOptimizer's token queue or tf_cnn_benchmarks'
sync-queue barrier). Without it each tensor's pull follows its own update, so the pulls of
the next iteration overlap the last pushes (docs/models.md).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ddlperf.errors import InputError
from ddlperf.units import parse_size

# PyTorch DDP's bucket_cap_mb=25 is in MiB.
DEFAULT_BUCKET_BYTES = 25 * 2**20

Arch = Literal["ps", "allreduce"]
Sync = Literal["bsp", "asp", "ssp"]
Sharding = Literal["round_robin", "greedy", "even"]
AllreduceAlgorithm = Literal["ring", "hierarchical"]


class Strategy(BaseModel):
    """Synchronization strategy. ``staleness`` is only meaningful (and required) for SSP."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    arch: Arch = "ps"
    sync: Sync = "bsp"
    staleness: int | None = Field(default=None, description="SSP bound s (iterations ahead)")
    sharding: Sharding = "round_robin"
    overlap: bool = Field(default=True, description="overlap communication with computation")
    bucket_bytes: float = Field(default=DEFAULT_BUCKET_BYTES, description="all-reduce bucket")
    allreduce: AllreduceAlgorithm = Field(
        default="ring", description="flat ring over all GPUs, or hierarchical on servers")
    local_aggregation: bool = Field(
        default=False, description="PS: sum a server's gradients over its fabric, push once")
    step_barrier: bool = Field(
        default=False, description="BSP PS: the next iteration's pulls wait for every update")

    @field_validator("bucket_bytes", mode="before")
    @classmethod
    def _bucket(cls, value: Any) -> Any:
        return parse_size(value, "bucket_size")

    @model_validator(mode="after")
    def _coherent(self) -> Strategy:
        if self.staleness is not None and self.sync != "ssp":
            raise InputError("--staleness", f"only applies to --sync ssp, not {self.sync}",
                             "add --sync ssp or drop --staleness")
        if self.sync == "ssp":
            if self.staleness is None:
                raise InputError("--sync", "ssp needs a staleness bound",
                                 "add --staleness S (an integer ≥ 0)")
            if self.staleness < 0:
                raise InputError("--staleness", f"must be ≥ 0, got {self.staleness}")
        if self.arch == "allreduce" and self.sync != "bsp":
            raise InputError("--sync", f"ring all-reduce is synchronous (got {self.sync})",
                             "use --sync bsp or --arch ps")
        if self.allreduce != "ring" and self.arch != "allreduce":
            raise InputError("--allreduce", "only applies to --arch allreduce",
                             "add --arch allreduce or drop --allreduce")
        if self.local_aggregation:
            if self.arch != "ps":
                raise InputError("--local-aggregation", "only applies to --arch ps",
                                 "drop it (all-reduce: see --allreduce hierarchical)")
            if self.effective_sync != "bsp":
                raise InputError("--local-aggregation",
                                 f"sums a server's gradients in step, so it needs --sync bsp "
                                 f"(got {self.sync})", "use --sync bsp or drop it")
        if self.step_barrier and (self.arch != "ps" or self.effective_sync != "bsp"):
            raise InputError("--step-barrier", "applies to a BSP parameter server only "
                             f"(got --arch {self.arch} --sync {self.sync})",
                             "use --arch ps --sync bsp or drop --step-barrier")
        return self

    @property
    def effective_sync(self) -> Sync:
        """SSP(0) is BSP."""
        return "bsp" if self.sync == "ssp" and self.staleness == 0 else self.sync

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)
