"""The scenario flags, defined once: ``predict``, ``sweep`` and ``measure`` take them from here.

Adding a flag is one :class:`Flag` entry in :data:`SCENARIO_FLAGS` (and the keyword in the
API): :func:`scenario_flags` adds it to every command listed in ``commands`` with the same
name, help and value checks; in ``ddlperf sweep`` a sweepable flag takes a comma-separated
list. Values are read here, so a bad one is one line naming the flag (``--workers: '4.5' is
not a whole number``), the same in every command.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from ddlperf.errors import InputError

F = TypeVar("F", bound=Callable[..., Any])
COMMANDS = frozenset({"predict", "sweep", "measure"})
BOOLEANS = {"true": True, "on": True, "yes": True, "false": False, "off": False, "no": False}


@dataclass(frozen=True)
class Flag:
    """One scenario flag. ``name`` is its keyword in the API and its axis in a sweep."""

    name: str
    help: str
    kind: type = str  # str (units are read by the API), int, float, bool or Path
    choices: tuple[str, ...] = ()
    defaults: Mapping[str, str] = field(default_factory=dict)  # command → default, for help
    commands: frozenset[str] = COMMANDS
    sweep: bool = True  # a comma-separated list in `ddlperf sweep`
    keyword: str | None = None  # the API keyword, where it differs from ``name``
    metavar: str | None = None  # what --help shows as the value

    def metavar_for(self, command: str) -> str:
        one = self.metavar or ("|".join(self.choices) if self.choices else {
            int: "N", float: "X", bool: "on|off", Path: "FILE"}.get(self.kind, "TEXT"))
        return f"{one},…" if command == "sweep" and self.sweep else one

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def api_name(self) -> str:
        return self.keyword or self.name

    def help_for(self, command: str) -> str:
        text = self.help  # choices and lists (``,…``) are in the metavar
        if command in self.defaults:
            text += f" [default: {self.defaults[command]}]"
        return text

    def read(self, text: Any) -> Any:
        """One value from its command-line text, or an :class:`InputError` naming the flag."""
        if self.kind is bool:
            if isinstance(text, bool):
                return text
            value = BOOLEANS.get(str(text).strip().lower())
            if value is None:
                raise InputError(self.option, f"{text!r} is not on or off", "use on or off")
            return value
        if self.kind is Path:
            return Path(text)
        text = str(text).strip()
        if self.kind is int:
            try:
                return int(text)
            except ValueError:
                raise InputError(self.option, f"{text!r} is not a whole number",
                                 f"e.g. {self.option} 4") from None
        if self.kind is float:
            try:
                value = float(text)
            except ValueError:
                value = math.nan
            if not math.isfinite(value):
                raise InputError(self.option, f"{text!r} is not a finite number") from None
            return value
        if self.choices and text not in self.choices:
            raise InputError(self.option, f"{text!r} is not one of {', '.join(self.choices)}",
                             f"use {' or '.join(self.choices)}")
        return text

    def read_list(self, text: str) -> list[Any]:
        """``1,2,4`` → [1, 2, 4]; whole numbers also as ranges (``1..64,128``); an empty item
        (``1,,4``) or an inverted range (``64..8``) is an error."""
        items = [t.strip() for t in str(text).split(",")]
        if any(not t for t in items):
            raise InputError(self.option, f"{text!r} has an empty value",
                             "give a comma-separated list without gaps, e.g. 1,2,4")
        values: list[Any] = []
        for item in items:
            low, dots, high = item.partition("..")
            if self.kind is not int or not dots:
                values.append(self.read(item))
                continue
            first, last = self.read(low), self.read(high)
            if last < first:
                raise InputError(self.option, f"{item!r} is an inverted range",
                                 f"write {last}..{first}")
            values.extend(range(first, last + 1))
        return values


_PREDICT_DEFAULTS = {"predict": "resnet50", "sweep": "resnet50"}
_PREDICTIONS = frozenset({"predict", "sweep"})


def _on_predictions(default: str) -> dict[str, str]:
    return {"predict": default, "sweep": default}


def _on_both(default: str) -> dict[str, str]:
    """The same default in predict, sweep and measure."""
    return dict.fromkeys(COMMANDS, default)


SCENARIO_FLAGS: tuple[Flag, ...] = (
    Flag("model", "zoo model, see 'ddlperf models'", metavar="NAME",
         defaults={**_PREDICT_DEFAULTS, "measure": "mobilenet_v2"}),
    Flag("workload", "workload JSON (from 'ddlperf profile' or by hand) instead of --model",
         kind=Path, sweep=False),
    Flag("batch_size", "samples per worker per iteration; a workload file is rescaled to it",
         kind=int, defaults={c: "32 (zoo) / the file's" for c in COMMANDS}),
    Flag("device", "worker device: catalog name (see 'ddlperf devices') or "
                   "name=X,peak=50TFLOPS,bw=900GB/s; a workload file is rescaled to it",
         metavar="DEVICE", defaults={c: "V100 (zoo) / the file's" for c in COMMANDS}),
    Flag("dtype", "compute dtype (mixed precision for fp16/bf16)",
         choices=("fp32", "tf32", "fp16", "bf16"), commands=_PREDICTIONS,
         defaults=_on_predictions("fp32")),
    Flag("math", "fp32 math: default (PyTorch: TF32 convolutions on Ampere+, FP32 matmuls)",
         choices=("default", "tf32", "ieee"), commands=_PREDICTIONS,
         defaults=_on_predictions("default")),
    Flag("grad_dtype", "dtype gradients are exchanged in", choices=("fp32", "tf32", "fp16", "bf16"),
         commands=_PREDICTIONS, defaults=_on_predictions("--dtype")),
    Flag("accumulation", "micro-batches per synchronisation (gradient accumulation)", kind=int,
         defaults=_on_both("1")),
    Flag("workers", "number of workers", kind=int,
         defaults={"predict": "8", "sweep": "8", "measure": "2"}),
    Flag("ps", "parameter-server shards", kind=int,
         defaults={"predict": "2 (ps), 0 (allreduce)", "sweep": "2 (ps), 0 (allreduce)",
                   "measure": "1 (ps), 0 (allreduce)"}),
    Flag("placement", "PS shards on their own hosts or shard k on worker k's host",
         choices=("dedicated", "colocated"), defaults={c: "dedicated" for c in COMMANDS}),
    Flag("arch", "parameter server or ring all-reduce", choices=("ps", "allreduce"),
         defaults={c: "ps" for c in COMMANDS}),
    Flag("sync", "bulk synchronous, asynchronous or stale synchronous",
         choices=("bsp", "asp", "ssp"), defaults={c: "bsp" for c in COMMANDS}),
    Flag("staleness", "SSP bound: iterations a worker may run ahead (with --sync ssp)",
         kind=int),
    Flag("sharding", "how tensors are placed on PS shards",
         choices=("round_robin", "greedy", "even"), defaults={c: "round_robin" for c in COMMANDS}),
    Flag("overlap", "overlap communication with backward/forward", kind=bool,
         defaults={c: "on" for c in COMMANDS}),
    Flag("bucket_size", "all-reduce bucket, e.g. 25MB", metavar="SIZE", defaults={c: "25MiB" for c in COMMANDS}),
    Flag("bandwidth", "line rate of every NIC, e.g. 10Gbps, 25GbE", metavar="RATE",
         defaults={"predict": "10Gbps", "sweep": "10Gbps",
                   "measure": "100Mbps (at most ~1Gbps per core here)"}),
    Flag("latency", "per-message latency, e.g. 50us", metavar="TIME", commands=frozenset({"predict", "sweep"}),
         defaults={"predict": "50us", "sweep": "50us"}),
    Flag("goodput", "payload share of the line rate", kind=float,
         commands=frozenset({"predict", "sweep"}),
         defaults={"predict": "0.956 (TCP/Ethernet)", "sweep": "0.956 (TCP/Ethernet)"}),
    Flag("config", "cluster YAML (mixed workers, PS, links); flags override its top level",
         kind=Path, sweep=False, keyword="cluster"),
    Flag("gpus_per_node", "GPUs per server: --workers N GPUs on N/G servers sharing their "
                          "NICs", kind=int, defaults=_on_both("1")),
    Flag("intra", "intra-node fabric per GPU: a name (see 'ddlperf fabrics') or a rate such "
                  "as 150GB/s", metavar="FABRIC"),
    Flag("nics", "NICs per server, each at --bandwidth", kind=int, defaults=_on_both("1")),
    Flag("rack_size", "servers per rack (with --rack-uplink)", kind=int),
    Flag("rack_uplink", "rack uplink to the core switch, e.g. 100Gbps (both directions)",
         metavar="RATE"),
    Flag("allreduce", "all-reduce algorithm: flat over all GPUs, or inside servers then "
                      "across them", choices=("ring", "hierarchical"),
         defaults=_on_both("ring")),
    Flag("local_aggregation", "PS: sum each server's gradients over its fabric, push and pull "
                              "once per server", kind=bool,
         defaults=_on_both("off")),
    Flag("step_barrier", "BSP PS: the next iteration's pulls wait until every shard applied "
                         "every update (TensorFlow 1.x sync PS)", kind=bool,
         commands=frozenset({"predict", "sweep"}), defaults=_on_both("off")),
    Flag("transport", "how tensors move between processes: a name (see 'ddlperf transports', "
                      "e.g. grpc-tf1) or a per-connection cap such as 200MB/s",
         metavar="NAME", commands=_PREDICTIONS, defaults=_on_predictions("tcp (no cap)")),
)


def flags_for(command: str) -> list[Flag]:
    return [f for f in SCENARIO_FLAGS if command in f.commands]


def _annotation(flag: Flag, command: str) -> Any:
    help_text = flag.help_for(command)
    if flag.kind is bool and not (command == "sweep" and flag.sweep):
        return Annotated[bool | None, typer.Option(f"{flag.option}/--no-{flag.option[2:]}",
                                                   help=help_text)]
    option = typer.Option(flag.option, help=help_text, metavar=flag.metavar_for(command))
    if flag.kind is Path:
        return Annotated[Path | None, option]
    return Annotated[str | None, option]


def scenario_flags(command: str) -> Callable[[F], F]:
    """Give a typer command every scenario flag of ``command``.

    The command declares a ``scenario: dict`` parameter and receives the flags that were given,
    read and checked, under their API keywords; in ``sweep`` sweepable ones are lists.
    """
    flags = flags_for(command)

    def decorate(func: F) -> F:
        signature = inspect.signature(func, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != "scenario"]
        added = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=None,
                                   annotation=_annotation(f, command)) for f in flags]

        @functools.wraps(func)
        def wrapper(**kwargs: Any) -> Any:
            scenario: dict[str, Any] = {}
            for f in flags:
                given = kwargs.pop(f.name)
                if given is None:
                    continue
                as_list = command == "sweep" and f.sweep
                scenario[f.api_name] = f.read_list(given) if as_list else f.read(given)
            return func(**kwargs, scenario=scenario)

        parameters = [*added, *(p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own)]
        # typer reads the signature and the (resolved) annotations: give it the new ones.
        wrapper.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
        del wrapper.__wrapped__
        return wrapper  # type: ignore[return-value]

    return decorate
