"""Exercises of chapter 4, zero bubble (``notebooks/04_zero_bubble.ipynb``).

Every right answer comes from the simulator (:func:`ppbook.simulate.simulate`) at check
time, under ppbook's cost convention (:mod:`ppbook.costs`): costs time one pass of one
micro-batch through one device's share of the model, and ZB-V runs each of its two chunk
passes in half of it. The hints name the usual slips: a backward left whole, a weight
pass ``W`` run as soon as it can instead of postponed, the Zero Bubble paper's Table 2
used outside its conditions (ZB-H2's needs I >= 2W for one step), one isolated step
mistaken for the steady state, a chunk run at a full device's cost, and more memory than
the budget. Sources: REFERENCES.md (Zero Bubble, arXiv:2401.10241: Table 2, sec. 3, 4
and 6); the paper writes B for the input-gradient pass, ppbook and PyTorch write ``I``.
"""

from __future__ import annotations

from collections.abc import Mapping

from ppbook.checks import shown
from ppbook.costs import Costs
from ppbook.exercises import close, exercise, integer, number, right, wrong
from ppbook.pipeline_schedule import Action, Schedule, parse_action
from ppbook.schedules import build, one_f_one_b, zb_h1, zb_h2, zb_v
from ppbook.simulate import simulate
from ppbook.timeline import ACTIVATION_UNIT

EVEN = Costs(F=1, I=1, W=1)
"""F = I = W = 1 time unit per device share: the paper's zero-bubble case."""


def _row_of(answer: object, stage: int) -> list[Action]:
    """The reader's row (a list of action strings, or one string of them) as actions."""
    if isinstance(answer, str):
        answer = answer.split()
    if not isinstance(answer, list | tuple) or not all(isinstance(a, str) for a in answer):
        raise ValueError(
            f'this exercise wants one list of action strings such as ["{stage}F0", '
            f'"{stage}I0", ...], got {shown(answer)}.'
        )
    row = [parse_action(text) for text in answer]
    strays = [str(a) for a in row if a.stage != stage]
    if strays:
        raise ValueError(f"rank {stage} holds stage {stage} only; {', '.join(strays)} is not.")
    return row


@exercise(
    "4.1",
    "Complete ZB-H1 for p = 3 ranks and m = 4 micro-batches: ranks 0 and 1 run zb_h1(3, 4)'s "
    "rows; write the last rank's row (stage 2) by hand, one list of action strings.",
    kind="construct",
    solution="The last rank has no warm-up (p-1-r = 0 forwards) and runs each W r = 2 "
    "micro-batches after its I: it alternates F and I and starts paying back the postponed "
    'W passes after its third I: ["2F0", "2I0", "2F1", "2I1", "2F2", "2I2", "2W0", "2F3", '
    '"2I3", "2W1", "2W2", "2W3"]. At F = I = W = 1 the step takes m(F+I+W) + (p-1)(F+I-W) '
    "= 12 + 2 = 14 time units, and rank 2 holds at most p = 3 micro-batch activations.",
    answer_name="answer_1",
)
def _zb_h1_last_row(answer):
    p, m = 3, 4
    row = _row_of(answer, p - 1)
    if any(a.kind == "B" for a in row):
        return wrong(
            "your row runs whole backwards (B); ranks 0 and 1 split theirs.",
            "split every backward into I (input gradient, sent up) and W (weight gradient).",
        )
    given = zb_h1(p, m)
    rows = [list(r) for r in given.actions[: p - 1]] + [row]
    run = simulate(Schedule(rows, given.stage_to_rank, m, name="zb-h1, your row"), EVEN)
    best = simulate(given, EVEN)
    held, most = run.peak_activations(p - 1), best.peak_activations(p - 1)
    if held > most:
        return wrong(
            f"rank 2 holds up to {held:g} {ACTIVATION_UNIT}; ZB-H1 keeps 1F1B's p = {most:g}.",
            "a W frees its micro-batch's activations: run some W before the last forward.",
        )
    if run.makespan > best.makespan:
        w_at_once = all(
            b.kind == "W" and a == Action(b.stage, "I", b.microbatch)
            for a, b in zip(row[1::3], row[2::3], strict=False)
        )
        hint = (
            "W right after its own I is 1F1B's order split in two: nobody waits for W, so "
            "postpone it and let the next input gradient go first."
            if w_at_once
            else "rank r runs each W r micro-batches after its I; here r = 2."
        )
        return wrong(
            f"with your row the step takes {run.makespan:g} time units; ZB-H1 takes "
            f"m(F+I+W) + (p-1)(F+I-W) = {best.makespan:g} (F = I = W = 1).",
            hint,
        )
    plain = simulate(one_f_one_b(p, m), EVEN).makespan
    return right(
        f"the step takes {run.makespan:g} time units, as ZB-H1 (1F1B: {plain:g}), and rank 2 "
        f"holds at most {held:g} {ACTIVATION_UNIT}."
    )


