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

from fractions import Fraction
from math import lcm
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
    cone = inside
    for other in others:
        if other != form:
            cone = cone.cut(_difference(form, other))
    return cone if cone.rays and cone.rank == inside.dimension else None


def envelope(inside: Cone, forms) -> list[tuple[tuple, Cone]]:
    """The forms that are the Max of ``forms`` on a full-dimensional part of ``inside``
    (a full-dimensional cone), each with that part.

    Few forms of a long Max are ever the largest, so they are found from the top: with
    ``top`` the forms found so far, each one's region within ``top`` is computed, and a
    form larger than ``top``'s Max at one of those regions' rays joins ``top``. When no
    ray shows one, ``Max(top)`` is ``Max(forms)`` on the whole of ``inside`` (each region
    is spanned by its rays, and the forms are linear), and the regions are the pieces.
    """
    originals = list(dict.fromkeys(tuple(f) for f in forms))
    scale = lcm(*(Fraction(x).denominator for f in originals for x in f))
    ints = [tuple(int(x * scale) for x in f) for f in originals]  # same order, integers

    def best(x) -> int:
        return max(range(len(ints)), key=lambda k: (dot(ints[k], x), ints[k]))

    first = best([sum(xs) for xs in zip(*inside.rays, strict=True)])  # an interior point
    regions = {first: inside}  # form index -> where it is the Max of the forms in regions
    checked: set = set()  # rays where no form beats the Max of those found
    while True:
        beyond = None
        for a, region in regions.items():
            for r in region.rays:
                if r not in checked:
                    top = best(r)
                    if dot(ints[top], r) > dot(ints[a], r):
                        beyond = top
                        break
                    checked.add(r)
            if beyond is not None:
                break
        if beyond is None:
            found = [(originals[a], region) for a, region in regions.items()]
            return [(f, region) for f, region in found if region.rank == inside.dimension]
        new = inside
        for a in list(regions):
            new = new.cut(_difference(ints[beyond], ints[a]))
            regions[a] = regions[a].cut(_difference(ints[a], ints[beyond]))
        regions[beyond] = new


def condition_of(space: CostSpace, cone: Cone) -> sp.Basic:
    """The facets of ``cone`` that the stated conditions do not imply, as a conjunction."""
    new = [h for h in cone.facets() if not space.cone.holds(h)]
    return sp.And(*(space.relation(h) for h in new))


def pieces(space: CostSpace, forms) -> tuple[Piece, ...]:
    """Each form that is the Max on a full-dimensional region of the stated conditions'
    cone, with that region (beyond the stated conditions), in sympy's order of forms."""
    found = [Piece(space.expr(a), condition_of(space, r)) for a, r in envelope(space.cone, forms)]
    return tuple(sorted(found, key=lambda piece: sp.default_sort_key(piece.expr)))


def _matches(inside: Cone, forms, formula) -> list[Cone] | None:
    """The parts of ``inside`` where Max(formula) equals Max(forms), each a cone; None
    when they cover ``inside`` entirely."""
    parts, whole = [], True
    for form, region in envelope(inside, forms):
        whole = (
            whole and form in formula and all(region.holds(_difference(form, g)) for g in formula)
        )
        part = _region(region, form, formula) if form in formula else None
        if part is not None:
            parts.append(part)
    return None if whole else parts


def matching_region(space: CostSpace, forms, formula) -> sp.Basic:
    """Where the formula ``Max(formula)`` equals the makespan ``Max(forms)``, beyond the
    stated conditions: ``sympy.true`` everywhere, ``sympy.false`` nowhere (but on
    boundaries), else a conjunction of relations, or a disjunction of them when the
    region is not convex."""
    formula = [tuple(g) for g in formula]
    parts = _matches(space.cone, forms, formula)
    if parts is None:
        return sp.true
    if len(parts) > 1:
        joined = space.cone & hull(space.cone.dimension, [r for p in parts for r in p.rays])
        if _matches(joined, forms, formula) is None:
            return condition_of(space, joined)
    return sp.Or(*(condition_of(space, part) for part in parts))
