"""``--engine torch``: run a ppbook schedule on PyTorch's own pipeline engine.

What each rank does, in place of :func:`ppbook.runtime.worker.run_job`:

1. cut the model into the same parts as ppbook's runtime does and wrap each part this
   rank holds in a ``torch.distributed.pipelining.PipelineStage``, with its input and
   output shapes given (PyTorch then runs no trial forward to infer them);
2. hand the schedule's order, in PyTorch's notation, to PyTorch's
   ``_PipelineScheduleRuntime``: the same lowering ``_load_csv`` does, which validates the
   order, infers which rank holds which stage, and adds the sends and receives;
3. run the steps with its ``step``, then the optimizer step, as ppbook's runtime does.

Measurement. :class:`TimedStage` marks the start and end of every ``F``, ``B``, ``I`` and
``W`` PyTorch runs on it (the last part's ``F`` ends after its loss, which PyTorch
computes right after the forward), with the same :class:`~ppbook.runtime.clock.ActionClock`
as ppbook's runtime. A step of the schedule runs from its first part's start to its last
part's end, so the record is a :class:`RankRecord` and the result the same
:class:`~ppbook.timeline.Timeline` type: plots and ``--compare`` work unchanged. PyTorch
waits for a received tensor just before the computation that needs it, outside the
marks, so waiting is idle time here too; only inside an overlapped pair (DualPipeV) does
a wait for the backward's gradient fall between the pair's two parts, within the step.

The loss: PyTorch calls ``mse_loss`` per micro-batch and divides the gradients by m at the
end of the backward (``scale_grads``); ppbook's runtime divides each micro-batch's loss by
m. Both give the gradient of the whole batch's mean loss, equal up to rounding.

``_PipelineScheduleRuntime`` (the runtime behind ``_load_csv``) and its
``_prepare_schedule_with_comms`` are private in torch 2.13: :func:`run_job` builds the
one, :func:`load_order` is the one place that calls the other. What ``--engine torch``
accepts is checked before any process starts (:func:`ppbook.runtime.config.check_engine`).
"""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining import schedules as torch_schedules
from torch.nn import functional

from ppbook.pipeline_schedule import Schedule
from ppbook.runtime.clock import ActionClock
from ppbook.runtime.config import RunConfig, input_shape, num_parts
from ppbook.runtime.context import Context, listening_addresses
from ppbook.runtime.models import build_blocks, part_bounds, split_blocks, step_data
from ppbook.runtime.result import RankRecord, keep_parameters
from ppbook.runtime.training import make_optimizer

Key = tuple[int, str, int]  # (stage, kind, micro-batch)


class Recorder:
    """Start and end marks of every computation on this rank, and their order."""

    def __init__(self, device: torch.device):
        self.clock = ActionClock(device)
        self.marks: dict[Key, list] = {}  # action -> [start mark, end mark]
        self.log: list[str] = []  # "1F3", in the order computed
        self.last_forward: Key | None = None

    def start(self, key: Key) -> None:
        self.log.append(f"{key[0]}{key[1]}{key[2]}")
        self.marks[key] = [self.clock.mark(), None]

    def end(self, key: Key) -> None:
        self.marks[key][1] = self.clock.mark()

    def step_times(self, steps) -> tuple[list[float], list[float]]:
        """Start and end, in seconds, of each step of a rank's list ``steps``."""
        starts = [self.marks[step.parts[0]][0] for step in steps]
        ends = [self.marks[step.parts[-1]][1] for step in steps]
        resolved = self.clock.resolve([*starts, *ends]) if steps else []
        return resolved[: len(steps)], resolved[len(steps) :]


class TimedStage(PipelineStage):
    """PyTorch's ``PipelineStage`` whose forward and backward computations are timed."""

    def __init__(self, *args, recorder: Recorder, **kwargs):
        super().__init__(*args, **kwargs)
        self.recorder = recorder

    def forward_one_chunk(self, fwd_chunk_id, *args, **kwargs):
        key = (self.stage_index, "F", fwd_chunk_id)
        self.recorder.start(key)
        output = super().forward_one_chunk(fwd_chunk_id, *args, **kwargs)
        self.recorder.end(key)
        self.recorder.last_forward = key  # the loss, computed next, extends it
        return output

    def backward_one_chunk(self, bwd_chunk_id, loss=None, full_backward=True, **kwargs):
        key = (self.stage_index, "B" if full_backward else "I", bwd_chunk_id)
        self.recorder.start(key)
        super().backward_one_chunk(bwd_chunk_id, loss=loss, full_backward=full_backward, **kwargs)
        self.recorder.end(key)

    def backward_weight_one_chunk(self, bwd_chunk_id, **kwargs):
        key = (self.stage_index, "W", bwd_chunk_id)
        self.recorder.start(key)
        super().backward_weight_one_chunk(bwd_chunk_id, **kwargs)
        self.recorder.end(key)