def _split_costs(answer: object) -> dict[str, float]:
    """F, I, W of the reader's costs (a ``Costs`` or a mapping with F, I and W)."""
    if isinstance(answer, Mapping):
        if not {"F", "I", "W"} <= set(answer):
            raise ValueError(
                f"this exercise wants F, I and W, such as dict(F=1, I=1, W=1), got {shown(answer)}."
            )
        answer = Costs(F=answer["F"], I=answer["I"], W=answer["W"])
    if not isinstance(answer, Costs):
        raise ValueError(
            "this exercise wants a Costs(F=..., I=..., W=...) or a dict with F, I and W, "
            f"got {shown(answer)}."
        )
    if answer.transfer:
        raise ValueError("keep transfers free (comm = 0): Table 2 assumes them free.")
    per = answer.per_stage(1)
    return {kind: per[kind][0] for kind in ("F", "I", "W")}


@exercise(
    "4.2",
    "Construct costs F, I, W (with W <= F, ZB-H2's own condition) under which one step of "
    "ZB-H2 with p = 4, m = 8 does not take Table 2's m(F+I+W) + (p-1)(F+I-2W).",
    kind="construct",
    solution="Any I < 2W with W <= F, for example F = I = W = 1. Table 2 lets two postponed "
    "W passes fill each of the p-1 waits of I in the cool-down; when 2W > I they overflow "
    "it, and the bubble of one step cannot fall below the (p-1)F that the last rank waits "
    "for its first forward. At F = I = W = 1 the simulator gives 8 * 3 + 3 * 1 = 27 time "
    "units, Table 2 says 24.",
    answer_name="answer_2",
)
def _zb_h2_formula_breaks(answer):
    p, m = 4, 8
    cost = _split_costs(answer)
    F, I, W = cost["F"], cost["I"], cost["W"]  # noqa: E741 (PyTorch's names)
    if W > F:
        return wrong(
            f"W = {W:g} > F = {F:g}: that is outside ZB-H2's own condition W <= F, where "
            "Table 2 claims nothing.",
            "keep W <= F and look at how I compares with W.",
        )
    table = m * (F + I + W) + (p - 1) * (F + I - 2 * W)
    makespan = simulate(zb_h2(p, m), Costs(F=F, I=I, W=W)).makespan
    if close(makespan, table):
        return wrong(
            f"at F = {F:g}, I = {I:g}, W = {W:g} the simulator gives {makespan:g} time "
            "units, exactly Table 2's value: the formula holds here.",
            "two postponed W passes fill each wait of I in the cool-down: make them too "
            "long for it.",
        )
    return right(
        f"at F = {F:g}, I = {I:g}, W = {W:g} (I < 2W) one step takes {makespan:g} time units, "
        f"Table 2 says {table:g}: the two W passes overflow the wait of I they fill."
    )


