"""After the backward of a step: combine the copies of a model part, then the optimizer step.

Every rank steps the optimizer of :attr:`RunConfig.optimizer` (SGD by default, learning
rate :attr:`RunConfig.lr`) on the weights of its own stages, after the last action of a
training step, so that ``steps`` steps train the model as ``steps`` steps in one process
do (:func:`ppbook.runtime.reference.reference_run`).

DualPipe holds two copies of each model part, on two ranks (one per feeding direction),
each of which sees half of the micro-batches. As DualPipe's own example does
(deepseek-ai/DualPipe, ``examples/example_dualpipe.py``: each copy adds the gradient of
its mirror), the copies' gradients are summed before the step: each copy then holds the
whole-batch gradient, as one process would have it, and both copies step identically and
stay equal. :func:`combine_copies` does the sum with one all-reduce over every rank.

In mixed precision (``dtype="bfloat16"``, :mod:`ppbook.runtime.precision`) the optimizer
and its state live on the fp32 master weights, whose gradients are the fp32 sums of the
micro-batches' bf16 gradients: the copies are combined there, in fp32, and the step on
the masters is copied back into the bf16 weights (:func:`stepped_weights`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist
from torch import nn

from ppbook.pipeline_schedule import Schedule
from ppbook.runtime.config import RunConfig
from ppbook.runtime.stage import Stage


def make_optimizer(config: RunConfig, weights: Sequence[nn.Parameter]) -> torch.optim.Optimizer:
    """The optimizer ``config`` names, on ``weights``."""
    if config.optimizer == "sgd":
        return torch.optim.SGD(weights, lr=config.lr)
    if config.optimizer == "adam":
        return torch.optim.Adam(weights, lr=config.lr)
    raise ValueError(f"optimizer must be 'sgd' or 'adam', got {config.optimizer!r}")


def stepped_weights(stage: Stage) -> list[nn.Parameter]:
    """What the optimizer steps for ``stage``: its fp32 masters in mixed precision (their
    ``.grad``: the fp32 gradient sums), else its weights."""
    return stage.masters.masters if stage.masters is not None else stage.weights()


def copied_parts(schedule: Schedule) -> list[int]:
    """The model parts that more than one stage holds (DualPipe: every part)."""
    holders: dict[int, int] = {}
    for stage in range(schedule.num_stages):
        part = schedule.model_part(stage)
        holders[part] = holders.get(part, 0) + 1
    return sorted(part for part, count in holders.items() if count > 1)


def combine_copies(
    schedule: Schedule,
    stages: dict[int, Stage],
    parts: Sequence[nn.Module],
    device: torch.device,
    dtype: torch.dtype | None = None,
) -> None:
    """Give every copy of a model part the sum of all copies' gradients (collective).

    Every rank calls this after its backward, with its ``stages`` and the model ``parts``
    (for the sizes of the parts it does not hold); ``device`` is where the all-reduce runs
    (the context's ``comm_device``), in ``dtype`` (default: the parts' own; fp32 in mixed
    precision, where the gradients of :func:`stepped_weights` are summed). A rank without a
    copy of a part adds zeros.
    """
    copied = copied_parts(schedule)
    weights = [w for part in copied for w in parts[part].parameters() if w.requires_grad]
    if not weights:  # the same on every rank: all skip the collective
        return
    sizes = [sum(w.numel() for w in parts[part].parameters() if w.requires_grad) for part in copied]
    dtype = weights[0].dtype if dtype is None else dtype
    total = torch.zeros(sum(sizes), dtype=dtype, device=device)  # every copied weight
    offsets = dict(zip(copied, _starts(sizes), strict=True))
    mine = [stage for stage in stages.values() if schedule.model_part(stage.stage) in offsets]
    for stage in mine:
        at = offsets[schedule.model_part(stage.stage)]
        for weight in stepped_weights(stage):
            if weight.grad is not None:
                total[at : at + weight.numel()] += weight.grad.reshape(-1).to(device, dtype)
            at += weight.numel()
    dist.all_reduce(total)
    for stage in mine:
        at = offsets[schedule.model_part(stage.stage)]
        for weight in stepped_weights(stage):
            piece = total[at : at + weight.numel()].view_as(weight)
            weight.grad = piece.to(weight.device, weight.dtype).clone()
            at += weight.numel()


def _starts(lengths: Sequence[int]) -> list[int]:
    """Where each of consecutive pieces of ``lengths`` starts."""
    starts, at = [], 0
    for length in lengths:
        starts.append(at)
        at += length
    return starts
