"""Assignment 1's questions (ppbook.assign.score_bubble): every score on right data and on
each kind of wrong or malformed data, with the line of feedback it must give. Right data comes
from expressions typed here from Megatron-LM's forms; data passes through JSON.
"""

from __future__ import annotations

import json

import pytest
import sympy as sp

from ppbook.assign.expressions import from_tree, to_tree
from ppbook.assign.questions import ASSIGNMENTS
from ppbook.assign.score_bubble import CHUNK_CASES
from ppbook.symbolic.symbols import c, m, p, t_b, t_f, v

QUESTIONS = {q.name: q for questions in ASSIGNMENTS.values() for q in questions}
MAKESPAN = m * (t_f + t_b) + (p - 1) * (t_f + t_b) / v
WITH_TRANSFER = MAKESPAN + 2 * (p * v - 1) * c
BEST_CHUNKS = [5, 4, 3, 5, 2, 3]  # read off a simulated table of v = 1..8 for each case


def score(name: str, data: object) -> tuple[float, str]:
    return QUESTIONS[name].score(json.loads(json.dumps(data)))


def tree(expr) -> list:
    return json.loads(json.dumps(to_tree(expr)))


@pytest.mark.parametrize(
    ("name", "answer", "points", "feedback"),
    [
        ("1.1", (p - 1) * (t_f + t_b) / v, 3, "right"),
        ("1.1", (p - 1) * (t_f + t_b), 0, "plain 1F1B's bubble"),
        ("1.1", (p - 1) / (v * m), 0, "bubble ratio r, a pure number"),
        ("1.1", (p - 1) * (t_f + t_b) / (2 * v), 0, "your bubble is 2.25; the simulator's idle"),
        ("1.2", (p - 1) / (v * m + p - 1), 2, "right"),
        ("1.2", (p - 1) / (v * m), 0, "the bubble ratio r = idle/compute"),
        ("1.2", (p - 1) / (m + p - 1), 0, "your fraction is 0.272727; the simulator's"),
        ("1.3", WITH_TRANSFER, 3, "right"),
        ("1.3", MAKESPAN, 0, "has no c"),
        ("1.3", MAKESPAN + 2 * (p - 1) * c, 0, "29.1, the simulator's 29.9 (time units): that"),
        ("1.3", MAKESPAN + (p * v - 1) * c, 0, "the forward's transfers only"),
    ],
)  # fmt: skip
def test_assignment_1_expressions(name, answer, points, feedback):
    got, line = score(name, tree(answer))
    assert got == points
    assert feedback in line and "\n" not in line


def test_an_expression_written_with_floats_or_other_symbol_objects_is_read_by_name():
    loose = sp.Symbol("p") - 1
    answer = loose * (sp.Symbol("t_f") + sp.Symbol("t_b")) * sp.Float(0.5) / (v / 2)
    assert score("1.1", tree(answer))[0] == 3


@pytest.mark.parametrize(
    ("data", "feedback"),
    [
        (None, "not an expression written by to_tree"),
        (["Symbol", "x"], "uses the symbol 'x'; use only p, m, v, t_f, t_b, c"),
        (["Pow", ["Symbol", "p"], ["Integer", 10**6]], "a power needs an exponent"),
        (["Pow", ["Integer", 10**9], ["Integer", 8]], "a number raised to it at most 1000"),
        (["Add"] + [["Symbol", "p"]] * 500, "too large"),
        (["Integer", 2**80], "not a small whole number"),
        (["eval", "__import__('os').system('true')"], "uses 'eval'"),
    ],
)
def test_malformed_or_hostile_expressions_score_zero_with_what_is_wrong(data, feedback):
    got, line = score("1.1", data)
    assert got == 0 and feedback in line


def test_to_tree_refuses_what_an_answer_does_not_need():
    with pytest.raises(ValueError, match="uses sin"):
        to_tree(sp.sin(p))
    assert from_tree(to_tree(sp.Rational(3, 4) * p)) == sp.Rational(3, 4) * p


def test_assignment_1_best_chunks():
    assert score("1.4", BEST_CHUNKS) == (
        2,
        "right: the fastest v in every case, as the simulator times them",
    )
    floor_of_the_optimum = [5, 3, 3, 5, 2, 2]  # sqrt((p-1)(F+B)/(2pc)) rounded down
    got, line = score("1.4", floor_of_the_optimum)
    assert got == round(2 * 4 / 6, 2)
    assert "m = 32, t_f = 1, t_b = 2, c = 0.1: v = 3 takes 107.6 time units, v = 4 107.45" in line
    assert score("1.4", [9] * 6)[1].endswith("v must be a whole number from 1 to 8, got 9")
    assert score("1.4", [1, 2])[0] == 0
    assert len(CHUNK_CASES) == len(BEST_CHUNKS)
