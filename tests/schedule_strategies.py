"""Random schedules that are valid and cannot deadlock, by construction (hypothesis).

:func:`valid_schedules` draws p ranks, m micro-batches, v stage chunks per rank placed in
a loop (rank r holds r, r + p, ...) or, with v = 2, in a V (rank r holds r and 2p-1-r),
which backwards are split into I and W (none, all, or each one by a coin), and a seed for
the coins and the order. It then runs a random topological order of the dependency graph:
at each step it picks a random rank among those with a ready action, and one of that
rank's ready actions at random, and appends it to the rank's row. Each row is then a part
of one global order in which every action comes after what it waits for, so the per-rank
orders cannot deadlock, and every micro-batch passes every stage.

The dependency rule is written here, not taken from ppbook.dependencies: F(s, j) waits
for F(s-1, j); the backward (B or I) of (s, j) for F(s, j) and the backward of (s+1, j);
W(s, j) for I(s, j).
"""

from __future__ import annotations

import random

from hypothesis import strategies as st

from ppbook.schedule import Action, Schedule

SPLITS = ("none", "all", "mixed")
"""Which backwards are split into I and W: none, all, or each one by a coin."""

RANKS, MICROBATCHES, CHUNKS = st.integers(1, 5), st.integers(1, 6), st.integers(1, 3)
SPLIT = st.sampled_from(SPLITS)
"""What :func:`valid_schedules` draws by default: p in 1..5, m in 1..6, v in 1..3, a split."""


def placement(p: int, v: int, shape: str) -> tuple[int, ...]:
    """Rank of each of the p * v stages: in a loop, or (v = 2) in a V."""
    if shape == "v":
        return tuple(s if s < p else 2 * p - 1 - s for s in range(2 * p))
    return tuple(s % p for s in range(p * v))


def needs(action: Action, split: set[tuple[int, int]], last: int) -> list[Action]:
    """What ``action`` waits for (the rule in the module docstring)."""
    stage, kind, j = action
    if kind == "F":
        return [Action(stage - 1, "F", j)] if stage > 0 else []
    if kind == "W":
        return [Action(stage, "I", j)]
    after = []
    if stage < last:
        after = [Action(stage + 1, "I" if (stage + 1, j) in split else "B", j)]
    return [Action(stage, "F", j), *after]


@st.composite
def valid_schedules(draw, ranks=RANKS, microbatches=MICROBATCHES, chunks=CHUNKS, splits=SPLIT):
    """A :class:`Schedule` that validates and finishes (see the module docstring).

    Its ``name`` records how it was drawn: ``"random p=.. m=.. v=.. loop|v split=.."``.
    """
    p, m, v = draw(ranks), draw(microbatches), draw(chunks)
    shape = draw(st.sampled_from(("loop", "v"))) if v == 2 else "loop"
    mode = draw(splits)
    # One seed for the many coin tosses below: a few bytes of hypothesis's data, not
    # hundreds of draws that would overrun its buffer on the largest schedules.
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    stage_to_rank = placement(p, v, shape)
    last = len(stage_to_rank) - 1
    pairs = [(s, j) for s in range(last + 1) for j in range(m)]
    if mode == "all":
        split = set(pairs)
    elif mode == "mixed":
        split = {pair for pair in pairs if rng.random() < 0.5}
    else:
        split = set()
    actions = []
    for s, j in pairs:
        actions.append(Action(s, "F", j))
        kinds = ("I", "W") if (s, j) in split else ("B",)
        actions += [Action(s, kind, j) for kind in kinds]
    waiting = {a: len(needs(a, split, last)) for a in actions}
    dependents: dict[Action, list[Action]] = {a: [] for a in actions}
    for a in actions:
        for need in needs(a, split, last):
            dependents[need].append(a)
    ready = {a for a in actions if not waiting[a]}
    rows: list[list[Action]] = [[] for _ in range(p)]
    while ready:
        rank = rng.choice(sorted({stage_to_rank[a.stage] for a in ready}))
        action = rng.choice(sorted(a for a in ready if stage_to_rank[a.stage] == rank))
        rows[rank].append(action)
        ready.discard(action)
        for after in dependents[action]:
            waiting[after] -= 1
            if not waiting[after]:
                ready.add(after)
    assert sum(map(len, rows)) == len(actions)  # the rule is acyclic: every action ran
    name = f"random p={p} m={m} v={v} {shape} split={mode}"
    return Schedule(rows, stage_to_rank, m, name=name)
