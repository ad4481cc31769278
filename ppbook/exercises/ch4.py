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


def _h2_costs(answer: object) -> tuple[float, float, float]:
    """F, I, W of the reader's costs within ZB-H2's own condition W <= F (4.2, 4.9); costs
    outside it end the check, since Table 2 claims nothing there."""
    from ppbook.exercises import _Verdict

    cost = _split_costs(answer)
    F, I, W = cost["F"], cost["I"], cost["W"]  # noqa: E741 (PyTorch's names)
    if W > F:
        raise _Verdict(
            (
                f"W = {W:g} > F = {F:g}: outside ZB-H2's condition W <= F, where Table 2 "
                "claims nothing.",
                "keep W <= F and compare W with I.",
            )
        )
    return F, I, W


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
    F, I, W = _h2_costs(answer)  # noqa: E741 (PyTorch's names)
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


# Exercises 4.7 to 4.10 (issue 19): derive, implement and construct, each judged by what
# makes an answer right on cases drawn at check time, never by one stored value.

_DRAWS = 24
"""Random cost points per (p, m) at which a derived expression is compared with the
critical path; with the corners of every region of costs, a wrong piece cannot hide."""


def _expression_in_p(answer: object, allowed: tuple) -> object:
    """The reader's answer as a sympy expression in ``allowed`` symbols (a sympy expression
    or a string sympy reads with the glossary's names), or end the check saying what is
    wanted."""
    from ppbook.exercises import _Verdict
    from ppbook.exercises.answers import expression
    from ppbook.symbolic import symbols as sym

    names = {str(s): s for s in allowed}
    try:
        answer = expression(answer, names, f"{', '.join(names)} (sym.p, sym.t_f, ...)")
    except ValueError as error:
        hint = "write it with sym.p and the pass times sym.t_f, sym.t_i, sym.t_w."
        raise _Verdict((str(error), hint)) from None
    if sym.p not in answer.free_symbols:
        raise _Verdict(
            (
                "your expression does not contain p: it cannot hold for every number of ranks.",
                "the bubble grows with the number of ranks the gradient has to cross.",
            )
        )
    return answer


def _cost_points(rng) -> list[tuple]:
    """Exact cost points (F, I, W): the corners where two or three costs tie and random
    rationals, so that each of the regions where another cost is smallest is visited."""
    from fractions import Fraction

    corners = [(1, 1, 1), (1, 2, 3), (3, 2, 1), (2, 1, 3), (1, 3, 2), (2, 3, 1), (3, 1, 2)]
    corners += [(1, 1, 2), (2, 2, 1), (1, 2, 2), (2, 1, 1), (2, 1, 2), (1, 2, 1)]
    drawn = [
        tuple(Fraction(rng.randint(1, 40), rng.randint(1, 8)) for _ in "FIW") for _ in range(_DRAWS)
    ]
    return [tuple(Fraction(x) for x in c) for c in corners] + drawn


@exercise(
    "4.7",
    "Derive, as a sympy expression in p, t_f, t_i and t_w, the idle time per rank of one "
    "step of ZB-H1 (m >= p, free transfers) for every cost, not only where Table 2's "
    "(p-1)(F+I-W) holds; sympy's Min and Max are allowed.",
    kind="derive",
    solution="(p-1)(F + I - min(F, I, W)), in sympy `(sym.p - 1) * (sym.t_f + sym.t_i - "
    "sp.Min(sym.t_f, sym.t_i, sym.t_w))`. `pieces(zb_h1(p, m), transfer=False)` splits "
    "the critical path into three regions: where W is the smallest cost, the postponed W "
    "passes fit the waits and Table 2's (p-1)(F+I-W) holds; where F is the smallest, the "
    "last rank's chain of input gradients sets the pace and the idle time is (p-1)I; where "
    "I is the smallest, the forward ramp does, (p-1)F. In each, one of F, I, W drops out: "
    "the one a postponed pass can hide. The makespan is m(F+I+W) plus this idle time.",
    answer_name="answer_7",
)
def _zb_h1_bubble_everywhere(answer):
    import random

    from ppbook.critical_path import makespan_expression
    from ppbook.symbolic import symbols as sym

    expr = _expression_in_p(answer, (sym.p, sym.t_f, sym.t_i, sym.t_w))
    rng = random.Random()
    for p in (2, 3, 4, 5, 7):
        for m in (p, 2 * p + 1):
            path = makespan_expression(zb_h1(p, m), transfer=False)
            for F, I, W in _cost_points(rng):  # noqa: E741 (PyTorch's names)
                values = {sym.t_f: F, sym.t_i: I, sym.t_w: W}
                truth = path.xreplace(values) - m * (F + I + W)
                value = expr.xreplace({**values, sym.p: p})
                try:
                    given = float(value)
                except (TypeError, ValueError):
                    return wrong(f"your expression does not give a number at p = {p}: {value}.")
                if abs(given - float(truth)) > 1e-9 * max(1.0, float(truth)):
                    smallest = min(("F", F), ("I", I), ("W", W), key=lambda kv: kv[1])[0]
                    return wrong(
                        f"at p = {p}, m = {m}, F = {F}, I = {I}, W = {W} your expression "
                        f"gives {given:g} time units of idle per rank; the critical path "
                        f"gives {float(truth):g}.",
                        f"here {smallest} is the smallest cost: which pass can the "
                        "schedule hide in the waits, and which chain is left to wait on?",
                    )
    return right(
        "it equals the critical path's idle time on every region of costs, for p from 2 to 7: "
        "Table 2's (p-1)(F+I-W) is the region where W is the smallest cost."
    )


