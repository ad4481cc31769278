"""Exact polyhedral cones of pass times, for deciding which path through a schedule is longest.

Costs are nonnegative, and every condition on them that this package states ("W <= F",
"I >= 2W") is a homogeneous linear inequality, so a set of conditions is a polyhedral
cone ``{x >= 0 : h.x >= 0 for each condition h}``. A pointed cone is the set of
nonnegative combinations of its extreme rays, which gives the one test everything here
rests on: a linear form is >= 0 on the whole cone exactly when it is >= 0 on every
extreme ray. So one path's length dominates another's under the conditions exactly when
it is at least as long at every ray.

The rays come from the double description method (Motzkin et al. 1953; Fukuda and
Prodon 1996, "Double description method revisited"): start from the orthant's unit
vectors, add one inequality at a time, keep the rays on its side and combine each
adjacent pair across it. All arithmetic is exact (integers and fractions), so no
tolerance decides anything.
"""

from __future__ import annotations

from fractions import Fraction
from functools import cached_property
from math import gcd, lcm

Vector = tuple[int, ...]


def primitive(vector) -> Vector:
    """``vector`` (integers or fractions) scaled to coprime integers, same direction."""
    scale = lcm(*(Fraction(x).denominator for x in vector))
    ints = [int(Fraction(x) * scale) for x in vector]
    common = gcd(*ints)
    return tuple(x // common for x in ints) if common else tuple(ints)


def dot(a, b) -> int | Fraction:
    """The inner product of two vectors of the same length."""
    return sum(x * y for x, y in zip(a, b, strict=True))


def rank(vectors) -> int:
    """The rank of a list of integer vectors, by fraction-free Gaussian elimination."""
    rows = [list(v) for v in vectors]
    found = 0
    for col in range(len(rows[0]) if rows else 0):
        pivot = next((r for r in range(found, len(rows)) if rows[r][col]), None)
        if pivot is None:
            continue
        rows[found], rows[pivot] = rows[pivot], rows[found]
        top = rows[found]
        for r in range(found + 1, len(rows)):
            if rows[r][col]:
                a, b = top[col], rows[r][col]
                rows[r] = [a * x - b * y for x, y in zip(rows[r], top, strict=True)]
        found += 1
    return found


class Cone:
    """The cone ``{x in R^d : x >= 0, h.x >= 0 for h in inequalities}``, exactly.

    ``inequalities`` are integer (or fraction) vectors of length ``dimension``. The cone
    is pointed (it lies in the orthant), so :attr:`rays` describe it completely.
    """

    def __init__(self, dimension: int, inequalities=()):
        self.dimension = dimension
        units = [tuple(int(i == k) for i in range(dimension)) for k in range(dimension)]
        self.inequalities = tuple(dict.fromkeys(units + [primitive(h) for h in inequalities]))

    @cached_property
    def rays(self) -> tuple[Vector, ...]:
        """The extreme rays, as coprime integer vectors (none when the cone is {0})."""
        d = self.dimension
        processed = self.inequalities[:d]  # the orthant: x_k >= 0, its rays the unit vectors
        rays = processed
        for h in self.inequalities[d:]:
            rays = _cut(rays, processed, h, d)
            processed = (*processed, h)
        return rays

    def cut(self, inequality) -> Cone:
        """This cone cut by ``inequality.x >= 0``, its rays found from this cone's; the
        cone itself when every ray already meets the inequality."""
        h = primitive(inequality)
        if all(dot(h, r) >= 0 for r in self.rays):
            return self
        cone = Cone(self.dimension)
        cone.inequalities = (*self.inequalities, h)
        cone.rays = _cut(self.rays, self.inequalities, h, self.dimension)
        return cone

    @cached_property
    def rank(self) -> int:
        """The dimension of the cone: the rank of its rays (``dimension`` when full)."""
        return rank(self.rays) if self.rays else 0

    def holds(self, form) -> bool:
        """Whether the linear form is >= 0 everywhere on the cone."""
        return all(dot(form, r) >= 0 for r in self.rays)

    def facets(self) -> tuple[Vector, ...]:
        """The irredundant inequalities of a full-dimensional cone, as coprime vectors.

        An inequality is a facet when the rays on its hyperplane span ``dimension - 1``
        dimensions; the others are implied by the facets. Raises ValueError for a cone of
        lower dimension, whose description is not unique.
        """
        if self.rank < self.dimension:
            raise ValueError(
                f"the cone has dimension {self.rank}, not {self.dimension}: its conditions "
                "force an equality between costs"
            )
        return tuple(
            h
            for h in self.inequalities
            if rank([r for r in self.rays if dot(h, r) == 0]) == self.dimension - 1
        )

    def __and__(self, other: Cone) -> Cone:
        cone = self
        for h in other.inequalities[other.dimension :]:
            cone = cone.cut(h)
        return cone


def hull(dimension: int, rays) -> Cone:
    """The smallest cone holding ``rays`` (vectors >= 0), described by inequalities.

    Its inequalities are the extreme rays of the dual cone ``{h : h.r >= 0 for each r}``.
    The dual is not inside the orthant, so it is found as the cone of pairs (h+, h-) with
    h = h+ - h-, which is, in the orthant of dimension 2d, what :class:`Cone` handles.
    """
    lifted = [tuple(r) + tuple(-x for x in r) for r in rays]
    dual = Cone(2 * dimension, lifted)
    return Cone(dimension, [h for h in (_fold(g, dimension) for g in dual.rays) if any(h)])


def _fold(h: Vector, d: int) -> Vector:
    """The inequality h+ - h- of a lifted vector (h+, h-)."""
    return tuple(a - b for a, b in zip(h[:d], h[d:], strict=True))


def _cut(rays, inequalities, h, d: int) -> tuple[Vector, ...]:
    """One step of the double description method: the rays of the cone with extreme rays
    ``rays`` and inequalities ``inequalities``, cut by ``h.x >= 0``."""
    values = [dot(h, r) for r in rays]
    keep = [r for r, value in zip(rays, values, strict=True) if value >= 0]
    ups = [(r, value) for r, value in zip(rays, values, strict=True) if value > 0]
    downs = [(r, value) for r, value in zip(rays, values, strict=True) if value < 0]
    for up, a in ups:
        for down, b in downs:
            if _adjacent(up, down, inequalities, d):  # a > 0 > b: a*down - b*up is on h
                pair = zip(up, down, strict=True)
                keep.append(primitive([a * y - b * x for x, y in pair]))
    return tuple(dict.fromkeys(keep))


def _adjacent(a: Vector, b: Vector, inequalities, d: int) -> bool:
    """Whether rays ``a`` and ``b`` span a 2-face: the inequalities tight on both have
    rank d - 2 (the algebraic adjacency test for a pointed cone)."""
    tight = [h for h in inequalities if dot(h, a) == 0 and dot(h, b) == 0]
    return len(tight) >= d - 2 and rank(tight) == d - 2
