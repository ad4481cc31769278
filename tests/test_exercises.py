"""The one exercise API: verdicts, tolerances, unanswered and wrong-type answers, solutions,
and the chapter standard (five or more exercises a chapter, half of them constructive,
each checked in its notebook through the API)."""

import json
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

from ppbook.exercises import KINDS, check, close, exercises, get, solution

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
CHAPTERS = {
    "1": "01_bubble.ipynb",
    "2": "02_schedules.ipynb",
    "3": "03_running.ipynb",
    "4": "04_zero_bubble.ipynb",
    "5": "05_dualpipe.ipynb",
    "6": "06_memory.ipynb",
    "7": "07_communication.ipynb",
    "8": "08_sizing.ipynb",
    "9": "09_multi_gpu.ipynb",
    "10": "10_cluster.ipynb",
    "11": "11_which_schedule.ipynb",
}


def test_right_wrong_and_unanswered_read_as_one_line_each():
    verdict = check("1.1", 0.2)
    assert verdict and verdict.status == "right"
    assert repr(verdict).startswith("Exercise 1.1, right:")
    wrong = check("1.1", 0.25)  # the bubble ratio, the usual slip
    assert not wrong and wrong.status == "wrong"
    assert "bubble ratio" in wrong.message and wrong.hint
    unanswered = check("1.1", None)
    assert unanswered.status == "unanswered" and not unanswered
    assert "answer_1" in unanswered.message
    assert "0.2" not in repr(unanswered)  # no answer is given away
    assert "\n" not in repr(wrong) and "\n" not in repr(unanswered)


@pytest.mark.parametrize(
    "answer", [0.2, Fraction(1, 5), Decimal("0.2"), np.float64(0.2), sp.Rational(1, 5), 0.2001]
)
def test_numbers_of_every_kind_a_reader_types_are_accepted(answer):
    assert check("1.1", answer)


def test_an_answer_rounded_to_three_digits_is_right_and_a_near_miss_is_not():
    assert close(1.78, 16 / 9)  # rounded to three significant digits
    assert close(0.18, 7 / 39)
    assert not close(0.2, 0.25)
    assert not close(1.7, 16 / 9)


@pytest.mark.parametrize("answer", ["0.2", True, [0.2], float("nan"), 1j])
def test_an_answer_of_the_wrong_type_says_what_is_wanted(answer):
    verdict = check("1.1", answer)
    assert verdict.status == "wrong"
    assert "wants" in verdict.message


def test_integer_answers_refuse_fractions_of_a_microbatch():
    assert check("1.3", 70) and check("1.3", 70.0)
    assert "whole number" in check("1.3", 70.5).message


def test_solutions_appear_only_when_asked():
    text = repr(solution("1.1"))
    assert "Solution 1.1" in text and "0.2" in text
    assert solution("1.1")._repr_markdown_().startswith("**Solution 1.1.**")


def test_unknown_exercises_are_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="there is no exercise '1.99'; chapter 1 has 1.1"):
        check("1.99", 1)
    with pytest.raises(ValueError, match="no chapter '42'"):
        exercises("42")
    with pytest.raises(ValueError, match="a string such as '1.2'"):
        get(1.2)


def _notebook_sources(name: str) -> tuple[str, str]:
    cells = json.loads((NOTEBOOKS / name).read_text())["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return code, text


@pytest.mark.parametrize("chapter", sorted(CHAPTERS, key=int))  # "10" after "9"
def test_every_chapter_meets_the_exercise_standard(chapter):
    found = exercises(chapter)
    assert len(found) >= 5, f"chapter {chapter} has {len(found)} exercises, wants 5 or more"
    constructive = [e for e in found if e.kind in ("derive", "construct", "implement")]
    assert 2 * len(constructive) >= len(found), "at least half derive, construct or implement"
    assert all(e.kind in KINDS and e.prompt and e.solution for e in found)
    code, _ = _notebook_sources(CHAPTERS[chapter])
    for entry in found:
        assert f'check("{entry.id}"' in code, f"{CHAPTERS[chapter]} does not check {entry.id}"
        assert f"{entry.answer_name} = None" in code, f"{entry.id}: no placeholder to fill in"
        assert check(entry.id, None).status == "unanswered"


@pytest.mark.parametrize("chapter", sorted(CHAPTERS, key=int))  # "10" after "9"
def test_every_chapter_opens_with_objectives_and_ends_with_references(chapter):
    _, text = _notebook_sources(CHAPTERS[chapter])
    lowered = text.lower()
    for heading in ("you will learn", "prerequisites", "summary", "references"):
        assert heading in lowered, f"{CHAPTERS[chapter]} lacks a '{heading}' section"
