"""Where each path is the longest, and where a closed form equals the critical path.

A makespan ``Max(t_1, ..., t_k)`` of linear forms is linear on each region of the costs
where one form is the largest: the region of ``t`` is the cone of the stated conditions
cut by ``t >= t'`` for every other form ``t'`` (:func:`pieces`). Its irredundant
inequalities (the cone's facets, :meth:`.cones.Cone.facets`), less those the stated
conditions already imply, are where the closed form changes: for one ZB-H2 step under
W <= F, two pieces, m(F+I+W) + (p-1)(F+I-2W) where I >= 2W and m(F+I+W) + (p-1)F where
I <= 2W.

A formula (itself a ``Max`` of linear forms, or one form) equals the critical path on
the parts of those regions where it is the same form and no larger
(:func:`matching_region`); when those parts make one cone, it is given as one
conjunction of conditions.
"""

from __future__ import annotations

from typing import NamedTuple

import sympy as sp

from ppbook.critical_path.cones import Cone, dot, hull
from ppbook.critical_path.space import CostSpace


class Piece(NamedTuple):
    """One linear form of a makespan and the condition under which it is the makespan."""

    expr: sp.Expr
    condition: sp.Basic  # a conjunction of relations (sympy.true: under the stated conditions)


def _difference(a, b) -> tuple:
    return tuple(x - y for x, y in zip(a, b, strict=True))


def _region(inside: Cone, form, others) -> Cone | None:
    """Where ``form`` is >= each of ``others`` within ``inside``, if full-dimensional."""
    cone = inside & Cone(inside.dimension, [_difference(form, o) for o in others if o != form])
    return cone if cone.rays and cone.rank == inside.dimension else None


def undominated(space: CostSpace, forms) -> list:
    """The forms (over ``space.free``) that no other one dominates under the conditions;
    of forms equal on the whole cone, the first."""
    forms = list(dict.fromkeys(tuple(f) for f in forms))
    keys = [tuple(dot(f, r) for r in space.cone.rays) for f in forms]
    return [
        f
        for i, (f, k) in enumerate(zip(forms, keys, strict=True))
        if not any(
            all(a >= b for a, b in zip(o, k, strict=True)) and (o != k or j < i)
            for j, o in enumerate(keys)
            if j != i
        )
    ]


def condition_of(space: CostSpace, cone: Cone) -> sp.Basic:
    """The facets of ``cone`` that the stated conditions do not imply, as a conjunction."""
    new = [h for h in cone.facets() if not space.cone.holds(h)]
    return sp.And(*(space.relation(h) for h in new))


def pieces(space: CostSpace, forms) -> tuple[Piece, ...]:
    """Each form with the region (beyond the stated conditions) where it is the Max;
    forms that are the Max only on a boundary are left out."""
    found = []
    for form in forms:
        region = _region(space.cone, form, forms)
        if region is not None:
            found.append(Piece(space.expr(form), condition_of(space, region)))
    return tuple(sorted(found, key=lambda piece: sp.default_sort_key(piece.expr)))


def _matches(space: CostSpace, inside: Cone, forms, formula) -> list[Cone] | None:
    """The parts of ``inside`` where Max(formula) equals Max(forms), each a cone; None
    when they cover ``inside`` entirely."""
    parts, whole = [], True
    for form in forms:
        region = _region(inside, form, forms)
        if region is None:
            continue
        part = _region(region, form, formula) if form in formula else None
        whole = (
            whole and form in formula and all(region.holds(_difference(form, g)) for g in formula)
        )
        if part is not None:
            parts.append(part)
    return None if whole else parts


def matching_region(space: CostSpace, forms, formula) -> sp.Basic:
    """Where the formula ``Max(formula)`` equals the makespan ``Max(forms)``, beyond the
    stated conditions: ``sympy.true`` everywhere, ``sympy.false`` nowhere (but on
    boundaries), else a conjunction of relations, or a disjunction of them when the
    region is not convex."""
    formula = [tuple(g) for g in formula]
    parts = _matches(space, space.cone, forms, formula)
    if parts is None:
        return sp.true
    if len(parts) > 1:
        joined = space.cone & hull(space.cone.dimension, [r for p in parts for r in p.rays])
        if _matches(space, joined, forms, formula) is None:
            return condition_of(space, joined)
    return sp.Or(*(condition_of(space, part) for part in parts))
