"""The assignments' questions (ppbook.assign.questions) in common, and assignment 2's: every
score on right data, on each kind of wrong data with the line of feedback it must give,
on cases drawn at grading time, and on missing or malformed data.

Right schedules come from ppbook.schedules' builders, never from the scores' own checks;
whether a wrong order happens to be 1F1B's at some (p, m) is decided by comparing it with
the builder's rows, and the times it must be told are simulated here. Data passes through
JSON, as it leaves the grader's kernel. Assignment 4 is tests/test_assign_design.py.
"""

from __future__ import annotations

import json
import random

import pytest

from ppbook.assign.questions import ASSIGNMENTS, questions_for
from ppbook.assign.score_schedules import FEW_MICROBATCHES, MANY_MICROBATCHES
from ppbook.costs import Costs
from ppbook.exercises import assert_right, check, exercises, solution
from ppbook.schedules import gpipe, one_f_one_b
from ppbook.simulate import simulate

QUESTIONS = {q.name: q for questions in ASSIGNMENTS.values() for q in questions}
BOTH = MANY_MICROBATCHES + FEW_MICROBATCHES
FIXED = {"2.1": MANY_MICROBATCHES, "2.2": FEW_MICROBATCHES, "2.3": BOTH}


def score(question, data: object) -> tuple[float, str]:
    question = QUESTIONS[question] if isinstance(question, str) else question
    return question.score(json.loads(json.dumps(data)))


def rows(builder, cases) -> list:
    return [builder(*case) if callable(builder) else builder[case] for case in cases]


def library(cases) -> list:
    return [one_f_one_b(*case).to_strings() for case in cases]


def alone(p: int, m: int) -> list[list[str]]:
    """Every rank runs F then B of each micro-batch before the next: no overlap."""
    return [[f"{r}{kind}{j}" for j in range(m) for kind in "FB"] for r in range(p)]


def gpipe_rows(p: int, m: int) -> list[list[str]]:
    """GPipe's order: every forward, then every backward (as ppbook.schedules.gpipe)."""
    return [[f"{r}{kind}{j}" for kind in "FB" for j in range(m)] for r in range(p)]


def drawn(name: str, seed: int):
    question = QUESTIONS[name].variant(random.Random(seed))
    cases = [tuple(case) for case in json.loads(question.collect.split(" in ", 1)[1][:-1])]
    return question, cases


def share_where_it_is_one_f_one_b(builder, cases) -> float:
    """The share of ``cases`` at which ``builder``'s rows are the library's 1F1B rows."""
    same = [builder(*case) == one_f_one_b(*case).to_strings() for case in cases]
    return sum(same) / len(cases)


def test_the_hand_written_orders_here_are_the_library_s():
    assert all(gpipe_rows(*case) == gpipe(*case).to_strings() for case in BOTH)


def test_every_assignment_is_found_by_its_notebook_and_adds_up_to_ten_points():
    assert [q.name for q in questions_for("notebooks/assignments/02_one_f_one_b.ipynb")] == [
        "2.1",
        "2.2",
        "2.3",
    ]
    for questions in ASSIGNMENTS.values():
        assert sum(q.max_score for q in questions) == 10
        assert all(q.collect and q.function and q.prompt for q in questions)
    assert [q.function for q in ASSIGNMENTS["02_one_f_one_b"]] == ["one_f_one_b_rows"] * 3
    with pytest.raises(ValueError, match="no assignment is called 'homework'"):
        questions_for("homework.ipynb")


@pytest.mark.parametrize("seed", [None, 0, 1, 2])
def test_assignment_2_the_library_s_1f1b_scores_full_marks_on_fixed_and_drawn_cases(seed):
    for name, points in (("2.1", 4), ("2.2", 3), ("2.3", 3)):
        question, cases = (QUESTIONS[name], FIXED[name]) if seed is None else drawn(name, seed)
        got, line = score(question, library(cases))
        assert got == points and line.startswith("right: "), line


