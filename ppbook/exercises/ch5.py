"""Exercises of chapter 5, DualPipe (``notebooks/05_dualpipe.ipynb``).

Every right answer comes from the package at check time: the DualPipe table's bubble from
:func:`ppbook.symbolic.formulas` (``"dualpipe_bubble"``, as published in the DeepSeek-V3
report, arXiv:2412.19437, Table 2, and the deepseek-ai/DualPipe README), everything else
from the simulator (:func:`ppbook.simulate.simulate` on :func:`ppbook.schedules.dualpipe`
and :func:`ppbook.schedules.dualpipev`), under ppbook's cost convention
(:mod:`ppbook.costs`: costs time one device's share of the model, a DualPipeV chunk pass
takes cost/2). The hints name the usual slips: the table's PP-1 where it has PP/2-1,
F + B where it has F&B, taking the table's bubble for every rank (ranks near the ends
idle less), counting DualPipeV's activations in chunks instead of full stages, forgetting
that DualPipe needs m even, and taking F&B = F + B as the point where overlapping stops
paying (a pair waits for both of its inputs).
"""

from __future__ import annotations

from collections.abc import Callable

from ppbook.checks import shown
from ppbook.costs import Costs
from ppbook.exercises import close, exercise, integer, number, right, wrong
from ppbook.pipeline_schedule import Schedule
from ppbook.schedules import dualpipe, dualpipev, one_f_one_b, zb_h1, zb_v
from ppbook.simulate import simulate
from ppbook.symbolic import formulas
from ppbook.timeline import ACTIVATION_UNIT

MOE_COSTS = Costs(F=2, I=2, W=1, FB=3)
"""An MoE model at DeepSeek-V3's 1:1 compute-to-all-to-all ratio (chapter 5, section 4):
compute F = I = W = 1, plus an all-to-all of 1 exposed in every forward and input-gradient
pass run alone; an overlapped pair hides it and costs its compute, F&B = 3."""

CANDIDATES = {
    "1f1b": one_f_one_b,
    "zb-h1": zb_h1,
    "zb-v": zb_v,
    "dualpipe": dualpipe,
    "dualpipev": dualpipev,
}
"""The schedules exercise 5.4 chooses from, by their names in ``ppbook.schedules.SCHEDULES``."""


def pairs_apart(schedule: Schedule) -> Schedule:
    """``schedule`` with every overlapped pair run as its forward, then its backward.

    The same order on every rank; only the pairs come apart, so each half runs as soon as
    its own input is there instead of waiting for the other's.
    """
    rows = [[part for step in row for part in step.parts] for row in schedule.actions]
    return Schedule(
        rows,
        schedule.stage_to_rank,
        schedule.num_microbatches,
        name=f"{schedule.name}, pairs apart",
        routes=schedule.routes,
    )


def parameters_per_rank(schedule: Schedule) -> list[float]:
    """Per rank, the parameters it holds, in device shares (1/p of the model each).

    A rank holds its stages; a stage is ``chunk_share`` of a device's share, and DualPipe's
    stage p+k is a second copy of model part k, so DualPipe's ranks hold 2.
    """
    share = schedule.chunk_share
    return [len(schedule.stages_on(r)) * share for r in range(schedule.num_ranks)]


def overlap_breakeven(p: int, m: int, f: float, i: float, w: float) -> float:
    """The largest F&B at which DualPipe(p, m) with its pairs overlapped is no slower than
    the same order with every pair run apart (:func:`pairs_apart`), under F, I, W.

    The paired makespan grows with F&B; found by bisection on the simulator, between 0
    and F + B (the most a pair that saves nothing takes).
    """
    apart = simulate(pairs_apart(dualpipe(p, m)), Costs(F=f, I=i, W=w)).makespan

    def paired(fb: float) -> float:
        return simulate(dualpipe(p, m), Costs(F=f, I=i, W=w, FB=fb)).makespan

    low, high = 0.0, f + i + w
    for _ in range(50):
        mid = (low + high) / 2
        low, high = (mid, high) if paired(mid) <= apart else (low, mid)
    return low


# ----- the exercises, in order ---------------------------------------------------------


