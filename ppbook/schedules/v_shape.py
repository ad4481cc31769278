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
(tests/test_schedules_v_shape.py keeps two of their orders literally and a digest of
theirs for every p <= 9, m <= 3p+3 and a few larger cases).

The steps cost about linear time in the p * 6m passes (p = 64, m = 1024: well under a
second; ``benchmarks/bench_simulator.py``): only the warm-up and cool-down passes are
visited one by one (the steady state never moves), the W passes are placed first come,
first served with running maxima (:func:`_fifo`), a move is checked only from the slot it
goes to until the rank's activations agree with the old ones again, and the squeeze solves
each rank's start times as one running maximum, again from the first pass a neighbour
changed (:func:`_squeeze`). Built rows are kept (:func:`_rows`), as a sizing search asks
for the same (p, m) more than once.

What the authors print (their README and the paper's demo page, REFERENCES.md): activation
memory (p+4)//3 micro-batches of a full stage for V-Min and (p+2)//2 for V-Half, against
1F1B's p; bubble about 2/3 (V-Min) and 1/2 (V-Half) of 1F1B's when F = B = W. Checked in
tests/test_schedules_v_shape.py.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from functools import lru_cache, partial
from itertools import chain, repeat
from operator import itemgetter

import numpy as np

from ppbook.pipeline_schedule import Action, Schedule
from ppbook.schedules.rules import check_counts
from ppbook.schedules.zero_bubble import v_placement

_PERIOD = 6  # slots per micro-batch on every rank: F, I, W on two chunks
# pass types of a block, in the order of its offsets: (arm, kind); arm 0 is down (stage r)
_TYPES = ((0, "F"), (1, "F"), (1, "I"), (0, "I"))
_W = 4  # the weight passes, when kept in one list
_new_action = partial(tuple.__new__, Action)


def block_offsets(p: int, kind: str) -> list[tuple[int, int, int, int]]:
    """Rank r's slots for micro-batch 0: (F down, F up, I up, I down), module docstring."""
    if kind == "v-min":
        d = 2 if p % 3 == 0 else 0
        return [(r, 2 * p - 1 - r, 2 * p + d + r, 4 * p + d - 1 - r) for r in range(p)]
    d = 3 if p % 2 == 0 else 0
    return [(2 * r, 3 * p - 2 - r, 3 * p + d + 2 * r - 1, 6 * p + d - 2 - r) for r in range(p)]


def _fifo(free: np.ndarray, arrivals: np.ndarray, beyond: int) -> np.ndarray:
    """Slots of unit passes served first come, first served in the sorted ``free`` slots,
    each after its arrival (sorted); those left over take ``beyond``, ``beyond`` + 1, ...

    The k-th pass takes free slot max(first free slot after its arrival, the (k-1)-th's
    + 1), in indices of ``free``: k plus the running maximum of (that first index - k)."""
    k = np.arange(len(arrivals))
    index = k + np.maximum.accumulate(np.searchsorted(free, arrivals, side="right") - k)
    out = beyond + index - len(free)
    inside = index < len(free)
    out[inside] = free[index[inside]]
    return out


def _free_slots(slots: list[list[int]]) -> tuple[np.ndarray, int]:
    """A rank's free slots up to its last pass (sorted), and that last slot."""
    taken = np.concatenate([np.asarray(row) for row in slots[:4]])
    last = int(taken.max())
    busy = np.zeros(last + 1, dtype=bool)
    busy[taken] = True
    return np.flatnonzero(~busy), last


def _w_slots(slots: list[list[int]]) -> np.ndarray:
    """The W passes in one list (each in the first free slot after its I, FIFO)."""
    free, last = _free_slots(slots)
    backwards = np.sort(np.concatenate([np.asarray(slots[2]), np.asarray(slots[3])]))
    return _fifo(free, backwards, last + 1)


def _put_w(slots: list[list[int]], split: bool) -> list[list[int]]:
    """Add the W passes: each in the first free slot after its I, FIFO, the up arm's first
    when ``split`` (two lists, up then down), else one list; leftovers after the last slot.

    The up arm's W take any free slot they can, as if alone; the down arm's the free slots
    left to them (and after the up arm's leftovers)."""
    rows = [row[:] for row in slots[:4]]
    if not split:
        return [*rows, _w_slots(slots).tolist()]
    free, last = _free_slots(slots)
    up = _fifo(free, np.asarray(slots[2]), last + 1)
    left = np.setdiff1d(free, up, assume_unique=True)
    beyond = last + 1 + int(np.count_nonzero(up > last))
    down = _fifo(left, np.asarray(slots[3]), beyond)
    return [*rows, up.tolist(), down.tolist()]


def _curve(slots: list[list[int]], w: np.ndarray, length: int) -> np.ndarray:
    """Chunk activations held after each slot: +1 at each F, -1 at each W."""
    change = np.bincount(np.asarray(slots[0]), minlength=length)[:length]
    change = change + np.bincount(np.asarray(slots[1]), minlength=length)[:length]
    change = change - np.bincount(w[w < length], minlength=length)[:length]
    return np.cumsum(change)


def _peak(slots: list[list[int]]) -> int:
    """A rank's most chunk activations: +1 at each F, -1 at each W; without W lists a free
    slot after a pending I stands for its W (the block's own W placement)."""
    w = np.asarray(slots[_W]) if len(slots) > 4 else _w_slots(slots)
    length = max(max(row) for row in slots[:4]) + 1
    return max(0, int(_curve(slots, w, length).max()))


def _earliest(slots, backwards, r: int, t: int, j: int) -> int:
    """The first slot pass (r, t, j) may take: after what it depends on, in unit slots
    (``backwards[r]``: rank r's I slots in order; the j-th W follows the j-th of them)."""
    p = len(slots)
    rank = slots[r]
    best = rank[t][j - 1] if j > 0 else -1
    if t == _W:
        return max(best, backwards[r][j]) + 1
    if 0 < t:
        best = max(best, rank[t - 1][j])
    if t in (0, 2):  # down the V: forward of the down arm, I of the up arm
        if r > 0:
            best = max(best, slots[r - 1][t][j])
    elif r + 1 < p:  # up the V
        best = max(best, slots[r + 1][t][j])
    return best + 1


def _moving(slots, consider_w: bool) -> list[tuple[int, int, int, int]]:
    """The passes that may move, as (slot, rank, type, micro-batch) in (slot, rank)
    order: those of the warm-up (with ``consider_w``), before rank 0's first I down, and
    those of the cool-down, after the first forward down of the last micro-batch that
    comes after that I (rows are in micro-batch order, so in slot order)."""
    m = len(slots[0][0])
    s0 = slots[0][3][0]
    after = [(rank[0][m - 1], r) for r, rank in enumerate(slots) if (rank[0][m - 1], r) > (s0, 0)]
    events = []
    for r, rank in enumerate(slots):
        for t, row in enumerate(rank):
            if consider_w:
                last = bisect_left(row, s0)
                events.extend(zip(row[:last], repeat(r), repeat(t), range(last), strict=False))
            if after:
                ts, tr = min(after)
                first = bisect_left(row, ts) if r > tr else bisect_right(row, ts)
                events.extend(
                    zip(row[first:], repeat(r), repeat(t), range(first, len(row)), strict=False)
                )
    events.sort()
    return events


class _Implicit:
    """A rank's activations slot by slot when its W passes are not placed yet (as
    :func:`_peak`: a free slot runs one pending W), kept so that moving one pass earlier is
    checked from the slot it moves to until the activations agree with the old ones again
    (beyond that the rank runs as before, within the limit)."""

    def __init__(self, slots: list[list[int]]) -> None:
        length = max(max(row) for row in slots) + 1
        at = np.full(length, -1)
        for t, row in enumerate(slots):
            at[np.asarray(row)] = t
        w = _w_slots(slots)
        self.at = at.tolist()  # slot -> pass type
        self.held = _curve(slots, w, length).tolist()  # activations after each slot
        backwards = np.bincount(
            np.concatenate([np.asarray(slots[2]), np.asarray(slots[3])]), minlength=length
        )
        done = np.bincount(w[w < length], minlength=length)
        self.pending = np.cumsum(backwards - done).tolist()  # I whose W is still to run

    def _scan(self, start: int, moved: int, limit: int, store: bool) -> bool:
        """Whether the activations from ``start`` stay within ``limit`` (until they agree
        with the stored ones after ``moved``); with ``store``, keep them."""
        held, pending = (self.held[start - 1], self.pending[start - 1]) if start else (0, 0)
        at, old_held, old_pending = self.at, self.held, self.pending
        for x in range(start, len(at)):
            t = at[x]
            if t < 0:
                if pending:
                    held, pending = held - 1, pending - 1
            elif t < 2:
                held += 1
                if held > limit:
                    return False
            else:
                pending += 1
            if x >= moved and held == old_held[x] and pending == old_pending[x]:
                return True
            if store:
                old_held[x], old_pending[x] = held, pending
        return True

    def move(self, s: int, free, limit: int) -> int:
        """Move the pass at slot ``s`` to the first of ``free`` that keeps the peak within
        ``limit``; return its slot (``s`` when none does)."""
        at = self.at
        t = at[s]
        at[s] = -1
        for e in free:
            at[e] = t
            if self._scan(e, s, limit, store=False):
                self._scan(e, s, limit, store=True)
                return e
            at[e] = -1
        at[s] = t
        return s


def _reorder(slots, consider_w: bool):
    """Move warm-up (with ``consider_w``) and cool-down passes to earlier free slots where
    no rank's peak memory grows past the schedule's; the steady state stays.

    Passes are visited in slot order, and only those visited have moved (earlier), so the
    free slots before a pass are the ones no pass of its rank holds now. A rank's
    bookkeeping is set up when its first pass is visited (before, nothing on it moved)."""
    if consider_w:
        slots = [_put_w(rank, split=False) for rank in slots]
    limit = max(_peak(rank) for rank in slots)
    # per rank, once visited: slots held now, its I slots in order, and its activations
    # (after each slot, W placed; or an _Implicit)
    occupied, backwards, curves = {}, {}, {}
    for s, r, t, j in _moving(slots, consider_w):
        rank = slots[r]
        if r not in occupied:
            length = max(map(max, rank)) + 1
            busy = np.zeros(length, dtype=np.uint8)
            busy[np.fromiter(chain.from_iterable(rank), np.int64)] = 1
            occupied[r] = bytearray(busy.tobytes())
            backwards[r] = sorted(rank[2] + rank[3])
            curves[r] = (
                _curve(rank, np.asarray(rank[_W]), length) if consider_w else _Implicit(rank)
            )
        busy, curve = occupied[r], curves[r]
        start = _earliest(slots, backwards, r, t, j)
        if consider_w:  # only a forward moved earlier can raise the peak
            low = start
            if t < 2 and start < s:  # after the last slot in reach that is at the limit
                full = (curve[start:s] >= limit).nonzero()[0]
                if len(full):
                    low += int(full[-1]) + 1
            slot = busy.find(0, low, s) if low < s else -1
            slot = s if slot < 0 else slot
            if slot < s and t != 2 and t != 3:
                curve[slot:s] += 1 if t < 2 else -1
        else:
            slot = curve.move(s, (e for e in range(start, s) if not busy[e]), limit)
        rank[t][j] = slot
        busy[s], busy[slot] = 0, 1
        if t in (2, 3) and slot != s:
            order = backwards[r]
            del order[bisect_left(order, s)]
            insort(order, slot)
    if not consider_w:
        slots = [_put_w(rank, split=False) for rank in slots]
    return _squeeze(slots)


@lru_cache(maxsize=8)
def _dependencies(p: int, m: int) -> np.ndarray:
    """For the passes of 5 rows a rank (F down, F up, I up, I down, then 2m W), flattened:
    the pass on a neighbouring rank each waits for in :func:`_squeeze` (p * 6m, past the
    end, for none: the W and the V's ends)."""
    row = 6 * m
    n = p * row
    index = np.arange(n)
    rank, within = np.divmod(index, row)
    t = np.minimum(within // m, _W)
    cross = np.full(n + 1, n)
    down = ((t == 0) | (t == 2)) & (rank > 0)
    up = ((t == 1) | (t == 3)) & (rank + 1 < p)
    cross[:n][down] = index[down] - row
    cross[:n][up] = index[up] + row
    return cross


def _squeeze(slots):
    """Start every pass as early as its order and dependencies allow, at unit cost.

    A pass starts after its rank's previous one and one slot after the pass it waits for
    on a neighbouring rank (those it waits for on its own rank run before it, in its
    order). On one rank, the k-th pass starts at k + the running maximum of (the slot
    after what it waits for - k); the ranks are solved again in turn, down and up the
    pipeline, from the first pass whose neighbour's start changed, until none changes
    (the dependencies form no cycle: the one answer, found from 0 upwards)."""
    p, m = len(slots), len(slots[0][0])
    row = 6 * m
    n = p * row
    cross = _dependencies(p, m)
    flat = np.fromiter(chain.from_iterable(chain.from_iterable(slots)), np.int64, n)
    ids = np.argsort(flat.reshape(p, row), axis=1, kind="stable") + np.arange(0, n, row)[:, None]
    waits = cross[ids]  # what each pass waits for, in rank order
    waiter = np.full(n + 1, -1)  # the position in its rank's order of the pass that waits
    waiter[waits] = k = np.arange(row)
    waiter_rank = np.full(n + 1, -1)  # and its rank
    waiter_rank[waits] = np.arange(p)[:, None]
    waiter_rank[n] = -1
    start = np.zeros(n + 1, dtype=np.int64)
    start[n] = -1
    first = [0] * p  # the first position to solve again on each rank (row: none)
    down = True
    while min(first) < row:
        for r in range(p) if down else range(p - 1, -1, -1):
            q = first[r]
            if q == row:
                continue
            first[r] = row
            seed = int(start[ids[r, q - 1]]) + 1 - q if q else 0
            tail = k[q:]
            begin = tail + np.maximum(np.maximum.accumulate(start[waits[r, q:]] + 1 - tail), seed)
            where = ids[r, q:]
            changed = where[begin != start[where]]
            if len(changed):
                start[where] = begin
                ranks, positions = waiter_rank[changed], waiter[changed]
                for neighbour in (r - 1, r + 1):
                    hit = positions[ranks == neighbour]
                    if len(hit) and 0 <= neighbour < p:
                        first[neighbour] = min(first[neighbour], int(hit.min()))
        down = not down
    out = start[:n].tolist()
    return [
        [out[base + t * m : base + (t + 1) * m] for t in range(4)]
        + [out[base + 4 * m : base + row]]
        for base in range(0, n, row)
    ]


def v_schedule_rows(p: int, m: int, kind: str) -> list[list[Action]]:
    """Each rank's order for ``kind`` ("v-half" or "v-min"): repeat, reorder, W placed."""
    return [list(row) for row in _rows(p, m, kind)]


@lru_cache(maxsize=8)
def _rows(p: int, m: int, kind: str) -> tuple[tuple[Action, ...], ...]:
    """:func:`v_schedule_rows`, the last 8 kept (a schedule is immutable): a sizing
    search asks for the same (p, m) several times."""
    slots = [
        [list(range(o, o + _PERIOD * m, _PERIOD)) for o in offsets]
        for offsets in block_offsets(p, kind)
    ]
    slots = _reorder(slots, consider_w=True)
    slots = _reorder([rank[:4] for rank in slots], consider_w=False)
    rows = []
    labels = [*_TYPES, (1, "W"), (0, "W")]
    for r, rank in enumerate(slots):
        rank = _put_w(rank[:4], split=True)
        stage = (r, 2 * p - 1 - r)  # (down arm, up arm)
        actions = list(
            map(
                _new_action,
                chain.from_iterable(
                    zip(repeat(stage[arm]), repeat(name), range(m), strict=False)
                    for arm, name in labels
                ),
            )
        )
        order = np.argsort(np.concatenate([np.asarray(row) for row in rank]))
        rows.append(itemgetter(*order.tolist())(actions))  # 6m >= 6 items: a tuple
    return tuple(rows)


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
    return Schedule(_rows(p, m, "v-half"), v_placement(p), m, name="v-half")


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
    return Schedule(_rows(p, m, "v-min"), v_placement(p), m, name="v-min")
