"""Exercises of chapter 1, the bubble (``notebooks/01_bubble.ipynb``).

The right answers come from the symbolic layer (:mod:`ppbook.symbolic`: the derived GPipe
makespan and bubble, :mod:`ppbook.symbolic.numeric`) and from the simulator
(:func:`ppbook.simulate.simulate` on :func:`ppbook.schedules.gpipe`): exercises 1.4 to
1.7 check the reader's choice or construction by its effect on a simulated timeline. The
hints name the usual slip, mixing up the bubble fraction f = idle/total (GPipe,
arXiv:1811.06965, sec. 2.3) and the bubble ratio r = idle/compute (Megatron-LM,
arXiv:2104.04473, sec. 2.2.1; the Ultra-Scale Playbook). Exercises 1.8 to 1.10 (derive,
implement) live in :mod:`ppbook.exercises.ch1_derive`.
"""

from __future__ import annotations

import sympy as sp

from ppbook.checks import shown
from ppbook.costs import Costs
from ppbook.exercises import close, exercise, integer, number, right, wrong
from ppbook.pipeline_schedule import Action, OverlapFB, Schedule
from ppbook.schedules import gpipe
from ppbook.simulate import simulate
from ppbook.symbolic import (
    bubble_fraction,
    bubble_fraction_of,
    bubble_ratio_of,
    gpipe_compute_time,
    gpipe_makespan_with_transfer,
    numeric,
)
from ppbook.symbolic.symbols import c, m, p, t_b, t_f

# ----- compute -----------------------------------------------------------------------------


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


# ----- choose ------------------------------------------------------------------------------


@exercise(
    "1.3",
    "Choose the smallest m that brings the bubble ratio r of p = 8 stages to 10 % or less.",
    kind="choose",
    solution="r = (p-1)/m <= 0.1 needs m >= 70; m = 70 gives r = 7/70 = 0.1.",
    answer_name="answer_3",
)
def _smallest_m(answer):
    given = integer(answer, "a whole number of micro-batches, at least one", minimum=1)
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


@exercise(
    "1.4",
    "Choose the smallest m that brings the bubble fraction f of GPipe with p = 16 stages "
    "to 5 % or less; the check runs GPipe at your m in the simulator.",
    kind="choose",
    solution="f = (p-1)/(m+p-1) = 15/(m+15) <= 0.05 needs m + 15 >= 300, so m >= 285: "
    "`numeric.min_microbatches(16, 0.05)` gives 285, and `simulate(gpipe(16, 285))` "
    "measures f = 15/300 = 0.05. (In the ratio convention the answer would be 300.)",
    answer_name="answer_4",
)
def _smallest_m_fraction(answer):
    given = integer(answer, "a whole number of micro-batches, at least one", minimum=1)
    best = numeric.min_microbatches(16, 0.05, convention="fraction")
    if given > best:
        if given == numeric.min_microbatches(16, 0.05, convention="ratio"):
            return wrong(
                f"m = {given} brings the bubble ratio r = 15/m to 5 %; the fraction f is "
                "below 5 % with fewer micro-batches.",
                "the question asks for the fraction f = (p-1)/(m+p-1).",
            )
        return wrong(f"m = {given} is enough, but a smaller m also brings f to 5 % or less.")
    measured = simulate(gpipe(16, given)).bubble_fraction
    if given == best:
        return right(f"the simulator measures f = {measured:.4g} <= 0.05 on GPipe at m = {given}.")
    return wrong(
        f"the simulator measures f = {measured:.4g} on GPipe at m = {given}, above 0.05.",
        "solve 15/(m+15) <= 0.05 for m.",
    )


_CONVENTIONS = {"fraction": "fraction", "f": "fraction", "ratio": "ratio", "r": "ratio"}


