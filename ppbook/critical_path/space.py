"""The pass times a makespan depends on, the conditions stated on them, and linear forms.

A path through a schedule's dependency graph has a length that is a linear form in the
pass times with nonnegative coefficients (``3 t_f + 2 t_i + t_w + 2 c``); a makespan is
the ``Max`` of such forms. :class:`CostSpace` holds the symbols (ppbook's glossary,
:mod:`ppbook.symbolic.symbols`), the conditions a reader states ("W <= F", "I >= 2W",
"I = F"), and turns forms into sympy and back:

- an equality removes a symbol (``I = F`` writes every ``t_i`` as ``t_f``);
- the inequalities, with every time >= 0, make a :class:`~.cones.Cone`; one form
  dominates another under the conditions exactly when it is at least as long at each of
  the cone's extreme rays, so :meth:`CostSpace.key` (the form's values at the rays)
  turns dominance into a comparison of integer tuples, coordinate by coordinate.

Strict and non-strict inequalities are read alike (``<`` as ``<=``): a makespan is
continuous in the costs, so a formula that holds on a region holds on its boundary.
"""

from __future__ import annotations

from fractions import Fraction

import sympy as sp
from sympy.parsing.sympy_parser import (
    implicit_multiplication,
    parse_expr,
    standard_transformations,
)

from ppbook.checks import shown
from ppbook.critical_path.cones import Cone, dot, primitive
from ppbook.symbolic.symbols import c, t_b, t_f, t_fb, t_i, t_w

NAMES = {"F": t_f, "B": t_b, "I": t_i, "W": t_w, "FB": t_fb, "c": c}
"""How a condition may name each cost: PyTorch's kind letters, or the glossary's symbol."""

_LOCALS = NAMES | {str(s): s for s in NAMES.values()}
_PARSING = (*standard_transformations, implicit_multiplication)


def parse_conditions(conditions) -> tuple[sp.Basic, ...]:
    """Conditions as sympy relationals: from strings ("W <= F", "I >= 2W", "I = F") or
    sympy relationals in the glossary's symbols; one string or a sequence of them."""
    if isinstance(conditions, str | sp.Basic):
        conditions = (conditions,)
    parsed = []
    for condition in conditions:
        text = condition
        if isinstance(condition, str):
            text = condition.strip()
            if text.count("=") == 1 and not any(op in text for op in "<>!"):
                text = "Eq({}, {})".format(*text.split("="))
            try:
                condition = parse_expr(text, local_dict=dict(_LOCALS), transformations=_PARSING)
            except (SyntaxError, TypeError, ValueError, sp.SympifyError):
                condition = None
        if condition is sp.true:
            continue  # "F >= 0": true of every cost already
        if condition is sp.false:
            raise ValueError(
                f"the condition {shown(text)} holds for no positive costs: state one that "
                "some costs meet, such as 'W <= F'"
            )
        if not isinstance(condition, sp.core.relational.Relational) or isinstance(
            condition, sp.core.relational.Unequality
        ):
            raise ValueError(
                f"cannot read the condition {shown(condition)}: write a comparison of costs "
                "such as 'W <= F', 'I >= 2W' or 'I = F' (costs F, B, I, W, FB, c)"
            )
        parsed.append(condition)
    return tuple(parsed)


