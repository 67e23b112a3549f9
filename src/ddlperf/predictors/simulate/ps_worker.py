"""A worker of the parameter-server model: its forward gates on pulled parameters, and its
backward hands gradients to :class:`~ddlperf.predictors.simulate.ps.PSModel` (split from
``ps.py``, which keeps the shards: aggregation, updates, pulls)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddlperf.predictors.simulate.connection import Connection
from ddlperf.predictors.simulate.worker import BWD, FWD, Worker

if TYPE_CHECKING:
    from ddlperf.predictors.simulate.ps import PSModel


class PSWorker(Worker):
    """A worker (unit) of the PS model: forward gates on pulled parameters."""

    model: PSModel

    def setup(self, model: PSModel) -> None:
        self.model = model
        self.missing = [0] * model.n_layers  # parts still to arrive, per layer (next iteration)
        self.missing_total = 0
        # early pulls: when the last counted part arrives, per layer and in all
        self.ready_at = [0.0] * model.n_layers
        self.ready_total = 0.0
        # ASP/SSP, overlap off: own updates each shard has not applied yet this iteration, and
        # each tensor's shards whose read of it has not gone out yet
        self.own_left: list[int] = [0] * len(model.shard_parts)
        self.read_left = [len(parts) for parts in model.parts]
        self.wake_at = -1.0  # early pulls: when the last poke for an open gate was posted
        self.pushes: list[list[tuple[Connection, float, int, int, str]]] = []  # see ahead

    def layer_ready(self, layer: int) -> bool:
        if self.model.overlap:
            return self.missing[layer] == 0 and self.ready_at[layer] <= self.engine.now
        return self.missing_total == 0 and self.ready_total <= self.engine.now

    def open_until(self, i: int, j: int) -> int:
        # Worker.open_until with layer_ready inlined (one call less per forward operation).
        ops = self.ops
        now = self.engine.now
        if self.model.overlap:
            missing, ready_at = self.missing, self.ready_at
            k = i
            while k < j:
                kind, layer = ops[k + 1]
                if kind == FWD and (missing[layer] or ready_at[layer] > now):
                    break
                k += 1
            return k
        if self.missing_total == 0 and self.ready_total <= now:
            return j
        k = i
        while k < j and ops[k + 1][0] != FWD:
            k += 1
        return k

    def waiting_on(self, layer: int) -> bool:
        """Is the chain stopped now at the forward gate that ``layer``'s parts open (overlap
        off: the first forward, which waits for every part)?"""
        if self.running:
            return False
        kind, at = self.ops[self.i]
        return kind == FWD and (at == layer or not self.model.overlap)

    def gate_closed(self, layer: int) -> None:
        # Early pulls: a gate whose parts are all counted opens at their last arrival; the
        # pulls poke only a worker already waiting there (see PSModel._pulled_early), one
        # that gets there before the arrival wakes itself then.
        if not self.model.self_wake:
            return
        ready = self.gate_opens_at(layer)
        if ready is not None and ready != self.wake_at:  # (None: the last pull pokes)
            self.wake_at = ready
            self.engine.post(ready, self.poke)

    def gate_opens_at(self, layer: int) -> float | None:
        """When the forward gate of ``layer`` opens (its last part's arrival), or None while
        parts are still to be counted."""
        if self.model.overlap:
            return None if self.missing[layer] else self.ready_at[layer]
        return None if self.missing_total else self.ready_total

    def quiet_end(self, kind: int, layer: int) -> bool:
        # Others only see a backward that pushes gradients (overlap on, layer with tensors),
        # unless its pushes are handed over when its chain starts (chain_planned).
        model = self.model
        return kind != BWD or not model.overlap or not model.layer_tensors[layer] or self.ahead

    def chain_planned(self, i: int, j: int, ends: list[float]) -> None:
        t = self.t
        if i <= self._last_forward < j:
            self.forward_done(t)  # its gates were all checked; the pushes below come later
        ops = self.ops
        pushes = self.pushes
        u = self.index
        for k in range(i, j):  # the last operation's gradients go out at its end (_done)
            kind, layer = ops[k]
            if kind == BWD:  # each sent as if pushed at its operation's end
                ready = ends[k - i + 1]
                for conn, size, tensor, shard, name in pushes[layer]:
                    conn.send_at(ready, size, (tensor, shard, u, t), name, t)

    def forward_done(self, t: int) -> None:
        # Parameters for iteration t + 1 can only come after this iteration's pushes.
        self.missing = list(self.model.layer_parts)
        self.missing_total = self.model.total_parts
        self.ready_at = [0.0] * self.model.n_layers
        self.ready_total = 0.0

    def gradients_ready(self, layer: int, t: int) -> None:
        if self.model.overlap:
            for j in self.model.layer_tensors[layer]:
                self.model.push(self, j, t)

    def backward_done(self, t: int) -> None:
        model = self.model
        if not model.overlap:
            self.own_left = list(model.shard_parts)
            for j in range(model.n_tensors):
                model.push(self, j, t)
