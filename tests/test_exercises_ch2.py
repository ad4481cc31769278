"""Chapter 2's exercises: each right answer passes and each typical slip gets its own hint.

The expected numbers are worked out by hand in the comments (or, for the interleaved
timings with transfers, pinned from a run with the chunk costs F/v and B/v written out
by hand), never by calling the check's own code.
"""

import pytest

from ppbook.exercises import check, exercises, solution
from ppbook.schedules import one_f_one_b

ONE_F_ONE_B_2x3 = [
    ["0F0", "0F1", "0B0", "0F2", "0B1", "0B2"],
    ["1F0", "1B0", "1F1", "1B1", "1F2", "1B2"],
]


def _capped_rows(p: int, m: int, warmup: int) -> list[list[str]]:
    """1F1B whose rank r runs min(warmup, p-1-r) forwards before its first backward."""
    rows = []
    for r in range(p):
        first = min(warmup, p - 1 - r)
        row = [f"{r}F{j}" for j in range(first)]
        for j in range(m):
            if first + j < m:
                row.append(f"{r}F{first + j}")
            row.append(f"{r}B{j}")
        rows.append(row)
    return rows


def test_chapter_two_has_eight_exercises_five_of_them_derive_construct_or_implement():
    kinds = [e.kind for e in exercises("2")]
    assert [e.id for e in exercises("2")] == [f"2.{k}" for k in range(1, 9)]
    assert sum(k in ("derive", "construct", "implement") for k in kinds) == 5


def test_2_1_gpipe_with_transfers():
    # (m+p-1)(F+B) = 11 * 3 = 33, plus 2(p-1)c = 6 * 0.25 = 1.5
    assert check("2.1", 34.5)
    assert "without transfers" in check("2.1", 33).message
    assert "forward only" in check("2.1", 33.75).message  # 33 + 3 * 0.25
    assert "too short" in check("2.1", 34).message
    assert "too long" in check("2.1", 40).message
    assert "wants a makespan" in check("2.1", "34.5").message


def test_2_2_smallest_m_for_interleaved():
    # f = 3.5 / (m + 3.5): m = 24 gives 0.127, m = 30 0.1045, m = 32 0.0986
    assert check("2.2", 32)
    assert "not below 0.1" in check("2.2", 24).message
    # PyTorch's order runs m = 30 (3 rounds of 10), not enough; 31 is refused with its rule
    assert "f = 0.104" in check("2.2", 30).message
    assert "multiple of its number of rounds" in check("2.2", 31).message
    # r = 3.5 / m < 0.1 needs m > 35: m = 36 (4 rounds of 9) is the answer for the ratio
    ratio = check("2.2", 36)
    assert "bubble ratio" in ratio.message and "f = r/(1+r)" in ratio.hint
    # plain 1F1B: f = 7 / (m + 7) < 0.1 needs m > 63: m = 64
    plain = check("2.2", 64)
    assert "plain 1F1B" in plain.message and "by v" in plain.hint
    assert "so does m = 45" in check("2.2", 48).message  # 44, 46, 47: not 5 equal rounds
    assert "whole number" in check("2.2", 32.5).message


def test_2_3_one_f_one_b_by_hand():
    assert check("2.3", ONE_F_ONE_B_2x3)
    assert check("2.3", one_f_one_b(2, 3))  # a Schedule is an answer too
    gpipe_rows = [["0F0", "0F1", "0F2", "0B0", "0B1", "0B2"],
                  ["1F0", "1F1", "1F2", "1B0", "1B1", "1B2"]]  # fmt: skip
    held = check("2.3", gpipe_rows)
    assert "holds 3 micro-batch activations of a full stage" in held.message
    assert "GPipe" in held.hint
    # one micro-batch at a time: 3 * (2F + 2B) = 18 time units, not (3+2-1) * 3 = 12
    sequential = [["0F0", "0B0", "0F1", "0B1", "0F2", "0B2"],
                  ["1F0", "1B0", "1F1", "1B1", "1F2", "1B2"]]  # fmt: skip
    slow = check("2.3", sequential)
    assert "takes 18 time units" in slow.message and "12" in slow.message
    assert "cannot parse action '0X0'" in check("2.3", [["0F0", "0X0"]]).message
    no_last_backward = [ONE_F_ONE_B_2x3[0][:-1], ONE_F_ONE_B_2x3[1]]
    assert "stage 0, micro-batch 2" in check("2.3", no_last_backward).message
    assert "expected 2 ranks" in check("2.3", [ONE_F_ONE_B_2x3[0]] * 1).message
    short = [["0F0", "0F1", "0B0", "0B1"], ["1F0", "1B0", "1F1", "1B1"]]
    assert "expected 3 micro-batches" in check("2.3", short).message
    assert "wants a Schedule" in check("2.3", "0F0 0B0").message


def test_2_4_choose_chunks_under_transfers():
    # pinned at c = 0.5 with chunk costs written out: v = 1: 41, 2: 35.5, 3: 39.33, 4: 45
    verdict = check("2.4", 2)
    assert verdict and "35.5" in verdict.message
    assert "fastest without transfers" in check("2.4", 4).message  # 26.25 at c = 0
    assert "45" in check("2.4", 4).message
    assert "plain 1F1B takes 41" in check("2.4", 1).message
    assert "39.33" in check("2.4", 3).message
    assert "from 1 to 4" in check("2.4", 5).message


def test_2_5_cap_the_activations_of_rank_0():
    capped = check("2.5", _capped_rows(4, 8, 1))
    # B0 is back on rank 0 at 12 (4 forwards of 1 down, 4 backwards of 2 back); each of
    # B1..B6 then waits one F and one B on each of ranks 0..2 (9); B7 3 more: 12 + 54 + 3.
    # Under the cap, but not within 51 (issue 19: the cap alone was accepted).
    assert not capped and "69 time units" in capped.message and "staggered" in capped.hint
    one_f_one_b_rows = _capped_rows(4, 8, 3)  # plain 1F1B: rank 0 holds p = 4
    verdict = check("2.5", one_f_one_b_rows)
    assert "holds up to 4 micro-batch" in verdict.message and "1F1B's p" in verdict.hint
    assert "micro-batch 3" in check("2.5", _capped_rows(4, 8, 2)).hint  # holds 3
    assert "expected 4 ranks" in check("2.5", ONE_F_ONE_B_2x3).message
    # one at a time: 8 round trips of 4F + 4B = 12, and the cap's second place unused
    single = check("2.5", _capped_rows(4, 8, 0))
    assert "96 time units" in single.message and "second place" in single.hint


@pytest.mark.parametrize("id", ["2.1", "2.2", "2.4"])
def test_worked_solutions_give_the_right_answer(id):
    answers = {"2.1": 34.5, "2.2": 32, "2.4": 2}
    assert str(answers[id]) in solution(id).markdown
    assert check(id, answers[id])


def test_construct_solutions_are_right_answers():
    assert check("2.3", ONE_F_ONE_B_2x3)
    assert '"0F0", "0F1", "0B0", "0F2", "0B1", "0B2"' in solution("2.3").markdown
    assert "51" in solution("2.5").markdown and "48" in solution("2.5").markdown
