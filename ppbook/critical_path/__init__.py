"""A schedule's critical path with symbols for the costs: its makespan as a ``Max`` (chapter 4).

Run a schedule's dependency graph (:mod:`ppbook.dependencies`' rule, as the simulator
does) with sympy symbols for the pass times, for given p and m: an action starts at the
Max of its rank's previous end and each dependency's end (plus the transfer time ``c``
when the dependency crosses ranks); the makespan is the Max of the last ends. The result
is exact, an expression in the glossary's symbols (:mod:`ppbook.symbolic.symbols`)::

    >>> from ppbook.schedules import zb_h2
    >>> makespan_expression(zb_h2(2, 3), transfer=False)
    Max(2*t_f + 4*t_i + 3*t_w, 4*t_f + 3*t_i + 3*t_w, 4*t_f + 4*t_i + t_w)
    >>> makespan_expression(zb_h2(2, 3), "W <= F", transfer=False)
    Max(4*t_f + 3*t_i + 3*t_w, 4*t_f + 4*t_i + t_w)
    >>> for piece in pieces(zb_h2(2, 3), "W <= F", transfer=False):
    ...     print(piece.expr, "where", piece.condition)
    4*t_f + 3*t_i + 3*t_w where t_i <= 2*t_w
    4*t_f + 4*t_i + t_w where 2*t_w <= t_i

With p = 2, m = 3 those are m(F+I+W) + (p-1)F and m(F+I+W) + (p-1)(F+I-2W): ZB-H2's
single-step makespan changes at I = 2W. :func:`formula_conditions` finds where a
published closed form (a :class:`ppbook.symbolic.Formula` or any expression in p, m, v
and the costs) equals the critical path, and :func:`formula_conditions_on_grid` does it
for a grid of p and m. To put numbers in, use ``expr.xreplace({t_f: 1, ...})``:
``subs`` on a long ``Max`` compares its arguments symbolically and is slow.

Costs follow ppbook's convention (:mod:`ppbook.costs`): each symbol is the pass time of
one device's share of the model, a chunk pass takes it times the schedule's
:attr:`~ppbook.pipeline_schedule.Schedule.chunk_share` (``t_f/2`` for ZB-V), and the transfer
time ``c`` is not scaled. Symbols: ``t_f``; ``t_i`` and ``t_w`` for a schedule that
splits its backward (an unsplit ``B`` in it costs ``t_i + t_w``), else ``t_b``;
``t_fb`` for an overlapped forward-and-backward pair (DualPipe's F&B; with
``overlap="F+B"`` a pair costs its two passes, as the simulator without ``Costs.FB``);
``c`` unless ``transfer=False``. Conditions are homogeneous linear comparisons of costs,
as strings (``"W <= F"``, ``"I >= 2W"``, ``"I = F"``, in the letters F, B, I, W, FB, c)
or sympy relations in the glossary's symbols; every cost is >= 0.

How expressions stay small: after every Max, a path length that another one dominates
under the conditions is dropped. Whether one linear form dominates another on the cone
of costs that meet the conditions is decided exactly at the cone's extreme rays
(:mod:`.cones`): the same as substituting a parametrisation such as F = W + a,
I = 2W + b with a, b >= 0 and comparing coefficients, for any set of conditions. At the
end, only the path lengths that are the longest somewhere (on a region of costs of full
dimension) are kept (:func:`.regions.envelope`): the ``Max`` has no needless argument.

Sizes (measured on one shared CPU core, with ``c`` / with ``transfer=False``): ZB-H2 at
p = 4, m = 8 takes about 0.1 s / 0.02 s; ZB-H1 and ZB-H2 at p = 8, m = 32 about 3 s /
0.4 s; ZB-V at p = 4, m = 8 about 1 s / 0.1 s, at p = 4, m = 16 about 7 s / 0.2 s;
DualPipe at p = 8, m = 32 about 6 s / 2 s; DualPipeV at p = 4, m = 8 about 5 s / 1.5 s.
The work grows with the number of actions times the number of competing path lengths,
which grows with p, fastest for V-shaped schedules with transfers; conditions such as
"W <= F" cut it. Imports sympy and the schedule layer; ``import ppbook`` does not
import it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import lru_cache

import sympy as sp

from ppbook.critical_path.regions import Piece, envelope, matching_region
from ppbook.critical_path.regions import pieces as _pieces
from ppbook.critical_path.run import path_lengths, variables_of
from ppbook.critical_path.space import NAMES, CostSpace, parse_conditions
from ppbook.pipeline_schedule import Schedule
from ppbook.symbolic import Formula, formulas
from ppbook.symbolic.symbols import c, m, p, t_fb, v

_OVERLAPS = ("FB", "F+B")


class Makespan:
    """A schedule's makespan as the Max of its longest paths, under stated conditions.

    ``terms`` are the lengths (linear forms in ``symbols``) of the paths that are the
    longest on some region of the costs that meet ``conditions`` (of full dimension);
    ``expr`` is their Max. ``space`` is the :class:`~.space.CostSpace` the forms live in
    (``forms``: their coefficients).
    """

    def __init__(self, schedule: Schedule, space: CostSpace, forms):
        self.schedule_name = schedule.name
        self.num_ranks = schedule.num_ranks
        self.num_microbatches = schedule.num_microbatches
        self.chunk_share = _chunk_share(schedule)
        self.space = space
        reduced = [space.reduce(f) for f in forms]
        self.forms = tuple(f for f, _ in envelope(space.cone, reduced))
        self.symbols = space.free
        self.conditions = space.conditions
        self.terms = tuple(space.expr(f) for f in self.forms)

    @property
    def expr(self) -> sp.Expr:
        """The makespan: ``Max`` of :attr:`terms` (the one term itself when there is one)."""
        return _max_of(self.terms)

    def __repr__(self) -> str:
        return (
            f"Makespan({self.schedule_name}, p={self.num_ranks}, m={self.num_microbatches}: "
            f"{self.expr})"
        )


def critical_path(
    schedule: Schedule,
    conditions=(),
    *,
    transfer: bool = True,
    split_backward: bool | None = None,
    overlap: str = "FB",
) -> Makespan:
    """The :class:`Makespan` of ``schedule`` with symbolic costs (module docstring).

    ``conditions``: comparisons of costs the expression is simplified under. ``transfer``:
    whether each dependency across ranks costs ``c``. ``split_backward``: write an
    unsplit backward as ``t_i + t_w`` (True) or ``t_b`` (False); default, as the schedule.
    ``overlap``: an overlapped pair costs ``t_fb`` ("FB") or its two passes ("F+B").
    Results are cached.
    """
    if not isinstance(schedule, Schedule):
        raise ValueError(
            f"expected a ppbook.schedule.Schedule, got {type(schedule).__name__}; "
            "build one with ppbook.schedules.build"
        )
    if split_backward not in (None, True, False):
        raise ValueError(f"split_backward must be None, True or False, got {split_backward!r}")
    if overlap not in _OVERLAPS:
        raise ValueError(f"overlap must be 'FB' or 'F+B', got {overlap!r}")
    return _critical_path(
        schedule, parse_conditions(conditions), bool(transfer), split_backward, overlap
    )


@lru_cache(maxsize=256)
def _critical_path(schedule, conditions, transfer, split_backward, overlap) -> Makespan:
    options = {"transfer": transfer, "split_backward": split_backward, "overlap": overlap}
    space = CostSpace(variables_of(schedule, **options), conditions)
    return Makespan(schedule, space, path_lengths(schedule, space))


def makespan_expression(schedule: Schedule, conditions=(), **options) -> sp.Expr:
    """The makespan of ``schedule`` as a sympy expression with ``Max``, simplified under
    ``conditions``; ``options`` as :func:`critical_path` (``transfer``, ...)."""
    return critical_path(schedule, conditions, **options).expr


def simplify_under(expr: sp.Expr, conditions=()) -> sp.Expr:
    """``expr``, a Max of linear forms in the costs (sums and positive multiples of them
    too), with every form that is the Max nowhere under ``conditions`` dropped: under
    "W <= F" and "I >= 2W", ``Max(4*t_f + 4*t_i + t_w, 4*t_f + 3*t_i + 3*t_w)`` is
    ``4*t_f + 4*t_i + t_w``. An equality condition substitutes (``"I = F"``)."""
    space = _space_of(expr, conditions)
    return _max_of([space.expr(f) for f, _ in envelope(space.cone, space.forms_of(expr))])


def pieces(what, conditions=(), **options) -> tuple[Piece, ...]:
    """Where the makespan changes: each term with the condition under which it is the
    makespan (beyond ``conditions``). ``what``: a schedule (``options`` as
    :func:`critical_path`), a :class:`Makespan`, or a Max of linear forms in the costs."""
    if isinstance(what, Schedule):
        what = critical_path(what, conditions, **options)
    if isinstance(what, Makespan):
        return _pieces(what.space, what.forms)
    space = _space_of(what, conditions)
    return _pieces(space, space.forms_of(what))


def formula_conditions(formula, schedule: Schedule, conditions=(), **options) -> sp.Basic:
    """Where ``formula`` equals the critical path of ``schedule``, beyond ``conditions``.

    ``formula``: a :class:`ppbook.symbolic.Formula`, its name in
    :func:`ppbook.symbolic.formulas`, or an expression in ``p``, ``m``, ``v`` and the
    costs (``t_b`` reads ``t_i + t_w`` for a split schedule), with ``Max`` allowed.
    ``p`` is the schedule's ranks, ``m`` its micro-batches, ``v`` its chunks per rank.
    Without ``c`` in the formula the transfer time is taken as 0. A record's own
    conditions on the costs are not assumed: they are what this finds. Returns ``sympy.true``
    (everywhere), a conjunction of relations such as ``(t_w <= t_f) & (t_w <= t_i)``, a
    disjunction of them, or ``sympy.false`` (nowhere but on boundaries).
    """
    expr = _formula_expr(formula)
    options.setdefault("transfer", c in expr.free_symbols)
    options.setdefault("overlap", "FB" if t_fb in expr.free_symbols else "F+B")
    makespan = critical_path(schedule, conditions, **options)
    at = {p: makespan.num_ranks, m: makespan.num_microbatches, v: 1 / makespan.chunk_share}
    return matching_region(makespan.space, makespan.forms, makespan.space.forms_of(expr, at))


def formula_conditions_on_grid(
    formula,
    schedules: str | Callable[[int, int], Schedule],
    grid: Iterable[tuple[int, int]],
    conditions=(),
    **options,
) -> dict[tuple[int, int], sp.Basic]:
    """:func:`formula_conditions` at each ``(p, m)`` of ``grid``, by ``(p, m)``.

    ``schedules``: a name for :func:`ppbook.schedules.build`, or a function of (p, m)
    returning the schedule. Points where a :class:`ppbook.symbolic.Formula`'s own
    conditions on p, m and v refuse the counts (ZB-H1's m >= p) are left out of the
    result.
    """
    from ppbook.schedules import build

    record = _record(formula)
    counts = [cond for cond, _ in getattr(record, "requires", ()) if cond.free_symbols <= {p, m, v}]
    found = {}
    for num_stages, num_microbatches in grid:
        at = {p: num_stages, m: num_microbatches}
        if any(cond.subs(at) == sp.false for cond in counts):
            continue  # the formula does not claim these counts (before building them)
        schedule = (
            build(schedules, num_stages, num_microbatches)
            if isinstance(schedules, str)
            else schedules(num_stages, num_microbatches)
        )
        at[v] = 1 / _chunk_share(schedule)
        if all(bool(cond.subs(at)) for cond in counts):
            key = (num_stages, num_microbatches)
            found[key] = formula_conditions(record, schedule, conditions, **options)
    return found


def _record(formula):
    """A :class:`~ppbook.symbolic.Formula` by name, or ``formula`` itself."""
    if not isinstance(formula, str):
        return formula
    if formula not in formulas():
        raise ValueError(
            f"unknown formula {formula!r}; choose a name of ppbook.symbolic.formulas(), "
            "or pass an expression"
        )
    return formulas()[formula]


def _formula_expr(formula) -> sp.Expr:
    formula = _record(formula)
    return formula.expr if isinstance(formula, Formula) else sp.sympify(formula)


def _chunk_share(schedule: Schedule) -> sp.Rational:
    """:attr:`~ppbook.pipeline_schedule.Schedule.chunk_share`, exactly: 1/v."""
    return sp.Rational(len(set(schedule.stage_to_rank)), len(schedule.route(0)))


def _space_of(expr, conditions) -> CostSpace:
    """The cost space of an expression's own symbols and those its conditions name."""
    named = set(sp.sympify(expr).free_symbols)
    for condition in parse_conditions(conditions):
        named |= condition.free_symbols
    return CostSpace(tuple(s for s in NAMES.values() if s in named), conditions)


def _max_of(terms) -> sp.Expr:
    """``Max`` of linear forms, in sympy's order, unevaluated (none dominates another)."""
    terms = list(dict.fromkeys(terms))
    if len(terms) == 1:
        return terms[0]
    return sp.Max(*sorted(terms, key=sp.default_sort_key), evaluate=False)


__all__ = [
    "Makespan",
    "Piece",
    "critical_path",
    "formula_conditions",
    "formula_conditions_on_grid",
    "makespan_expression",
    "pieces",
    "simplify_under",
]
