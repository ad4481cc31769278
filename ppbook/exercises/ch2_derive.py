"""Exercises 2.6 to 2.8 of chapter 2: derive and implement (``notebooks/02_schedules.ipynb``).

Each answer is judged by what makes it right, never by equality with ppbook's own builder:

- 2.6, 1F1B's makespan with a transfer time c, a sympy expression, must equal the critical
  path of the schedule (:func:`ppbook.critical_path.critical_path`, symbolic in t_f, t_b
  and c) at every p and m of a grid;
- 2.7, the interleaved warm-up count, must equal the forwards each rank of
  :func:`ppbook.schedules.interleaved_1f1b` (PyTorch's ScheduleInterleaved1F1B order,
  Megatron-LM's count, arXiv:2104.04473 sec. 2.2.2) runs before its first backward;
- 2.8, an interleaved-1F1B generator, must give on drawn (p, m, v) a schedule the validator
  accepts, with the looped placement, the published makespan m(F+B) + (p-1)(F+B)/v
  (:func:`ppbook.symbolic.interleaved_makespan`) in the simulator and on every rank no more
  activations than its warm-up allows.
"""

from __future__ import annotations

import random

import sympy as sp

from ppbook.checks import shown
from ppbook.costs import Costs
from ppbook.critical_path import critical_path
from ppbook.exercises import exercise, right, wrong
from ppbook.exercises.answers import expression
from ppbook.exercises.ch1_derive import generated_schedule
from ppbook.pipeline_schedule import Schedule
from ppbook.schedules import interleaved_1f1b, one_f_one_b
from ppbook.simulate import simulate
from ppbook.symbolic import interleaved_makespan
from ppbook.symbolic.symbols import c, m, p, t_b, t_f, v

_GRID = [(pp, mm) for pp in range(2, 6) for mm in range(1, 3 * pp + 1)]
"""(p, m) at which 2.6's expression must equal 1F1B's critical path."""


def _expression(answer: object, names: dict[str, sp.Symbol], what: str) -> sp.Expr:
    """The reader's sympy expression, read in the glossary's symbols ``names``."""
    return expression(answer, names, what)


def _critical(pp: int, mm: int) -> sp.Expr:
    return critical_path(one_f_one_b(pp, mm)).expr


@exercise(
    "2.6",
    "Derive 1F1B's makespan when every message between ranks takes time c: a sympy "
    "expression in p, m, t_f, t_b and c, right for every p >= 2 and m >= 1.",
    kind="derive",
    solution="Without transfers every rank's compute chain is (m+p-1)(t_f+t_b). With them, "
    "count the transfers on the critical path (`critical_path(one_f_one_b(p, m)).expr` "
    "prints them for small p and m): the fill and the drain cross 2(p-1) boundaries, and "
    "each later micro-batch adds 2 more, except one in every p, whose input is already "
    "there: 2(p-1) + 2(m-1) - 2 ceiling((m-1)/p). So "
    "`(m + p - 1)*(t_f + t_b) + 2*(p - 1 + m - 1 - sp.ceiling((m - 1)/p))*c`: 338 ms at "
    "p = 4, m = 8, F = 10, B = 20, c = 0.5 (exercise 9.3), where GPipe's count 2(p-1) "
    "gives 333.",
    answer_name="answer_6",
)
def _one_f_one_b_makespan(answer):
    names = {str(x): x for x in (p, m, t_f, t_b, c)}
    given = _expression(answer, names, "p, m, t_f, t_b and c")
    if c not in given.free_symbols:
        return wrong(
            "the expression does not depend on c: it is the makespan without transfers.",
            "each message on the critical path adds c; count them.",
        )
    for pp, mm in _GRID:
        truth = _critical(pp, mm)
        mine = sp.simplify(given.subs({p: pp, m: mm}))
        if sp.simplify(mine - truth) != 0:
            counted, held = mine.coeff(c), truth.coeff(c)
            if sp.simplify(mine.subs(c, 0) - truth.subs(c, 0)) == 0 and counted.is_number:
                return wrong(
                    f"at p = {pp}, m = {mm} the expression counts {counted} transfers; 1F1B's "
                    f"critical path holds {held}.",
                    "GPipe's 2(p-1) holds for m <= 2 only: in 1F1B's steady state a forward "
                    "and a backward wait for messages too.",
                )
            return wrong(
                f"at p = {pp}, m = {mm} the expression gives {mine}; the critical path of "
                f"one_f_one_b({pp}, {mm}) is {truth}.",
                "without transfers 1F1B takes (m+p-1)(t_f+t_b), as GPipe.",
            )
    return right(
        f"it equals 1F1B's critical path at all {len(_GRID)} points p = 2..5, m = 1..3p, "
        "symbolically in t_f, t_b and c."
    )


