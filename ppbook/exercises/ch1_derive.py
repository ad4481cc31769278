"""Exercises 1.8 to 1.10 of chapter 1: derive and implement (``notebooks/01_bubble.ipynb``).

Each answer is judged by what makes it right, on many points, never by equality with one
expression or with ppbook's builder:

- 1.8, GPipe's makespan with one slow stage, must equal the simulator's makespan
  (:func:`ppbook.simulate.simulate` with per-stage costs) wherever the slow stage sits, for
  drawn p, m, slow-down k, t_f and t_b;
- 1.9, a GPipe generator, must give on drawn (p, m) a schedule that the validator accepts,
  that runs every forward before any backward on each rank, and whose simulated makespan
  is the derived (m+p-1)(t_f+t_b) + 2(p-1)c, with and without transfers;
- 1.10, the largest transfer time for a bubble target, must bring the simulated bubble
  fraction f = idle/total of GPipe exactly to the target at drawn points.
"""

from __future__ import annotations

import random

import sympy as sp

from ppbook.checks import shown
from ppbook.costs import Costs
from ppbook.exercises import exercise, right, wrong
from ppbook.exercises.answers import expression
from ppbook.pipeline_schedule import Schedule
from ppbook.schedules import gpipe
from ppbook.simulate import simulate


def _expression(answer: object, names: tuple[str, ...]) -> sp.Expr:
    """The reader's sympy expression, its symbols read by name (assumptions do not matter)."""
    return expression(answer, {name: sp.Symbol(name) for name in names})


def _value(expr: sp.Expr, at: dict[str, object]) -> float | None:
    """``expr`` at the point ``at`` (by symbol name), or None when it is not a finite number."""
    value = expr.subs({x: sp.nsimplify(at[str(x)]) for x in expr.free_symbols})
    value = sp.simplify(value)
    return float(value) if value.is_number and value.is_finite and value.is_real else None


# ----- 1.8 one slow stage -----------------------------------------------------------------------


def slow_draws(seed: int = 18) -> list[dict[str, object]]:
    """Points (p, m, k, t_f, t_b and the slow stage) at which 1.8 is checked."""
    rng = random.Random(seed)
    draws = [dict(p=4, m=6, k=2, t_f=1, t_b=2, slow=1), dict(p=3, m=1, k=3, t_f=1, t_b=2, slow=2)]
    while len(draws) < 10:
        pp = rng.randint(2, 6)
        draws.append(
            dict(
                p=pp,
                m=rng.randint(1, 12),
                k=rng.choice([1, 1.5, 2, 3, 4]),
                t_f=rng.choice([1, 2]),
                t_b=rng.choice([1, 2, 3]),
                slow=rng.randrange(pp),
            )
        )
    return draws


def _slow_makespan(at: dict[str, object]) -> float:
    """GPipe's simulated makespan when stage ``slow`` runs k times as long as the others."""
    scale = [at["k"] if s == at["slow"] else 1 for s in range(at["p"])]
    costs = Costs(F=[at["t_f"] * x for x in scale], B=[at["t_b"] * x for x in scale])
    return simulate(gpipe(at["p"], at["m"]), costs).makespan