@exercise(
    "1.5",
    'A report quotes "a pipeline bubble of 0.4375" for p = 8 stages and m = 16 micro-batches. '
    'Choose the convention it is in: "fraction" or "ratio".',
    kind="choose",
    solution='"ratio": r = (p-1)/m = 7/16 = 0.4375, while f = (p-1)/(m+p-1) = 7/23 = 0.304. '
    "`simulate(gpipe(8, 16))` measures both: `.bubble_ratio` is 0.4375.",
    answer_name="answer_5",
)
def _which_convention(answer):
    text = answer.strip().lower().removeprefix("bubble ") if isinstance(answer, str) else None
    if text not in _CONVENTIONS:
        return wrong(f'this exercise wants "fraction" or "ratio", got {shown(answer)}.')
    timeline = simulate(gpipe(8, 16))
    measured = {"fraction": timeline.bubble_fraction, "ratio": timeline.bubble_ratio}
    symbol = {"fraction": "f = idle/total", "ratio": "r = idle/compute"}
    chosen = _CONVENTIONS[text]
    if close(0.4375, measured[chosen]):
        return right(
            f"the simulator measures {symbol[chosen]} = {measured[chosen]:.4g} on GPipe "
            "with p = 8, m = 16."
        )
    other = "ratio" if chosen == "fraction" else "fraction"
    return wrong(
        f"the simulator measures {symbol[chosen]} = {measured[chosen]:.4g} on GPipe with "
        "p = 8, m = 16, not 0.4375.",
        f"compute the {other} as well and compare it with the quoted number.",
    )


# ----- construct ---------------------------------------------------------------------------

_GLOSSARY = {str(x): x for x in (p, m, t_f, t_b, c)}
_POINT = {p: 4, m: 6, t_f: 1, t_b: 2, c: sp.Rational(1, 2)}  # a pipeline the check simulates


def _with_transfer(convention: str, hops: int) -> sp.Expr:
    """GPipe's bubble with ``hops (p-1)`` transfers of time c on the critical path."""
    makespan = gpipe_makespan_with_transfer().subs(c, c * sp.Rational(hops, 2))
    of = bubble_fraction_of if convention == "fraction" else bubble_ratio_of
    return of(p * makespan - gpipe_compute_time(), gpipe_compute_time())


def _same(a: sp.Expr, b: sp.Expr) -> bool:
    return sp.simplify(a - b) == 0


@exercise(
    "1.6",
    "Construct a sympy expression in p, m, t_f, t_b and c (ppbook.symbolic.symbols) for the "
    "bubble fraction f of GPipe when every transfer between devices takes time c.",
    kind="construct",
    solution="The makespan grows by 2(p-1)c (p-1 hops forward, p-1 back; "
    "`gpipe_makespan_with_transfer()`), so the idle time over all p devices is "
    "p(p-1)(t_f+t_b+2c) and `f = (p-1)*(t_f+t_b+2*c) / ((m+p-1)*(t_f+t_b) + 2*(p-1)*c)`. "
    "At p = 4, m = 6, t_f = 1, t_b = 2, c = 0.5 it gives 0.4, as "
    "`simulate(gpipe(4, 6), Costs(F=1, B=2, comm=0.5)).bubble_fraction` measures.",
    answer_name="answer_6",
)
def _bubble_with_transfer(answer):
    if not isinstance(answer, sp.Expr):
        return wrong(
            f"this exercise wants a sympy expression in p, m, t_f, t_b and c, got {shown(answer)}.",
            "import the symbols: from ppbook.symbolic.symbols import p, m, t_f, t_b, c.",
        )
    unknown = sorted(str(x) for x in answer.free_symbols if str(x) not in _GLOSSARY)
    if unknown:
        return wrong(
            f"the expression uses {', '.join(unknown)}, which the question does not define.",
            "write it in p, m, t_f, t_b and c only.",
        )
    given = answer.subs({x: _GLOSSARY[str(x)] for x in answer.free_symbols})
    costs = Costs(F=_POINT[t_f], B=_POINT[t_b], comm=_POINT[c])
    measured = simulate(gpipe(_POINT[p], _POINT[m]), costs).bubble_fraction
    if _same(given, _with_transfer("fraction", 2)):
        return right(
            "it is GPipe's f with 2(p-1) transfers on the critical path; at p = 4, m = 6, "
            f"t_f = 1, t_b = 2, c = 0.5 the simulator measures f = {measured:.4g} as well."
        )
    if _same(given, bubble_fraction()):
        return wrong(
            "that is the bubble without transfers: c does not change it.",
            "every hop on the critical path adds c to the makespan; count the hops.",
        )
    if _same(given, _with_transfer("ratio", 2)):
        return wrong(
            "that is the bubble ratio r = idle/compute with transfers.",
            "the fraction divides the idle time by the total time, idle plus compute.",
        )
    if _same(given, _with_transfer("fraction", 1)):
        return wrong(
            "that counts p-1 transfers, the forward ones only.",
            "the backward crosses the same p-1 device boundaries on its way back.",
        )
    value = given.subs(_POINT)
    said = f"{float(value):.4g}" if value.is_real and value.is_finite else "no finite number"
    return wrong(
        f"at p = 4, m = 6, t_f = 1, t_b = 2, c = 0.5 the expression gives {said}; the "
        f"simulator measures f = {measured:.4g}.",
        "f = idle/total: the total is p times the makespan, the idle time what compute "
        "leaves of it.",
    )


