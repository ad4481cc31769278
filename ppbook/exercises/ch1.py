"""Exercises of chapter 1, the bubble (``notebooks/01_bubble.ipynb``).

The right answers come from :mod:`ppbook.symbolic.numeric`; the hints name the usual slip,
mixing up the bubble fraction f = idle/total (GPipe) and the bubble ratio r = idle/compute
(Megatron-LM, the Ultra-Scale Playbook).
"""

from __future__ import annotations

from ppbook.exercises import close, exercise, integer, number, right, wrong
from ppbook.symbolic import numeric


@exercise(
    "1.1",
    "The bubble fraction f of GPipe with p = 4 stages and m = 12 micro-batches.",
    kind="compute",
    solution="f = (p-1)/(m+p-1) = 3/15 = 0.2: the ramps take p-1 of the m+p-1 steps.",
    answer_name="answer_1",
)
def _gpipe_fraction(answer):
    given = number(answer)
    f, r = numeric.bubble_fraction(4, 12), numeric.bubble_ratio(4, 12)
    if close(given, f):
        return right(f"f = (p-1)/(m+p-1) = 3/15 = {f:.4g}.")
    if close(given, r):
        return wrong(
            f"{given:.4g} is the bubble ratio r = (p-1)/m, idle time over compute time.",
            "the fraction divides the idle time by the total time: (p-1)/(m+p-1).",
        )
    return wrong(f"{given:.4g} is not f for p = 4, m = 12.", "f = (p-1)/(m+p-1).")


@exercise(
    "1.2",
    "A paper reports a bubble ratio r = 0.25: what fraction f of the step is idle?",
    kind="compute",
    solution="f = r/(1+r) = 0.25/1.25 = 0.2.",
    answer_name="answer_2",
)
def _fraction_from_ratio(answer):
    given = number(answer)
    f = numeric.fraction_from_ratio(0.25)
    if close(given, f):
        return right(f"f = r/(1+r) = 0.25/1.25 = {f:.4g} of the step is idle.")
    if close(given, 0.25):
        return wrong(
            "0.25 is the ratio itself: idle time over compute time.",
            "over the total time, idle plus compute, the share is smaller: f = r/(1+r).",
        )
    if close(given, numeric.ratio_from_fraction(0.25)):
        return wrong("that is r = f/(1-f), the other direction.", "here r is given: f = r/(1+r).")
    return wrong(f"{given:.4g} is not the fraction for r = 0.25.", "use f = r/(1+r).")


@exercise(
    "1.3",
    "Choose the smallest m that brings the bubble ratio r of p = 8 stages to 10 % or less.",
    kind="choose",
    solution="r = (p-1)/m <= 0.1 needs m >= 70; m = 70 gives r = 7/70 = 0.1.",
    answer_name="answer_3",
)
def _smallest_m(answer):
    given = integer(answer, "a whole number of micro-batches")
    if given < 1:
        return wrong(f"a step needs at least one micro-batch, got m = {given}.")
    best = numeric.min_microbatches(8, 0.1, convention="ratio")
    ratio = numeric.bubble_ratio(8, given)
    if given == best:
        return right(f"r = 7/{best} = {ratio:.4g} <= 0.1.")
    if given == numeric.min_microbatches(8, 0.1, convention="fraction"):
        return wrong(
            f"m = {given} brings the bubble fraction f to 10 %, but the ratio r = 7/{given} "
            f"= {ratio:.4g} is still above 0.1.",
            "the question asks for the ratio r = (p-1)/m.",
        )
    if given < best:
        return wrong(f"at m = {given} the ratio r = 7/{given} = {ratio:.4g} is above 0.1.")
    return wrong(f"m = {given} is enough, but a smaller m also brings r to 0.1 or less.")