# ----- 2.7 the interleaved warm-up count ------------------------------------------------------

r = sp.Symbol("r", integer=True, nonnegative=True)
"""Exercise 2.7's rank symbol (0 to p-1)."""

_WARMUP_DRAWS = [(pp, vv) for pp in range(2, 6) for vv in range(2, 5)]


def warmups(schedule: Schedule) -> list[int]:
    """Each rank's warm-up: the forwards it runs before the forward that its first backward
    (B or I) follows, the start of its steady state of one forward, one backward."""
    counts = []
    for row in schedule.actions:
        kinds = [a.kind for a in row]
        first = next((k for k, kind in enumerate(kinds) if kind in "BI"), len(kinds))
        counts.append(kinds[:first].count("F") - 1)
    return counts


@exercise(
    "2.7",
    "Derive the warm-up of rank r in interleaved 1F1B (p ranks, v chunks each, m a multiple "
    "of p with m >= 2p): the forwards it runs before its steady state of one forward, one "
    "backward; a sympy expression in p, v and r.",
    kind="derive",
    solution="Count it on `interleaved_1f1b(p, 2*p, v)` (the forwards before the first "
    "backward, less the steady state's first forward) for a few p, v and r, and explain "
    "each term. (v-1)p: the first p micro-batches must pass every chunk of every rank "
    "before the last stage can run a backward, and a rank takes p micro-batches through "
    "one chunk before the next. 2(p-1-r): 2 more forwards for every rank below r that the "
    "first gradient climbs back through: `(v - 1)*p + 2*(p - 1 - r)`, Megatron-LM's count "
    "(its schedules.py), which PyTorch's ScheduleInterleaved1F1B copies. Plain 1F1B "
    "(v = 1) warms up with p-1-r. The factor 2 is Megatron-LM's choice, not forced by the "
    "makespan: at F = 1, B = 2 without transfers, (v-1)p + (p-1-r) reaches the same "
    "makespan with fewer activations (simulate it at p = 4, m = 8, v = 2).",
    answer_name="answer_7",
)
def _interleaved_warmup(answer):
    names = {"p": p, "v": v, "r": r}
    given = _expression(answer, names, "p, v and r")
    for pp, vv in _WARMUP_DRAWS:
        counts = warmups(interleaved_1f1b(pp, 2 * pp, vv))
        for rank, truth in enumerate(counts):
            mine = given.subs({p: pp, v: vv, r: rank})
            if sp.simplify(mine - truth) != 0:
                plain = (pp - 1 - rank) + (vv - 1) * pp
                hint = (
                    "that is 1F1B's p-1-r on top of (v-1)p: interleaved 1F1B adds 2 per "
                    "rank below r."
                    if sp.simplify(mine - plain) == 0
                    else "count rank r's forwards in interleaved_1f1b(p, 2p, v) before the "
                    "forward its first B follows, for a few p, v and r."
                )
                return wrong(
                    f"at p = {pp}, v = {vv}, rank {rank} the expression gives {mine}; "
                    f"interleaved_1f1b({pp}, {2 * pp}, {vv}) warms up with {truth} forwards.",
                    hint,
                )
    return right(
        f"it matches every rank of interleaved 1F1B at {len(_WARMUP_DRAWS)} (p, v) pairs, "
        "p = 2..5, v = 2..4."
    )


