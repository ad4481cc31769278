"""Scores of assignment 1: the interleaved 1F1B bubble in sympy, and the v past which more
chunks stop paying on a link (``notebooks/assignments/01_interleaved_bubble.ipynb``).

Each score runs in the grader's own process on data only (:mod:`ppbook.assign.expressions`
rebuilds the reader's expression). An expression is right when it is symbolically equal to
the right one (:func:`ppbook.assign.equality.equal`), not when it agrees at a few points:
the idle time and the fraction of ppbook.symbolic's published form
(:func:`ppbook.symbolic.interleaved_bubble`, Megatron-LM sec. 2.2.2); the makespan with a
transfer c, which the package does not publish, m(t_f+t_b) + (p-1)(t_f+t_b)/v + 2(pv-1)c
**wherever v >= 2 and c <= t_f/v, c <= t_b/v**, the conditions the question states: beyond
them the steady state waits for transfers, so an answer may differ there (one with a Max
for slow links is right too).
The tests check that form against the simulator on both sides of the condition. Wrong
answers are told the usual slip when they make one, else where they part from the simulator
or, where they agree with it on its cases, a point where they differ from the right form.

best_chunks (1.4) is asked on cases drawn when the grader runs (:func:`varied`), and each
drawn case is scored by simulating every v, independent of any formula.
"""

from __future__ import annotations

import random

import sympy as sp

from ppbook import symbolic
from ppbook.assign.drawn import on_drawn_cases
from ppbook.assign.equality import POINTS, Verdict, equal, equal_within
from ppbook.assign.expressions import SYMBOLS, from_tree
from ppbook.costs import Costs
from ppbook.schedules import interleaved_1f1b
from ppbook.simulate import simulate

p, m, v, t_f, t_b, c = (SYMBOLS[name] for name in ("p", "m", "v", "t_f", "t_b", "c"))

WITH_TRANSFER = symbolic.interleaved_makespan() + 2 * (p * v - 1) * c
"""1.3's makespan, for v >= 2 and c <= t_f/v, c <= t_b/v (:data:`FAST_LINK`)."""
W, Z = sp.Symbol("w", positive=True), sp.Symbol("z", positive=True)
FAST_LINK = (
    {v: v + 1, t_b: t_f + Z, c: t_f / ((v + 1) * (1 + W))},
    {v: v + 1, t_f: t_b + Z, c: t_b / ((v + 1) * (1 + W))},
)
"""Where 1.3's makespan holds, as two substitutions (t_b > t_f, then t_f > t_b): v >= 2 (v + 1
for a positive v), and a transfer no longer than a chunk's forward or backward, c =
min(t_f, t_b)/(v(1+w)) with w > 0 (c = 0 in the limit). The simulator agrees with
:data:`WITH_TRANSFER` there (the tests check it); with c > t_b/v it does not."""

BUBBLE_CASES = ((4, 8, 2, 1, 2), (8, 16, 4, 1, 2), (2, 6, 3, 2, 3))
"""(p, m, v, F, B) at which a wrong bubble is compared with the simulator."""

TRANSFER_CASES = (
    (4, 8, 2, 1, 2, 0.1),
    (4, 16, 3, 1, 2, 0.25),
    (8, 16, 2, 2, 3, 1.0),
    (2, 6, 4, 1, 1, 0.125),
    (3, 9, 2, 1, 3, 0.0),
    (8, 32, 3, 1, 2, 0.2),
)
"""(p, m, v, F, B, c): interleaved 1F1B (v >= 2, p divides m) with a transfer c <= F/v
on every message between ranks, where a wrong makespan is compared with the simulator."""

CHUNK_CASES = (
    (8, 32, 1, 2, 0.05),
    (8, 32, 1, 2, 0.1),
    (4, 16, 1, 2, 0.1),
    (8, 16, 2, 4, 0.1),
    (4, 8, 1, 2, 0.25),
    (8, 64, 1, 2, 0.2),
)
"""(p, m, F, B, c) of the notebook's self-check of best_chunks; the grader draws its own
(:func:`draw_chunk_cases`)."""

MAX_CHUNKS = 8


def _timeline(p_: int, m_: int, v_: int, F: float, B: float, comm: float = 0.0):
    return simulate(interleaved_1f1b(p_, m_, v_), Costs(F=F, B=B, comm=comm))


def _value(expr: sp.Expr, **values) -> float | None:
    point = {SYMBOLS[name]: sp.sympify(x) for name, x in values.items()}
    got = expr.xreplace(point)
    return float(got) if got.is_Number and got.is_finite else None


def _right(verdict: Verdict, what: str) -> str:
    if verdict.sampled:
        return (
            f"right: {what} (sympy could not simplify the difference to 0; it is 0 at "
            f"{POINTS} random points, exactly)"
        )
    return f"right: {what}, symbolically"


