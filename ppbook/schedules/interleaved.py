"""Several stage chunks per rank: interleaved 1F1B and looped breadth-first.

Rank r holds the v chunks r, r+p, ..., r+(v-1)p of a model cut into p*v stages.

- Interleaved 1F1B (Megatron-LM, Narayanan et al. 2021, arXiv:2104.04473, sec. 2.2.2):
  the bubble shrinks by v, to (p-1)(F+B)/v of a full stage, while point-to-point traffic
  grows by v. The order is PyTorch's ScheduleInterleaved1F1B (torch 2.13; the tests
  compare the two action by action): micro-batches go through the chunks in rounds of
  m / max(1, m // p) micro-batches, so it runs every m that PyTorch runs, m < p included,
  and refuses, as PyTorch does, an m that is not a multiple of its number of rounds.
  See :func:`interleaved_1f1b` for where it differs from Megatron-LM's.
- Looped BFS (Lamy-Poirier 2023, "Breadth-First Pipeline Parallelism", arXiv:2211.05953):
  each rank runs every micro-batch through its first chunk, then its second, ...; then the
  backwards in reverse order. Order as PyTorch's ScheduleLoopedBFS.

The zero-bubble variant of the same order, PyTorch's ScheduleInterleavedZeroBubble, is in
:mod:`ppbook.schedules.interleaved_zb`; both use :func:`rounds` and :func:`rank_order`.
"""

from __future__ import annotations

from collections import defaultdict

from ppbook.pipeline_schedule import Action, Schedule
from ppbook.schedules.rules import check_counts, check_int


def placement(p: int, v: int) -> tuple[int, ...]:
    """Rank r holds stages r, r+p, ..., r+(v-1)p (the loop)."""
    return tuple(stage % p for stage in range(p * v))


def rounds(name: str, pytorch_class: str, p: int, m: int) -> int:
    """Micro-batches per round, PyTorch's ``n_microbatches // number_of_rounds``.

    PyTorch (torch 2.13) runs ``max(1, m // p)`` rounds and refuses an m that is not a
    multiple of that number; so does this function, with a one-line error naming the rule.
    """
    number = max(1, m // p)
    if m % number:
        # the nearest counts PyTorch runs: multiples of p always do, so each is < p away
        lower = next(k for k in range(m - 1, 0, -1) if k % max(1, k // p) == 0)
        upper = next(k for k in range(m + 1, m + p + 1) if k % max(1, k // p) == 0)
        raise ValueError(
            f"{name} needs num_microbatches to be a multiple of its number of rounds, "
            f"max(1, m // p) (PyTorch's {pytorch_class} rule), got m = {m} with p = {p} "
            f"({number} rounds); try m = {lower} or m = {upper}"
        )
    return m // number


def rank_order(
    p: int, v: int, m: int, per_round: int, rank: int, warmup: int, zero_bubble: bool
) -> list[Action]:
    """One rank's actions in PyTorch's ``_get_1f1b_rank_ops`` order (torch 2.13).

    ``warmup`` forwards, then one forward and one backward in turn, then the remaining
    backwards. The k-th forward runs chunk (k // per_round) % v, the k-th backward the
    chunks in reverse, per_round micro-batches at a time; each stage takes its
    micro-batches in order. With ``zero_bubble`` the backward is the input gradient ``I``
    and, from the (rank+1)-th backward on, each one is followed by the ``W`` of the oldest
    backward still without one; the rest run last.
    """
    total = m * v  # forwards (and backwards) on this rank
    nxt: defaultdict[tuple[int, str], int] = defaultdict(int)

    def take(chunk: int, kind: str) -> Action:
        stage = chunk * p + rank
        microbatch = nxt[stage, kind]
        nxt[stage, kind] = microbatch + 1
        return Action(stage, kind, microbatch)

    def backward_chunk(k: int) -> int:
        return v - 1 - ((k - warmup) // per_round) % v

    row = [take((k // per_round) % v, "F") for k in range(warmup)]  # warm-up
    kind = "I" if zero_bubble else "B"
    weights = 0  # W passes placed so far
    for k in range(warmup, total + warmup):
        if k < total:  # steady state: one forward, one backward
            row.append(take((k // per_round) % v, "F"))
        row.append(take(backward_chunk(k), kind))  # (after the forwards: cool-down)
        if zero_bubble and k - warmup >= rank:
            row.append(take(backward_chunk(warmup + weights), "W"))
            weights += 1
    if zero_bubble:  # the weight passes left over
        row += [take(backward_chunk(warmup + j), "W") for j in range(weights, total)]
    return row


def interleaved_1f1b(num_stages: int, num_microbatches: int, num_chunks: int = 2) -> Schedule:
    """Interleaved 1F1B with v = ``num_chunks`` chunks per rank, in PyTorch's order.

    The order of PyTorch's ScheduleInterleaved1F1B (torch 2.13) for every m it runs:
    micro-batches go through the chunks in rounds of n = m / max(1, m // p) micro-batches
    (n = p when m is a multiple of p, n = m when m < p), so m must be a multiple of
    max(1, m // p), PyTorch's rule (m = 9 with p = 4 is refused, m = 6 and m = 3 run).
    Rank r warms up with (p-1-r)*2 + (v-1)*n forwards (at most m*v), Megatron-LM's count
    when n = p, and so does PyTorch. Megatron-LM itself runs every forward first on every
    rank when m = p; here, as in PyTorch, only ranks whose warm-up count reaches m*v do.
    With one chunk (v = 1) it is plain 1F1B (warm-up p-1-r).

    With m >= p and chunk costs F/v and B/v (costs of one device's share, scaled by
    :attr:`~ppbook.pipeline_schedule.Schedule.chunk_share`), the makespan is
    m(F+B) + (p-1)(F+B)/v: p = 4, m = 6, v = 2 takes 22.5 at F = 1, B = 2.
    """
    v = check_int("interleaved-1f1b", "num_chunks", num_chunks)
    p, m = check_counts("interleaved-1f1b", num_stages, num_microbatches, num_chunks=v)
    per_round = rounds("interleaved-1f1b", "ScheduleInterleaved1F1B", p, m)
    rows = []
    for rank in range(p):
        # warm-up: PyTorch's _get_warmup_ops (multiply factor 2); one chunk is 1F1B's
        warmup = (v - 1) * per_round + 2 * (p - 1 - rank) if v > 1 else p - 1 - rank
        rows.append(rank_order(p, v, m, per_round, rank, min(warmup, m * v), False))
    return Schedule(rows, placement(p, v), m, name="interleaved-1f1b")


def looped_bfs(num_stages: int, num_microbatches: int, num_chunks: int = 2) -> Schedule:
    """Looped breadth-first: all micro-batches per chunk, chunk by chunk (arXiv:2211.05953)."""
    v = check_int("looped-bfs", "num_chunks", num_chunks)
    p, m = check_counts("looped-bfs", num_stages, num_microbatches, num_chunks=v)
    actions = []
    for rank in range(p):
        stages = range(rank, p * v, p)
        row = [Action(s, "F", j) for s in stages for j in range(m)]
        row += [Action(s, "B", j) for s in reversed(stages) for j in reversed(range(m))]
        actions.append(row)
    return Schedule(actions, placement(p, v), m, name="looped-bfs")
