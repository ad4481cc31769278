"""PyTorch's schedule classes as ppbook schedules, built without starting processes.

``torch.distributed.pipelining`` computes the whole pipeline order of its schedule
classes in their constructors, for every rank, from the number of ranks p, stages and
micro-batches m alone. :func:`from_pytorch` builds one with stand-in stages (the few
attributes a constructor reads; no process group, no model), takes its ``pipeline_order``
in PyTorch's CSV form, reads it with :func:`ppbook.pytorch_csv.read_csv_text` (which drops
PyTorch's communication and ``REDUCE_GRAD`` actions and says so in ``Schedule.notes``)
and validates it (:func:`ppbook.validate.validate`, through the simulator, which also
finds an order that deadlocks). An invalid order is a one-line ValueError that quotes
the validator.

One order PyTorch exports is invalid (torch 2.13): ``Schedule1F1B``'s ``pipeline_order``
(what ``_dump_csv`` writes; its runtime loop, ``_step_microbatches``, is right). On the
last rank the warm-up has no forward, and the steady state counts forwards from 1, so
that rank runs forward 1 to m and never forward 0: for p = 4, m = 8 the validator says
``rank 3, position 14 (3F8): micro-batch 8 is not in 0..7`` and ``stage 3, micro-batch 0:
a backward without its forward (F)``. :data:`KNOWN_INVALID` records it; the tests check
that it still holds.

The classes came in different torch releases (:data:`SINCE`, from PyTorch's pull
requests); with an older torch, :func:`from_pytorch` says which release a class needs.
The project requires torch >= 2.4, where the first four are.
"""

from __future__ import annotations

import csv
import io
import types

from ppbook.checks import as_count, joined_lines, shown
from ppbook.pipeline_schedule import Schedule
from ppbook.pytorch_csv import read_csv_text
from ppbook.simulate import simulate

SINCE = {
    "ScheduleGPipe": "2.4",  # torch.distributed.pipelining's first release (pytorch#124776)
    "Schedule1F1B": "2.4",
    "ScheduleInterleaved1F1B": "2.4",
    "ScheduleLoopedBFS": "2.4",
    "ScheduleInterleavedZeroBubble": "2.5",  # ZB1P, beside ScheduleFlexibleInterleaved1F1B
    "ScheduleZBVZeroBubble": "2.6",  # pytorch#138444, November 2024
    "ScheduleDualPipeV": "2.9",  # pytorch#159591, August 2025
}
"""Each supported class, and the first torch release that has it."""

PLACEMENT = {
    "ScheduleGPipe": "single",
    "Schedule1F1B": "single",
    "ScheduleInterleaved1F1B": "loop",
    "ScheduleLoopedBFS": "loop",
    "ScheduleInterleavedZeroBubble": "loop",
    "ScheduleZBVZeroBubble": "v",
    "ScheduleDualPipeV": "v",
}
"""How a class places stages: one per rank ("single"), v per rank round-robin ("loop":
rank r holds r, r + p, ...), or two per rank in a V ("v": rank r holds r and 2p - 1 - r)."""

KNOWN_INVALID = {
    "Schedule1F1B": "its last rank runs forward 1 to m and never forward 0",
}
"""Classes whose exported order ppbook's validator refuses (torch 2.13), and why."""


def from_pytorch(
    schedule_class,
    num_stages: int,
    num_microbatches: int,
    num_chunks: int | None = None,
) -> Schedule:
    """PyTorch's order of ``schedule_class`` for p = ``num_stages`` ranks, as a Schedule.

    ``schedule_class`` is a class of :data:`SINCE` or its name. ``num_chunks`` (v) is the
    number of stages per rank: 1 for GPipe and 1F1B, 2 for ZB-V and DualPipeV (the
    defaults), any v >= 1 for the looped classes (default 2). Raises a one-line ValueError
    when the class is unknown or missing from this torch, when PyTorch refuses the counts,
    or when the order it exports is not a valid schedule (the validator's message) or
    cannot finish (the simulator names the stuck ranks).
    """
    name = (
        schedule_class
        if isinstance(schedule_class, str)
        else getattr(schedule_class, "__name__", shown(schedule_class))
    )
    if name not in SINCE:
        raise ValueError(
            f"unknown PyTorch schedule class {shown(name)}; choose one of {', '.join(SINCE)}"
        )
    p = as_count(num_stages, "num_stages", name)
    m = as_count(num_microbatches, "num_microbatches", name)
    v = _chunks(name, num_chunks)
    cls = _torch_class(name)
    stage_indices = _stages_of_rank_zero(PLACEMENT[name], p, v)
    stages = [_stand_in(p, p * v, s) for s in stage_indices]
    try:
        built = cls(stages[0], m) if PLACEMENT[name] == "single" else cls(stages, m)
    except (ValueError, AssertionError, RuntimeError, ZeroDivisionError) as exc:
        raise ValueError(
            f"PyTorch's {name} refuses p={p}, m={m}, v={v}: {_one_line(exc)}"
        ) from None
    rows = [built.pipeline_order[rank] for rank in range(p)]
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(
        [["" if a is None else str(a) for a in row] for row in rows]
    )
    mapping = getattr(built, "stage_index_to_group_rank", None) or {s: s for s in range(p)}
    label = f"{name}(p={p}, m={m}, v={v})"
    try:
        schedule = read_csv_text(
            buffer.getvalue(),
            name=f"torch-{name}",
            num_microbatches=m,
            stage_to_rank=[mapping[s] for s in range(p * v)],
        )
        simulate(schedule)  # validates (ppbook.validate), and finds an order that deadlocks
    except ValueError as exc:
        raise ValueError(
            f"PyTorch's exported order of {label} is invalid: {_one_line(exc)}"
        ) from None
    return schedule


def _chunks(name: str, num_chunks: int | None) -> int:
    """v for ``name``: checked against what the class allows."""
    placement = PLACEMENT[name]
    fixed = {"single": 1, "v": 2}.get(placement)
    if num_chunks is None:
        return fixed or 2
    v = as_count(num_chunks, "num_chunks", name)
    if fixed is not None and v != fixed:
        raise ValueError(f"{name} places {fixed} stage(s) per rank, got num_chunks {v}")
    return v


def _torch_class(name: str):
    """PyTorch's class ``name``, or a ValueError saying which torch release has it."""
    import torch
    from torch.distributed.pipelining import schedules

    cls = getattr(schedules, name, None)
    if cls is None:
        raise ValueError(
            f"{name} needs torch >= {SINCE[name]}, but this is torch {torch.__version__}: "
            f"pip install 'torch>={SINCE[name]}'"
        )
    return cls


def _stages_of_rank_zero(placement: str, p: int, v: int) -> list[int]:
    """The stages rank 0 holds: a constructor computes every rank's order from them."""
    if placement == "single":
        return [0]
    if placement == "loop":
        return [p * chunk for chunk in range(v)]
    return [0, 2 * p - 1]


def _stand_in(group_size: int, num_stages: int, stage_index: int) -> types.SimpleNamespace:
    """What PyTorch's schedule constructors read from a stage, without a process group."""
    from torch import nn

    return types.SimpleNamespace(
        group_size=group_size,
        group_rank=0,
        num_stages=num_stages,
        stage_index=stage_index,
        is_first=stage_index == 0,
        is_last=stage_index == num_stages - 1,
        submod=nn.Identity(),  # the zero-bubble constructors look for torch.compile
    )


def _one_line(exc: BaseException) -> str:
    """``exc``'s message on one line (the validator lists its problems on several)."""
    return joined_lines(exc) or type(exc).__name__