# ----- 2.8 an interleaved-1F1B generator --------------------------------------------------------

COSTS = Costs(F=1, B=2)


def generator_draws(seed: int = 2026) -> list[tuple[int, int, int]]:
    """(p, m, v) on which 2.8's generator runs: small corners, then random draws."""
    draws = [(2, 2, 2), (2, 4, 3), (4, 4, 2), (3, 9, 2), (4, 8, 4)]
    rng = random.Random(seed)
    while len(draws) < 12:
        pp, vv = rng.randint(2, 5), rng.randint(2, 4)
        draws.append((pp, pp * rng.randint(1, 4), vv))
    return draws


@exercise(
    "2.8",
    "Implement interleaved 1F1B: a function of (p, m, v) that returns the schedule (a "
    "Schedule or one list of action strings per rank) for any m that is a multiple of p; "
    "the check runs it on drawn (p, m, v).",
    kind="implement",
    solution="Rank r holds stages r, r+p, ..., r+(v-1)p. Its k-th forward runs chunk "
    "(k // p) % v and its k-th backward chunk v-1-((k // p) % v), each stage taking its "
    "micro-batches in order (groups of p micro-batches go through one chunk, then the next). "
    "Warm up with w = min((v-1)p + 2(p-1-r), m v) forwards (exercise 2.7), then alternate "
    "one forward and one backward, then run the backwards left. "
    "`interleaved_1f1b` in ppbook/schedules/interleaved.py is one such generator (there "
    "the group is m / max(1, m // p), PyTorch's rule, which is p for these m).",
    answer_name="answer_8",
)
def _interleaved_generator(answer):
    if not callable(answer):
        return wrong(
            f"this exercise wants a function of (p, m, v), got {shown(answer)}.",
            "def interleaved(p, m, v): ... return rows",
        )
    for pp, mm, vv in generator_draws():
        made = generated_schedule(answer, p=pp, m=mm, v=vv)
        where = f"at p = {pp}, m = {mm}, v = {vv}"
        shape = (made.num_ranks, made.num_stages, made.num_microbatches)
        if shape != (pp, pp * vv, mm):
            return wrong(
                f"{where} the schedule has {shape[0]} ranks, {shape[1]} stages and "
                f"{shape[2]} micro-batches; interleaved 1F1B has p, p v and m.",
            )
        if tuple(made.stage_to_rank) != tuple(s % pp for s in range(pp * vv)):
            return wrong(
                f"{where} stage s runs on ranks {list(made.stage_to_rank)}; interleaving "
                "loops the stages over the ranks.",
                "stage s on rank s % p.",
            )
        run = simulate(made, COSTS)  # the validator speaks if the schedule cannot run
        at = {p: pp, m: mm, v: vv, t_f: COSTS.F, t_b: COSTS.B}
        published = float(interleaved_makespan().subs(at))
        if run.makespan > published + 1e-9:
            return wrong(
                f"{where} the simulator's makespan is {run.makespan:.4g}, longer than "
                f"interleaved 1F1B's m(F+B) + (p-1)(F+B)/v = {published:.4g}.",
                "warm up with enough forwards that no rank waits in the steady state.",
            )
        for rank in range(pp):
            allowed = (min((vv - 1) * pp + 2 * (pp - 1 - rank), mm * vv) + 1) / vv
            held = run.peak_activations(rank)
            if held > allowed + 1e-9:
                return wrong(
                    f"{where} rank {rank} holds {held:.4g} micro-batch activations of a full "
                    f"stage; interleaved 1F1B holds at most {allowed:.4g} (its warm-up plus "
                    "one chunk).",
                    "after the warm-up, alternate one forward and one backward.",
                )
    return right(
        f"on {len(generator_draws())} drawn (p, m, v) your schedules are valid, loop the stages "
        "over the ranks, reach the published makespan and hold no more than interleaved 1F1B."
    )
