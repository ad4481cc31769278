"""The assignments' questions (ppbook.assign.questions): every score on right data, on each
kind of wrong data with the line of feedback it must give, and on missing or malformed data.

Right data comes from elsewhere than the scores' own checks: expressions typed here from
Megatron-LM's forms, schedules from ppbook.schedules' builders, gradients from a real
two-process run of the runtime's own send and receive. Data passes through JSON, as it
leaves the grader's kernel.
"""

from __future__ import annotations

import json

import pytest

from ppbook.assign.questions import ASSIGNMENTS, questions_for
from ppbook.assign.score_schedules import FEW_MICROBATCHES, MANY_MICROBATCHES
from ppbook.exercises import check, exercises, solution
from ppbook.schedules import gpipe, one_f_one_b, zb_h1
from ppbook.symbolic.symbols import c, m, p, t_b, t_f, v

QUESTIONS = {q.name: q for questions in ASSIGNMENTS.values() for q in questions}
MAKESPAN = m * (t_f + t_b) + (p - 1) * (t_f + t_b) / v
WITH_TRANSFER = MAKESPAN + 2 * (p * v - 1) * c
BEST_CHUNKS = [5, 4, 3, 5, 2, 3]  # read off a simulated table of v = 1..8 for each case


def score(name: str, data: object) -> tuple[float, str]:
    return QUESTIONS[name].score(json.loads(json.dumps(data)))


def rows(builder, cases) -> list:
    return [builder(*case).to_strings() for case in cases]


def test_every_assignment_is_found_by_its_notebook_and_adds_up_to_ten_points():
    assert [q.name for q in questions_for("notebooks/assignments/02_one_f_one_b.ipynb")] == [
        "2.1",
        "2.2",
        "2.3",
    ]
    for questions in ASSIGNMENTS.values():
        assert sum(q.max_score for q in questions) == 10
        assert all(q.collect and q.function and q.prompt for q in questions)
    with pytest.raises(ValueError, match="no assignment is called 'homework'"):
        questions_for("homework.ipynb")


def test_assignment_2_right_schedules_score_full_marks():
    assert score("2.1", rows(one_f_one_b, MANY_MICROBATCHES))[0] == 4
    assert score("2.2", rows(one_f_one_b, FEW_MICROBATCHES))[0] == 3
    assert score("2.3", rows(one_f_one_b, MANY_MICROBATCHES + FEW_MICROBATCHES))[0] == 3


def test_assignment_2_a_deadlock_names_the_stuck_ranks_and_actions():
    data = rows(one_f_one_b, MANY_MICROBATCHES)
    data[1] = [row[::-1] for row in data[1]]  # p = 4, m = 8 run backwards: B before its F
    got, line = score("2.1", data)
    assert got == round(4 * 4 / 5, 2)
    assert "4 of 5 right; schedule 'one_f_one_b_rows(4, 8)' cannot finish (deadlock): " in line
    assert "rank 0 is stuck at position 0 on 0B7, which waits for 0F7" in line


def test_assignment_2_a_wrong_makespan_says_by_how_much_and_where():
    data = rows(one_f_one_b, FEW_MICROBATCHES)
    data[0] = rows(gpipe, [(4, 2)])[0]  # GPipe takes 1F1B's time: right
    data[2][4] = ["4F0", "4F1", "4B0", "4F2", "4B1", "4B2"]  # the last rank waits for 4F1
    got, line = score("2.2", data)
    assert got == round(3 * 3 / 4, 2)
    assert "one_f_one_b_rows(5, 3) takes 24 time units, 3 more than (m+p-1)(F+B) = 21" in line


def test_assignment_2_gpipe_runs_in_time_but_holds_too_much():
    data = rows(gpipe, MANY_MICROBATCHES + FEW_MICROBATCHES)
    assert score("2.1", data[: len(MANY_MICROBATCHES)])[0] == 4  # GPipe's makespan is 1F1B's
    got, line = score("2.3", data)
    assert got < 3
    assert "one_f_one_b_rows(2, 4): rank 0 goes over its limit of 2 at t = 2" in line
    assert "holds up to 4 micro-batch activations of a full stage, 2 too many" in line


@pytest.mark.parametrize(
    ("data", "feedback"),
    [
        (None, "expected one schedule per (p, m)"),
        ([[["0F0"]]] * 5, "expected 2 ranks (one list each), got 1"),
        ([[["0F0", "0B0"], ["1F0", "1B0"]]] * 5, "expected micro-batches 0 to 3, got 0 to 0"),
        ([[[1, 2]]] * 5, "must return one list of action strings per rank"),
        ([[["0X0"], ["1F0"]]] * 5, "cannot parse action '0X0'"),
    ],
)
def test_assignment_2_malformed_data_scores_zero_and_says_why(data, feedback):
    got, line = score("2.1", data)
    assert got == 0 and feedback.lower() in line.lower()


def test_assignment_4_thresholds_memory_and_deadlock():
    assert score("4.1", zb_h1(4, 8).to_strings()) == (
        10,
        "full marks: 27 time units, at or below ZB-H1's 27",
    )
    assert score("4.1", one_f_one_b(4, 8).to_strings())[0] == 1
    halfway = zb_h1(4, 8).to_strings()
    halfway[3] = [a.replace("I", "B") for a in halfway[3] if "W" not in a]  # no split on rank 3
    got, line = score("4.1", halfway)
    assert 1 < got < 10 and "of the way from 1F1B's 33 to ZB-H1's 27" in line
    got, line = score("4.1", gpipe(4, 8).to_strings())
    assert got == 0
    assert line == (
        "over the memory limit: rank 0 goes over its limit of 4 at t = 4 time units and "
        "holds up to 8 micro-batch activations of a full stage, 4 too many"
    )
    stuck = zb_h1(4, 8).to_strings()
    stuck[1].insert(0, stuck[1].pop())  # its last W first, before its own I
    got, line = score("4.1", stuck)
    assert got == 0 and "cannot finish (deadlock)" in line and "rank 1 is stuck" in line
    assert score("4.1", None)[0] == 0


def test_self_checks_are_the_grader_s_scores_under_the_exercise_api():
    assert [e.id for e in exercises("A2")] == ["A2.1", "A2.2", "A2.3"]
    verdict = check("A4.1", lambda: zb_h1(4, 8).to_strings())
    assert verdict and "(10 of 10 points)" in verdict.message

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