@exercise(
    "1.8",
    "Derive GPipe's makespan when one of the p stages (any one) runs its forward and "
    "backward k >= 1 times as long as the others, without transfers: a sympy expression in "
    "p, m, k, t_f and t_b.",
    kind="derive",
    solution="Follow the recurrences of section 3 with stage s slow: the longest path "
    "through the forward grid passes every stage once and, on the slowest stage, every "
    "micro-batch: (p-1) t_f + m k t_f; the backward grid the same with t_b. So the makespan "
    "is `(p - 1 + m*k)*(t_f + t_b)`: the slow stage sets the pace of the steady state, the "
    "others only the ramps, wherever it sits. At k = 1 it is (m+p-1)(t_f+t_b).",
    answer_name="answer_8",
)
def _one_slow_stage(answer):
    given = _expression(answer, ("p", "m", "k", "t_f", "t_b"))
    for at in slow_draws():
        truth = _slow_makespan(at)
        mine = _value(given, at)
        if mine is None or abs(mine - truth) > 1e-9 * max(1.0, truth):
            said = "no finite number" if mine is None else f"{mine:.6g}"
            where = (
                f"p = {at['p']}, m = {at['m']}, k = {at['k']}, t_f = {at['t_f']}, "
                f"t_b = {at['t_b']} (stage {at['slow']} slow)"
            )
            whole = (at["m"] + at["p"] - 1) * (at["t_f"] + at["t_b"])
            if mine is not None and abs(mine - whole * at["k"]) < 1e-9 * whole * at["k"]:
                hint = "only one stage is slow: the ramps run at the others' speed."
            elif (
                mine is not None
                and abs(mine - whole - (at["k"] - 1) * (at["t_f"] + at["t_b"])) < 1e-9 * truth
            ):
                hint = "the slow stage is on the critical path once per micro-batch, not once."
            else:
                hint = "which stage does the longest path through the grid stay on?"
            return wrong(
                f"at {where} the expression gives {said}; the simulator measures {truth:g}.",
                hint,
            )
    return right(
        f"it equals the simulator's makespan at all {len(slow_draws())} drawn points, "
        "whichever stage is slow."
    )


# ----- 1.9 a GPipe generator --------------------------------------------------------------------

GENERATOR_DRAWS = ((1, 1), (1, 5), (2, 1), (3, 4), (4, 2), (5, 9), (7, 3), (8, 16))
"""(p, m) on which 1.9's generator runs: m < p, m = 1 and p = 1 included."""


def generated_schedule(answer, **sizes: int) -> Schedule:
    """The schedule the reader's generator ``answer`` builds for ``sizes`` (p, m and v as
    keywords, passed positionally in that order): a Schedule, or one list of action strings
    per rank; anything else, or an exception, ends the check with a one-line verdict that
    names the sizes (exercises 1.9 and 2.8)."""
    where = ", ".join(f"{name} = {value}" for name, value in sizes.items())
    try:
        made = answer(*sizes.values())
    except Exception as error:  # the reader's code: any failure is a verdict, not a crash
        raise ValueError(
            f"your generator raised {type(error).__name__} at {where}: {error}"
        ) from None
    if isinstance(made, list | tuple):
        made = Schedule.from_strings([list(row) for row in made])
    if not isinstance(made, Schedule):
        raise ValueError(
            f"at {where} your generator returned {shown(made)}; it should return a "
            "Schedule or one list of action strings per rank."
        )
    return made


@exercise(
    "1.9",
    "Implement GPipe: a function of (p, m) that returns its schedule (a Schedule or one list "
    "of action strings per rank, one stage per rank); the check runs it on drawn (p, m).",
    kind="implement",
    solution="`def my_gpipe(p, m): return [[f'{s}F{j}' for j in range(m)] + "
    "[f'{s}B{j}' for j in range(m)] for s in range(p)]`: every rank runs its forwards in "
    "micro-batch order, then its backwards in the same order, so that each backward finds "
    "its gradient as early as the recurrences of section 3 allow.",
    answer_name="answer_9",
)
def _gpipe_generator(answer):
    if not callable(answer):
        return wrong(
            f"this exercise wants a function of (p, m), got {shown(answer)}.",
            "def my_gpipe(p, m): ... return rows",
        )
    for pp, mm in GENERATOR_DRAWS:
        made = generated_schedule(answer, p=pp, m=mm)
        where = f"at p = {pp}, m = {mm}"
        if (made.num_ranks, made.num_stages, made.num_microbatches) != (pp, pp, mm):
            return wrong(
                f"{where} the schedule has {made.num_ranks} ranks, {made.num_stages} stages "
                f"and {made.num_microbatches} micro-batches; GPipe has p ranks, p stages and "
                "m micro-batches."
            )
        for rank, row in enumerate(made.actions):
            kinds = [a.kind for a in row]
            if "B" in kinds and "F" in kinds[kinds.index("B") :]:
                return wrong(
                    f"{where} rank {rank} runs a backward before its last forward, as 1F1B does.",
                    "GPipe runs all forwards, then all backwards.",
                )
        for comm in (0, 0.5):
            run = simulate(made, Costs(F=1, B=2, comm=comm))  # the validator speaks first
            derived = (mm + pp - 1) * 3 + 2 * (pp - 1) * comm
            if abs(run.makespan - derived) > 1e-9:
                return wrong(
                    f"{where}, t_f = 1, t_b = 2, c = {comm} the simulator's makespan is "
                    f"{run.makespan:g}, not the derived (m+p-1)(t_f+t_b) + 2(p-1)c = "
                    f"{derived:g}.",
                    "take the micro-batches in order 0..m-1, forwards and backwards alike.",
                )
    return right(
        f"on {len(GENERATOR_DRAWS)} drawn (p, m) your schedules are valid, run all forwards "
        "first and take the derived makespan, with and without transfers."
    )


