"""Run one rank's actions of a schedule, in the schedule's order: the runtime's core loop.

The loop knows no schedule by name. GPipe's all-forward-all-backward, 1F1B's warm-up,
steady state and cool-down, an interleaved or zero-bubble order: all of them are just the
order of ``schedule.actions[rank]``, built by :mod:`ppbook.schedules` and checked by the
simulator. Each step of that list goes through three phases:

1. receive: what each part of the step needs from another stage (its input activation
   for ``F``, the gradient of its output for ``B`` or ``I``; nothing for ``W``: the rules
   of :mod:`ppbook.dependencies`), from another rank through
   :class:`~ppbook.runtime.comm.Messenger` or from a stage of this rank through ``local``;
2. compute, timed by the :class:`~ppbook.runtime.clock.ActionClock`: the forward or the
   backward on the :class:`~ppbook.runtime.stage.Stage` (an ``OverlapFB`` pair runs its
   forward, then its backward, and is timed as one step, as the simulator counts it);
3. send: each result to the stage that waits for it (``sends`` of
   :mod:`ppbook.dependencies`), without waiting for delivery.

Waiting for data is outside the timed interval: it is idle time, the bubble.

Phases 1 and 3 can be replaced: ``transport`` names a module whose ``receive(runner,
part)`` and ``deliver(runner, part, result)`` do the work of :meth:`StepRunner.receive` and
:meth:`StepRunner.deliver` (``RunConfig(transport=...)``; assignment 3 has the reader
write them). The ranks import it by name, so it must be a file on their ``sys.path``.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from functools import partial

import torch

from ppbook.dependencies import needs, sends
from ppbook.pipeline_schedule import Action, Schedule
from ppbook.runtime.clock import ActionClock
from ppbook.runtime.comm import Messenger
from ppbook.runtime.config import Fault
from ppbook.runtime.stage import Stage


class StepRunner:
    """Runs the actions of ``rank`` in one training step: forward and backward (the worker
    then combines DualPipe's copies and steps the optimizer, :mod:`ppbook.runtime.training`).

    ``stages`` maps each stage this rank holds to its :class:`Stage`; ``inputs`` and
    ``targets`` hold one tensor per micro-batch (used by the first and last model part).
    ``transport``, a module's name, replaces :meth:`receive` and :meth:`deliver` by that
    module's ``receive(runner, part)`` and ``deliver(runner, part, result)``.
    """

    def __init__(
        self,
        schedule: Schedule,
        rank: int,
        stages: dict[int, Stage],
        messenger: Messenger,
        inputs: list[torch.Tensor],
        targets: list[torch.Tensor],
        fault: Fault | None = None,
        transport: str | None = None,
    ):
        self.schedule = schedule
        self.rank = rank
        self.stages = stages
        self.messenger = messenger
        self.device = messenger.ctx.device
        self.inputs = inputs
        self.targets = targets
        self.fault = fault if fault is not None and fault.rank == rank else None
        self.clock = ActionClock(self.device)
        self.local: dict[tuple[int, int, int], torch.Tensor] = {}  # between stages of this rank
        if transport is not None:  # phases 1 and 3 from another module (see the docstring)
            module = importlib.import_module(transport)
            self.receive = partial(module.receive, self)
            self.deliver = partial(module.deliver, self)

    def run(self) -> tuple[list[float], list[float], list[torch.Tensor]]:
        """Run every action of this rank; return start and end times and the loss terms."""
        starts, ends, losses = [], [], []
        self.messenger.start_step()  # post the first receives from every peer
        self.clock.begin_step()
        for position, step in enumerate(self.schedule.actions[self.rank]):
            if self.fault is not None and self.fault.position == position:
                inject(self.fault, step)
            # 1. receive
            needs = [self.receive(part) for part in step.parts]
            # 2. compute (timed)
            starts.append(self.clock.mark())
            results = [self.compute(p, data) for p, data in zip(step.parts, needs, strict=True)]
            ends.append(self.clock.mark())
            # 3. send
            for part, result in zip(step.parts, results, strict=True):
                if part.kind == "F" and self.stages[part.stage].loss_fn is not None:
                    losses.append(result.detach())  # the last model part returns its loss
                else:
                    self.deliver(part, result)
        self.messenger.finish_step()
        return self.clock.resolve(starts), self.clock.resolve(ends), losses

    def receive(self, part: Action) -> torch.Tensor | None:
        """What ``part`` needs from another stage (None: the data, the loss, or nothing)."""
        stage, kind, microbatch = part
        for need in needs(self.schedule, stage, kind, microbatch):
            if need.message is not None:  # data from another stage, not an order on its own
                return self._take(need.stage, (stage, need.message, microbatch))
        if kind == "F":  # the first stage of the route: the model input
            return self.inputs[microbatch].to(self.device)
        return None

    def compute(self, part: Action, data: torch.Tensor | None) -> torch.Tensor | None:
        """Run ``part`` on its stage: the output of ``F``, the input gradient of ``B``/``I``."""
        stage, kind, microbatch = part
        module = self.stages[stage]
        if kind == "F":
            target = self.targets[microbatch].to(self.device) if module.loss_fn else None
            return module.forward(microbatch, data, target)
        if kind == "B":
            return module.backward(microbatch, data)
        if kind == "I":
            return module.backward_input(microbatch, data)
        module.backward_weight(microbatch)
        return None

    def deliver(self, part: Action, result: torch.Tensor | None) -> None:
        """Send ``result`` of ``part`` to the stage that waits for it, if any."""
        stage, kind, microbatch = part
        sent = sends(self.schedule, stage, kind, microbatch)
        if sent is not None:
            receiver, what = sent
            self._put(receiver, (receiver, what, microbatch), result)

    def _take(self, peer_stage: int, identity: tuple[int, int, int]) -> torch.Tensor:
        peer = self.schedule.stage_to_rank[peer_stage]
        if peer == self.rank:
            return self.local.pop(identity)
        return self.messenger.recv(peer, identity)

    def _put(self, peer_stage: int, identity: tuple[int, int, int], tensor: torch.Tensor) -> None:
        peer = self.schedule.stage_to_rank[peer_stage]
        if peer == self.rank:
            self.local[identity] = tensor.detach()
        else:
            self.messenger.send(tensor, peer, identity)


def inject(fault: Fault, step=None) -> None:
    """Fail on purpose, as ``fault`` says (tests and chapter 3); ``step`` is the action it
    fires at, None at the end of the run."""
    if step is None:
        where = f"rank {fault.rank} at the end, leaving the process group"
    else:
        where = f"rank {fault.rank} at its action {fault.position} ({step})"
    if fault.kind == "raise":
        raise RuntimeError(f"injected fault: {where} raises")
    if fault.kind == "exit":
        os._exit(3)
    if fault.kind == "abort":
        print(f"injected fault: {where} aborts", file=sys.stderr, flush=True)
        os.abort()
    while True:  # "hang": the peers' receives time out
        time.sleep(1.0)
