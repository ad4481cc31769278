"""Chapter 1's derive and implement exercises (1.8 to 1.10): right answers pass, each kind of
slip is refused and says why.

The right answers are worked by hand: with stage s slow by k, the longest path through
GPipe's grid passes every stage once and the slow one m times, forward and backward:
(p - 1 + m k)(t_f + t_b), 45 at p = 4, m = 6, k = 2, t_f = 1, t_b = 2 (3 + 12 = 15 steps of
3). Setting f = (p-1)(t_f+t_b+2c) / ((m+p-1)(t_f+t_b) + 2(p-1)c) to b and solving by hand:
c = (t_f+t_b)(b(m+p-1) - (p-1)) / (2(p-1)(1-b)), 0.5 at p = 4, m = 6, t_f = 1, t_b = 2,
b = 0.4 (3 (3.6 - 3) / (6 * 0.6)). GPipe generators are written out here, not ppbook's.
"""

from __future__ import annotations

import pytest
import sympy as sp

from ppbook.costs import Costs
from ppbook.exercises import check, exercises
from ppbook.schedules import gpipe, one_f_one_b
from ppbook.simulate import simulate

p, m, k, t_f, t_b, b = sp.symbols("p m k t_f t_b b", positive=True)

SLOW = (p - 1 + m * k) * (t_f + t_b)
LARGEST_C = (t_f + t_b) * (b * (m + p - 1) - (p - 1)) / (2 * (p - 1) * (1 - b))


def my_gpipe(p: int, m: int) -> list[list[str]]:
    return [[f"{s}F{j}" for j in range(m)] + [f"{s}B{j}" for j in range(m)] for s in range(p)]


def test_chapter_one_is_half_derive_construct_or_implement():
    kinds = [e.kind for e in exercises("1")]
    assert len(kinds) == 10
    assert sum(kind in ("derive", "construct", "implement") for kind in kinds) == 5


def test_1_8_one_slow_stage():
    # p = 4, m = 6, stage 1 twice as slow: 45 by hand, and by the simulator with stage costs
    costs = Costs(F=[1, 2, 1, 1], B=[2, 4, 2, 2])
    assert simulate(gpipe(4, 6), costs).makespan == 45
    assert SLOW.subs({p: 4, m: 6, k: 2, t_f: 1, t_b: 2}) == 45
    assert check("1.8", SLOW)
    assert check("1.8", (p - 1) * (t_f + t_b) + m * k * t_f + m * k * t_b)
    whole = check("1.8", (m + p - 1) * k * (t_f + t_b))  # every stage slow
    assert "gives 54" in whole.message and "only one stage" in whole.hint
    once = check("1.8", (m + p - 1) * (t_f + t_b) + (k - 1) * (t_f + t_b))
    assert "once per micro-batch" in once.hint
    assert check("1.8", (m + p - 1) * (t_f + t_b)).status == "wrong"
    assert "uses s" in check("1.8", SLOW + sp.Symbol("s")).message
    assert "wants a sympy expression" in check("1.8", 45).message


def test_1_9_gpipe_generators():
    assert check("1.9", my_gpipe)
    reversed_backward = check(  # GPipe's figure: the backwards in reverse order, as fast
        "1.9",
        lambda p, m: [
            [f"{s}F{j}" for j in range(m)] + [f"{s}B{j}" for j in reversed(range(m))]
            for s in range(p)
        ],
    )
    assert reversed_backward, reversed_backward.text
    assert "before its last forward" in check("1.9", one_f_one_b).message

    def reversed_forward(p, m):  # valid, all forwards first, but the last rank waits
        rows = my_gpipe(p, m)
        rows[-1] = [f"{p - 1}F{j}" for j in reversed(range(m))] + rows[-1][m:]
        return rows

    slow = check("1.9", reversed_forward)
    assert slow.status == "wrong" and "not the derived" in slow.message
    assert "2 stages" in check("1.9", lambda p, m: my_gpipe(2, m)).message
    assert "raised ZeroDivisionError at p = 1, m = 1" in check("1.9", lambda p, m: 1 / 0).message
    assert "wants a function" in check("1.9", gpipe(2, 2)).message


def test_1_10_largest_transfer_for_a_target():
    at = {p: 4, m: 6, t_f: 1, t_b: 2, b: sp.Rational(2, 5)}
    assert LARGEST_C.subs(at) == sp.Rational(1, 2)
    assert simulate(gpipe(4, 6), Costs(F=1, B=2, comm=0.5)).bubble_fraction == pytest.approx(0.4)
    assert check("1.10", LARGEST_C)
    half = check("1.10", LARGEST_C / 2)
    assert "below the target" in half.message
    ratio = (t_f + t_b) * (b * m - (p - 1)) / (2 * (p - 1))  # r = b solved for c instead
    negative = check("1.10", ratio)  # 3 (2.4 - 3) / 6 = -0.3 at the first point
    assert "negative time" in negative.message and "idle/total" in negative.hint
    assert "wants a sympy expression" in check("1.10", 0.5).message
