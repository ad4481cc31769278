"""Exercises of chapter 11, which schedule when (``notebooks/11_which_schedule.ipynb``).

Every right answer comes from the simulator (:func:`ppbook.simulate.simulate`) at check
time, under ppbook's cost convention (:mod:`ppbook.costs`): a cost is one pass of one
micro-batch through one device's share of the model, a chunk pass takes ``cost / v``, and a
transfer between ranks takes ``comm``. A memory budget counts activations in micro-batches
of a full stage, the most any rank holds at once on the simulated timeline
(:meth:`~ppbook.timeline.Timeline.peak_activations`). The candidates are every schedule of
:data:`ppbook.schedules.SCHEDULES` with its default chunks, ``zb-auto`` built for the
budget. The hints name the usual slips: a schedule chosen for its bubble alone when it
holds more than the budget, transfers forgotten (1F1B's steady state waits for round
trips, GPipe's does not), an overlapped F&B pair faster than its longer pass, a speed-up
given for a saving, and a rule of thumb that holds in one regime only.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from functools import lru_cache

import sympy as sp

from ppbook.checks import clipped, shown
from ppbook.costs import Costs
from ppbook.exercises import close, exercise, integer, number, right, wrong
from ppbook.schedules import SCHEDULES, build
from ppbook.simulate import simulate
from ppbook.timeline import ACTIVATION_UNIT

SLACK = 0.02
"""A schedule within 2% of the fastest counts as a tie for the fastest (exercise 11.1)."""


def _costs(comm: float = 0.0, fb: float | None = None) -> Costs:
    """F = I = W = 1 time unit per device share (B = 2), ``comm`` per transfer."""
    extra = {} if fb is None else {"FB": fb}
    return Costs(F=1, I=1, W=1, comm=comm, **extra)


@lru_cache(maxsize=512)
def _run(name: str, p: int, m: int, comm: float, fb: float | None, budget: float):
    """(step time, peak activations on any rank) of ``name``, or None where its rule
    refuses (p, m)."""
    costs = _costs(comm, fb)
    options = {}
    if name == "zb-auto":
        options = {"costs": costs, "memory_limit": max(1, int(min(budget, 2 * m)))}
    try:
        timeline = simulate(build(name, p, m, **options), costs)
    except ValueError:
        return None
    peak = max(timeline.peak_activations(r) for r in range(p))
    return timeline.makespan, peak


def ranked(
    p: int, m: int, comm: float = 0.0, budget: float = math.inf, fb: float | None = None
) -> list[tuple[float, str, float]]:
    """``(step time, name, peak activations)`` of every schedule that runs (p, m) and holds
    at most ``budget`` activations, fastest first."""
    found = []
    for name in SCHEDULES:
        run = _run(name, p, m, float(comm), fb, float(budget))
        if run is not None and run[1] <= budget + 1e-9:
            found.append((run[0], name, run[1]))
    return sorted(found)


def _schedule_name(answer: object) -> str:
    name = answer.strip().lower() if isinstance(answer, str) else None
    if name not in SCHEDULES:
        raise ValueError(
            f"this exercise wants a schedule name, one of {', '.join(SCHEDULES)}; got "
            f"{shown(answer)}."
        )
    return name


def _judge_choice(name: str, p: int, m: int, comm: float, budget: float, fb=None):
    """Right when ``name`` fits the budget and ties the fastest that does; else why not."""
    run = _run(name, p, m, float(comm), fb, float(budget))
    if run is None:
        return wrong(f"{name} does not run p = {p}, m = {m}: {SCHEDULES[name].rule}.")
    step, peak = run
    if peak > budget + 1e-9:
        return wrong(
            f"{name} holds up to {peak:g} {ACTIVATION_UNIT} on a rank, over the budget of "
            f"{budget:g}.",
            "a short step is no use if the activations do not fit: look at memory first.",
        )
    best = ranked(p, m, comm, budget, fb)[0]
    if step > best[0] * (1 + SLACK):
        hint = (
            "with transfers, a schedule whose steady state waits on round trips pays them "
            "every micro-batch; one with more micro-batches in flight hides them."
            if comm
            else "which schedules fill the ramps at the start and end of a step?"
        )
        return wrong(
            f"{name} fits ({peak:g} {ACTIVATION_UNIT}) and takes {step:g} time units; "
            f"a schedule that fits takes {best[0]:g} ({100 * (step / best[0] - 1):.0f}% less).",
            hint,
        )
    return right(f"{name} takes {step:g} time units, the fastest that fits, holding {peak:g}.")


@exercise(
    "11.1",
    "p = 8, m = 16, F = I = W = 1, a transfer between ranks takes 0.5 time units, and each "
    "rank may hold at most 8 micro-batch activations of a full stage: choose the schedule "
    "(a name of SCHEDULES) with the shortest step that fits.",
    kind="choose",
    solution="Rank the schedules that fit the budget of p = 8 by simulated step time (the "
    "chapter's `ranked(8, 16, comm=0.5, budget=8)`). ZB-H2 would be fastest with these "
    "transfers, but holds 2p-1 = 15; 1F1B pays a round trip of 2c per micro-batch in its "
    "steady state (89 time units). Of those that fit, ZB-V takes 68.5 and ZB-H1 and "
    "zb-auto 69: the check accepts any schedule within 2% of the fastest.",
    answer_name="answer_1",
)
def _choose_with_transfers(answer):
    return _judge_choice(_schedule_name(answer), 8, 16, 0.5, 8)


@exercise(
    "11.2",
    "ZB-V with p = 8, F = I = W = 1 and free transfers: choose the fewest micro-batches m "
    "for which one step's bubble fraction f = idle/total is at most 5%.",
    kind="choose",
    solution="ZB-V idles only the ramp of (p-1) chunk forwards, (p-1)F/2 per rank, so "
    "f = (p-1)/2 / (3m + (p-1)/2) = 3.5 / (3m + 3.5) at p = 8. f <= 0.05 needs "
    "3m + 3.5 >= 70, m >= 22.2: m = 23 (f = 0.0483; at m = 22, f = 0.0504). The bubble "
    "ratio r = 3.5 / 3m would ask for m = 24.",
    answer_name="answer_2",
)
def _fewest_microbatches(answer):
    p = 8
    m = integer(answer, "a whole number of micro-batches from 1 to 200", minimum=1, maximum=200)

    def bubble(k: int) -> float:
        return simulate(build("zb-v", p, k), _costs()).bubble_fraction

    if bubble(m) > 0.05 + 1e-12:
        return wrong(
            f"at m = {m} ZB-V's bubble fraction is f = {bubble(m):.4f} > 0.05.",
            "more micro-batches spread the same ramp over a longer step.",
        )
    if m > 1 and bubble(m - 1) <= 0.05 + 1e-12:
        ratio = bubble(m) / (1 - bubble(m))
        hint = (
            "r = idle/compute is at most 5% here, but the exercise asks for f = idle/total "
            "= r / (1 + r), which is smaller."
            if ratio <= 0.05 < bubble(m - 1) / (1 - bubble(m - 1))
            else "the fewest: try smaller m until f rises above 5%."
        )
        return wrong(
            f"m = {m} works (f = {bubble(m):.4f}), but so does m = {m - 1} "
            f"(f = {bubble(m - 1):.4f}).",
            hint,
        )
    return right(
        f"m = {m}: f = {bubble(m):.4f} <= 0.05, and at m = {m - 1} f = {bubble(m - 1):.4f}."
    )


@exercise(
    "11.3",
    "Construct costs (a Costs with F, B or I and W, and comm) under which one step of GPipe "
    "is at least 10% shorter than one of 1F1B, for p = 4 and m = 8.",
    kind="construct",
    solution="Make transfers costly, for example Costs(F=1, B=2, comm=1). GPipe pays each "
    "transfer once on the way down and once on the way up, 2(p-1)c in all; 1F1B's steady "
    "state alternates a forward and a backward, and each backward waits for the gradient "
    "of the forward it just sent down: a round trip per micro-batch. At c = 1 GPipe takes "
    "(m+p-1)(F+B) + 2(p-1)c = 39 time units, 1F1B 53.",
    answer_name="answer_3",
)
def _gpipe_beats_one_f_one_b(answer):
    p, m = 4, 8
    if not isinstance(answer, Costs):
        return wrong(f"this exercise wants a Costs(F=..., B=..., comm=...), got {shown(answer)}.")
    gpipe = simulate(build("gpipe", p, m), answer).makespan
    one = simulate(build("1f1b", p, m), answer).makespan
    if gpipe > 0.9 * one:
        hint = (
            "with free transfers GPipe and 1F1B take the same (m+p-1)(F+B): what does 1F1B "
            "wait for that GPipe does not?"
            if not answer.transfer
            else "make the transfers longer compared with the passes."
        )
        return wrong(
            f"with your costs GPipe takes {gpipe:g} and 1F1B {one:g} time units "
            f"({100 * (1 - gpipe / one):.1f}% shorter, not 10%).",
            hint,
        )
    return right(
        f"GPipe takes {gpipe:g}, 1F1B {one:g} time units ({100 * (1 - gpipe / one):.0f}% "
        "shorter): 1F1B's steady state waits for a round trip per micro-batch."
    )


@exercise(
    "11.4",
    "A mixture-of-experts model overlaps one micro-batch's forward with another's backward "
    "(DualPipe's F&B pair). p = 8, m = 16, F = I = W = 1 (B = 2), free transfers: construct "
    "the time FB of an overlapped pair under which DualPipe's step is at least 5% shorter "
    "than ZB-V's. A pair cannot take less than its longer pass.",
    kind="construct",
    solution="Any FB from 2 (the longer pass, B) up to about 2.6. Without overlap (FB = "
    "F + B = 3) DualPipe takes 54 time units against ZB-V's 51.5; every unit saved on a "
    "pair is saved on each of the pairs on the critical path. At FB = 2.4 DualPipe takes "
    "48.0, 6.8% less than ZB-V.",
    answer_name="answer_4",
)
def _dualpipe_overlap(answer):
    p, m = 8, 16
    if isinstance(answer, Costs):
        if answer.FB is None:
            return wrong("your Costs has no FB: give the pair's time, Costs(..., FB=2.4).")
        answer = answer.FB
    fb = number(answer, "the time of one overlapped pair, such as 2.5")
    if fb < 2 - 1e-12:
        return wrong(
            f"FB = {fb:g} is less than the pair's longer pass (B = 2): overlap hides one "
            "pass's communication behind the other's compute, it cannot shorten compute.",
            "keep FB between max(F, B) = 2 and F + B = 3.",
        )
    dual = simulate(build("dualpipe", p, m), _costs(fb=fb)).makespan
    v_shape = simulate(build("zb-v", p, m), _costs()).makespan
    if dual > 0.95 * v_shape:
        return wrong(
            f"at FB = {fb:g} DualPipe takes {dual:g} time units, ZB-V {v_shape:g}: not 5% shorter.",
            "the pair must save more of F + B = 3 for DualPipe's overlap to pay.",
        )
    return right(
        f"at FB = {fb:g} DualPipe takes {dual:g} time units, {100 * (1 - dual / v_shape):.1f}% "
        f"less than ZB-V's {v_shape:g}."
    )


@exercise(
    "11.5",
    "p = 8, m = 16, F = I = W = 1, free transfers, a budget of p = 8 activations per rank: "
    "by what fraction does the fastest schedule that fits shorten 1F1B's step? Answer the "
    "saving (T_1F1B - T_best) / T_1F1B.",
    kind="compute",
    solution="1F1B takes (m+p-1)(F+B) = 23 * 3 = 69 time units. The fastest that fits, a "
    "zero-bubble V such as ZB-V, takes m(F+I+W) + (p-1)F/2 = 48 + 3.5 = 51.5. The saving "
    "is (69 - 51.5) / 69 = 0.254: a quarter of the step.",
    answer_name="answer_5",
)
def _saving(answer):
    p, m = 8, 16
    given = number(answer, "a fraction such as 0.2")
    best = ranked(p, m, budget=p)[0][0]
    one = _run("1f1b", p, m, 0.0, None, float(p))[0]
    truth = (one - best) / one
    if close(given, truth):
        return right(f"{truth:.3f}: {one:g} against {best:g} time units.")
    if close(given, one / best - 1):
        return wrong(
            f"{given:g} is the speed-up T_1F1B / T_best - 1, not the saving.",
            "divide the time saved by 1F1B's step, not by the best one's.",
        )
    if close(given, 100 * truth):
        return wrong(f"{given:g} is a percentage; the exercise wants a fraction.")
    return wrong(
        f"{given:g} is not the saving.",
        "rank the schedules that fit 8 activations by step time, then compare with 1F1B.",
    )


REGIMES = tuple(
    (p, m, comm, budget)
    for p in (4, 8)
    for m in (p, 2 * p, 4 * p)
    for comm in (0.0, 0.1, 0.5, 1.0)
    for budget in (p // 2, p, 2 * p)
)
"""(p, m, comm, budget) a rule of 11.6 is tried on: F = I = W = 1, budget in activations."""

HARD = ((8, 16, 0.0, 4), (8, 16, 1.0, 16), (4, 8, 0.0, 4), (8, 32, 0.5, 16))
"""Regimes 11.6 always tries: a budget below p, and costly transfers with room for 2p-1."""


@exercise(
    "11.6",
    "Write choose(p, m, comm, budget), a rule read off the chapter's table (no simulation "
    "inside), that returns the name of a schedule for p ranks, m micro-batches, "
    "F = I = W = 1, transfers of comm time units and a budget of activations per rank; it "
    "must fit the budget and be within 5% of the fastest schedule that fits, on regimes "
    "drawn at check time.",
    kind="implement",
    solution="A rule in the order of the chapter's table: memory first, then transfers, "
    "then the ramps.\n\n```python\ndef choose(p, m, comm, budget):\n"
    '    if budget < p:\n        return "v-min"\n    if comm >= 0.5:\n'
    '        if budget >= 2 * p - 1 and m >= 2 * p - 1:\n            return "zb-h2"\n'
    '        return "zb-auto" if m <= p else "zb-v"\n'
    '    return "interleaved-zb" if m <= p else "zb-v"\n```\n\n'
    "It is within 5% of the fastest on every regime of the grid (p = 4 or 8, m = p to 4p, "
    "comm 0 to 1, budgets p/2 to 2p). Outside the grid, look the regime up before you trust "
    "a rule of thumb.",
    answer_name="answer_6",
)
def _choose_rule(answer, seed: int | None = None):
    if not isinstance(answer, Callable):
        return wrong(
            f"this exercise wants a function choose(p, m, comm, budget), got {shown(answer)}."
        )
    seed = random.SystemRandom().randrange(10**6) if seed is None else seed
    drawn = random.Random(seed).sample(REGIMES, 8)
    for p, m, comm, budget in HARD + tuple(drawn):
        where = f"at p = {p}, m = {m}, comm = {comm:g}, budget = {budget}"
        try:
            picked = answer(p, m, comm, budget)
        except Exception as error:  # the reader's code: any error is an answer to report
            return wrong(
                f"choose raised {type(error).__name__} {where}: {clipped(str(error), 120)}"
            )
        name = picked.strip().lower() if isinstance(picked, str) else None
        if name not in SCHEDULES:
            return wrong(f"choose returned {shown(picked)} {where}; return a name of SCHEDULES.")
        run = _run(name, p, m, comm, None, float(budget))
        if run is None:
            return wrong(f"{name} does not run {where}: {SCHEDULES[name].rule}.")
        step, peak = run
        if peak > budget + 1e-9:
            return wrong(
                f"{name} holds {peak:g} {ACTIVATION_UNIT} {where}, over the budget.",
                "check the memory a schedule holds before its speed.",
            )
        best = ranked(p, m, comm, budget)[0]
        if step > 1.05 * best[0]:
            return wrong(
                f"{name} takes {step:g} time units {where}; {best[1]} takes {best[0]:g}.",
                "which schedules hide transfers, and which fit a budget below p?",
            )
    return right(
        f"your rule fits the budget and is within 5% of the fastest on {len(HARD) + 8} "
        f"regimes (seed {seed})."
    )


@exercise(
    "11.7",
    "Derive, with F = I = W = 1, free transfers and m >= 2p, how much shorter ZB-V's step "
    "is than 1F1B's, as a sympy expression in p and m (symbols from "
    "ppbook.symbolic.symbols).",
    kind="derive",
    solution="1F1B takes (m+p-1)(F+B) = 3(m+p-1). ZB-V computes m(F+I+W) = 3m per rank and "
    "idles only its ramp of (p-1) chunk forwards, each F/2: 3m + (p-1)/2. The difference "
    "is 3(p-1) - (p-1)/2 = 5(p-1)/2, whatever m >= 2p (with fewer micro-batches ZB-V's "
    "ramps do not yet overlap and it saves less).",
    answer_name="answer_7",
)
def _derive_saving(answer):
    from ppbook.symbolic.symbols import m as m_symbol
    from ppbook.symbolic.symbols import p as p_symbol

    if isinstance(answer, Mapping) or not isinstance(answer, sp.Basic | int | float):
        return wrong(f"this exercise wants a sympy expression in p and m, got {shown(answer)}.")
    expr = sp.sympify(answer)
    strays = expr.free_symbols - {p_symbol, m_symbol}
    if strays:
        names = ", ".join(sorted(map(str, strays)))
        return wrong(
            f"your expression has {names}; use p and m from ppbook.symbolic.symbols.",
            "with F = I = W = 1 the costs are numbers.",
        )
    for p, m in ((2, 4), (3, 6), (4, 8), (5, 11), (8, 16), (6, 30)):
        truth = (
            simulate(build("1f1b", p, m), _costs()).makespan
            - simulate(build("zb-v", p, m), _costs()).makespan
        )
        value = float(expr.xreplace({p_symbol: p, m_symbol: m}))
        if not close(value, truth):
            return wrong(
                f"at p = {p}, m = {m} your expression gives {value:g}; the simulator's "
                f"1F1B and ZB-V differ by {truth:g} time units.",
                "write each step as compute plus idle; the compute m(F+I+W) is the same.",
            )
    return right(f"{sp.simplify(expr)} time units, as the simulator gives for every p and m tried.")
