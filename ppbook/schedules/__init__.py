"""The schedules, each a function returning a :class:`~ppbook.pipeline_schedule.Schedule`.

Their names on the command line and in widgets, with the rule each one enforces, are in
:data:`SCHEDULES`; :func:`build` makes one by name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ppbook.costs import Costs
from ppbook.pipeline_schedule import Schedule
from ppbook.schedules.auto import zb_auto
from ppbook.schedules.basic import gpipe, one_f_one_b
from ppbook.schedules.dualpipe import dualpipe, dualpipev
from ppbook.schedules.interleaved import interleaved_1f1b, looped_bfs
from ppbook.schedules.interleaved_zb import interleaved_zb
from ppbook.schedules.rules import check_int
from ppbook.schedules.v_shape import v_half, v_min
from ppbook.schedules.zero_bubble import zb_h1, zb_h2, zb_v


@dataclass(frozen=True)
class ScheduleSpec:
    """A schedule's name, builder, whether it takes ``num_chunks``, and its rule."""

    name: str
    build: Callable[..., Schedule]
    chunks: str  # "none": one stage per rank; "any": v >= 1; "two": exactly 2 per rank
    rule: str
    paper: str


SCHEDULES: dict[str, ScheduleSpec] = {
    spec.name: spec
    for spec in (
        ScheduleSpec("gpipe", gpipe, "none", "any m >= 1", "GPipe, arXiv:1811.06965"),
        ScheduleSpec(
            "1f1b",
            one_f_one_b,
            "none",
            "any m >= 1 (also m < p)",
            "PipeDream-Flush, arXiv:2006.09503",
        ),
        ScheduleSpec(
            "interleaved-1f1b",
            interleaved_1f1b,
            "any",
            "m a multiple of max(1, m // p), PyTorch's rule (m < p runs); "
            "v chunks per rank (--chunks, default 2); PyTorch's order",
            "Megatron-LM, arXiv:2104.04473",
        ),
        ScheduleSpec(
            "interleaved-zb",
            interleaved_zb,
            "any",
            "m a multiple of max(1, m // p), PyTorch's rule (m < p runs); "
            "v chunks per rank (--chunks, default 2); splits the backward into I and W; "
            "PyTorch's ScheduleInterleavedZeroBubble",
            "Zero Bubble PP (ZB1P), arXiv:2401.10241",
        ),
        ScheduleSpec(
            "looped-bfs",
            looped_bfs,
            "any",
            "any m >= 1; v chunks per rank (--chunks, default 2)",
            "Breadth-First PP, arXiv:2211.05953",
        ),
        ScheduleSpec(
            "zb-h1",
            zb_h1,
            "none",
            "any m >= 1; splits the backward into I and W",
            "Zero Bubble PP, arXiv:2401.10241",
        ),
        ScheduleSpec(
            "zb-h2",
            zb_h2,
            "none",
            "m >= 2p-1; splits the backward into I and W",
            "Zero Bubble PP, arXiv:2401.10241",
        ),
        ScheduleSpec(
            "zb-auto",
            zb_auto,
            "none",
            "any m >= 1; --memory-limit K activations per rank (default p); "
            "uses --costs and --comm",
            "Zero Bubble PP sec. 3, arXiv:2401.10241",
        ),
        ScheduleSpec(
            "zb-v",
            zb_v,
            "two",
            "exactly 2 chunks per rank (V shape); m >= 1",
            "Zero Bubble PP sec. 6, arXiv:2401.10241",
        ),
        ScheduleSpec(
            "v-half",
            v_half,
            "two",
            "exactly 2 chunks per rank (V shape); m >= 1; splits the backward into I and W; "
            "peak (p+2)//2 activations of a full stage",
            "Controllable Memory PP, arXiv:2405.15362",
        ),
        ScheduleSpec(
            "v-min",
            v_min,
            "two",
            "exactly 2 chunks per rank (V shape); m >= 1; splits the backward into I and W; "
            "peak (p+4)//3 activations of a full stage",
            "Controllable Memory PP, arXiv:2405.15362",
        ),
        ScheduleSpec(
            "dualpipe",
            dualpipe,
            "two",
            "p even; m even and m >= 2p; rank r holds stages r and 2p-1-r, "
            "half the micro-batches enter at each end",
            "DeepSeek-V3, arXiv:2412.19437",
        ),
        ScheduleSpec(
            "dualpipev",
            dualpipev,
            "two",
            "m >= 2p; exactly 2 chunks per rank (V shape)",
            "DeepSeek-V3 / DualPipeV, arXiv:2412.19437",
        ),
    )
}


def build(
    name: str,
    num_stages: int,
    num_microbatches: int,
    num_chunks: int | None = None,
    *,
    costs: Costs | None = None,
    memory_limit: int | None = None,
) -> Schedule:
    """Build the schedule called ``name`` (see :data:`SCHEDULES`) for p, m and v.

    ``num_stages`` is p, the number of pipeline ranks; ``num_chunks`` is v, stage chunks per
    rank (default 2 for schedules that take it; schedules with one stage per rank accept
    only 1 or None; V-shaped ones only 2 or None). ``costs`` and ``memory_limit`` (K
    activations per rank) go to ``zb-auto``, which builds its schedule for them; the other
    schedules do not depend on costs and ignore them, and refuse a memory limit.
    """
    if name not in SCHEDULES:
        raise ValueError(f"unknown schedule {name!r}; choose one of {', '.join(SCHEDULES)}")
    spec = SCHEDULES[name]
    if memory_limit is not None and spec.build is not zb_auto:
        raise ValueError(
            f"only zb-auto takes a memory limit; {name} has a fixed order (got "
            f"memory_limit = {memory_limit})"
        )
    if spec.chunks == "any":
        v = 2 if num_chunks is None else check_int(name, "num_chunks", num_chunks)
        return spec.build(num_stages, num_microbatches, v)
    allowed = 1 if spec.chunks == "none" else 2
    if num_chunks is not None and num_chunks != allowed:
        raise ValueError(
            f"{name} runs exactly {allowed} chunk(s) per rank, got num_chunks = {num_chunks}"
        )
    if spec.build is zb_auto:
        return zb_auto(num_stages, num_microbatches, costs, memory_limit)
    return spec.build(num_stages, num_microbatches)


__all__ = [
    "SCHEDULES",
    "ScheduleSpec",
    "build",
    "gpipe",
    "one_f_one_b",
    "interleaved_1f1b",
    "interleaved_zb",
    "looped_bfs",
    "zb_h1",
    "zb_h2",
    "zb_auto",
    "zb_v",
    "v_half",
    "v_min",
    "dualpipe",
    "dualpipev",
]