@exercise(
    "1.7",
    "Construct GPipe's schedule for p = 3 stages and m = 4 micro-batches with "
    "ppbook.pipeline_schedule's Schedule (one stage per rank); the check simulates it and compares "
    "its bubble with the closed form.",
    kind="construct",
    solution="Each rank runs every forward, then every backward, in micro-batch order: "
    '`Schedule.from_strings([[f"{s}F{j}" for j in range(4)] + [f"{s}B{j}" for j in range(4)] '
    "for s in range(3)])`. It equals `ppbook.schedules.gpipe(3, 4)`, and the simulator "
    "measures f = 2/6 = (p-1)/(m+p-1).",
    answer_name="answer_7",
)
def _gpipe_schedule(answer):
    if not isinstance(answer, Schedule):
        return wrong(
            f"this exercise wants a Schedule, got {shown(answer)}.",
            'build one with Schedule.from_strings([["0F0", ...], ...]) or '
            "Schedule(actions, stage_to_rank, num_microbatches).",
        )
    shape = (answer.num_ranks, answer.num_stages, answer.num_microbatches)
    if shape != (3, 3, 4):
        return wrong(
            "the schedule has num_ranks, num_stages, num_microbatches = "
            f"{', '.join(map(str, shape))}; GPipe here has 3 ranks, one stage each, and 4 "
            "micro-batches."
        )
    for rank, row in enumerate(answer.actions):
        strange = next((a for a in row if not isinstance(a, Action | OverlapFB)), None)
        if strange is not None:
            return wrong(
                f"rank {rank} holds {shown(strange)}, which is not an action.",
                "pass strings such as '0F0' to Schedule.from_strings, or build Action(0, 'F', 0).",
            )
        kinds = [a.kind for a in row]
        if set(kinds) - {"F", "B"}:
            return wrong(
                f"rank {rank} runs {', '.join(sorted(set(kinds) - {'F', 'B'}))}: GPipe does "
                "not split the backward.",
                "use one B per micro-batch.",
            )
        if "B" in kinds and "F" in kinds[kinds.index("B") :]:
            return wrong(
                f"rank {rank} runs a backward before its last forward, as 1F1B does.",
                "GPipe runs all forwards, then all backwards (all-forward-all-backward).",
            )
    timeline = simulate(answer)  # validates: every F and B once, on the right rank
    expected = bubble_fraction().subs({p: 3, m: 4})
    if close(timeline.bubble_fraction, float(expected)):
        return right(
            f"the simulator measures f = {timeline.bubble_fraction:.4g} = (p-1)/(m+p-1) "
            f"= {expected}, GPipe's closed form."
        )
    return wrong(
        f"the simulator measures f = {timeline.bubble_fraction:.4g}, not GPipe's "
        f"(p-1)/(m+p-1) = {expected}: some rank waits longer than it must.",
        "run each rank's forwards in micro-batch order 0..m-1, then its backwards.",
    )


import ppbook.exercises.ch1_derive  # noqa: E402, F401 (registers 1.8 to 1.10: derive, implement)
