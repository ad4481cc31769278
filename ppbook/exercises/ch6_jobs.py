"""The model, speed and simulated step that chapter 6's exercises share
(:mod:`ppbook.exercises.ch6` and :mod:`ppbook.exercises.ch6_make`), in one module that both
import, so that neither imports the other."""

from __future__ import annotations

from ppbook.cost_model.flops import stage_costs
from ppbook.cost_model.memory_bytes import MemoryBreakdown, ModelShape, Parallel, peak_memory
from ppbook.schedules import build
from ppbook.simulate import simulate
from ppbook.timeline import Timeline

SPEED = 150e12
"""FLOP/s each device sustains in these exercises (an assumption: about half of an
A100's 16-bit peak), turning :mod:`ppbook.cost_model.flops` counts into seconds."""

MODEL_13B = ModelShape(layers=40, hidden=5120, heads=40, vocab=51200, seq_len=2048)
"""The chapter's 13-billion-parameter GPT: 40 layers, h = 5120, 40 heads, s = 2048."""

MODEL_5B = ModelShape(layers=24, hidden=4096, heads=32, vocab=51200, seq_len=2048)
"""A 5-billion-parameter GPT for exercise 6.6: 24 layers, h = 4096, 32 heads, s = 2048."""


def run(
    name: str,
    shape: ModelShape,
    parallel: Parallel,
    p: int,
    m: int,
    num_chunks: int | None = None,
    layers_per_part=None,
) -> tuple[Timeline, list[MemoryBreakdown]]:
    """Simulate one step of schedule ``name`` with :func:`stage_costs` at :data:`SPEED`;
    return the timeline (in seconds) and each rank's :class:`MemoryBreakdown`."""
    schedule = build(name, p, m, num_chunks)
    costs = stage_costs(schedule, shape, parallel, SPEED, layers_per_part)
    timeline = simulate(schedule, costs)
    return timeline, peak_memory(timeline, shape, parallel, layers_per_part)