class CostSpace:
    """The symbols ``variables`` of a makespan, under ``conditions`` on them.

    ``variables`` are the symbols a path length is written in (its forms are tuples of
    coefficients in that order). An equality condition removes one symbol: the
    remaining ones are :attr:`free`, and :meth:`reduce` writes a form in them. The
    inequalities (and every cost >= 0) make :attr:`cone`, over :attr:`free`.
    """

    def __init__(self, variables: tuple[sp.Symbol, ...], conditions=()):
        self.variables = variables
        self.conditions = parse_conditions(conditions)
        replace: dict[sp.Symbol, sp.Expr] = {}
        if t_b not in variables and {t_i, t_w} <= set(variables):
            replace[t_b] = t_i + t_w  # an unsplit backward is I + W
        inequalities = []
        for condition in self.conditions:
            difference = sp.expand((condition.lhs - condition.rhs).subs(replace))
            self._check_linear(condition, difference)
            if isinstance(condition, sp.Eq):
                if difference == 0:
                    continue
                lone = condition.lhs.subs(replace)
                if lone not in variables or difference.coeff(lone) == 0:
                    lone = next(v for v in variables if difference.coeff(v) != 0)
                solved = sp.solve(difference, lone)[0]
                replace = {k: sp.expand(e.subs(lone, solved)) for k, e in replace.items()}
                replace[lone] = solved
            else:
                sign = 1 if isinstance(condition, sp.GreaterThan | sp.StrictGreaterThan) else -1
                inequalities.append(sign * difference)
        self.free = tuple(v for v in variables if v not in replace)
        # each variable as a form in the free ones; eliminated ones must stay >= 0
        self.embed = [self._form(replace.get(v, v)) for v in variables]
        inequalities += [replace[v] for v in variables if v in replace]
        self.cone = Cone(
            len(self.free), [self._form(sp.expand(e.subs(replace))) for e in inequalities]
        )
        if not self.cone.rays:
            raise ValueError(
                f"the conditions {shown(self.conditions)} leave no positive costs: "
                "state conditions that some costs > 0 meet"
            )
        if self.cone.rank < len(self.free):
            raise ValueError(
                f"the conditions {shown(self.conditions)} force an equality between costs: "
                "state it as one, such as 'I = F'"
            )
        self.rays = tuple(primitive([dot(e, r) for e in self.embed]) for r in self.cone.rays)
        self._replace = replace

    def _check_linear(self, condition, difference) -> None:
        if not _linear(difference, self.variables):
            names = ", ".join(map(str, self.variables))
            hint = (
                " (split_backward=True writes B as t_i + t_w)"
                if t_b in self.variables and difference.free_symbols & {t_i, t_w}
                else ""
            )
            raise ValueError(
                f"the condition {shown(condition)} must compare multiples of the costs "
                f"this makespan depends on ({names}), with no constant term{hint}"
            )

    def _form(self, expr: sp.Expr) -> tuple[Fraction, ...]:
        """A linear expression in the free symbols as a tuple of coefficients."""
        return tuple(Fraction(str(sp.expand(expr).coeff(v))) for v in self.free)

    def key(self, form) -> tuple:
        """The form's values at the cone's extreme rays (in :attr:`variables`' order):
        one form dominates another under the conditions iff its key is >= at every place."""
        return tuple(dot(form, r) for r in self.rays)

    def reduce(self, form) -> tuple[Fraction, ...]:
        """A form in :attr:`variables` written in :attr:`free` (equalities substituted)."""
        return tuple(
            sum((x * e[j] for x, e in zip(form, self.embed, strict=True)), Fraction(0))
            for j in range(len(self.free))
        )

    def expr(self, free_form) -> sp.Expr:
        """A form in :attr:`free` as a sympy expression."""
        return sp.Add(
            *(
                sp.Rational(x.numerator, x.denominator) * v
                for x, v in zip(free_form, self.free, strict=True)
            )
        )

    def forms_of(self, expr: sp.Expr, at: dict | None = None) -> list[tuple[Fraction, ...]]:
        """``expr``, a sum of positive multiples of ``Max``-es of linear forms, as the list
        of forms (in :attr:`free`) whose maximum it is; ``at`` substitutes numbers first
        (``p``, ``m``, ``v``). Raises ValueError for anything else (``Min``, a constant)."""
        expr = sp.sympify(expr).subs(at or {}).subs(self._replace)
        unknown = expr.free_symbols - set(self.free)
        if unknown:
            raise ValueError(
                f"the expression {shown(expr)} names {sorted(map(str, unknown))}, but the "
                f"makespan depends only on {', '.join(map(str, self.free))}"
            )
        return [self._form(e) for e in _pieces(sp.expand(expr), expr)]

    def relation(self, inequality) -> sp.Basic:
        """``h.x >= 0`` over :attr:`free` as a readable relation: ``2*t_w <= t_i``."""
        small = sp.Add(*(-h * v for h, v in zip(inequality, self.free, strict=True) if h < 0))
        large = sp.Add(*(h * v for h, v in zip(inequality, self.free, strict=True) if h > 0))
        return sp.Le(small, large, evaluate=False)


def _pieces(expr: sp.Expr, whole: sp.Expr) -> list[sp.Expr]:
    """Linear expressions whose maximum is ``expr`` (Max distributed over + and * k > 0)."""
    if isinstance(expr, sp.Max):
        return [piece for arg in expr.args for piece in _pieces(arg, whole)]
    if isinstance(expr, sp.Add):
        sums = [sp.S.Zero]
        for arg in expr.args:
            sums = [a + b for a in sums for b in _pieces(arg, whole)]
        return sums
    if isinstance(expr, sp.Mul) and expr.has(sp.Max):
        number, rest = expr.as_coeff_Mul()
        if number > 0 and not isinstance(rest, sp.Mul):
            return [number * piece for piece in _pieces(rest, whole)]
    elif expr.is_number and expr != 0:
        raise ValueError(
            f"{shown(whole)} has a constant term {expr}: a makespan here is a sum of "
            "pass and transfer times (write times as multiples of the costs)"
        )
    elif _linear(expr, expr.free_symbols):
        return [expr]
    raise ValueError(
        f"cannot read {shown(whole)} as a maximum of linear forms in the costs: "
        "use sums, positive multiples and Max of multiples of the costs"
    )


def _linear(expr: sp.Expr, variables) -> bool:
    """Whether ``expr`` is a linear form in ``variables``: no constant, no other symbol."""
    if expr == 0:
        return True
    if not expr.free_symbols <= set(variables) or not expr.is_polynomial(*variables):
        return False
    poly = sp.Poly(expr, *variables)
    return poly.total_degree() == 1 and poly.coeff_monomial(1) == 0
