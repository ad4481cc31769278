"""Assignment 1's questions (ppbook.assign.score_bubble): every score on right data and on
each kind of wrong or malformed data, with the line of feedback it must give. Right data comes
from expressions typed here from Megatron-LM's forms (and the simulator, for the condition of
1.3); data passes through JSON.
"""

from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path

import nbformat
import pytest
import sympy as sp

from ppbook.assign.equality import equal
from ppbook.assign.expressions import from_tree, to_tree
from ppbook.assign.forbidden import findings
from ppbook.assign.questions import ASSIGNMENTS, FORBIDDEN
from ppbook.assign.score_bubble import CHUNK_CASES
from ppbook.costs import Costs
from ppbook.schedules import interleaved_1f1b
from ppbook.simulate import simulate
from ppbook.symbolic.symbols import c, k, m, p, t_b, t_f, v

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks/assignments/01_interleaved_bubble.ipynb"

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
        ("1.1", (p - 1) * (t_f + t_b) / v, 3, "right: Megatron-LM's idle time per device"),
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


# Symbolic equality (issue 16): wrong answers that agree with the right one at a few
# points fail; right answers written in any form pass. The old scores compared at six fixed
# points (expressions.POINTS, v from 1 to 5) within 1e-9: each "wrong" case below scored
# full there.
AT_THE_OLD_POINTS = (v - 1) * (v - 2) * (v - 3) * (v - 4) * (v - 5)  # 0 at each of them


@pytest.mark.parametrize(
    ("name", "answer", "feedback"),
    [
        ("1.1", (p - 1) * (t_f + t_b) / v + AT_THE_OLD_POINTS * t_f, "not the general form: at "),
        ("1.1", (p - 1) * (t_f + t_b) / v + sp.Max(0, v - 5) * t_b, "not the general form: at "),
        ("1.1", (p - 1) * (t_f + t_b) / v + sp.Max(0, v - 10**6) * t_b, "not the general form"),
        ("1.1", (p - 1) * (t_f + t_b) / v * sp.Float(0.9999999999999), "not the general form"),
        (
            "1.1",
            (p - 1) * (t_f + t_b) / v**2,
            "your bubble is 2.25; the simulator's idle",
        ),  # v = 1 only
        ("1.2", (p - 1) * sp.Float(0.333) / (v * m / 3 + sp.Float(0.333) * (p - 1)), "at p ="),
        ("1.2", (p - 1) / (v * m + p - 1) + AT_THE_OLD_POINTS / m, "not the general form: at "),
        ("1.3", WITH_TRANSFER + AT_THE_OLD_POINTS * c, "not the general form"),
        ("1.3", MAKESPAN + 2 * (p * v - 1) * sp.Max(c, t_f / (2 * v)), "the simulator's 29.9"),
    ],
)
def test_an_answer_equal_only_at_some_points_is_wrong(name, answer, feedback):
    got, line = score(name, tree(answer))
    assert got == 0, line
    assert feedback in line and "\n" not in line


@pytest.mark.parametrize(
    ("name", "answer"),
    [
        ("1.1", sp.expand((p - 1) * (t_f + t_b) / v)),
        ("1.1", sp.summation(t_f / v, (k, 1, p - 1)) + sp.summation(t_b / v, (k, 1, p - 1))),
        ("1.2", 1 - m * v / (m * v + p - 1)),
        ("1.2", (p - 1) * (t_f + t_b) / (v * m * (t_f + t_b) + (p - 1) * (t_f + t_b))),
        ("1.3", sp.expand(WITH_TRANSFER)),
        ("1.3", WITH_TRANSFER * sp.Float(0.5) * 2),  # a float that is exact
        # right wherever c <= t_f/v, the question's condition; more above it (a slow link)
        ("1.3", WITH_TRANSFER + 5 * (p - 1) * sp.Max(0, c - t_f / v)),
    ],
)
def test_a_right_answer_in_another_form_is_right_symbolically(name, answer):
    got, line = score(name, tree(answer))
    assert got == QUESTIONS[name].max_score, line
    assert line.endswith("symbolically")


def test_where_sympy_cannot_decide_the_score_samples_and_says_so():
    answer = (p - 1) * (t_f + t_b) / v + sp.Max(t_f, t_b) + sp.Min(t_f, t_b) - t_f - t_b
    got, line = score("1.1", tree(answer))
    assert got == 3 and "sympy could not simplify the difference to 0" in line
    assert "200 random points" in line
    assert equal(answer, (p - 1) * (t_f + t_b) / v).sampled
    wrong = answer + sp.Max(t_f, 2 * t_b) - 2 * t_b  # differs where t_f > 2 t_b
    verdict = equal(wrong, (p - 1) * (t_f + t_b) / v)
    assert not verdict and verdict.witness["t_f"] > 2 * verdict.witness["t_b"]


