"""V-Half and V-Min: V-shaped schedules with controllable memory.

Qi, Wan, Amar and Lin 2024, "Pipeline Parallelism with Controllable Memory"
(arXiv:2405.15362, NeurIPS 2024). A schedule is one *building block*, the passes of one
micro-batch laid out on every rank, repeated every 6 slots (each rank runs six passes per
micro-batch: F, I and W on each of its two chunks). The block's *lifespan* on a rank,
from its first forward to its last weight pass, sets the rank's peak activation memory.
As in ZB-V, the model is cut into 2p stage chunks and rank r holds chunks r and 2p-1-r,
so a micro-batch goes down ranks 0..p-1 and back up p-1..0.

The V-shaped blocks place rank r's passes of micro-batch 0 at these slots (the offsets of
the authors' implementation, sail-sg/zero-bubble-pipeline-parallelism,
``zbv_greedy.py``; d avoids a collision when repeating):

- V-Min:  F down r, F up 2p-1-r, I up 2p+d+r, I down 4p+d-1-r (d = 2 when 3 | p, else 0);
- V-Half: F down 2r, F up 3p-2-r, I up 3p+d+2r-1, I down 6p+d-2-r (d = 3 when 2 | p).

The framework's steps (the demo page's repeating, reordering, squeezing), written anew:
*repeat* the block every 6 slots and put each W in the first free slot after its I (the
up arm's first); *reorder* the passes of the warm-up and the cool-down into earlier free
slots where no rank's peak memory grows; *squeeze* out the empty slots without changing
any rank's order (the simulator does this last step itself, for any costs). The order
does not depend on the costs. It is the order of the authors' ``zbv_greedy.py``
(compared for p <= 9, m <= 3p+3 when written; two cases are kept in
tests/test_schedules_v_shape.py).

What the authors print (their README and the paper's demo page, REFERENCES.md): activation
memory (p+4)//3 micro-batches of a full stage for V-Min and (p+2)//2 for V-Half, against
1F1B's p; bubble about 2/3 (V-Min) and 1/2 (V-Half) of 1F1B's when F = B = W. Checked in
tests/test_schedules_v_shape.py.
"""

from __future__ import annotations

from bisect import insort
from itertools import accumulate

from ppbook.pipeline_schedule import Action, Schedule
from ppbook.schedules.rules import check_counts
from ppbook.schedules.zero_bubble import v_placement

_PERIOD = 6  # slots per micro-batch on every rank: F, I, W on two chunks
# pass types of a block, in the order of its offsets: (arm, kind); arm 0 is down (stage r)
_TYPES = ((0, "F"), (1, "F"), (1, "I"), (0, "I"))
_W = 4  # the weight passes, when kept in one list


def block_offsets(p: int, kind: str) -> list[tuple[int, int, int, int]]:
    """Rank r's slots for micro-batch 0: (F down, F up, I up, I down), module docstring."""
    if kind == "v-min":
        d = 2 if p % 3 == 0 else 0
        return [(r, 2 * p - 1 - r, 2 * p + d + r, 4 * p + d - 1 - r) for r in range(p)]
    d = 3 if p % 2 == 0 else 0
    return [(2 * r, 3 * p - 2 - r, 3 * p + d + 2 * r - 1, 6 * p + d - 2 - r) for r in range(p)]


def _put_w(slots: list[list[int]], split: bool) -> list[list[int]]:
    """Add the W passes: each in the first free slot after its I, FIFO, the up arm's first
    when ``split`` (two lists, up then down), else one list; leftovers after the last slot."""
    lists: list[list[int]] = [[], []] if split else [[]]
    pending = [0, 0]
    taken = {s: t for t, row in enumerate(slots) for s in row}
    last = max(taken)
    for s in range(last + 1):
        if s in taken:
            if taken[s] in (2, 3):
                pending[taken[s] - 2 if split else 0] += 1
            continue
        for w in range(2):
            if pending[w]:
                lists[w].append(s)
                pending[w] -= 1
                break
    s = last
    for w in range(2):
        while pending[w]:
            s += 1
            lists[w].append(s)
            pending[w] -= 1
    return [row[:] for row in slots[:4]] + lists