@exercise(
    "5.1",
    "The DualPipe table's bubble for PP = 8 ranks with F = 1, I = 1, W = 0.25 (so the full "
    "backward B = 1.25) and F&B = 2, in time units.",
    kind="compute",
    solution="(PP/2-1)(F&B + B - 3W) = 3 * (2 + 1.25 - 0.75) = 7.5 time units. The costs "
    "meet the table's conditions (I = F, W <= F, F&B >= F + W), so the two middle ranks "
    "of `simulate(dualpipe(8, 16), Costs(F=1, I=1, W=0.25, FB=2))` idle exactly 7.5; "
    "the ranks nearer the ends run fewer overlapped pairs, compute longer and idle less "
    "(7 and 7.25).",
    answer_name="answer_1",
)
def _table_bubble(answer):
    given = number(answer, "an idle time in time units, such as 4.5")
    p, f, i, w, fb = 8, 1.0, 1.0, 0.25, 2.0
    b = i + w
    table = formulas()["dualpipe_bubble"](p=p, t_fb=fb, t_b=b, t_w=w)
    run = simulate(dualpipe(p, 2 * p), Costs(F=f, I=i, W=w, FB=fb))
    idle = [run.idle(r) for r in range(p)]
    if close(given, table):
        return right(
            f"(PP/2-1)(F&B+B-3W) = 3 * {fb + b - 3 * w:g} = {table:g}; the simulator's middle "
            f"ranks idle {idle[p // 2]:g}, the end ranks {idle[0]:g} (fewer overlapped pairs)."
        )
    slips = [
        (
            (p - 1) * (fb + b - 3 * w),
            "that uses PP-1 ramp steps, as 1F1B has.",
            "micro-batches enter from both ends: the ramps are PP/2-1 steps long.",
        ),
        (
            (p // 2 - 1) * (f + b + b - 3 * w),
            "that puts F + B where the table has F&B, the time of one overlapped pair.",
            "F&B is given: 2 time units.",
        ),
        (
            (p // 2 - 1) * (fb + b),
            "that leaves out the -3W: the table counts W passes that fill the ramps.",
            "(PP/2-1)(F&B + B - 3W).",
        ),
        (
            (p - 1) * (f + b - 2 * w),
            "that is the table's ZB1P row, (PP-1)(F+B-2W).",
            "the DualPipe row is (PP/2-1)(F&B + B - 3W).",
        ),
        (
            idle[0],
            "that is what the end ranks idle in the simulator, less than the table says.",
            "the table gives the middle ranks' idle time: use its formula.",
        ),
    ]
    for value, message, hint in slips:
        if close(given, value):
            return wrong(message, hint)
    return wrong(f"{given:g} is not the table's bubble here.", "(PP/2-1)(F&B + B - 3W).")


@exercise(
    "5.2",
    "Construct DualPipe's placement as a function place(p) that returns stage_to_rank for "
    "p ranks (p even): stages 0..p-1 carry the micro-batches fed from rank 0, stages "
    "p..2p-1 (stage p+k a copy of model part k) those fed from the other end.",
    kind="construct",
    solution="The downward pipeline puts stage k on rank k; the upward one enters at rank "
    "p-1, so its k-th stage p+k sits on rank p-1-k: "
    "`def place(p): return [*range(p), *reversed(range(p))]`. Rank r then holds stages r "
    "and 2p-1-r, a V over the ranks, and model parts r and p-1-r.",
    answer_name="answer_2",
)
def _placement(answer):
    if not callable(answer):
        return wrong(
            f"this exercise wants a function of p, got {shown(answer)}.",
            "def place(p): return [...]  # one rank for each of the 2p stages",
        )
    for p in (2, 4, 6, 8):
        try:
            placement = tuple(answer(p))
        except (TypeError, ValueError, IndexError) as error:
            return wrong(f"place({p}) did not return a list of ranks: {error}.")
        if len(placement) != 2 * p or not all(type(r) is int for r in placement):
            return wrong(
                f"place({p}) gives {shown(list(placement))}; DualPipe wants 2p = {2 * p} "
                "whole rank numbers, one for each stage 0 to 2p-1.",
            )
        if placement == tuple(range(p)) * 2:
            return wrong(
                f"place({p}) puts stage p+k on rank k, as interleaved 1F1B loops: both "
                "pipelines then enter at rank 0.",
                "the second pipeline is fed from rank p-1: its first stage, p, goes there.",
            )
        reference = dualpipe(p, 2 * p)
        runs_on = {
            a.stage: r for r, row in enumerate(reference.actions) for s in row for a in s.parts
        }
        for stage, rank in enumerate(placement):
            if runs_on[stage] != rank:
                return wrong(
                    f"place({p}) puts stage {stage} on rank {rank}, but DualPipe's order runs "
                    f"it on rank {runs_on[stage]}.",
                    "stage p+k is the k-th stage of the pipeline that enters at rank p-1.",
                )
        # The simulator runs DualPipe's own order on the placement (and refuses it if any
        # action lands on a rank that does not hold its stage).
        simulate(Schedule(reference.actions, placement, 2 * p, routes=reference.routes))
    return right(
        "rank r holds stages r and 2p-1-r, model parts r and p-1-r: two copies of the model, "
        "one per direction, and DualPipe's order runs on it for p = 2, 4, 6 and 8."
    )


def _smallest_even(p: int, holds: Callable[[int], bool]) -> int:
    """The smallest even m >= 2p (DualPipe's rule) for which ``holds(m)``."""
    m = 2 * p
    while not holds(m):
        m += 2
    return m


@exercise(
    "5.3",
    "DualPipe on p = 8 ranks with F = I = W = 1 and F&B = 2: choose the smallest number of "
    "micro-batches m that brings the bubble fraction f = idle/total to 4 % or less.",
    kind="choose",
    solution="DualPipe needs m even and m >= 2p = 16. Its idle time does not grow with m: "
    "the ranks idle 1, 2, 3, 3, 3, 3, 2, 1 time units (18 in all; the table's 3 only on "
    "the middle ranks) and the step takes 2m + 12, so f = 18 / (8 (2m + 12)) <= 0.04 needs "
    "m >= 22.1: m = 24 (m = 23 is odd), with f = 0.0375.",
    answer_name="answer_3",
)
def _choose_m(answer):
    p, target, costs = 8, 0.04, Costs(F=1, I=1, W=1, FB=2)
    given = integer(answer, "a whole number of micro-batches", minimum=1)
    if given % 2 or given < 2 * p:
        return wrong(
            f"DualPipe cannot run m = {given}: it needs m even and m >= 2p = {2 * p}.",
            "it feeds m/2 micro-batches from each end, at least p from each.",
        )

    def run(m: int):
        return simulate(dualpipe(p, m), costs)

    f = run(given).bubble_fraction
    if f > target:
        return wrong(f"at m = {given} the bubble fraction is f = {f:.4f}, above {target}.")
    best = _smallest_even(p, lambda m: run(m).bubble_fraction <= target)
    if given == best:
        return right(f"m = {given} gives f = {f:.4f}; m = {given - 2} would not reach {target}.")
    table = formulas()["dualpipe_bubble"](p=p, t_fb=2, t_b=2, t_w=1)
    f_best = run(best).bubble_fraction
    if given == _smallest_even(p, lambda m: table / run(m).makespan <= target):
        return wrong(
            f"m = {given} is what it takes if every rank idled the table's {table:g}; the "
            f"ranks near the ends idle less, and m = {best} already gives f = {f_best:.4f}.",
            "simulate and read the bubble fraction, or add up the idle time of each rank.",
        )
    if (p - 1) / (given + p - 1) <= target < (p - 1) / (given + p - 2):
        return wrong(
            f"m = {given} is what 1F1B needs, f = (p-1)/(m+p-1); DualPipe reaches "
            f"f = {f_best:.4f} at m = {best}.",
            "DualPipe's idle time stays the same as m grows: simulate it.",
        )
    return wrong(
        f"m = {given} works, but a smaller m does too (m = {best}: f = {f_best:.4f}).",
        "DualPipe's idle time stays the same as m grows: only the step gets longer.",
    )


@exercise(
    "5.4",
    "An MoE model whose all-to-all takes as long as its compute (Costs(F=2, I=2, W=1, "
    "FB=3)), p = 8, m = 16: of 1f1b, zb-h1, zb-v, dualpipe and dualpipev, choose the one "
    "that holds the fewest parameters per rank among those whose step takes at most 80 "
    "time units.",
    kind="choose",
    solution="Simulated: 1F1B 115, ZB-H1 101, ZB-V 87, DualPipe 75 and DualPipeV 75.5 "
    "time units; only the two DualPipes hide the all-to-all in their overlapped pairs. "
    "DualPipe holds two copies of its part of the model (2 device shares per rank), "
    'DualPipeV two chunks of half a share each (1): `"dualpipev"`.',
    answer_name="answer_4",
)
def _choose_schedule(answer):
    p, m, limit = 8, 16, 80.0
    name = answer.strip().lower() if isinstance(answer, str) else None
    if name not in CANDIDATES:
        return wrong(
            f"this exercise wants one of {', '.join(repr(n) for n in CANDIDATES)}, "
            f"got {shown(answer)}."
        )
    times = {n: simulate(b(p, m), MOE_COSTS).makespan for n, b in CANDIDATES.items()}
    params = {n: max(parameters_per_rank(b(p, m))) for n, b in CANDIDATES.items()}
    fits = [n for n in CANDIDATES if times[n] <= limit]
    best = min(fits, key=params.__getitem__)
    said = f"{times[name]:g} time units, parameters {params[name]:g} x a device's share"
    if name == best:
        return right(
            f"{name}: {said} per rank, the fewest of those within {limit:g} time units "
            f"({', '.join(f'{n} {times[n]:g}' for n in fits)})."
        )
    if name not in fits:
        return wrong(
            f"{name} takes {times[name]:g} time units, more than {limit:g}.",
            "the all-to-all is exposed in every pass run alone: which schedules hide it?",
        )
    return wrong(
        f"{name} fits ({said} per rank), but another fits with fewer parameters.",
        "count the stages each rank holds and the share of the model each stage is.",
    )


@exercise(
    "5.5",
    "DualPipe with p = 8, m = 16 and F = I = W = 1: construct Costs(F=1, I=1, W=1, FB=...) "
    "with the largest F&B at which the overlapped pairs are still no slower than running "
    "each pair as its forward, then its backward.",
    kind="construct",
    solution="Run apart (`pairs_apart(dualpipe(8, 16))`), the step takes 51 time units. "
    "With the pairs overlapped it takes 54 at F&B = F + B = 3, not 51: a pair cannot start "
    "until both its forward's input and its backward's gradient have arrived, and that "
    "waiting lands on the critical path. The middle rank runs 2M-2P-1 = 7 pairs and idles "
    "the table's 3(F&B - 1), so the step takes 24 + 10 F&B, and overlapping pays while "
    "F&B <= 2.7: `Costs(F=1, I=1, W=1, FB=2.7)`.",
    answer_name="answer_5",
)
def _overlap_pays(answer):
    p, m, f, i, w = 8, 16, 1.0, 1.0, 1.0
    if not isinstance(answer, Costs):
        return wrong(
            f"this exercise wants a ppbook.costs.Costs, got {shown(answer)}.",
            "Costs(F=1, I=1, W=1, FB=...) with your F&B.",
        )
    if (answer.F, answer.I, answer.W, answer.B) != (f, i, w, None) or answer.transfer:
        return wrong(
            "keep the question's costs: F = 1, I = 1, W = 1, no B (it is I + W) and no "
            "transfer cost; only FB is yours to choose."
        )
    if answer.FB is None:
        return wrong(
            "FB is not set, so a pair takes F + B: choose its time with FB=...",
            "Costs(F=1, I=1, W=1, FB=...).",
        )
    fb = number(answer.FB, "one number FB for every stage")
    best = overlap_breakeven(p, m, f, i, w)
    apart = simulate(pairs_apart(dualpipe(p, m)), Costs(F=f, I=i, W=w)).makespan
    paired = simulate(dualpipe(p, m), answer).makespan
    if close(fb, best):
        return right(
            f"at F&B = {fb:g} the overlapped step takes {paired:g} time units, as long as "
            f"with the pairs run apart ({apart:g}); a slower pair would lose."
        )
    if close(fb, f + i + w):
        return wrong(
            f"at F&B = F + B = {fb:g} the overlapped step takes {paired:g} time units, "
            f"longer than the {apart:g} of the pairs run apart.",
            "a pair waits for both of its inputs; find where the simulated step times meet.",
        )
    if paired > apart:
        return wrong(
            f"at F&B = {fb:g} the overlapped step takes {paired:g} time units, longer than "
            f"the {apart:g} of the pairs run apart.",
            "a faster pair: lower FB.",
        )
    return wrong(
        f"at F&B = {fb:g} overlapping pays ({paired:g} against {apart:g} time units), but a "
        "slower pair would still pay: the question wants the largest such F&B.",
        "raise FB until the two step times meet.",
    )


@exercise(
    "5.6",
    "DualPipeV on p = 4 ranks with m = 10 micro-batches: the most activations any rank "
    f"holds, in {ACTIVATION_UNIT}.",
    kind="compute",
    solution="The table's PP+1 counts stage chunks, and DualPipeV's PP is 2p = 8 chunks, "
    "so each rank holds up to 9 chunk activations. A chunk is half of one device's share, "
    "so that is 9/2 = 4.5 micro-batch activations of a full stage: "
    "`max(simulate(dualpipev(4, 10)).peak_activations(r) for r in range(4))`. 1F1B on the "
    "same 4 ranks holds 4.",
    answer_name="answer_6",
)
def _dualpipev_activations(answer):
    given = number(answer, f"a number of {ACTIVATION_UNIT}, such as 3.5")
    p, m = 4, 10
    run = simulate(dualpipev(p, m))
    peak = max(run.peak_activations(r) for r in range(p))
    chunks = peak / run.schedule.chunk_share
    if close(given, peak):
        return right(
            f"{peak:g}: the table's PP+1 = {chunks:g} chunks of half a stage each, about "
            f"1F1B's p = {p}."
        )
    if close(given, chunks):
        return wrong(
            f"{given:g} counts stage chunks, the table's PP+1 with PP = 2p = {2 * p}.",
            "a DualPipeV chunk is half of one device's share: convert to full stages.",
        )
    if close(given, p + 1):
        return wrong(
            f"{given:g} reads the table's PP+1 with PP = p, but DualPipeV's PP is its "
            f"number of stage chunks, 2p = {2 * p}.",
            "count the chunks first, then convert them to full stages.",
        )
    return wrong(
        f"{given:g} is not DualPipeV's peak.",
        f"simulate dualpipev({p}, {m}) and read peak_activations.",
    )


@exercise(
    "5.7",
    "Derive DualPipeV's one-step makespan as a sympy expression in p, m, t_f and t_w, for "
    "even m >= 2p, when I = F, W <= F and a pair gains nothing (F&B = F + B = 2F + W), "
    "costs per device share (a chunk pass takes half).",
    kind="derive",
    solution="m(2F + W) + (p-1)(3F - W)/2, in sympy `sym.m * (2 * sym.t_f + sym.t_w) + "
    "(sym.p - 1) * (3 * sym.t_f - sym.t_w) / 2`. Every rank computes m micro-batches "
    "through its two chunks of half a share: m(F + B) = m(2F + W). The bottom of the V "
    "idles the table's DualPipeV bubble with PP = 2p chunks, (PP/2 - 1)(F&B + B - 3W) in "
    "chunk pass times: (p-1)(2F + W + F + W - 3W)/2 = (p-1)(3F - W)/2. The critical path "
    "of `dualpipev(p, m)` under these conditions is exactly that sum.",
    answer_name="answer_7",
)
def _dualpipev_makespan(answer):
    import sympy as sp

    from ppbook.critical_path import makespan_expression
    from ppbook.exercises.answers import expression
    from ppbook.symbolic import symbols as sym

    allowed = {sym.p, sym.m, sym.t_f, sym.t_w}
    try:
        answer = expression(answer, {str(s): s for s in allowed}, "sym.p, sym.m, sym.t_f, sym.t_w")
    except ValueError as error:
        return wrong(
            str(error),
            "with I = F and F&B = 2F + W: t_i is t_f, t_b is t_f + t_w, t_fb 2t_f + t_w.",
        )
    if not {sym.p, sym.m} <= answer.free_symbols:
        return wrong(
            "your expression must hold for every p and m, so it contains both.",
            "the compute grows with m, the idle time with p.",
        )
    conditions = ("I = F", "W <= F", "FB = F + I + W")
    for p in (2, 3, 4, 5, 6):
        for m in (2 * p, 2 * p + 2, 2 * p + 6):
            path = makespan_expression(dualpipev(p, m), conditions, transfer=False)
            path = path.xreplace({sym.t_i: sym.t_f, sym.t_fb: 2 * sym.t_f + sym.t_w})
            mine = answer.xreplace({sym.p: p, sym.m: m})
            if sp.expand(mine - path) != 0:
                slope = sp.expand(answer.xreplace({sym.p: p, sym.m: m + 2}) - mine)
                hint = (
                    "the idle time is off: the V has 2p chunks of half a share, so count "
                    "the table's bubble with PP = 2p, in chunk pass times."
                    if sp.expand(slope - 2 * (2 * sym.t_f + sym.t_w)) == 0
                    else "two chunks of half a share per rank: what does a rank compute in a "
                    "step of m micro-batches?"
                )
                return wrong(
                    f"at p = {p}, m = {m} your expression gives {sp.expand(mine)}; the critical "
                    f"path of dualpipev({p}, {m}) gives {sp.expand(path)}.",
                    hint,
                )
    return right(
        "it is the critical path of dualpipev(p, m) for p from 2 to 6 and three m each: the "
        "compute m(F + B) and the bottom rank's bubble with PP = 2p chunks."
    )


@exercise(
    "5.8",
    "Construct costs Costs(F=..., I=..., W=..., FB=...) under which an overlapped pair is "
    "faster than its two passes run apart (F&B < F + I + W) and yet one step of DualPipe on "
    "p = 8 ranks with m = 16 takes longer than one step of ZB-V.",
    kind="construct",
    solution="F = I = W = 1 and F&B = 2.9: each pair saves 0.1, DualPipe takes 53 time units "
    "and ZB-V 51.5. DualPipe's ramps are p/2 - 1 steps of F&B + B - 3W, about 3 x 2.9 here, "
    "and a pair waits for both its inputs; ZB-V's ramps are p - 1 chunk forwards of F/2 = "
    "3.5 in all. A pair that hides little cannot win that back: overlapping pays only when "
    "it hides a large share of the pass, as an MoE all-to-all does.",
    answer_name="answer_8",
)
def _overlap_too_small(answer):
    p, m = 8, 16
    if not isinstance(answer, Costs):
        return wrong(
            f"this exercise wants a Costs(F=..., I=..., W=..., FB=...), got {shown(answer)}."
        )
    if answer.transfer:
        return wrong("keep transfers free (comm = 0): the comparison is of the schedules alone.")
    per = answer.per_stage(1)
    if per.get("FB") is None:
        return wrong(
            "give F&B as FB=...: the overlapped pair's time.", "Costs(F=1, I=1, W=1, FB=...)"
        )
    F, I, W, FB = (per[k][0] for k in ("F", "I", "W", "FB"))  # noqa: E741 (PyTorch's names)
    if not FB < F + I + W - 1e-9:
        return wrong(
            f"F&B = {FB:g} is not below F + I + W = {F + I + W:g}: the pair gains nothing "
            "from overlapping, so this shows nothing about the overlap.",
            "make the pair a little faster than its two passes.",
        )
    two_way, v = simulate(dualpipe(p, m), answer).makespan, simulate(zb_v(p, m), answer).makespan
    if not two_way > v + 1e-9:
        return wrong(
            f"with these costs DualPipe takes {two_way:g} time units and ZB-V {v:g}: DualPipe "
            "is not slower.",
            "the more a pair saves, the better DualPipe does: how little may it save?",
        )
    return right(
        f"each pair saves {F + I + W - FB:g}, yet DualPipe takes {two_way:g} time units against "
        f"ZB-V's {v:g}: its ramps and its pairs' waits cost more than the overlap gives back."
    )