def test_assignment_2_gpipe_s_order_is_refused_with_the_warm_up_1f1b_runs():
    got, line = score("2.1", rows(gpipe_rows, MANY_MICROBATCHES))
    assert got == round(4 * share_where_it_is_one_f_one_b(gpipe_rows, MANY_MICROBATCHES), 2)
    assert got == 0  # today: 4 of 4, GPipe's makespan is (m+p-1)(F+B) too
    assert line.startswith("0 of 5 right; one_f_one_b_rows(2, 4): rank 0 runs 4 forwards ")
    assert "before its first backward and holds more than it needs; 1F1B runs " in line
    assert "min(p-1-r, m) = 1 forward of warm-up, then one forward before each backward: " in line
    slow = Costs(F=1, B=3, comm=0.5)
    took, want = (simulate(b(2, 4), slow).makespan for b in (gpipe, one_f_one_b))
    assert took != want
    assert f"takes {took:g} time units at F = 1, B = 3 and a transfer of 0.5" in line
    assert f"1F1B's order takes {want:g}" in line
    for name in ("2.2", "2.3"):
        got, _ = score(name, rows(gpipe_rows, FIXED[name]))
        points = QUESTIONS[name].max_score
        assert got == round(points * share_where_it_is_one_f_one_b(gpipe_rows, FIXED[name]), 2)
        assert got < points
    _, line = score("2.3", rows(gpipe_rows, BOTH))
    assert "rank 0 goes over its limit of 2 at t = 2 time units and holds up to 4" in line


def test_assignment_2_gpipe_s_order_at_m_below_p_differs_on_the_last_ranks():
    _, line = score("2.2", rows(gpipe_rows, FEW_MICROBATCHES))
    assert "one_f_one_b_rows(4, 2): rank 3 runs 2 forwards before its first backward" in line
    assert "1F1B runs min(p-1-r, m) = 0 forwards of warm-up" in line


@pytest.mark.parametrize("seed", [None, 3, 4])
def test_assignment_2_ranks_running_their_micro_batches_alone_score_low(seed):
    for name in ("2.1", "2.2", "2.3"):
        question, cases = (QUESTIONS[name], FIXED[name]) if seed is None else drawn(name, seed)
        got, line = score(question, rows(alone, cases))
        expected = share_where_it_is_one_f_one_b(alone, cases)  # p = 1 or m = 1 only
        assert expected < 1
        assert got == round(question.max_score * expected, 2)
    _, line = score("2.1", rows(alone, MANY_MICROBATCHES))
    assert "rank 0 runs 1 forward before its first backward and waits for gradients" in line
    assert "takes 24 time units, 9 more than (m+p-1)(F+B) = 15" in line


def test_assignment_2_a_stage_never_run_or_a_micro_batch_dropped_scores_nothing():
    data = library(MANY_MICROBATCHES)
    data[1][3] = []  # p = 4, m = 8: the last rank runs nothing
    got, line = score("2.1", data)
    assert got == round(4 * 4 / 5, 2)
    assert "one_f_one_b_rows(4, 8): rank 3 runs nothing, so no micro-batch passes stage 3" in line
    data = library(MANY_MICROBATCHES)
    data[1] = [[a for a in row if not a.endswith("F7") and not a.endswith("B7")] for row in data[1]]
    got, line = score("2.3", data + library(FEW_MICROBATCHES))
    assert got == round(3 * 8 / 9, 2)
    assert "rank 0 never runs 0F7, 0B7: every micro-batch passes every stage" in line
    data = library(MANY_MICROBATCHES)
    data[1][2] = [a for a in data[1][2] if a != "2B5"]  # one backward left out
    assert "rank 2 never runs 2B5" in score("2.1", data)[1]


@pytest.mark.parametrize(
    ("change", "feedback"),
    [
        (lambda r: r[0].append("0F1"), "rank 0 runs 0F1 more than once"),
        (lambda r: r[1].__setitem__(0, "2F0"), "rank 1 runs 2F0, but rank r holds stage r only"),
        (lambda r: r[0].__setitem__(0, "0F9"), "rank 0 runs 0F9, but the micro-batches are 0 to 7"),
        (lambda r: r[0].__setitem__(-1, "0I7"), "cannot read '0I7' on rank 0"),
    ],
)
def test_assignment_2_extra_misplaced_or_split_passes_are_refused(change, feedback):
    data = library(MANY_MICROBATCHES)
    change(data[1])
    got, line = score("2.1", data)
    assert got == round(4 * 4 / 5, 2) and feedback in line, line


def test_assignment_2_each_order_property_has_its_own_line():
    forwards = library([(4, 8)])[0]
    forwards[0][1], forwards[0][2] = forwards[0][2], forwards[0][1]  # 0F2 before 0F1
    data = library(MANY_MICROBATCHES)
    data[1] = forwards
    line = score("2.1", data)[1]
    assert "rank 0 runs 0F2 before 0F1; 1F1B runs the forwards in micro-batch order" in line
    backwards = library([(2, 4)])[0]
    backwards[1] = ["1F0", "1F1", "1B1", "1B0", "1F2", "1B2", "1F3", "1B3"]
    data = library(MANY_MICROBATCHES)
    data[0] = backwards
    line = score("2.1", data)[1]
    assert "rank 1 runs 1B1 before 1B0; 1F1B runs the backwards in micro-batch order" in line
    steady = library([(2, 4)])[0]
    steady[0] = ["0F0", "0F1", "0B0", "0F2", "0F3", "0B1", "0B2", "0B3"]
    data = library(MANY_MICROBATCHES)
    data[0] = steady
    line = score("2.1", data)[1]
    assert "rank 0 runs two forwards in a row (0F2, 0F3) while it still has forwards" in line


