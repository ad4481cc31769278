"""Zero-bubble schedules: the backward split into I (input gradient) and W (weight gradient).

Qi, Wan, Huang and Lin 2024, "Zero Bubble Pipeline Parallelism", arXiv:2401.10241. The
paper writes B for the input-gradient pass; here, as in PyTorch, it is ``I``, and ``B``
stays the full backward. Only ``I`` is on the critical path between stages: a rank may
postpone its ``W`` passes to fill the time it would otherwise wait.

- ZB-H1 (Fig. 3 top, Table 2): 1F1B's warm-up, then rank r runs each W r micro-batches
  after its I, so the input gradients run back up the pipeline faster. Same peak memory
  as 1F1B; makespan m(F+I+W) + (p-1)(F+I-W) instead of 1F1B's (m+p-1)(F+I+W).
- ZB-H2 (Fig. 3 bottom, Table 2): twice the warm-up forwards and W passes 2r micro-batches
  late; 2p-1 activations per rank and, when F = I = W, a parallelogram with no bubble
  inside it.
- ZB-V (sec. 6): two chunks per rank in a V, no bubble inside the steady state when
  F = I = W. Same order as PyTorch's ``ScheduleZBVZeroBubble`` (torch 2.13).

Closed forms, with no communication cost and the same F, I, W on every stage chunk (the
tests check each one against the simulator):

- ZB-H1, when W <= F and W <= I: makespan (m+p-1)(F+I) + max(1, m-p+1) W, that is
  Table 2's m(F+I+W) + (p-1)(F+I-W) when m >= p, and (m+p-1)(F+I) + W when m <= p.
- ZB-H2 (m >= 2p-1), when W <= F: makespan m(F+I+W) + (p-1)(F + max(0, I-2W)). This is
  Table 2's m(F+I+W) + (p-1)(F+I-2W) exactly when I >= 2W. When I < 2W no single step
  can reach Table 2: the last rank cannot start before (p-1)F and then has m(F+I+W) of
  work, which is exactly what ZB-H2 takes. Table 2's "zero bubble" at F = I = W counts the
  two triangles at the ends of the parallelogram (rank r idles rF before its first
  forward and (p-1-r)F after its last W) as overlapped with the neighbouring steps, which
  the paper's optimizer post-validation allows; one step alone shows them.
- ZB-V, per chunk, when F <= I and W <= I and m >= 2p-1: makespan
  2m(F+I+W) + (p-1)(I + max(0, I-2W)). At F = I = W = c that is (6m + p - 1) c, the same
  parallelogram (rank r idles rc first and (p-1-r) c last, nothing in between); for any
  m >= 1 it is (6m + max(p-1, 4p-2-2m)) c.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from ppbook.pipeline_schedule import Action, Schedule
from ppbook.schedules.rules import check_counts


def _postponed_w_rows(
    p: int, m: int, warmup: Callable[[int], int], postponed: Callable[[int], int]
) -> list[list[Action]]:
    """One stage per rank: warm-up forwards, then F/I pairs, each W some pairs late.

    Rank r runs ``warmup(r)`` forwards, then one forward and one input-gradient pass in
    turn. With d = ``postponed(r)``, W of micro-batch j runs right after I of micro-batch
    j + d; the last d weight passes run at the very end. A rank holds at most
    ``warmup(r) + 1 + d`` activations (a split backward frees them at its W).
    """
    actions = []
    for rank in range(p):
        warm = min(warmup(rank), m)
        late = postponed(rank)
        row = [Action(rank, "F", j) for j in range(warm)]  # warm-up
        next_w = 0
        for j in range(m):  # steady state: F, I, and the W of a micro-batch `late` back
            if warm + j < m:
                row.append(Action(rank, "F", warm + j))
            row.append(Action(rank, "I", j))
            if j >= late:
                row.append(Action(rank, "W", next_w))
                next_w += 1
        row += [Action(rank, "W", j) for j in range(next_w, m)]  # cool-down: postponed W
        actions.append(row)
    return actions


def zb_h1(num_stages: int, num_microbatches: int) -> Schedule:
    """ZB-H1 (Zero Bubble PP, arXiv:2401.10241, Fig. 3 top): 1F1B memory, a third the bubble.

    Rank r (0-based): 1F1B's warm-up of p-1-r forwards, then forward / input-gradient
    pairs, with W of micro-batch j right after I of micro-batch j+r (the last r weight
    passes run at the end). The last rank thus runs F I F I ..., its W passes filling the
    time the other ranks spend waiting. Peak activations min(p, m) on every rank, as
    1F1B. Any m >= 1. The order is PyTorch's ``ScheduleInterleavedZeroBubble`` (ZB1P) with
    one stage per rank.

    With no communication and W <= F, W <= I on every stage, the makespan is exactly
    m(F+I+W) + (p-1)(F+I-W) for m >= p (Table 2, whose B is our I) and (m+p-1)(F+I) + W
    for m <= p. Example, p = m = 2, F = I = W = 1: rank 0 runs 0F0 0F1 0I0 0W0 0I1 0W1,
    rank 1 runs 1F0 1I0 1F1 1I1 1W0 1W1, makespan 7 (1F1B: 9).
    """
    p, m = check_counts("zb-h1", num_stages, num_microbatches, passes=3)
    rows = _postponed_w_rows(p, m, lambda r: p - 1 - r, lambda r: r)
    return Schedule(rows, tuple(range(p)), m, name="zb-h1")


def zb_h2(num_stages: int, num_microbatches: int) -> Schedule:
    """ZB-H2 (Zero Bubble PP, arXiv:2401.10241, Fig. 3 bottom): more memory, no inner bubble.

    Rank r (0-based): 2(p-1-r) warm-up forwards, so that with F = I = W the forwards
    fill the whole wait for the first input gradient, then forward / input-gradient pairs
    with W of micro-batch j right after I of micro-batch j+2r (the last 2r at the end).
    Peak activations 2p-1 on every rank. Needs m >= 2p-1 (the paper's condition).

    With no communication and W <= F on every stage, the makespan is exactly
    m(F+I+W) + (p-1)(F + max(0, I-2W)): Table 2's (p-1)(F+I-2W) bubble when I >= 2W, and
    when I < 2W the single-step parallelogram, (p-1)F (see the module docstring).
    """
    p, m = check_counts("zb-h2", num_stages, num_microbatches, passes=3)
    if m < 2 * p - 1:
        raise ValueError(
            f"zb-h2 needs num_microbatches >= 2 * num_stages - 1 (m >= 2p-1), got m = {m} "
            f"with p = {p}; use m >= {2 * p - 1}, or zb-h1"
        )
    rows = _postponed_w_rows(p, m, lambda r: 2 * (p - 1 - r), lambda r: 2 * r)
    return Schedule(rows, tuple(range(p)), m, name="zb-h2")


def zb_v(num_stages: int, num_microbatches: int) -> Schedule:
    """ZB-V (Zero Bubble PP, arXiv:2401.10241, sec. 6): two chunks per rank in a V.

    ``num_stages`` is p, the number of ranks; the model is cut into 2p stage chunks and
    rank r holds chunks r and 2p-1-r, so a micro-batch goes down ranks 0..p-1 and back up
    p-1..0, and rank 0 both starts and ends it. The order is PyTorch's
    ``ScheduleZBVZeroBubble`` (torch 2.13): warm-up forwards of chunk r, forwards of both
    chunks, F I W of chunk 2p-1-r, a steady state of F I W on one chunk then on the
    other, and a cool-down of input gradients with the weight passes last. Any m >= 1 (for
    m < 2p-1, PyTorch's orders for 2p-1 micro-batches with the extra ones left out).

    Memory: :class:`~ppbook.timeline.Timeline` counts chunk activations, each half of what
    one rank's whole share of the model keeps. Rank 0 peaks at min(2p, m+1) chunk
    activations, and every rank at 2p once m >= 2p-1: p micro-batches of a whole rank's
    share, the same as 1F1B (paper sec. 6).

    With per-chunk costs, F <= I, W <= I, m >= 2p-1 and no communication, the makespan is
    exactly 2m(F+I+W) + (p-1)(I + max(0, I-2W)); at F = I = W = c, (6m + p - 1) c with no
    idle time inside the steady state (module docstring).
    """
    p, m = check_counts("zb-v", num_stages, num_microbatches, num_chunks=2, passes=3)
    n = max(2 * p - 1, m)  # PyTorch's count; actions of micro-batches >= m are dropped
    actions = [[a for a in _zb_v_row(p, n, rank) if a.microbatch < m] for rank in range(p)]
    return Schedule(actions, v_placement(p), m, name="zb-v")


class _Counters:
    """Hands out each (stage, kind)'s micro-batches in order: ``take(3, "F")`` -> ``3F0``."""

    def __init__(self) -> None:
        self.next: defaultdict[tuple[int, str], int] = defaultdict(int)

    def __call__(self, stage: int, kind: str) -> Action:
        microbatch = self.next[stage, kind]
        self.next[stage, kind] = microbatch + 1
        return Action(stage, kind, microbatch)


def _zb_v_row(p: int, n: int, rank: int) -> list[Action]:
    """Rank ``rank``'s ZB-V order for ``n`` micro-batches (PyTorch's phases)."""
    down, up = rank, 2 * p - 1 - rank  # the V's first arm and its second arm
    take, row = _Counters(), []
    row += [take(down, "F") for _ in range(2 * (p - rank) - 1)]  # warm-up: first arm
    for _ in range(rank):  # forwards on both arms
        row += [take(up, "F"), take(down, "F")]
    for _ in range(p - rank):  # the bottom of the V: F, I, W of the second arm at once
        row += [take(up, "F"), take(up, "I"), take(up, "W")]
    # steady state: F I W on the first arm, then on the second
    while take.next[up, "F"] < take.next[down, "F"] or take.next[down, "F"] < n:
        if take.next[down, "F"] < n:
            row.append(take(down, "F"))
        row += [take(down, "I"), take(down, "W"), take(up, "F"), take(up, "I"), take(up, "W")]
    for _ in range(rank):  # cool-down: input gradients first, weights at the end
        row += [take(down, "I"), take(up, "I")]
    for _ in range(p - rank):
        row += [take(down, "I"), take(down, "W")]
    row += [take(up, "W") for _ in range(take.next[up, "W"], n)]
    row += [take(down, "W") for _ in range(take.next[down, "W"], n)]
    return row


def v_placement(p: int) -> tuple[int, ...]:
    """Rank r holds stages r and 2p-1-r (the V)."""
    return tuple(s if s < p else 2 * p - 1 - s for s in range(2 * p))
