"""Whether two answers of assignment 1 are the same expression: decided by sympy, and only
where sympy cannot decide, by exact arithmetic at many random rational points, said so.

Answers are built by :func:`ppbook.assign.expressions.from_tree` from +, *, ** (exponents
up to 8), Max and Min over the glossary's symbols, whose assumptions hold throughout: counts
``p``, ``m``, ``v`` positive integers, times ``t_f``, ``t_b`` positive, ``c`` >= 0. So
:func:`equal`:

1. reads every float as the decimal it prints as (0.5 is 1/2, 0.333 is 333/1000): a float
   approximation of a fraction is not that fraction;
2. substitutes ``where``, a parametrization of the domain a question states (c <= t_f/v is
   ``c = t_f/(v(1+w))`` with a new positive ``w``): the two must agree there only
   (:func:`equal_within`: in each of several such regions);
3. **symbolic**, the normal path: sympy's ``cancel`` of the difference, the canonical form of
   a rational function (numerator and denominator without common factor, expanded), is 0
   exactly when the two are equal; without Max, Min or fractional powers a non-zero form
   decides that they differ. With them, ``sympy.simplify`` of the difference; 0: equal;
4. **sampled**, where sympy left a Max or ran past :data:`SECONDS`: the difference at
   :data:`POINTS` random points, in exact rational arithmetic, half of them small numbers and
   half spread beyond every constant of the expression (so a Max that switches at v = 10**6
   is met). One point where they differ proves that they differ; agreement at all of them is
   taken as equal, and the :class:`Verdict` says it was sampled.

sympy's time on an expression of :data:`~ppbook.assign.expressions.MAX_NODES` parts is
bounded by a timer (SIGALRM, in the main thread); elsewhere only expressions of small degree
go to sympy, the others are sampled.
"""

from __future__ import annotations

import math
import random
import signal
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import sympy as sp

from ppbook.assign.expressions import SYMBOLS

SECONDS = 5.0
"""The longest sympy may take to decide one comparison."""
POINTS = 200
"""Random points at which an expression sympy could not decide is compared."""
SMALL_DEGREE = 16
"""Largest degree that goes to sympy without a timer (outside the main thread)."""
MAX_DEGREE = 40
"""Beyond this degree an expression is sampled: expanding it could take for ever."""
DIGITS = 60
"""Digits of a numeric comparison, where a value is irrational (a fractional power)."""


@dataclass(frozen=True)
class Verdict:
    """``equal``; ``sampled``: decided by points, not by sympy; ``witness``: a point where
    the two differ (symbol name -> value), when one was found; ``values``: theirs there."""

    equal: bool
    sampled: bool = False
    witness: dict[str, sp.Rational] | None = None
    values: tuple[sp.Expr, sp.Expr] | None = field(default=None, compare=False)

    def __bool__(self) -> bool:
        return self.equal

    def where(self) -> str:
        """The witness as ``p = 4, v = 3, ...``, in the glossary's order."""
        order = ("p", "m", "v", "t_f", "t_b", "c")
        names = sorted(self.witness or {}, key=lambda n: order.index(n) if n in order else 9)
        return ", ".join(f"{n} = {self.witness[n]}" for n in names)


def exact(expr: sp.Expr) -> sp.Expr:
    """``expr`` with every float replaced by the decimal fraction it prints as."""
    floats = expr.atoms(sp.Float)
    return expr.xreplace({f: sp.Rational(repr(float(f))) for f in floats}) if floats else expr


def equal(a: sp.Expr, b: sp.Expr, where: Mapping[sp.Symbol, sp.Expr] | None = None) -> Verdict:
    """Whether ``a`` and ``b`` are the same expression (module docstring), within ``where``."""
    a, b = exact(a), exact(b)
    where = dict(where or {})
    if where:
        a, b = a.xreplace(where), b.xreplace(where)
    difference = a - b
    found = None
    if _degree(difference) <= MAX_DEGREE:
        decided = _bounded(_symbolic, difference)
        if decided is True:
            return Verdict(True)
        if decided is False:
            found = _search(a, b, symbolic=True)
            if found is None:
                return Verdict(False)
    if found is None:
        found = _search(a, b, symbolic=False)
        if found is None:
            return Verdict(True, sampled=True)
    point, values = found
    return Verdict(False, witness=_named(point, where), values=values)


def equal_within(a: sp.Expr, b: sp.Expr, regions) -> Verdict:
    """:func:`equal` in every one of ``regions`` (substitutions that together cover a
    domain): equal when equal in all, else the first region's witness; sampled when any
    was sampled."""
    verdicts = []
    for region in regions:
        verdict = equal(a, b, region)
        if not verdict:
            return verdict
        verdicts.append(verdict)
    return Verdict(True, sampled=any(v.sampled for v in verdicts))


def _named(point: dict, where: dict) -> dict[str, sp.Rational]:
    """A point by the glossary's names: the symbols ``where`` replaced in, with their values
    there, in place of the new symbols it brought."""
    named = {s.name: x for s, x in point.items() if s.name in SYMBOLS}
    named.update({symbol.name: value.xreplace(point) for symbol, value in where.items()})
    return named


