"""Wrong answers issue 19 found accepted in chapter 2 (2.5), and others of their kind.

2.5 asks for a schedule of p = 4 ranks and m = 8 micro-batches (F = 1, B = 2) in which
rank 0 never holds more than 2 micro-batches and the step takes at most 51 time units.
Every schedule below keeps rank 0 under the cap but is slow: valid, but not what was
asked. The fast one is worked out by hand: two micro-batches in flight, each a round trip
of 4F + 4B = 12, the second lane 3 time units behind the first so that no rank is asked to
do two things at once (rank r runs F at offset r, B at offset 4 + 2(3 - r) of its lane).
"""

from __future__ import annotations

import pytest

from ppbook.exercises import check

P, M = 4, 8


def _one_at_a_time() -> list[list[str]]:
    """Each micro-batch down and back before the next starts: 8 x 12 = 96 time units."""
    return [[f"{r}{k}{j}" for j in range(M) for k in "FB"] for r in range(P)]


def _capped_warmup(warmup: int) -> list[list[str]]:
    """1F1B whose rank r runs min(warmup, p-1-r) forwards before its first backward."""
    rows = []
    for r in range(P):
        first = min(warmup, P - 1 - r)
        row = [f"{r}F{j}" for j in range(first)]
        for j in range(M):
            if first + j < M:
                row.append(f"{r}F{first + j}")
            row.append(f"{r}B{j}")
        rows.append(row)
    return rows


def two_lanes(offset: int) -> list[list[str]]:
    """Micro-batch j starts 12 (j // 2) + offset (j % 2) on rank 0; each rank's actions in
    the order of their start times in that plan."""
    planned = [[] for _ in range(P)]
    for j in range(M):
        start = 12 * (j // 2) + offset * (j % 2)
        for r in range(P):
            planned[r].append((start + r, f"{r}F{j}"))
            planned[r].append((start + 4 + 2 * (P - 1 - r), f"{r}B{j}"))
    return [[a for _, a in sorted(row)] for row in planned]


@pytest.mark.parametrize(
    ("answer", "took"),
    [
        (_one_at_a_time(), "96 time units"),  # 8 round trips of 12
        (_capped_warmup(1), "69 time units"),  # the old worked answer
        (_capped_warmup(0), "96 time units"),  # no warm-up at all: one at a time again
        (two_lanes(6), "54 time units"),  # lanes half a period apart: 6 + 48
        (two_lanes(1), "60 time units"),  # lanes that collide and wait
    ],
)
def test_2_5_a_slow_schedule_under_the_cap_is_wrong(answer, took):
    verdict = check("2.5", answer)
    assert verdict.status == "wrong", verdict.text
    assert took in verdict.text


def test_2_5_two_lanes_three_apart_are_right():
    verdict = check("2.5", two_lanes(3))  # 3 + 4 x 12 = 51
    assert verdict, verdict.text
    assert "51 time units" in verdict.text