@exercise(
    "4.8",
    "Implement the backward of one nn.Linear (y = x A^T + b) split as ZB does: "
    "input_grad(grad_out, weight) -> dL/dx, and weight_grad(grad_out, x) -> (dL/dA, dL/db), "
    "with numpy; answer the pair (input_grad, weight_grad). Checked against PyTorch's "
    "autograd on shapes drawn at check time, with any number of leading batch dimensions.",
    kind="implement",
    solution="```python\nimport numpy as np\n\ndef input_grad(grad_out, weight):\n"
    "    return grad_out @ weight            # (..., out) @ (out, in) -> (..., in)\n\n"
    "def weight_grad(grad_out, x):\n"
    "    g = grad_out.reshape(-1, grad_out.shape[-1])\n"
    "    return g.T @ x.reshape(-1, x.shape[-1]), g.sum(axis=0)\n```\n"
    "nn.Linear stores its weight as (out, in) and computes y = x W^T + b. The input "
    "gradient needs only the weight and the incoming gradient: that is I, which the stage "
    "before waits for. The weight gradient sums, over every token of every sequence, the "
    "outer product of the incoming gradient with the layer's input: that needs the saved "
    "input x, and nobody waits for it: W. The bias gradient is the incoming gradient "
    "summed over all the leading dimensions.",
    answer_name="answer_8",
)
def _linear_split(answer):
    import numpy as np
    import torch

    if not (isinstance(answer, list | tuple) and len(answer) == 2 and all(map(callable, answer))):
        return wrong(
            "this exercise wants the pair (input_grad, weight_grad) of two functions, got "
            f"{shown(answer)}."
        )
    input_grad, weight_grad = answer
    rng = np.random.default_rng()
    for leading in ((5,), (2, 3), (1, 4, 2)):
        n_in, n_out = (int(x) for x in rng.integers(2, 9, size=2))
        while n_out == n_in:
            n_out = int(rng.integers(2, 9))
        x = rng.standard_normal((*leading, n_in))
        layer = torch.nn.Linear(n_in, n_out, dtype=torch.float64)
        tx = torch.tensor(x, requires_grad=True)
        out = layer(tx)
        grad_out = rng.standard_normal(out.shape)
        out.backward(torch.tensor(grad_out))
        weight = layer.weight.detach().numpy().copy()
        want = (tx.grad.numpy(), layer.weight.grad.numpy(), layer.bias.grad.numpy())
        shapes = f"x of shape {x.shape}, weight {weight.shape}"
        try:
            got_x = np.asarray(input_grad(grad_out.copy(), weight.copy()), dtype=float)
        except Exception as error:  # noqa: BLE001 (the reader's code: any failure is feedback)
            return wrong(
                f"with {shapes} your input_grad raised {type(error).__name__}: {error}.",
                "nn.Linear's weight is (out, in): y = x @ weight.T + b.",
            )
        try:
            got_w, got_b = (
                np.asarray(g, dtype=float) for g in weight_grad(grad_out.copy(), x.copy())
            )
        except Exception as error:  # noqa: BLE001 (the reader's code: any failure is feedback)
            return wrong(
                f"with {shapes} your weight_grad raised {type(error).__name__}: {error}.",
                "weight_grad returns a pair (dL/dA, dL/db), the weight's shape and the bias's.",
            )
        for what, have, truth, hint in (
            ("dL/dx", got_x, want[0], "nn.Linear's weight is (out, in): y = x @ weight.T + b."),
            ("dL/dA", got_w, want[1], "sum the outer products over every leading dimension."),
            ("dL/db", got_b, want[2], "the bias gradient sums grad_out over the leading dims."),
        ):
            if have.shape != truth.shape:
                return wrong(
                    f"with {shapes} your {what} has shape {have.shape}; autograd's is "
                    f"{truth.shape}.",
                    hint,
                )
            if not np.allclose(have, truth, rtol=1e-9, atol=1e-9):
                return wrong(
                    f"with {shapes} your {what} differs from autograd's by up to "
                    f"{float(np.max(np.abs(have - truth))):.3g}.",
                    hint,
                )
    return right(
        "both match autograd on three drawn shapes: I needs only the weight, W only the saved "
        "input, which is why ZB can run them apart."
    )