@exercise(
    "4.3",
    "ZB-H2 with p = 4, m = 8 and F = I = W = 1: choose how to simulate it, the "
    'synchronisation ("optimizer" or "none") and the fewest steps, so that its steady-state '
    "bubble per step (period_bubble_fraction) is zero. Answer (sync, steps).",
    kind="choose",
    solution='("none", 2). With the optimizer step\'s synchronisation every step starts '
    "after the previous one has ended on every rank, so each step is the isolated one: a "
    "period of m(F+I+W) + (p-1)F = 27 time units, f = 3/27. Post-validation (sync none) lets "
    "rank 0 start the next step while the last rank finishes this one; the period, measured "
    "between the ends of the last two steps, is m(F+I+W) = 24 from the second step on.",
    answer_name="answer_3",
)
def _choose_sync(answer):
    p, m = 4, 8
    if isinstance(answer, Mapping):
        answer = (answer.get("sync"), answer.get("steps"))
    if not (isinstance(answer, list | tuple) and len(answer) == 2):
        return wrong(f'this exercise wants a pair such as ("optimizer", 3), got {shown(answer)}.')
    sync, steps = answer
    if sync not in ("optimizer", "none"):
        return wrong(f'the synchronisation is "optimizer" or "none", got {shown(sync)}.')
    steps = integer(steps, "a whole number of steps from 1 to 8", minimum=1, maximum=8)
    run = simulate(zb_h2(p, m), EVEN, steps=steps, sync=sync)
    bubble = run.period_bubble_fraction
    if bubble > 1e-9:
        hint = (
            "one step alone has no steady state: its period is its makespan."
            if sync == "none"
            else "with the optimizer's synchronisation every step waits for the whole "
            "previous one: what does the paper's post-validation change?"
        )
        return wrong(
            f'with sync = "{sync}" and {steps} step(s) the period is {run.period:g} time '
            f"units and the bubble per step f = {bubble:.3f}.",
            hint,
        )
    fewest = next(
        k
        for k in range(1, steps + 1)
        if simulate(zb_h2(p, m), EVEN, steps=k, sync="none").period_bubble_fraction <= 1e-9
    )
    if steps > fewest:
        return wrong(
            f"{steps} steps show it, and so do {fewest}.",
            "the period is measured between the ends of the last two steps.",
        )
    return right(
        f"the period is {run.period:g} time units = m(F+I+W): no bubble per step once "
        "consecutive steps overlap."
    )


@exercise(
    "4.4",
    "ZB-V with p = 8, m = 16 and F = I = W = 1 for one device's share of the model: what "
    "is its makespan, in time units?",
    kind="compute",
    solution="ZB-V cuts the model into 2p chunks, two per rank, so each chunk pass takes "
    "half the device-share cost: F = I = W = 0.5 per chunk. The compute per rank is still "
    "m(F+I+W) = 48; with F = I = W the only idle time is the ramp into a rank's first pass "
    "and out of its last, (p-1) chunk forwards of 0.5 = 3.5 time units: 51.5 time units, "
    "against ZB-H1's 48 + (p-1)(F+I-W) = 55.",
    answer_name="answer_4",
)
def _zb_v_makespan(answer):
    p, m = 8, 16
    given = number(answer, "a makespan in time units, such as 30.5")
    truth = simulate(zb_v(p, m), EVEN).makespan
    if close(given, truth):
        return right(f"{truth:g} time units: ZB-V's chunk passes each take half the cost.")
    if close(given, 2 * truth):
        return wrong(
            f"{given:g} runs each chunk pass at a full device's cost: a model twice as large.",
            "each of ZB-V's two chunks per rank holds half of the device's share.",
        )
    if close(given, simulate(zb_h1(p, m), EVEN).makespan):
        return wrong(f"{given:g} is ZB-H1's makespan.", "ZB-V leaves less idle at the ends.")
    if close(given, m * 3):
        return wrong(
            f"{given:g} is the compute m(F+I+W) alone.", "no rank can start before its input."
        )
    return wrong(f"{given:g} is not ZB-V's makespan.", f"simulate zb_v({p}, {m}) with these costs.")


_HANDCRAFTED = ("1f1b", "zb-h1", "zb-h2", "zb-v")


