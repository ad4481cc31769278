"""The bubble in its two conventions, derived from the GPipe makespan (chapter 1).

Two numbers in circulation describe the same idle time ``T_idle`` of a step, against its
compute time ``T_comp`` (``I`` is the input-gradient pass; REFERENCES.md):

- the **bubble fraction** ``f = T_idle / (T_idle + T_comp)``, idle over total device time, is
  GPipe's ``O((K-1)/(M+K-1))`` (Huang et al. 2019, arXiv:1811.06965, sec. 2.3);
- the **bubble ratio** ``r = T_idle / T_comp``, idle time over ideal compute time, is Megatron-LM's
  "bubble time fraction" (Narayanan et al. 2021, arXiv:2104.04473, sec. 2.2.1) and the
  Hugging Face Ultra-Scale Playbook's ``r_bubble = (p-1)/m``.

For GPipe and 1F1B, ``T_idle = p (p-1)(t_f + t_b)`` summed over all ``p`` devices and
``T_comp = p m (t_f + t_b)``, so ``f = (p-1)/(m+p-1)`` and ``r = (p-1)/m``. Whatever the
schedule, ``f = r/(1+r)`` and ``r = f/(1-f)``: :func:`convention_identity_residuals`
proves it with sympy. (The Zero Bubble paper's "bubble rate", Qi et al. 2024,
arXiv:2401.10241, is a third measure over the longest stage span; it equals f for GPipe,
1F1B and ZB-H1.)
"""

from functools import cache

import sympy as sp

from ppbook.symbolic.gpipe import gpipe_makespan
from ppbook.symbolic.symbols import compute, idle, m, p, t_b, t_f


def fraction_from_ratio(ratio: sp.Expr) -> sp.Expr:
    """The bubble fraction f = r/(1+r) that goes with a bubble ratio r."""
    return ratio / (1 + ratio)


def ratio_from_fraction(fraction: sp.Expr) -> sp.Expr:
    """The bubble ratio r = f/(1-f) that goes with a bubble fraction f."""
    return fraction / (1 - fraction)


def bubble_fraction_of(idle_time: sp.Expr, compute_time: sp.Expr) -> sp.Expr:
    """f = idle / (idle + compute): idle time over the devices' total time."""
    return sp.cancel(idle_time / (idle_time + compute_time))


def bubble_ratio_of(idle_time: sp.Expr, compute_time: sp.Expr) -> sp.Expr:
    """r = idle / compute: idle time over the ideal (bubble-free) compute time."""
    return sp.cancel(idle_time / compute_time)


def convention_identity_residuals() -> list[sp.Expr]:
    """``f - r/(1+r)`` and ``r - f/(1-f)`` for any T_idle and T_comp: [0, 0]."""
    f = idle / (idle + compute)
    r = idle / compute
    return [sp.simplify(f - fraction_from_ratio(r)), sp.simplify(r - ratio_from_fraction(f))]


@cache
def gpipe_compute_time() -> sp.Expr:
    """Ideal compute time of a step over all p devices: p m (t_f + t_b)."""
    return p * m * (t_f + t_b)


@cache
def gpipe_bubble_time() -> sp.Expr:
    """Idle time of a GPipe step over all p devices: p * makespan - p m (t_f + t_b).

    Simplifies to p (p-1)(t_f + t_b); divide by p for one device's bubble, the Playbook's
    ``t_pb = (p-1)(t_f + t_b)``.
    """
    return sp.factor(p * gpipe_makespan() - gpipe_compute_time())


@cache
def per_device_bubble_time() -> sp.Expr:
    """Idle time of one device in a GPipe (or 1F1B) step: (p-1)(t_f + t_b)."""
    return sp.factor(gpipe_bubble_time() / p)


@cache
def bubble_fraction() -> sp.Expr:
    """GPipe's (and 1F1B's) bubble fraction f = idle / total = (p-1)/(m+p-1).

    Valid for uniform pass times and no transfer cost, any ``m >= 1``.
    """
    return bubble_fraction_of(gpipe_bubble_time(), gpipe_compute_time())


@cache
def bubble_ratio() -> sp.Expr:
    """GPipe's (and 1F1B's) bubble ratio r = idle / ideal compute = (p-1)/m.

    Valid for uniform pass times and no transfer cost, any ``m >= 1``.
    """
    return bubble_ratio_of(gpipe_bubble_time(), gpipe_compute_time())
