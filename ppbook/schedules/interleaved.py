"""Several stage chunks per rank: interleaved 1F1B and looped breadth-first.

Rank r holds the v chunks r, r+p, ..., r+(v-1)p of a model cut into p*v stages.

- Interleaved 1F1B (Megatron-LM, Narayanan et al. 2021, arXiv:2104.04473, sec. 2.2.2):
  the bubble shrinks by v, to (p-1)(F+B)/v of a full stage, while point-to-point traffic
  grows by v. Micro-batches go through the chunks in groups of p, so the order needs m to
  be a multiple of p. The order is PyTorch's ScheduleInterleaved1F1B (the tests compare
  the two action by action); see :func:`interleaved_1f1b` for where it differs from
  Megatron-LM's.
- Looped BFS (Lamy-Poirier 2023, "Breadth-First Pipeline Parallelism", arXiv:2211.05953):
  each rank runs every micro-batch through its first chunk, then its second, ...; then the
  backwards in reverse order. Order as PyTorch's ScheduleLoopedBFS.
"""

from __future__ import annotations

from ppbook.pipeline_schedule import Action, Schedule, actions_of
from ppbook.schedules.rules import check_counts, check_int


def _placement(p: int, v: int) -> tuple[int, ...]:
    return tuple(stage % p for stage in range(p * v))


def interleaved_1f1b(num_stages: int, num_microbatches: int, num_chunks: int = 2) -> Schedule:
    """Interleaved 1F1B with v = ``num_chunks`` chunks per rank, in PyTorch's order.

    Needs ``num_microbatches`` to be a multiple of ``num_stages`` (micro-batches move
    through the chunks in groups of p). Rank r warms up with (p-1-r)*2 + (v-1)*p forwards,
    Megatron-LM's count, and so does PyTorch's ScheduleInterleaved1F1B, whose order this
    is. Megatron-LM itself runs every forward first on every rank when m = p; here, as in
    PyTorch, only ranks whose warm-up count reaches m*v do. With m a multiple of p and
    chunk costs F/v and B/v (costs of one device's share, scaled by
    :attr:`~ppbook.pipeline_schedule.Schedule.chunk_share`), the makespan is m(F+B) + (p-1)(F+B)/v.
    """
    v = check_int("interleaved-1f1b", "num_chunks", num_chunks)
    p, m = check_counts("interleaved-1f1b", num_stages, num_microbatches, num_chunks=v)
    if m % p:
        raise ValueError(
            f"interleaved-1f1b needs num_microbatches to be a multiple of num_stages "
            f"(Megatron-LM's rule), got m = {m} with p = {p}; try m = {p * -(-m // p)}"
        )
    group = p * v  # one group: p micro-batches through all v chunks
    total = m * v  # forwards (and backwards) per rank
    # The k-th forward of a rank runs chunk (k % group) // p on micro-batch
    # (k // group) * p + k % p; backwards visit the chunks in reverse.
    microbatch = [k // group * p + k % p for k in range(total)]
    chunk = [(k % group) // p for k in range(total)]
    actions = []
    for rank in range(p):
        forwards = actions_of("F", [rank + c * p for c in chunk], microbatch)
        backwards = actions_of("B", [rank + (v - 1 - c) * p for c in chunk], microbatch)
        # warm-up (Megatron-LM's count, as PyTorch's); one chunk is plain 1F1B's p - 1 - rank
        warmup = (p - rank - 1) * 2 + (v - 1) * p if v > 1 else p - rank - 1
        warmup = min(warmup, total)
        steady = total - warmup
        row = forwards[:warmup]  # warm-up
        pairs: list[Action] = [None] * (2 * steady)  # steady state: one forward, one backward
        pairs[0::2] = forwards[warmup:]
        pairs[1::2] = backwards[:steady]
        row += pairs
        row += backwards[steady:]  # cool-down
        actions.append(row)
    return Schedule(actions, _placement(p, v), m, name="interleaved-1f1b")


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
    return Schedule(actions, _placement(p, v), m, name="looped-bfs")