def score_bubble(data: object) -> tuple[float, str]:
    """1.1: the idle time of one device, (p-1)(t_f+t_b)/v."""
    try:
        expr = from_tree(data)  # ValueError: what is wrong with it
    except ValueError as error:
        return 0.0, f"interleaved_bubble(): {error}"
    verdict = equal(expr, symbolic.interleaved_bubble())
    if verdict:
        return 1.0, _right(verdict, "Megatron-LM's idle time per device, (p-1)(t_f+t_b)/v")
    if equal(expr, symbolic.one_f_one_b_bubble()):
        return 0.0, (
            "that is plain 1F1B's bubble (p-1)(t_f+t_b): with v chunks the warm-up and the "
            "cool-down are still p-1 steps, but each step is one chunk pass, t_f/v or t_b/v"
        )
    for name, form in (("fraction f", "fraction"), ("ratio r", "ratio")):
        if equal(expr, getattr(symbolic, f"interleaved_bubble_{form}")()):
            return 0.0, (
                f"that is the bubble {name}, a pure number; the question asks for the idle "
                "time of one device, in the unit of t_f"
            )
    return 0.0, _against_simulator(
        expr,
        verdict,
        "your bubble",
        lambda t, mm, F, B: t.makespan - mm * (F + B),
        "idle time per device",
    )


def score_fraction(data: object) -> tuple[float, str]:
    """1.2: the bubble fraction f = idle / total = (p-1)/(vm + p - 1)."""
    try:
        expr = from_tree(data)  # ValueError: what is wrong with it
    except ValueError as error:
        return 0.0, f"interleaved_bubble_fraction(): {error}"
    verdict = equal(expr, symbolic.interleaved_bubble_fraction())
    if verdict:
        return 1.0, _right(verdict, "the simulator's bubble fraction")
    if equal(expr, symbolic.interleaved_bubble_ratio()):
        return 0.0, (
            "that is the bubble ratio r = idle/compute; the fraction f divides the idle time "
            "by the total time, compute plus idle: f = r/(1+r)"
        )
    return 0.0, _against_simulator(
        expr, verdict, "your fraction", lambda t, mm, F, B: t.bubble_fraction, "bubble fraction"
    )


def _first_difference(expr, cases, measure) -> tuple[str, float | None, float] | None:
    """The first case of ``cases`` ((p, m, v, F, B), or with c) at which ``expr`` parts from
    ``measure(timeline, m, F, B)`` of the simulator: (where, expr's value or None when it is
    no finite number, the simulator's); None when they agree at every case."""
    for case in cases:
        p_, m_, v_, F, B = case[:5]
        at = {"p": p_, "m": m_, "v": v_, "t_f": F, "t_b": B}
        where = f"at p = {p_}, m = {m_}, v = {v_}, t_f = {F:g}, t_b = {B:g}"
        if len(case) > 5:
            at["c"] = case[5]
            where += f", c = {case[5]:g}"
        truth = measure(_timeline(*case), m_, F, B)
        got = _value(expr, **at)
        if got is None or abs(got - truth) > 1e-9 * max(1.0, abs(truth)):
            return where, got, truth
    return None


def _elsewhere(verdict: Verdict, yours: str) -> str:
    """Where an answer that agrees with the simulator's cases parts from the right form."""
    if verdict.witness is None:
        return f"{yours} agrees with the simulator at a few cases but is not the general form"
    mine, right = (float(x) if x.is_finite else x for x in verdict.values)
    return (
        f"{yours} agrees with the simulator at its cases but is not the general form: at "
        f"{verdict.where()} it is {mine:.6g}, the right form {right:.6g}"
    )


def _against_simulator(expr, verdict: Verdict, yours: str, measure, what: str) -> str:
    """Where ``expr`` first parts from the simulator over :data:`BUBBLE_CASES`."""
    found = _first_difference(expr, BUBBLE_CASES, measure)
    if found is None:
        return _elsewhere(verdict, yours)
    where, got, truth = found
    if got is None:
        return f"{where} {yours} is no finite number"
    return f"{where} {yours} is {got:.6g}; the simulator's {what} is {truth:.6g}"


def score_transfer(data: object) -> tuple[float, str]:
    """1.3: the makespan with a transfer c per message, :data:`WITH_TRANSFER`, equal to it
    wherever v >= 2 and c <= min(t_f, t_b)/v (:data:`FAST_LINK`)."""
    try:
        expr = from_tree(data)  # ValueError: what is wrong with it
    except ValueError as error:
        return 0.0, f"interleaved_makespan_with_transfer(): {error}"
    if c not in expr.free_symbols:
        return 0.0, (
            "your makespan has no c: each micro-batch crosses a rank boundary at every one of "
            "its p*v - 1 chunk boundaries, going forward and coming back"
        )
    verdict = equal_within(expr, WITH_TRANSFER, FAST_LINK)
    if verdict:
        return 1.0, _right(verdict, "the simulator's makespan wherever c <= t_f/v, t_b/v")
    found = _first_difference(expr, TRANSFER_CASES, lambda t, mm, F, B: t.makespan)
    if found is None:
        return 0.0, _elsewhere(verdict, "your makespan") + _transfer_slip(expr)
    where, got, truth = found
    if got is None:
        return 0.0, f"{where} your makespan is no number"
    return 0.0, (
        f"{where} your makespan is {got:.6g}, the simulator's {truth:.6g} "
        f"(time units){_transfer_slip(expr)}"
    )