# ----- 1.10 the transfer time a bubble target allows ----------------------------------------


def target_draws() -> list[dict[str, object]]:
    """Points at which 1.10 is checked; each target is above the bubble without transfers."""
    return [
        dict(p=4, m=6, t_f=1, t_b=2, b=0.4),
        dict(p=8, m=32, t_f=1, t_b=2, b=0.2),
        dict(p=2, m=3, t_f=2, t_b=3, b=0.3),
        dict(p=6, m=20, t_f=1, t_b=1, b=0.25),
        dict(p=3, m=10, t_f=1.5, t_b=2.5, b=0.2),
    ]


@exercise(
    "1.10",
    "Derive the largest transfer time c at which GPipe's bubble fraction f stays at or "
    "below a target b: a sympy expression in p, m, t_f, t_b and b.",
    kind="derive",
    solution="Set exercise 1.6's f = (p-1)(t_f+t_b+2c) / ((m+p-1)(t_f+t_b) + 2(p-1)c) equal "
    "to b and solve for c (f grows with c): `sp.solve(sp.Eq(f, b), c)[0]`, that is "
    "`(t_f + t_b)*(b*(m + p - 1) - (p - 1)) / (2*(p - 1)*(1 - b))`. At p = 4, m = 6, "
    "t_f = 1, t_b = 2, b = 0.4 it gives c = 0.5: the simulator measures f = 0.4 there.",
    answer_name="answer_10",
)
def _largest_transfer(answer):
    given = _expression(answer, ("p", "m", "t_f", "t_b", "b"))
    for at in target_draws():
        mine = _value(given, at)
        where = f"p = {at['p']}, m = {at['m']}, t_f = {at['t_f']}, t_b = {at['t_b']}, b = {at['b']}"
        if mine is None or mine < 0:
            said = "no finite number" if mine is None else f"{mine:.4g}, a negative time"
            return wrong(
                f"at {where} the expression gives {said}.",
                "at c = 0 GPipe's f is (p-1)/(m+p-1), below every target here, so the "
                "answer is a positive time: is your f the fraction idle/total?",
            )
        costs = Costs(F=at["t_f"], B=at["t_b"], comm=mine)
        f = simulate(gpipe(at["p"], at["m"]), costs).bubble_fraction
        if abs(f - at["b"]) > 1e-9:
            ratio = simulate(gpipe(at["p"], at["m"]), costs).bubble_ratio
            hint = (
                "that c brings the bubble ratio r = idle/compute to b; the question asks "
                "for the fraction f = idle/total."
                if abs(ratio - at["b"]) < 1e-9
                else "set f with transfers (exercise 1.6) equal to b and solve for c."
            )
            side = "above" if f > at["b"] else "below"
            return wrong(
                f"at {where} the expression gives c = {mine:.4g}, where the simulator "
                f"measures f = {f:.4g}, {side} the target.",
                hint,
            )
    return right(
        f"at all {len(target_draws())} drawn points the simulator measures f = b at your c: "
        "the largest c, since f grows with c."
    )
