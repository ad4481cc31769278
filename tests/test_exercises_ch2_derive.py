"""Chapter 2's derive and implement exercises (2.6 to 2.8): right answers pass, each kind of
slip is refused and says why.

The right answers are written here by hand: 1F1B's transfer count 2(p-1) + 2(m-1) -
2 ceil((m-1)/p) (read off the critical paths of one_f_one_b for p = 2..5, m = 1..3p, and
worked for p = 4, m = 8: 6 + 14 - 2 * 2 = 16, the slope exercise 9.3 measures), Megatron-LM's
warm-up (v-1)p + 2(p-1-r), and an interleaved-1F1B generator written from the Megatron-LM
description (groups of p micro-batches per chunk), not from ppbook's builder.
"""

from __future__ import annotations

import sympy as sp

from ppbook.exercises import check, exercises, solution
from ppbook.schedules import gpipe, interleaved_1f1b, looped_bfs, one_f_one_b
from ppbook.symbolic.symbols import c, m, p, t_b, t_f, v

r = sp.Symbol("r")  # the reader's rank symbol, without assumptions

ONE_F_ONE_B = (m + p - 1) * (t_f + t_b) + 2 * (p - 1 + m - 1 - sp.ceiling((m - 1) / p)) * c


def my_interleaved(p: int, m: int, v: int, factor: int = 2) -> list[list[str]]:
    """Interleaved 1F1B from its description: groups of p micro-batches go through a chunk
    before the next; warm-up (v-1)p + factor (p-1-r); then one forward, one backward."""
    rows = []
    for rank in range(p):
        total = m * v
        warmup = min((v - 1) * p + factor * (p - 1 - rank), total)
        done = {"F": {}, "B": {}}

        def take(k, kind):
            chunk = (k // p) % v if kind == "F" else v - 1 - (k // p) % v
            stage = chunk * p + rank  # noqa: B023
            j = done[kind].get(stage, 0)  # noqa: B023
            done[kind][stage] = j + 1  # noqa: B023
            return f"{stage}{kind}{j}"

        row = [take(k, "F") for k in range(warmup)]
        for k in range(total):
            if warmup + k < total:
                row.append(take(warmup + k, "F"))
            row.append(take(k, "B"))
        rows.append(row)
    return rows


def test_chapter_two_has_derive_and_implement_exercises():
    kinds = {e.id: e.kind for e in exercises("2")}
    assert kinds["2.6"] == kinds["2.7"] == "derive" and kinds["2.8"] == "implement"
    assert all(check(i, None).status == "unanswered" for i in ("2.6", "2.7", "2.8"))


def test_2_6_1f1b_makespan_with_transfers():
    verdict = check("2.6", ONE_F_ONE_B)
    assert verdict, verdict.text
    at = {p: 4, m: 8, t_f: 10, t_b: 20, c: sp.Rational(1, 2)}
    assert ONE_F_ONE_B.subs(at) == 338  # exercise 9.3's answer
    P, M, TF, TB, C = sp.symbols("p m t_f t_b c")  # the reader's own symbols
    assert check("2.6", (M + P - 1) * (TF + TB) + 2 * (P + M - 2 - sp.ceiling((M - 1) / P)) * C)
    gpipe_count = check("2.6", (m + p - 1) * (t_f + t_b) + 2 * (p - 1) * c)
    assert "counts 2 transfers" in gpipe_count.message and "holds 4" in gpipe_count.message
    assert "without transfers" in check("2.6", (m + p - 1) * (t_f + t_b)).message
    every = check("2.6", (m + p - 1) * (t_f + t_b) + 2 * (p - 1 + m - 1) * c)  # no exception
    assert every.status == "wrong" and "critical path holds" in every.message
    slow = check("2.6", (m + p) * (t_f + t_b) + 2 * (p - 1) * c)
    assert slow.status == "wrong" and "critical path of" in slow.message
    assert "uses x" in check("2.6", sp.Symbol("x") * c).message
    assert "wants a sympy expression" in check("2.6", 338).message
    assert "ceiling" in solution("2.6").markdown


def test_2_7_interleaved_warmup():
    assert check("2.7", (v - 1) * p + 2 * (p - 1 - r))
    one_per_rank = check("2.7", (v - 1) * p + (p - 1 - r))
    assert one_per_rank.status == "wrong" and "2 per rank" in one_per_rank.hint
    assert check("2.7", p - 1 - r).status == "wrong"  # plain 1F1B
    assert check("2.7", (v - 1) * p + 2 * r).status == "wrong"  # ranks counted the wrong way
    assert check("2.7", v * p + 2 * (p - 1 - r)).status == "wrong"  # the first forward counted
    assert "uses m" in check("2.7", m * v).message


def test_2_8_a_generator_of_ones_own_passes_on_every_draw():
    assert my_interleaved(2, 2, 2)[0] == ["0F0", "0F1", "2F0", "2F1", "2B0", "2B1", "0B0", "0B1"]
    verdict = check("2.8", my_interleaved)
    assert verdict, verdict.text
    assert check("2.8", lambda p, m, v: my_interleaved(p, m, v, factor=1))  # holds less


def test_2_8_generators_that_are_not_interleaved_1f1b_are_refused():
    bfs = check("2.8", looped_bfs)  # valid, fast enough, but holds every micro-batch
    assert bfs.status == "wrong" and "holds" in bfs.message
    plain = check("2.8", lambda p, m, v: one_f_one_b(p, m))
    assert plain.status == "wrong" and "stages" in plain.message
    late = check("2.8", lambda p, m, v: my_interleaved(p, m, v, factor=0))  # warm-up too short
    assert late.status == "wrong" and "longer than" in late.message
    gpipe_like = check("2.8", lambda p, m, v: gpipe(p * v, m))
    assert gpipe_like.status == "wrong"


def test_2_8_a_generator_that_fails_says_where():
    def broken(p, m, v):
        if m > p:
            raise IndexError("list index out of range")
        return interleaved_1f1b(p, m, v)

    verdict = check("2.8", broken)
    assert verdict.status == "wrong" and "raised IndexError at p = 2, m = 4" in verdict.message
    assert "returned None" in check("2.8", lambda p, m, v: None).message
    assert "wants a function" in check("2.8", interleaved_1f1b(2, 2, 2)).message