def _symbolic(difference: sp.Expr) -> bool | None:
    """True: 0; False: not 0; None: sympy cannot tell (a Max, Min or root is left)."""
    normal = sp.cancel(sp.together(difference))
    if normal == 0:
        return True
    if not normal.has(sp.Max, sp.Min) and all(
        power.exp.is_Integer for power in normal.atoms(sp.Pow)
    ):
        return False  # cancel's form of a rational function is canonical: not the same
    return True if sp.simplify(normal) == 0 else None


def _search(a: sp.Expr, b: sp.Expr, *, symbolic: bool) -> tuple[dict, tuple] | None:
    """The first random point where ``a`` and ``b`` differ, with their values there, or
    None when they agree at every one (``symbolic``: sympy already found them different:
    look for a witness among the small points only)."""
    symbols = sorted((a - b).free_symbols | a.free_symbols | b.free_symbols, key=lambda s: s.name)
    rng = random.Random(sp.srepr(a) + "|" + sp.srepr(b))  # the same points for the same answer
    spread = _spread(a - b)
    for index in range(POINTS):
        small = index < POINTS // 2
        if symbolic and not small:
            return None
        point = {s: _value(s, rng, 12 if small else spread) for s in symbols}
        x, y = a.xreplace(point), b.xreplace(point)
        if _differ(x, y):
            return point, (x, y)
    return None


def _value(symbol: sp.Symbol, rng: random.Random, spread: int) -> sp.Rational:
    """A random value of ``symbol`` within its assumptions, up to ``spread`` in size."""
    if symbol.is_integer:
        return sp.Integer(_whole(rng, spread))
    if symbol.is_nonnegative and not symbol.is_positive and rng.random() < 0.1:
        return sp.S.Zero
    return sp.Rational(_whole(rng, spread), _whole(rng, spread))


def _whole(rng: random.Random, spread: int) -> int:
    """A whole number from 1 to ``spread``, its number of digits uniform."""
    digits = rng.randint(1, len(str(spread)))
    return rng.randint(1, min(spread, 10**digits))


def _spread(expr: sp.Expr) -> int:
    """How far the spread points go: beyond the square of every constant of ``expr``."""
    largest = max((max(abs(r.p), abs(r.q)) for r in expr.atoms(sp.Rational)), default=1)
    return max(10**6, largest**2 * 1000)


def _differ(x: sp.Expr, y: sp.Expr) -> bool:
    """Whether two values at one point differ (False where either is undefined)."""
    if not (x.is_finite and y.is_finite):
        return False  # a pole or an undefined point: no evidence either way
    if x.is_Rational and y.is_Rational:
        return x != y
    nx, ny = sp.N(x, DIGITS), sp.N(y, DIGITS)
    if not (nx.is_Number and ny.is_Number):
        return False
    scale = max(abs(nx), abs(ny), 1)
    return abs(nx - ny) > scale * sp.Float(10) ** (10 - DIGITS)


def _degree(expr: sp.Expr) -> float:
    """An upper bound on the degrees of numerator and denominator, added, of ``expr`` once
    put over one denominator and expanded."""
    top, bottom = _degrees(expr)
    return top + bottom


def _degrees(expr: sp.Expr) -> tuple[float, float]:
    if expr.is_Symbol:
        return 1, 0
    if expr.is_Number or not expr.args:
        return 0, 0
    parts = [_degrees(arg) for arg in expr.args]
    if expr.is_Mul:
        return sum(t for t, _ in parts), sum(b for _, b in parts)
    if expr.is_Pow:
        if not expr.exp.is_Rational:
            return math.inf, math.inf
        times = math.ceil(abs(expr.exp))
        top, bottom = parts[0]
        return (top * times, bottom * times) if expr.exp > 0 else (bottom * times, top * times)
    bottom = sum(b for _, b in parts)  # a sum (or Max, Min): over the common denominator
    return max(t for t, _ in parts) + bottom, bottom


class _TimeUp(BaseException):
    """sympy ran past :data:`SECONDS` (a BaseException: sympy's own handlers let it pass)."""


def _bounded(function, expr: sp.Expr) -> bool | None:
    """``function(expr)`` within :data:`SECONDS`; None when it runs out or cannot be timed
    and ``expr`` is beyond :data:`SMALL_DEGREE`."""
    timed = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    outer = signal.getitimer(signal.ITIMER_REAL) if timed else (0.0, 0.0)
    if timed and outer[0] and outer[0] < SECONDS:  # an outer timer fires first: leave it
        timed = False
    if not timed:
        return function(expr) if _degree(expr) <= SMALL_DEGREE else None

    def time_up(signum, frame):
        raise _TimeUp

    began = time.monotonic()
    previous = signal.signal(signal.SIGALRM, time_up)
    signal.setitimer(signal.ITIMER_REAL, SECONDS)
    try:
        return function(expr)
    except _TimeUp:
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer[0]:  # the caller's timer (pytest-timeout's, say), less the time spent here
            left = max(outer[0] - (time.monotonic() - began), 1e-3)
            signal.setitimer(signal.ITIMER_REAL, left, outer[1])