def test_assignment_2_a_deadlock_names_the_stuck_ranks_and_actions():
    data = library(MANY_MICROBATCHES)
    data[1] = [row[::-1] for row in data[1]]  # p = 4, m = 8 run backwards: B before its F
    got, line = score("2.1", data)
    assert got == round(4 * 4 / 5, 2)
    assert "4 of 5 right; schedule 'one_f_one_b_rows(4, 8)' cannot finish (deadlock): " in line
    assert "rank 0 is stuck at position 0 on 0B7, which waits for 0F7" in line


def test_assignment_2_drawn_cases_cover_the_range_and_never_the_fixed_ones():
    seen: dict[str, set] = {name: set() for name in FIXED}
    for seed in range(40):
        for name in FIXED:
            question, cases = drawn(name, seed)
            base = QUESTIONS[name]
            assert (question.name, question.max_score, question.function) == (
                base.name,
                base.max_score,
                base.function,
            )
            assert question.variant is None and question.prompt == base.prompt
            assert len(set(cases)) == len(cases) and not set(cases) & set(FIXED[name])
            assert all(1 <= p <= 8 and 1 <= m <= 16 for p, m in cases)
            seen[name].add(tuple(cases))
            if name == "2.1":
                assert all(m >= p for p, m in cases) and cases[0][0] == 1
            if name == "2.2":
                assert all(m < p for p, m in cases) and cases[0][1] == 1
            if name == "2.3":
                assert any(m >= p for p, m in cases) and any(m < p for p, m in cases)
    assert all(len(sets) > 30 for sets in seen.values())  # drawn, not one fixed set


def test_assignment_2_a_table_of_the_fixed_cases_scores_nothing_when_drawn():
    table = {case: one_f_one_b(*case).to_strings() for case in BOTH}

    def looked_up(p, m):
        return table.get((p, m), [])  # not a case of the notebook: nothing

    for name in FIXED:
        assert score(name, rows(looked_up, FIXED[name]))[0] == QUESTIONS[name].max_score
        for seed in range(5):
            question, cases = drawn(name, seed)
            assert score(question, rows(looked_up, cases))[0] == 0


@pytest.mark.parametrize(
    ("data", "feedback"),
    [
        (None, "expected one schedule per (p, m)"),
        ([[["0F0"]]] * 5, "expected 2 ranks (one list each), got 1"),
        ([[["0F0", "0B0"], ["1F0", "1B0"]]] * 5, "rank 0 never runs 0F1, 0B1, 0F2, 0B2 and"),
        ([[[1, 2]]] * 5, "must return one list of action strings per rank"),
        ([[["0X0"], ["1F0"]]] * 5, "cannot read '0X0' on rank 0"),
    ],
)
def test_assignment_2_malformed_data_scores_zero_and_says_why(data, feedback):
    got, line = score("2.1", data)
    assert got == 0 and feedback.lower() in line.lower(), line


def test_self_checks_are_the_grader_s_scores_under_the_exercise_api():
    assert [e.id for e in exercises("A2")] == ["A2.1", "A2.2", "A2.3"]
    table = {case: one_f_one_b(*case).to_strings() for case in MANY_MICROBATCHES}
    verdict = check("A2.1", lambda p, m: table[(p, m)])
    assert verdict and "(4 of 4 points)" in verdict.message
    called = check("A2.1", lambda p, m: one_f_one_b(p, m).to_strings())
    assert not called and "uses ppbook.schedules.basic.one_f_one_b" in called.message
    with pytest.raises(AssertionError, match="rank 0 runs 4 forwards before its first"):
        assert_right("A2.1", gpipe_rows)

    def stub():
        raise NotImplementedError("write my_schedule: per rank, its actions in order")

    unfinished = check("A4.1", stub)
    assert not unfinished and unfinished.message == (
        "my_schedule is still to do: per rank, its actions in order"
    )
    broken = check("A2.1", lambda p, m: 1 / 0)
    assert "one_f_one_b_rows gave an error: ZeroDivisionError: division by zero" in broken.message
    assert "no worked answer" in repr(solution("A1.1"))
    assert "the grader imports the module 'my_transport'" in check("A3.1", "other").message
