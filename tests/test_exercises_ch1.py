"""Chapter 1's exercises: each right answer passes and each typical slip gets its own hint.

The right answers here are worked by hand (fractions of small integers, a schedule written
out action by action), independently of the package code that checks them.
"""

import json
import re
from fractions import Fraction
from pathlib import Path

import pytest
import sympy as sp

from ppbook.exercises import check
from ppbook.schedule import Schedule
from ppbook.symbolic.symbols import c, m, p, t_b, t_f


def _gpipe_rows(forward_order=range(4), backward_order=range(4)) -> list[list[str]]:
    """GPipe for p = 3, m = 4 written out: every forward, then every backward."""
    return [
        [f"{s}F{j}" for j in forward_order] + [f"{s}B{j}" for j in backward_order] for s in range(3)
    ]


@pytest.mark.parametrize(
    ("exercise", "answer"),
    [
        ("1.1", Fraction(3, 15)),  # (p-1)/(m+p-1) with p = 4, m = 12
        ("1.1", 0.2),
        ("1.2", 0.25 / 1.25),  # r/(1+r)
        ("1.3", 70),  # 7/m <= 1/10
        ("1.4", 285),  # 15/(m+15) <= 1/20  <=>  m >= 285
        ("1.5", "ratio"),  # 7/16 = 0.4375 is (p-1)/m; (p-1)/(m+p-1) = 7/23
        ("1.5", " Bubble Ratio "),
        ("1.5", "r"),
        ("1.6", (p - 1) * (t_f + t_b + 2 * c) / ((m + p - 1) * (t_f + t_b) + 2 * (p - 1) * c)),
        ("1.6", 1 - p * m * (t_f + t_b) / (p * ((m + p - 1) * (t_f + t_b) + 2 * (p - 1) * c))),
        ("1.7", Schedule.from_strings(_gpipe_rows())),
    ],
)
def test_right_answers_pass(exercise, answer):
    verdict = check(exercise, answer)
    assert verdict.status == "right", verdict.text


def test_an_expression_in_the_readers_own_symbols_is_read_in_the_glossarys():
    P, M, TF, TB, C = sp.symbols("p m t_f t_b c")  # no assumptions, as a reader might write
    answer = (P - 1) * (TF + TB + 2 * C) / ((M + P - 1) * (TF + TB) + 2 * (P - 1) * C)
    assert check("1.6", answer)


def test_the_simulated_bubble_is_in_the_verdicts_that_say_so():
    assert "f = 0.05 " in check("1.4", 285).message  # 15/300 on the simulator's timeline
    assert "r = idle/compute = 0.4375" in check("1.5", "ratio").message
    assert (
        "f = 0.4 "
        in check(
            "1.6", (p - 1) * (t_f + t_b + 2 * c) / ((m + p - 1) * (t_f + t_b) + 2 * (p - 1) * c)
        ).message
    )  # (p-1)(t_f+t_b+2c)/((m+p-1)(t_f+t_b)+2(p-1)c) = 3*4/(9*3+3) at the point
    assert "f = 0.3333" in check("1.7", Schedule.from_strings(_gpipe_rows())).message


