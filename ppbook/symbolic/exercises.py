"""Answer checks for the exercises of chapter 1 (notebooks/01_bubble.ipynb).

Each ``check_exercise_N(answer)`` prints a short confirmation and returns True for a
right answer, says "no answer yet" and returns None for ``None`` (the notebook's
placeholder), and raises :class:`WrongAnswer` with a hint for a wrong one, naming the
usual slip: mixing up the bubble fraction f = idle/total (GPipe, arXiv:1811.06965) and
the bubble ratio r = idle/compute (Megatron-LM, arXiv:2104.04473; Ultra-Scale Playbook).
The right answers are computed with :mod:`ppbook.symbolic.numeric`, not stored.
"""

import numbers

from ppbook.symbolic import numeric

#: How far a decimal answer may be from the exact one (answers rounded to 3 places pass).
TOLERANCE = 1e-3


class WrongAnswer(AssertionError):
    """An exercise answer that is not right yet; the message says why."""


def _unanswered(exercise: int, answer) -> bool:
    if answer is None:
        print(f"Exercise {exercise}: no answer yet. Set answer_{exercise} and run the cell again.")
        return True
    return False


def _as_number(exercise: int, answer) -> float:
    if isinstance(answer, bool) or not isinstance(answer, numbers.Real):
        raise WrongAnswer(
            f"exercise {exercise} wants a number such as 0.25 or Fraction(1, 4), got {answer!r}"
        )
    return float(answer)


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= TOLERANCE


def check_exercise_1(answer) -> bool | None:
    """Exercise 1: the bubble fraction f of GPipe with p = 4 stages and m = 12 micro-batches."""
    if _unanswered(1, answer):
        return None
    given = _as_number(1, answer)
    f, r = numeric.bubble_fraction(4, 12), numeric.bubble_ratio(4, 12)
    if _close(given, f):
        print(f"Correct: f = (p-1)/(m+p-1) = 3/15 = {f:.4g}.")
        return True
    if _close(given, r):
        raise WrongAnswer(
            f"{given:.4g} is the bubble ratio r = (p-1)/m, idle time over compute time. "
            "The fraction divides the idle time by the total time: (p-1)/(m+p-1)."
        )
    raise WrongAnswer(f"{given:.4g} is not f for p = 4, m = 12; try f = (p-1)/(m+p-1).")


def check_exercise_2(answer) -> bool | None:
    """Exercise 2: the bubble fraction f that goes with a reported bubble ratio r = 0.25."""
    if _unanswered(2, answer):
        return None
    given = _as_number(2, answer)
    f = numeric.fraction_from_ratio(0.25)
    if _close(given, f):
        print(f"Correct: f = r/(1+r) = 0.25/1.25 = {f:.4g} of the step is idle.")
        return True
    if _close(given, 0.25):
        raise WrongAnswer(
            "0.25 is the ratio itself: idle time over compute time. Over the total time, "
            "idle plus compute, the share is smaller: f = r/(1+r)."
        )
    if _close(given, numeric.ratio_from_fraction(0.25)):
        raise WrongAnswer("that is r = f/(1-f), the other direction; here r is given: f = r/(1+r)")
    raise WrongAnswer(f"{given:.4g} is not the fraction for r = 0.25; use f = r/(1+r).")


def check_exercise_3(answer) -> bool | None:
    """Exercise 3: the smallest m that brings the bubble ratio of p = 8 stages to 10% or less."""
    if _unanswered(3, answer):
        return None
    if isinstance(answer, bool) or not isinstance(answer, numbers.Integral):
        raise WrongAnswer(f"exercise 3 wants a whole number of micro-batches, got {answer!r}")
    if answer < 1:
        raise WrongAnswer(f"a step needs at least one micro-batch, got m = {answer}")
    right = numeric.min_microbatches(8, 0.1, convention="ratio")
    if answer == right:
        print(f"Correct: r = 7/{right} = {numeric.bubble_ratio(8, right):.4g} <= 0.1.")
        return True
    if answer == numeric.min_microbatches(8, 0.1, convention="fraction"):
        raise WrongAnswer(
            f"m = {answer} brings the bubble fraction f to 10%, but the ratio r = 7/{answer} "
            f"= {numeric.bubble_ratio(8, answer):.4g} is still above 0.1."
        )
    if answer < right:
        raise WrongAnswer(
            f"at m = {answer} the ratio r = 7/{answer} = {numeric.bubble_ratio(8, answer):.4g}"
            " is above 0.1: more micro-batches."
        )
    raise WrongAnswer(f"m = {answer} is enough, but a smaller m also brings r to 0.1 or less.")