def _peak(slots: list[list[int]]) -> int:
    """A rank's most chunk activations: +1 at each F, -1 at each W; without W lists a free
    slot after a pending I stands for its W (the block's own W placement)."""
    events = sorted((s, t) for t, row in enumerate(slots) for s in row)
    has_w = len(slots) > 4
    held = peak = pending = 0
    previous = -1
    for s, t in events:
        if not has_w:  # each free slot before s runs one pending W
            freed = min(pending, s - previous - 1)
            held -= freed
            pending -= freed
        previous = s
        if t < 2:
            held += 1
        elif t < 4:
            pending += 1
        else:
            held -= 1
        peak = max(peak, held)
    return peak


def _global_order(slots: list[list[list[int]]]) -> list[tuple[int, int, int, int]]:
    """Every pass as (slot, rank, type, micro-batch), in slot order."""
    return sorted(
        (s, r, t, j)
        for r, rank in enumerate(slots)
        for t, row in enumerate(rank)
        for j, s in enumerate(row)
    )


def _earliest(slots, backwards, r: int, t: int, j: int) -> int:
    """The first slot pass (r, t, j) may take: after what it depends on, in unit slots
    (``backwards[r]``: rank r's I slots in order; the j-th W follows the j-th of them)."""
    p = len(slots)
    deps = [-1]
    if t in (0, 2) and r > 0:  # down the V: forward of the down arm, I of the up arm
        deps.append(slots[r - 1][t][j])
    if t in (1, 3) and r + 1 < p:  # up the V
        deps.append(slots[r + 1][t][j])
    if 0 < t < 4:
        deps.append(slots[r][t - 1][j])
    if t == _W:
        deps.append(backwards[r][j])
    if j > 0:
        deps.append(slots[r][t][j - 1])
    return max(deps) + 1


def _reorder(slots, consider_w: bool):
    """Move warm-up (with ``consider_w``) and cool-down passes to earlier free slots where
    no rank's peak memory grows past the schedule's; the steady state stays."""
    if consider_w:
        slots = [_put_w(rank, split=False) for rank in slots]
        held = [_held(rank) for rank in slots]  # chunk activations after each slot
    else:
        curves = [_Implicit(rank) for rank in slots]
    limit = max(_peak(rank) for rank in slots)
    backwards = [sorted(rank[2] + rank[3]) for rank in slots]
    last_mb = len(slots[0][0]) - 1
    occupied = [set() for _ in slots]
    phase = 0  # 0: warm-up, 1: steady state, 2: cool-down
    for s, r, t, j in _global_order(slots):
        if phase == 0 and t == 3 and r == 0:
            phase = 1
        if phase == 1 or (phase == 0 and not consider_w):
            if phase == 1 and t == 0 and j == last_mb:
                phase = 2
            occupied[r].add(s)
            continue
        free = [e for e in range(_earliest(slots, backwards, r, t, j), s) if e not in occupied[r]]
        slot = s
        if consider_w:  # only a forward moved earlier can raise the peak
            curve = held[r]
            slot = next((e for e in free if t >= 2 or max(curve[e:s]) < limit), s)
            change = 1 if t < 2 else -1 if t == _W else 0
            for e in range(slot, s):
                curve[e] += change
        else:
            slot = curves[r].move(s, free, limit)
        slots[r][t][j] = slot
        occupied[r].add(slot)
        if t in (2, 3) and slot != s:
            backwards[r].remove(s)
            insort(backwards[r], slot)
    if not consider_w:
        slots = [_put_w(rank, split=False) for rank in slots]
    return _squeeze(slots)


def _held(slots: list[list[int]]) -> list[int]:
    """Chunk activations held after each slot, with the W passes in their own list."""
    change = [0] * (max(max(row) for row in slots) + 1)
    for t, row in enumerate(slots):
        for s in row:
            change[s] += 1 if t < 2 else -1 if t == _W else 0
    return list(accumulate(change))


class _Implicit:
    """A rank's activations slot by slot when its W passes are not placed yet (as
    :func:`_peak`: a free slot runs one pending W), kept so that moving one pass earlier is
    checked from the slot it moves to, not from the start."""

    def __init__(self, slots: list[list[int]]) -> None:
        self.at = [-1] * (max(max(row) for row in slots) + 1)  # slot -> pass type
        for t, row in enumerate(slots):
            for s in row:
                self.at[s] = t
        self.state = [(0, 0, 0)] * len(self.at)  # (held, pending I, peak so far) after slot
        self._scan(0, store=True)

    def _scan(self, start: int, store: bool = False) -> int:
        held, pending, peak = self.state[start - 1] if start else (0, 0, 0)
        at, state = self.at, self.state
        for x in range(start, len(at)):
            t = at[x]
            if t < 0:
                if pending:
                    held, pending = held - 1, pending - 1
            elif t < 2:
                held += 1
                peak = max(peak, held)
            else:
                pending += 1
            if store:
                state[x] = (held, pending, peak)
        return peak

    def move(self, s: int, free: list[int], limit: int) -> int:
        """Move the pass at slot ``s`` to the first of ``free`` that keeps the peak within
        ``limit``; return its slot (``s`` when none does)."""
        t = self.at[s]
        self.at[s] = -1
        for e in free:
            self.at[e] = t
            if self._scan(e) <= limit:
                self._scan(e, store=True)
                return e
            self.at[e] = -1
        self.at[s] = t
        return s