@exercise(
    "4.9",
    "Construct costs F, I, W (free transfers, W <= F) under which one step of ZB-H2 with "
    "p = 4, m = 8 is strictly shorter than one step of ZB-H1.",
    kind="construct",
    solution="Any 0 < W < I with W <= F, for example F = 1, I = 2, W = 0.5: 34 against 35.5 "
    "time units. In its cool-down ZB-H1 hides one postponed W in each wait of I, and ZB-H2 "
    "two; at F = I = W the second one does not fit and the two tie (27 each), and with "
    "W >= I neither hides more than ZB-H1 already does. Only a W shorter than I lets the "
    "extra warm-up of ZB-H2 buy time for its memory.",
    answer_name="answer_9",
)
def _zb_h2_beats_h1(answer):
    p, m = 4, 8
    F, I, W = _h2_costs(answer)  # noqa: E741 (PyTorch's names)
    costs = Costs(F=F, I=I, W=W)
    h1, h2 = simulate(zb_h1(p, m), costs).makespan, simulate(zb_h2(p, m), costs).makespan
    if not h2 < h1 - 1e-9:
        return wrong(
            f"at F = {F:g}, I = {I:g}, W = {W:g} ZB-H2 takes {h2:g} time units and ZB-H1 "
            f"{h1:g}: not shorter.",
            "ZB-H2 hides a second postponed W in each wait of I in the cool-down: when does "
            "it fit?",
        )
    return right(
        f"ZB-H2 takes {h2:g} time units, ZB-H1 {h1:g}: with W < I the second postponed W "
        "fits the wait it fills."
    )


def _function_of_p(answer: object):
    """The reader's answer as a function of p: a callable, or a sympy expression in p
    (or a string of one)."""
    import sympy as sp

    from ppbook.symbolic import symbols as sym

    if callable(answer) and not isinstance(answer, sp.Basic):
        return answer
    expr = sp.sympify(answer, locals={"p": sym.p}) if isinstance(answer, str) else answer
    if (
        not isinstance(expr, sp.Expr)
        or expr.free_symbols - {sym.p}
        or sym.p not in expr.free_symbols
    ):
        raise ValueError(
            "this exercise wants K as a function of p: a Python function such as "
            "lambda p: ..., or a sympy expression in sym.p only, got " + shown(answer) + "."
        )
    return lambda p: expr.xreplace({sym.p: p})


@exercise(
    "4.10",
    "zb-auto with F = I = W = 1 and a transfer time c = 0.5 on every message: derive the "
    "least memory limit K (activations per rank) that reaches a bubble rate of zero, as a "
    "function of p (m = 3p micro-batches).",
    kind="derive",
    solution="K(p) = 3p - 2. A rate of zero means rank 0 never waits once it has started, "
    "and before its first input gradient arrives it can only run forwards (a W needs its "
    "I). That gradient arrives after the first micro-batch's forward has crossed p ranks "
    "and its input gradient has come back across p-1: (2p-1)F of passes plus 2(p-1) "
    "transfers of c, (2p-1) + (p-1) = 3p - 2 time units, in which rank 0 runs 3p - 2 "
    "forwards and holds their activations. Without transfers it is ZB-H2's 2p - 1.",
    answer_name="answer_10",
)
def _least_limit_with_transfers(answer):
    costs = Costs(F=1, I=1, W=1, comm=0.5)
    limit_of = _function_of_p(answer)

    def rate(p: int, limit: int) -> float:
        schedule = build("zb-auto", p, 3 * p, costs=costs, memory_limit=limit)
        return simulate(schedule, costs).zb_bubble_rate

    for p in (2, 3, 4, 5, 6):
        try:
            given = integer(limit_of(p), f"a whole number of activations for p = {p}", 1, 9 * p)
        except (TypeError, ValueError, ArithmeticError) as error:
            return wrong(f"your K(p) fails at p = {p}: {error}.")
        reached = rate(p, given)
        if reached > 1e-9:
            return wrong(
                f"at p = {p} your K = {given} leaves zb-auto a bubble rate of {reached:.3f}.",
                "count the time until rank 0's first input gradient can arrive, transfers "
                "included; rank 0 runs only forwards until then.",
            )
        if given > 1 and rate(p, given - 1) <= 1e-9:
            return wrong(
                f"at p = {p} your K = {given} reaches zero, and so does K = {given - 1}.",
                "the least limit: every forward rank 0 runs before its first I, no more.",
            )
    return right(
        "it is the least limit for p = 2 to 6: one activation per forward rank 0 "
        "runs while its first input gradient makes the round trip."
    )