def test_the_conditions_of_1_3_are_where_the_makespan_holds():
    """1.3's right form against the simulator, independently of the score: equal at random
    cases with v >= 2 and c <= min(t_f, t_b)/v, and larger than it beyond: a transfer
    longer than a chunk's backward, or v = 1 (plain 1F1B, whose steady state waits for
    every transfer). So the question states them, and an answer is compared only inside."""
    rng = random.Random(16)
    for _ in range(12):
        p_, v_ = rng.choice((2, 3, 4, 8)), rng.randint(2, 4)
        m_, F, B = p_ * rng.randint(1, 4), rng.choice((1, 2, 3)), rng.choice((1, 2, 4))
        comm = sp.Rational(rng.randint(0, 100), 100) * sp.Rational(min(F, B), v_)
        at = {p: p_, m: m_, v: v_, t_f: F, t_b: B, c: comm}
        timeline = simulate(interleaved_1f1b(p_, m_, v_), Costs(F=F, B=B, comm=float(comm)))
        assert timeline.makespan == pytest.approx(float(WITH_TRANSFER.xreplace(at)), rel=1e-9)
    for p_, m_, v_, F, B, comm in ((4, 8, 4, 1, 2, 1), (2, 8, 2, 2, 1, 0.66), (4, 8, 1, 1, 2, 0.5)):
        timeline = simulate(interleaved_1f1b(p_, m_, v_), Costs(F=F, B=B, comm=comm))
        at = {p: p_, m: m_, v: v_, t_f: F, t_b: B, c: sp.nsimplify(comm)}
        assert timeline.makespan > float(WITH_TRANSFER.xreplace(at)) + 0.5


def test_1_3_compares_inside_its_conditions_only():
    """Beyond them (c > t_b/v, a backward shorter than a transfer) an answer may differ; a
    single point inside where it differs makes it wrong."""
    beyond = WITH_TRANSFER + (p - 1) * sp.Max(0, c - t_b / v) + sp.Max(0, c - t_f / v)
    assert score("1.3", tree(beyond))[0] == 3
    inside = WITH_TRANSFER + sp.Max(0, c - 2 * t_b / (3 * v))  # 0 at the simulator's cases
    got, line = score("1.3", tree(inside))
    assert got == 0 and "not the general form: at p = " in line
    assert "c = " in line and "w = " not in line and "z = " not in line


def test_an_expression_sympy_could_take_for_ever_on_is_answered_in_bounded_time():
    x, y = p + m + v + t_f + t_b + c, p + 2 * m + 3 * v
    huge = ["Pow", ["Mul", ["Pow", to_tree(x), ["Integer", 8]], to_tree(y)], ["Integer", 8]]
    began = time.monotonic()
    got, line = score("1.1", huge)  # degree 72 once expanded
    assert got == 0 and "at p =" in line
    assert time.monotonic() - began < 20


def test_best_chunks_is_asked_on_cases_drawn_at_grading_time():
    """1.4's variant: a lookup table of the notebook's cases answers the fixed question but
    not the one the grader asks; the notebook's method (the makespan of 1.3, the whole
    numbers around where its derivative vanishes) answers every drawn one."""
    question = QUESTIONS["1.4"]
    table = dict(zip(CHUNK_CASES, BEST_CHUNKS, strict=True))

    def lookup(*case):
        return table.get(case, 4)

    assert score("1.4", collected(question, lookup))[0] == 2  # the self-check's cases
    for seed in range(4):
        asked = question.variant(random.Random(seed))
        assert (asked.name, asked.max_score, asked.function) == ("1.4", 2, "best_chunks")
        assert asked.variant is None and asked.collect != question.collect
        assert asked.score(collected(asked, by_the_formula))[0] == 2, asked.collect
        got, line = asked.score(collected(asked, lookup))
        assert got < 2 and "cases right" in line
    first, again = (question.variant(random.Random(7)).collect for _ in range(2))
    assert first == again != question.variant(random.Random(8)).collect


def collected(question, best_chunks) -> object:
    """What the grader collects for ``question`` from a notebook whose answer is best_chunks."""
    return json.loads(json.dumps(eval(question.collect, {"best_chunks": best_chunks})))


def by_the_formula(stages, microbatches, forward, backward, transfer) -> int:
    """The notebook's method, on the makespan typed here: the best of the whole numbers
    around sqrt((p-1)(F+B)/(2pc)), where the derivative in v of 1.3's makespan vanishes."""
    at = {p: stages, m: microbatches, t_f: forward, t_b: backward, c: transfer}
    form = WITH_TRANSFER.subs(at)
    turn = math.sqrt((stages - 1) * (forward + backward) / (2 * stages * transfer))
    around = {min(max(math.floor(turn) + d, 1), 8) for d in (0, 1)}
    return min(around, key=lambda chunks: float(form.subs(v, chunks)))


def test_assignment_1_forbids_the_package_s_closed_forms_but_not_the_notebook_s_tools():
    forbidden = FORBIDDEN["01_interleaved_bubble"]
    notebook = nbformat.read(NOTEBOOK, 4)
    cells = {f"cell {i}": c.source for i, c in enumerate(notebook.cells) if c.cell_type == "code"}
    assert findings(cells, forbidden) == []  # sympy, the simulator, interleaved_1f1b, links
    for source, used in (
        ("from ppbook.symbolic import interleaved_bubble\nf = interleaved_bubble()", "ppbook"),
        ("import ppbook.symbolic as s\ns.interleaved_makespan()", "interleaved_makespan"),
        ("from ppbook.assign.score_bubble import WITH_TRANSFER", "WITH_TRANSFER"),
        ("from ppbook.closed_form import gpipe_timeline", "closed_form"),
        ("from ppbook.critical_path import makespan_expression", "critical_path"),
        ("from ppbook.symbolic.numeric import bubble_fraction", "numeric"),
    ):
        found = findings({"cell 3": source}, forbidden)
        assert found and used in found[0][1], (source, found)