def _squeeze(slots):
    """Start every pass as early as its order and dependencies allow, at unit cost."""
    p = len(slots)
    start = [[[0] * len(row) for row in rank] for rank in slots]
    free = [0] * p
    for _, r, t, j in _global_order(slots):
        begin = max(_earliest_after(start, r, t, j, p), free[r])
        start[r][t][j] = begin
        free[r] = begin + 1
    return start


def _earliest_after(start, r: int, t: int, j: int, p: int) -> int:
    deps = [0]
    if t in (0, 2) and r > 0:
        deps.append(start[r - 1][t][j] + 1)
    if t in (1, 3) and r + 1 < p:
        deps.append(start[r + 1][t][j] + 1)
    if 0 < t < 4:
        deps.append(start[r][t - 1][j] + 1)
    if j > 0:
        deps.append(start[r][t][j - 1] + 1)
    return max(deps)


def v_schedule_rows(p: int, m: int, kind: str) -> list[list[Action]]:
    """Each rank's order for ``kind`` ("v-half" or "v-min"): repeat, reorder, W placed."""
    slots = [
        [[o + _PERIOD * j for j in range(m)] for o in offsets] for offsets in block_offsets(p, kind)
    ]
    slots = _reorder(slots, consider_w=True)
    slots = _reorder([rank[:4] for rank in slots], consider_w=False)
    slots = [_put_w(rank[:4], split=True) for rank in slots]
    rows = []
    for r, rank in enumerate(slots):
        stage = (r, 2 * p - 1 - r)  # (down arm, up arm)
        kinds = [*_TYPES, (1, "W"), (0, "W")]
        passes = sorted((s, t, j) for t, row in enumerate(rank) for j, s in enumerate(row))
        rows.append([Action(stage[kinds[t][0]], kinds[t][1], j) for _, t, j in passes])
    return rows


def v_half(num_stages: int, num_microbatches: int) -> Schedule:
    """V-Half (arXiv:2405.15362): half of 1F1B's activation memory, a V of 2 chunks.

    ``num_stages`` is p, the number of ranks; rank r holds chunks r and 2p-1-r (as ZB-V).
    Peak activations (p+2)//2 micro-batches of a full stage on the busiest rank (1F1B: p)
    once m is large enough to fill the pipeline; bubble about half of 1F1B's when
    F = I = W. Any m >= 1; the order does not depend on the costs, so when F, I and W
    differ the steady state idles and the bubble grows with m (p = 8, F = 1, I = 1.5,
    W = 0.5: 22.5, 30.5, 46.5 time units at m = 32, 64, 128; 1F1B's stays 21).
    """
    p, m = check_counts("v-half", num_stages, num_microbatches, num_chunks=2, passes=3)
    return Schedule(v_schedule_rows(p, m, "v-half"), v_placement(p), m, name="v-half")


def v_min(num_stages: int, num_microbatches: int) -> Schedule:
    """V-Min (arXiv:2405.15362): a third of 1F1B's activation memory, a V of 2 chunks.

    ``num_stages`` is p, the number of ranks; rank r holds chunks r and 2p-1-r (as ZB-V).
    Peak activations (p+4)//3 micro-batches of a full stage on the busiest rank (1F1B: p);
    bubble about two thirds of 1F1B's when F = I = W. Any m >= 1; the order does not
    depend on the costs, so when they differ the bubble grows with m, faster than
    V-Half's (p = 8, F = 1, I = 1.5, W = 0.5: 63, 111, 207 time units at m = 32, 64, 128),
    as the authors' README warns ("V-Min suffers a performance degradation when F/B/W
    are not balanced").
    """
    p, m = check_counts("v-min", num_stages, num_microbatches, num_chunks=2, passes=3)
    return Schedule(v_schedule_rows(p, m, "v-min"), v_placement(p), m, name="v-min")