def load_order(runtime, schedule: Schedule) -> None:
    """Give PyTorch's ``runtime`` the compute order of ``schedule``, as ``_load_csv`` does
    with a compute-only CSV: PyTorch checks it, places stages, adds sends and receives."""
    parse = torch_schedules._Action.from_str
    order = {rank: [parse(a) for a in row] for rank, row in enumerate(schedule.to_strings())}
    runtime.pipeline_order = order
    runtime._prepare_schedule_with_comms(order)


def run_job(ctx: Context, config: RunConfig, schedule: Schedule) -> RankRecord:
    """Build this rank's PyTorch stages for ``config`` and run its steps on PyTorch's
    engine; the record is the one :func:`ppbook.runtime.worker.run_job` gives."""
    if ctx.via_cpu:
        raise ValueError(
            "--engine torch needs one GPU per rank (NCCL) or CPU ranks; these ranks share a "
            "GPU, which only ppbook's runtime handles (through CPU memory): --engine ppbook"
        )
    parts = num_parts(schedule)
    blocks = build_blocks(config, parts)
    bounds = part_bounds(len(blocks), parts)
    modules = split_blocks(blocks, parts)
    inputs, targets, layouts = step_data(config, modules)  # layouts: each part's output
    dtype = getattr(torch, config.dtype)
    sample = (dtype, (config.microbatch_size, *input_shape(config)))
    recorder = Recorder(ctx.device)
    stages = []
    for stage in schedule.stages_on(ctx.rank):
        before, after = sample if stage == 0 else layouts[stage - 1], layouts[stage]
        stages.append(
            TimedStage(
                copy.deepcopy(modules[stage]).to(ctx.device),
                stage,
                schedule.num_stages,
                ctx.device,
                input_args=_example(before, requires_grad=stage > 0),  # the first gets none
                output_args=_example(after, requires_grad=True),
                recorder=recorder,
            )
        )

    def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        loss = functional.mse_loss(output, target)  # one micro-batch's mean
        recorder.end(recorder.last_forward)  # the last part's F ends with its loss
        return loss

    runtime = torch_schedules._PipelineScheduleRuntime(
        stages, config.num_microbatches, loss_fn=loss_fn, scale_grads=True
    )
    load_order(runtime, schedule)
    weights = [w for s in stages for w in s.submod.parameters() if w.requires_grad]
    optimizer = make_optimizer(config, weights) if weights else None
    holds = set(schedule.stages_on(ctx.rank))
    batch = (torch.cat(inputs).to(ctx.device),) if 0 in holds else ()
    target = torch.cat(targets).to(ctx.device) if schedule.num_stages - 1 in holds else None
    record = RankRecord(ctx.rank)
    for _ in range(config.steps):
        for stage in stages:
            stage.submod.zero_grad(set_to_none=True)
        recorder.marks.clear()
        recorder.log.clear()
        dist.barrier()  # the ranks start each step together
        recorder.clock.begin_step()
        losses: list[torch.Tensor] = []
        runtime.step(*batch, target=target, losses=losses)
        if optimizer is not None:
            optimizer.step()
        starts, ends = recorder.step_times(schedule.actions[ctx.rank])
        record.starts.append(starts)
        record.ends.append(ends)
        record.executed.append(list(recorder.log))
        record.losses.append(sum(loss.item() for loss in losses) / config.num_microbatches)
    if config.collect_grads:  # stage s is model part s: every route is 0..p-1
        keep_parameters(record, bounds, [(s.stage_index, s.submod) for s in stages])
    record.listening = listening_addresses()
    return record


def _example(layout: tuple[torch.dtype, tuple[int, ...]], requires_grad: bool) -> torch.Tensor:
    """A tensor of ``layout`` without memory (meta device): what a stage sends or receives.
    ``requires_grad`` tells PyTorch that a gradient travels back for it."""
    dtype, shape = layout
    return torch.empty(shape, dtype=dtype, device="meta", requires_grad=requires_grad)
