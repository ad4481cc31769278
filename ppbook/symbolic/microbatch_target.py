"""Sizing a job: how many micro-batches bring the bubble under a target (chapter 1).

The reader picks a convention, ``"fraction"`` (f = idle/total, GPipe arXiv:1811.06965)
or ``"ratio"`` (r = idle/compute, Megatron-LM arXiv:2104.04473, Ultra-Scale Playbook),
and a target ``b`` in (0, 1). Both are decreasing in ``m``, so the smallest ``m`` with
bubble ``<= b`` is the ceiling of the root of ``bubble(m) = b``, derived here with sympy
from the published interleaved bubble (:mod:`.schedules`). With ``v`` chunks (interleaved 1F1B)
the formulas hold for ``m`` a multiple of ``p``; ``v = 1`` gives GPipe and 1F1B.

GPipe's advice (sec. 2.3): the bubble is "negligible when M >= 4K". At ``m = 4p`` the
fraction is still (p-1)/(5p-1), 18% at p = 8, tending to 1/5 as p grows; the paper
credits overlap with re-computation for the rest.
"""

from functools import cache

import sympy as sp

from ppbook.symbolic.schedules import interleaved_bubble_fraction, interleaved_bubble_ratio
from ppbook.symbolic.symbols import m, p, target, v

CONVENTIONS = ("fraction", "ratio")


def bubble_expr(convention: str, num_chunks: sp.Expr = v) -> sp.Expr:
    """The bubble in the given convention, in p, m and ``num_chunks`` (default: symbol v)."""
    if convention == "fraction":
        expr = interleaved_bubble_fraction()
    elif convention == "ratio":
        expr = interleaved_bubble_ratio()
    else:
        raise ValueError(f'convention must be "fraction" or "ratio", got {convention!r}')
    return expr.subs(v, num_chunks)


@cache
def min_microbatches_expr(convention: str = "fraction") -> sp.Expr:
    """Smallest m with bubble <= target b: ceiling of the root of bubble(m) = b.

    ``fraction``: ceiling((p-1)(1-b)/(v b)); ``ratio``: ceiling((p-1)/(v b)). Below 1
    (when p = 1) the answer is 1, and with v > 1 round up to a multiple of p; the numeric
    :func:`ppbook.symbolic.numeric.min_microbatches` does both.
    """
    (root,) = sp.solve(sp.Eq(bubble_expr(convention), target), m)
    return sp.ceiling(sp.factor(root))


@cache
def bubble_limit(convention: str = "fraction") -> sp.Expr:
    """The bubble as m grows without bound: 0 in both conventions."""
    return sp.limit(bubble_expr(convention), m, sp.oo)


@cache
def bubble_at_microbatches_per_stage(convention: str = "fraction", ratio: int = 4) -> sp.Expr:
    """The bubble at ``m = ratio * p`` (GPipe's rule: ratio 4): (p-1)/(5p-1) as a fraction."""
    return sp.factor(bubble_expr(convention, 1).subs(m, ratio * p))


@cache
def bubble_at_rule_of_thumb_limit(convention: str = "fraction", ratio: int = 4) -> sp.Expr:
    """The bubble at m = ratio * p as p grows: 1/(ratio+1) as a fraction, 1/ratio as a ratio."""
    return sp.limit(bubble_at_microbatches_per_stage(convention, ratio), p, sp.oo)
