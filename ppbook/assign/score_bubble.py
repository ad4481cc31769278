"""Scores of assignment 1: the interleaved 1F1B bubble in sympy, and the v past which more
chunks stop paying on a link (``notebooks/assignments/01_interleaved_bubble.ipynb``).

Each score runs in the grader's own process on data only (:mod:`ppbook.assign.expressions`
rebuilds the reader's expression). A right expression agrees with ppbook.symbolic's
published form (:func:`ppbook.symbolic.interleaved_bubble`, Megatron-LM sec. 2.2.2) or, for
the makespan with transfers, which the package does not publish, with the simulator on a
grid of cases inside its conditions. Wrong answers are told the usual slip when they make
one, else where they part from the simulator, and by how much.
"""

from __future__ import annotations

import sympy as sp

from ppbook import symbolic
from ppbook.assign.expressions import SYMBOLS, from_tree, same
from ppbook.costs import Costs
from ppbook.schedules import interleaved_1f1b
from ppbook.simulate import simulate

p, v, c = (SYMBOLS[name] for name in ("p", "v", "c"))

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
on every message between ranks, the conditions under which the makespan has one closed
form (c larger than a chunk's forward makes the steady state wait for transfers)."""

CHUNK_CASES = (
    (8, 32, 1, 2, 0.05),
    (8, 32, 1, 2, 0.1),
    (4, 16, 1, 2, 0.1),
    (8, 16, 2, 4, 0.1),
    (4, 8, 1, 2, 0.25),
    (8, 64, 1, 2, 0.2),
)
"""(p, m, F, B, c) for which the reader's best_chunks picks v from 1 to :data:`MAX_CHUNKS`."""

MAX_CHUNKS = 8


def _timeline(p_: int, m_: int, v_: int, F: float, B: float, comm: float = 0.0):
    return simulate(interleaved_1f1b(p_, m_, v_), Costs(F=F, B=B, comm=comm))


def _value(expr: sp.Expr, **values) -> float | None:
    point = {SYMBOLS[name]: sp.sympify(x) for name, x in values.items()}
    got = expr.xreplace(point)
    return float(got) if got.is_Number and got.is_finite else None


def score_bubble(data: object) -> tuple[float, str]:
    """1.1: the idle time of one device, (p-1)(t_f+t_b)/v."""
    try:
        expr = from_tree(data)  # ValueError: what is wrong with it
    except ValueError as error:
        return 0.0, f"interleaved_bubble(): {error}"
    if same(expr, symbolic.interleaved_bubble()):
        return 1.0, (
            f"right: {expr} is Megatron-LM's (p-1)(t_f+t_b)/v, and the simulator's idle time "
            "per device at every case"
        )
    if same(expr, symbolic.one_f_one_b_bubble()):
        return 0.0, (
            "that is plain 1F1B's bubble (p-1)(t_f+t_b): with v chunks the warm-up and the "
            "cool-down are still p-1 steps, but each step is one chunk pass, t_f/v or t_b/v"
        )
    for name, form in (("fraction f", "fraction"), ("ratio r", "ratio")):
        published = getattr(symbolic, f"interleaved_bubble_{form}")()
        if same(expr, published):
            return 0.0, (
                f"that is the bubble {name}, a pure number; the question asks for the idle "
                "time of one device, in the unit of t_f"
            )
    return 0.0, _against_simulator(
        expr, "your bubble", lambda t, mm, F, B: t.makespan - mm * (F + B), "idle time per device"
    )


def score_fraction(data: object) -> tuple[float, str]:
    """1.2: the bubble fraction f = idle / total = (p-1)/(vm + p - 1)."""
    try:
        expr = from_tree(data)  # ValueError: what is wrong with it
    except ValueError as error:
        return 0.0, f"interleaved_bubble_fraction(): {error}"
    if same(expr, symbolic.interleaved_bubble_fraction()):
        return 1.0, f"right: f = {sp.factor(expr)}, the simulator's bubble fraction at every case"
    if same(expr, symbolic.interleaved_bubble_ratio()):
        return 0.0, (
            "that is the bubble ratio r = idle/compute; the fraction f divides the idle time "
            "by the total time, compute plus idle: f = r/(1+r)"
        )
    return 0.0, _against_simulator(
        expr, "your fraction", lambda t, mm, F, B: t.bubble_fraction, "bubble fraction"
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


def _against_simulator(expr, yours: str, measure, what: str) -> str:
    """Where ``expr`` first parts from the simulator over :data:`BUBBLE_CASES`."""
    found = _first_difference(expr, BUBBLE_CASES, measure)
    if found is None:
        return f"{yours} agrees with the simulator at a few cases but is not the general form"
    where, got, truth = found
    if got is None:
        return f"{where} {yours} is no finite number"
    return f"{where} {yours} is {got:.6g}; the simulator's {what} is {truth:.6g}"


def score_transfer(data: object) -> tuple[float, str]:
    """1.3: the makespan with a transfer c per message, m(t_f+t_b) + (p-1)(t_f+t_b)/v +
    2(pv-1)c, against the simulator on :data:`TRANSFER_CASES`."""
    try:
        expr = from_tree(data)  # ValueError: what is wrong with it
    except ValueError as error:
        return 0.0, f"interleaved_makespan_with_transfer(): {error}"
    if c not in expr.free_symbols:
        return 0.0, (
            "your makespan has no c: each micro-batch crosses a rank boundary at every one of "
            "its p*v - 1 chunk boundaries, going forward and coming back"
        )
    found = _first_difference(expr, TRANSFER_CASES, lambda t, mm, F, B: t.makespan)
    if found is None:
        return 1.0, f"right: {expr} is the simulator's makespan in every case"
    where, got, truth = found
    if got is None:
        return 0.0, f"{where} your makespan is no number"
    return 0.0, (
        f"{where} your makespan is {got:.6g}, the simulator's {truth:.6g} "
        f"(time units){_transfer_slip(expr)}"
    )


def _transfer_slip(expr: sp.Expr) -> str:
    base = symbolic.interleaved_makespan()
    if same(expr, base + 2 * (p - 1) * c):
        return ": that counts 1F1B's p-1 boundaries; a micro-batch crosses p*v - 1 chunk boundaries"
    if same(expr, base + (p * v - 1) * c):
        return ": that counts the forward's transfers only; the gradients come back the same way"
    return ""


def score_chunks(data: object) -> tuple[float, str]:
    """1.4: best_chunks for every case of :data:`CHUNK_CASES`; a share of the marks each."""
    if not isinstance(data, list) or len(data) != len(CHUNK_CASES):
        return 0.0, f"best_chunks should give one v per case ({len(CHUNK_CASES)}), got {data!r:.80}"
    right, first = 0, ""
    for (p_, m_, F, B, comm), given in zip(CHUNK_CASES, data, strict=True):
        where = f"p = {p_}, m = {m_}, t_f = {F:g}, t_b = {B:g}, c = {comm:g}"
        if type(given) is not int or not 1 <= given <= MAX_CHUNKS:
            first = (
                first
                or f"{where}: v must be a whole number from 1 to {MAX_CHUNKS}, got {given!r:.40}"
            )
            continue
        times = {k: _timeline(p_, m_, k, F, B, comm).makespan for k in range(1, MAX_CHUNKS + 1)}
        best = min(times, key=times.get)
        if times[given] <= times[best] * (1 + 1e-12):
            right += 1
        elif not first:
            first = (
                f"{where}: v = {given} takes {times[given]:.6g} time units, v = {best} "
                f"{times[best]:.6g}; compare the whole numbers on either side of the optimum"
            )
    share = right / len(CHUNK_CASES)
    if right == len(CHUNK_CASES):
        return share, "right: the fastest v in every case, as the simulator times them"
    return share, f"{right} of {len(CHUNK_CASES)} cases right; {first}"
