"""What a run gives back: measured timelines (the simulator's type), loss and gradients.

Each rank reports a :class:`RankRecord`; rank 0 gathers them and :func:`assemble` puts
every rank's times on rank 0's clock (minus the offsets of :func:`~ppbook.runtime.clock.
clock_offsets`) and makes one :class:`~ppbook.timeline.Timeline` per step with
``source="measured"``, so every plot, metric and trace export works on a real run.
Times are in seconds from the first action of the step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from ppbook.pipeline_schedule import Schedule
from ppbook.runtime.config import RunConfig
from ppbook.runtime.models import global_name
from ppbook.timeline import Timeline


def after_warm_up(timelines: list[Timeline]) -> list[Timeline]:
    """The steps without the first (warm-up) one, if there are more than one."""
    return timelines[1:] or timelines


def typical_step(timelines: list[Timeline]) -> Timeline:
    """The step of median makespan, leaving out the first (warm-up) step if there are more."""
    ranked = sorted(after_warm_up(timelines), key=lambda t: t.makespan)
    return ranked[(len(ranked) - 1) // 2]


@dataclass
class RankRecord:
    """One rank's report on one run: per step, its action times and what it computed."""

    rank: int
    starts: list[list[float]] = field(default_factory=list)  # [step][position]
    ends: list[list[float]] = field(default_factory=list)
    executed: list[list[str]] = field(default_factory=list)  # [step] -> parts, in order
    losses: list[float] = field(default_factory=list)  # [step] -> this rank's loss terms
    grads: dict[str, torch.Tensor] | None = None  # whole-model name -> gradient (last step)
    params: dict[str, torch.Tensor] | None = None  # whole-model name -> value after the last step
    listening: list[str] | None = None  # TCP addresses this rank listened on


@dataclass
class RunResult:
    """A measured run: one timeline per step, the loss, and (if asked) the gradients.

    ``executed[step][rank]`` lists the actions rank really computed (``"1F3"``; an
    overlapped pair as its forward then its backward). With ``collect_grads``, ``grads``
    holds every parameter's gradient of the last step (the copies of a model part,
    DualPipe, hold the sum of theirs, so it compares with the single-process model) and
    ``params`` every parameter after the last step's optimizer step.
    """

    config: RunConfig
    schedule: Schedule
    timelines: list[Timeline]
    losses: list[float]
    executed: list[list[list[str]]]
    grads: dict[str, torch.Tensor] | None
    params: dict[str, torch.Tensor] | None
    clock_offsets: list[float]  # each rank's clock minus rank 0's, removed from its times
    clock_errors: list[float]  # bound on each offset's error: half the best round trip
    listening: list[list[str] | None]

    @property
    def loss(self) -> float:
        """The loss of the last step (the mean over the whole batch)."""
        return self.losses[-1]

    @property
    def timeline(self) -> Timeline:
        """The typical step (:func:`typical_step`)."""
        return typical_step(self.timelines)

    @property
    def step_times(self) -> list[float]:
        """The makespan of every step, in seconds."""
        return [t.makespan for t in self.timelines]

    def metrics(self) -> dict:
        """The typical step's metrics, plus every step time, the loss and the clock offsets."""
        out = self.timeline.metrics()
        out.update(
            time_unit="s",
            steps=self.step_times,
            loss=self.loss,
            clock_offsets=self.clock_offsets,
            clock_errors=self.clock_errors,
        )
        return out


def assemble(
    config: RunConfig,
    schedule: Schedule,
    records: list[RankRecord],
    offsets: list[float],
    errors: list[float],
) -> RunResult:
    """Rank 0's view of a run from every rank's record."""
    records = sorted(records, key=lambda r: r.rank)
    timelines = []
    for step in range(config.steps):
        starts = [[t - offsets[r.rank] for t in r.starts[step]] for r in records]
        ends = [[t - offsets[r.rank] for t in r.ends[step]] for r in records]
        origin = min((row[0] for row in starts if row), default=0.0)
        timelines.append(
            Timeline.from_arrays(
                schedule,
                [[t - origin for t in row] for row in starts],
                [[t - origin for t in row] for row in ends],
                source="measured",
                time_unit="s",
            )
        )
    grads = params = None
    if config.collect_grads:
        grads, params = {}, {}
        for record in records:
            _merge_copies(grads, record.grads, "gradient")
            _merge_copies(params, record.params, "value")
    return RunResult(
        config=config,
        schedule=schedule,
        timelines=timelines,
        losses=[math.fsum(r.losses[step] for r in records) for step in range(config.steps)],
        executed=[[r.executed[step] for r in records] for step in range(config.steps)],
        grads=grads,
        params=params,
        clock_offsets=list(offsets),
        clock_errors=list(errors),
        listening=[r.listening for r in records],
    )


def _merge_copies(into: dict, tensors: dict, what: str) -> None:
    """Add ``tensors`` to ``into``; a name already there (a copy of a part) must agree."""
    for name, tensor in tensors.items():
        if name in into and not torch.equal(into[name], tensor):
            raise RuntimeError(
                f"the copies of parameter {name} differ in their {what}: the ranks that hold "
                "them did not combine their gradients before the optimizer step"
            )
        into.setdefault(name, tensor)


def keep_parameters(record: RankRecord, bounds: list[tuple[int, int]], held: list[tuple]) -> None:
    """Put into ``record`` the last step's gradients and the parameters after its update,
    named as in the whole model; ``held``: (model part, module) or (model part, module,
    masters) for each part on this rank. With masters (mixed precision) a trained weight
    is reported as the optimizer holds it: its fp32 master and fp32 gradient sum."""
    record.grads, record.params = {}, {}
    for part, module, *rest in held:
        masters = rest[0] if rest else None
        kept = {} if masters is None else masters.by_weight()
        for local, param in module.named_parameters():
            name = global_name(bounds, part, local)  # copies of a part: equal, kept once
            param = kept.get(id(param), param)
            record.params[name] = param.detach().cpu()
            if param.grad is not None:
                record.grads[name] = param.grad.detach().cpu()
