"""Interleaved zero bubble: PyTorch's ScheduleInterleavedZeroBubble (torch 2.13).

PyTorch's docstring calls it "the ZB1P schedule" of Qi et al. 2024, "Zero Bubble Pipeline
Parallelism" (arXiv:2401.10241), with v chunks per rank placed as in interleaved 1F1B
(rank r holds stages r, r+p, ..., r+(v-1)p). It is interleaved 1F1B's order
(:func:`ppbook.schedules.interleaved.rank_order`) with three changes:

- the backward is split into ``I`` (input gradient) and ``W`` (weight gradient);
- rank r warms up with (v-1)n + (p-1-r) forwards (n micro-batches per round), one per hop
  fewer than interleaved 1F1B's 2(p-1-r): a rank need not wait for a full backward;
- from its (r+1)-th input gradient on, rank r runs after each ``I`` the ``W`` of its
  oldest backward still without one; the weight passes left over run last.

With one chunk (v = 1) it is ZB-H1. PyTorch then inserts idle slots
(``_add_bubbles_to_actions``) where a forward's input is not ready in its lock-step
count; that changes no rank's order, and the simulator finds the idle time itself (a
rank waits for its inputs), so the order here is PyTorch's without those slots.
"""

from __future__ import annotations

from ppbook.pipeline_schedule import Schedule
from ppbook.schedules.interleaved import placement, rank_order, rounds
from ppbook.schedules.rules import check_counts, check_int


def interleaved_zb(num_stages: int, num_microbatches: int, num_chunks: int = 2) -> Schedule:
    """Interleaved zero bubble with v = ``num_chunks`` chunks per rank, in PyTorch's order.

    PyTorch's ScheduleInterleavedZeroBubble (torch 2.13, "ZB1P"): F, I and W passes on v
    chunks per rank; rank r warms up with (v-1)n + (p-1-r) forwards (at most m*v), where
    n = m / max(1, m // p) micro-batches go through the chunks per round, then runs F and
    I in turn, each I from the (r+1)-th on followed by a postponed W. Runs every m that
    PyTorch runs: m a multiple of max(1, m // p) (PyTorch's rule; m < p included).
    v = 1 gives ZB-H1.
    """
    v = check_int("interleaved-zb", "num_chunks", num_chunks)
    p, m = check_counts("interleaved-zb", num_stages, num_microbatches, num_chunks=v, passes=3)
    per_round = rounds("interleaved-zb", "ScheduleInterleavedZeroBubble", p, m)
    rows = []
    for rank in range(p):
        warmup = min((v - 1) * per_round + (p - 1 - rank), m * v)  # multiply factor 1
        rows.append(rank_order(p, v, m, per_round, rank, warmup, True))
    return Schedule(rows, placement(p, v), m, name="interleaved-zb")