def _transfer_slip(expr: sp.Expr) -> str:
    base = symbolic.interleaved_makespan()
    if equal(expr, base + 2 * (p - 1) * c):
        return ": that counts 1F1B's p-1 boundaries; a micro-batch crosses p*v - 1 chunk boundaries"
    if equal(expr, base + (p * v - 1) * c):
        return ": that counts the forward's transfers only; the gradients come back the same way"
    return ""


def chunk_times(p_: int, m_: int, F: float, B: float, comm: float) -> dict[int, float]:
    """The simulated makespan of interleaved 1F1B for every v from 1 to :data:`MAX_CHUNKS`."""
    return {k: _timeline(p_, m_, k, F, B, comm).makespan for k in range(1, MAX_CHUNKS + 1)}


def chunk_share(cases) -> object:
    """The score of best_chunks on ``cases`` ((p, m, F, B, c) each): a share of the marks
    per case whose v is among the simulator's fastest."""

    def score(data: object) -> tuple[float, str]:
        if not isinstance(data, list) or len(data) != len(cases):
            return 0.0, f"best_chunks should give one v per case ({len(cases)}), got {data!r:.80}"
        right, first = 0, ""
        for (p_, m_, F, B, comm), given in zip(cases, data, strict=True):
            where = f"p = {p_}, m = {m_}, t_f = {F:g}, t_b = {B:g}, c = {comm:g}"
            if type(given) is not int or not 1 <= given <= MAX_CHUNKS:
                first = first or (
                    f"{where}: v must be a whole number from 1 to {MAX_CHUNKS}, got {given!r:.40}"
                )
                continue
            times = chunk_times(p_, m_, F, B, comm)
            best = min(times, key=times.get)
            if times[given] <= times[best] * (1 + 1e-12):
                right += 1
            elif not first:
                first = (
                    f"{where}: v = {given} takes {times[given]:.6g} time units, v = {best} "
                    f"{times[best]:.6g}; compare the whole numbers on either side of the optimum"
                )
        share = right / len(cases)
        if right == len(cases):
            return share, "right: the fastest v in every case, as the simulator times them"
        return share, f"{right} of {len(cases)} cases right; {first}"

    score.__doc__ = f"1.4: best_chunks on {len(cases)} cases; a share of the marks each."
    return score


score_chunks = chunk_share(CHUNK_CASES)
"""1.4 on :data:`CHUNK_CASES`, the notebook's self-check."""


def draw_chunk_cases(rng: random.Random, count: int = 6) -> tuple[tuple, ...]:
    """``count`` cases (p, m, F, B, c) drawn from ``rng``: p from 2 to 8, m a multiple of p,
    c chosen so that the best v lies anywhere from 1 to 8, kept where 1.3's makespan holds
    (the v it makes fastest is among the simulator's fastest), and at least three different
    best v among them."""
    for _ in range(200):
        cases, bests = [], set()
        while len(cases) < count:
            case = _draw_case(rng)
            times = chunk_times(*case)
            fastest = min(times.values())
            best = {k for k, t in times.items() if t <= fastest * (1 + 1e-12)}
            if _formula_best(*case) in best:
                cases.append(case)
                bests.add(min(best))
        if len(bests) >= 3:
            return tuple(cases)
    raise RuntimeError("could not draw best_chunks cases whose best v varies")  # never seen


def _draw_case(rng: random.Random) -> tuple:
    p_ = rng.choice((2, 3, 4, 6, 8))
    m_ = p_ * rng.randint(2, 8)
    F = rng.choice((0.5, 1, 1.5, 2, 3, 4))
    B = F * rng.choice((1, 1.5, 2, 2.5, 3))
    target = rng.uniform(1.2, 8.5)  # where the makespan's derivative in v vanishes
    comm = round((p_ - 1) * (F + B) / (2 * p_ * target**2), 4)
    return p_, m_, F, B, max(comm, 1e-4)


def _formula_best(p_: int, m_: int, F: float, B: float, comm: float) -> int:
    """The v from 1 to :data:`MAX_CHUNKS` that :data:`WITH_TRANSFER` makes fastest."""
    at = {p: p_, m: m_, t_f: sp.nsimplify(F), t_b: sp.nsimplify(B), c: sp.nsimplify(comm)}
    form = WITH_TRANSFER.xreplace(at)
    return min(range(1, MAX_CHUNKS + 1), key=lambda k: form.xreplace({v: k}))


def chunk_calls(cases) -> str:
    """The source that calls best_chunks on every case, as the grader collects it."""
    return f"[best_chunks(*case) for case in {[list(case) for case in cases]!r}]"


def varied(question):
    """``question`` (1.4) with a ``variant``: the same question on :func:`draw_chunk_cases`."""
    return on_drawn_cases(question, draw_chunk_cases, chunk_share, chunk_calls)