@pytest.mark.parametrize(
    ("exercise", "answer", "hint"),
    [
        ("1.1", 0.25, "bubble ratio r"),  # 3/12
        ("1.1", 0.5, "not f for p = 4"),
        ("1.1", "0.2", "wants a number"),
        ("1.2", 0.25, "ratio itself"),
        ("1.2", 1 / 3, "other direction"),  # 0.25/0.75
        ("1.2", 0.9, "not the fraction"),
        ("1.3", 63, "bubble fraction f to 10 %"),  # 7/(63+7) = 0.1
        ("1.3", 32, "above 0.1"),
        ("1.3", 71, "smaller m"),
        ("1.3", 0, "at least one"),
        ("1.3", 70.5, "whole number"),
        ("1.4", 300, "bubble ratio r = 15/m to 5 %"),  # 15/300 = 0.05
        ("1.4", 284, "simulator measures f = 0.05017"),  # 15/299
        ("1.4", 286, "smaller m"),
        ("1.4", -3, "at least one"),
        ("1.4", "285", "whole number"),
        ("1.5", "fraction", "f = idle/total = 0.3043"),  # 7/23
        ("1.5", "f", "compute the ratio as well"),
        ("1.5", "percent", 'wants "fraction" or "ratio"'),
        ("1.5", 0.4375, 'wants "fraction" or "ratio"'),
        ("1.6", (p - 1) / (m + p - 1), "without transfers"),
        ("1.6", (p - 1) * (t_f + t_b + 2 * c) / (m * (t_f + t_b)), "bubble ratio r"),
        (
            "1.6",
            (p - 1) * (t_f + t_b + c) / ((m + p - 1) * (t_f + t_b) + (p - 1) * c),
            "forward ones only",
        ),
        ("1.6", (p - 1) / m, "gives 0.5; the simulator measures f = 0.4"),  # 3/6
        ("1.6", p / (m - m), "no finite number"),
        ("1.6", (p - 1) * sp.Symbol("x"), "uses x"),
        ("1.6", 0.4, "wants a sympy expression"),
        ("1.7", "0F0", "wants a Schedule"),
        ("1.7", Schedule.from_strings(_gpipe_rows()[:1]), "3 ranks, one stage each"),
        (
            "1.7",
            Schedule.from_strings(_gpipe_rows(range(5), range(5))),
            "4 micro-batches",
        ),
        (
            "1.7",
            Schedule.from_strings(
                [["0F0", "0F1", "0B0", "0F2", "0B1", "0F3", "0B2", "0B3"], *_gpipe_rows()[1:]]
            ),
            "backward before its last forward",
        ),
        (
            "1.7",
            Schedule.from_strings(
                [
                    [a.replace("B", "I") for a in r] + [f"{s}W{j}" for j in range(4)]
                    for s, r in enumerate(_gpipe_rows())
                ]
            ),
            "does not split the backward",
        ),
        ("1.7", Schedule.from_strings([r[:-1] for r in _gpipe_rows()]), "expected one B"),
        (
            "1.7",  # micro-batch 3 stops after stage 1: the last rank never sees it
            Schedule.from_strings([*_gpipe_rows()[:2], _gpipe_rows(range(3), range(3))[2]]),
            "micro-batch 3 never passes stage 2",
        ),
        ("1.7", Schedule(_gpipe_rows(), (0, 1, 2), 4), "'0F0', which is not an action"),
        (
            "1.7",  # the last rank takes the micro-batches in reverse and waits for the last
            Schedule.from_strings([*_gpipe_rows()[:2], _gpipe_rows(range(3, -1, -1))[2]]),
            "not GPipe's (p-1)/(m+p-1) = 1/3",
        ),
    ],
)
def test_each_typical_slip_gets_its_own_hint(exercise, answer, hint):
    verdict = check(exercise, answer)
    assert verdict.status == "wrong"
    assert hint in verdict.text, verdict.text


@pytest.mark.parametrize("exercise", [f"1.{k}" for k in range(1, 11)])
def test_every_exercise_waits_for_an_answer_without_giving_it_away(exercise):
    verdict = check(exercise, None)
    assert verdict.status == "unanswered"
    assert f"answer_{exercise[2:]}" in verdict.message
    for given_away in ("0.2", "70", "285", "ratio", "2*c"):
        assert given_away not in verdict.text


def test_the_chapter_measures_on_the_simulator_and_shows_no_answer():
    notebook = Path(__file__).resolve().parent.parent / "notebooks" / "01_bubble.ipynb"
    cells = json.loads(notebook.read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    joined = "\n".join(code)
    # the bubble is measured on the simulator's timeline, not on one built from the closed form
    assert "simulate(gpipe(" in joined and "gpipe_timeline" not in joined
    # no cell runs a check on anything but the reader's placeholder, or calls solution()
    assert not re.search(r'check\("1\.\d+", (?!answer_\d+\))', joined)
    assert "solution(" not in joined.replace('solution("1.k")', "")
    for k in range(1, 11):
        cell = next(c for c in code if f'check("1.{k}"' in c)
        assert cell.startswith(f"answer_{k} = None  #")
        assert cell.rstrip().endswith(f'check("1.{k}", answer_{k})')