@exercise(
    "4.5",
    "A budget of p micro-batch activations of a full stage per rank: choose, of 1f1b, "
    "zb-h1, zb-h2 and zb-v, the schedule with the shortest step for p = 4, m = 8, "
    "F = I = W = 1.",
    kind="choose",
    solution='"zb-v". ZB-H2 is as fast as ZB-H1 in one step here (27 time units, I < 2W) '
    "but holds 2p-1 = 7. ZB-H1 holds p = 4 and takes m(F+I+W) + (p-1)(F+I-W) = 27; ZB-V "
    "holds p = 4 (2p chunks of half a stage) and, with chunk passes of half the cost, "
    "idles only (p-1) chunk forwards: 24 + 1.5 = 25.5 time units. 1F1B takes 33.",
    answer_name="answer_5",
)
def _choose_under_budget(answer):
    p, m = 4, 8
    name = answer.strip().lower() if isinstance(answer, str) else None
    if name not in _HANDCRAFTED:
        return wrong(f"choose one of {', '.join(_HANDCRAFTED)}; got {shown(answer)}.")
    runs = {n: simulate(build(n, p, m), EVEN) for n in _HANDCRAFTED}
    peak = {n: max(t.peak_activations(r) for r in range(p)) for n, t in runs.items()}
    within = {n: t.makespan for n, t in runs.items() if peak[n] <= p}
    best = min(within, key=within.get)
    if peak[name] > p:
        return wrong(
            f"{name} holds up to {peak[name]:g} {ACTIVATION_UNIT} on a rank, over p = {p}.",
            "W passes postponed further keep activations longer.",
        )
    if name != best:
        return wrong(
            f"{name} fits the budget but takes {runs[name].makespan:g} time units; "
            f"another fits it and is faster.",
            "compare the idle time at the ends: which schedule ramps up with shorter passes?",
        )
    return right(
        f"{name} takes {runs[name].makespan:g} time units and holds at most {peak[name]:g} "
        f"{ACTIVATION_UNIT}."
    )


def _auto_rate(p: int, m: int, limit: int) -> float:
    """The paper's bubble rate of one step of zb-auto at memory limit ``limit``."""
    return simulate(build("zb-auto", p, m, costs=EVEN, memory_limit=limit), EVEN).zb_bubble_rate


@exercise(
    "4.6",
    "Choose the least memory limit K (micro-batch activations of a full stage per rank) "
    "for which zb-auto with p = 4, m = 8, F = I = W = 1 reaches a bubble rate of zero.",
    kind="choose",
    solution="K = 2p-1 = 7. A rate of zero means no rank idles between its first pass and "
    "its last. Rank 0's first input gradient can start only after the forward has gone "
    "down p ranks and the input gradients have come back up p-1: at (2p-1)F = 7. Until "
    "then rank 0 can only run forwards (a W needs its I), so it must run 7 of them and "
    "hold 7 activations. K = 7 allows ZB-H2, whose rate is 0; at K = 6 zb-auto's rate is "
    "above 0.",
    answer_name="answer_6",
)
def _least_limit(answer):
    p, m = 4, 8
    given = integer(answer, "a whole number of activations per rank, from 1 to 16", 1, 16)
    rate = _auto_rate(p, m, given)
    if rate > 1e-9:
        hint = (
            "K = p is the paper's ZB-1p: 1F1B's memory leaves the ramps idle."
            if given == p
            else "count the forwards rank 0 must run before its first input gradient can start."
        )
        return wrong(f"at K = {given} zb-auto's bubble rate is {rate:.3f}, not zero.", hint)
    if given > 1 and _auto_rate(p, m, given - 1) <= 1e-9:
        hint = (
            "K = 2p is the paper's ZB-2p; it is more than zero bubble needs here."
            if given == 2 * p
            else "try smaller limits."
        )
        return wrong(f"K = {given} reaches a rate of zero, and so does K = {given - 1}.", hint)
    return right(
        f"K = {given} is the least: zb-auto's rate is 0 here and "
        f"{_auto_rate(p, m, given - 1):.3f} at K = {given - 1}."
    )
