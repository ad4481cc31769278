"""The GPipe timeline as recurrences, solved with sympy to the makespan (chapter 1).

Source: Huang et al. 2019, "GPipe: Efficient Training of Giant Neural Networks using
Pipeline Parallelism", arXiv:1811.06965, sec. 2.3. GPipe runs all forwards, then all
backwards (all-forward-all-backward, AFAB). Stage ``s`` lives on device ``s``; each device
runs its passes in micro-batch order. With uniform pass times and a transfer cost ``c``
on every cross-device dependency, the finish times obey

    F(s, j) = max(F(s-1, j) + c, F(s, j-1)) + t_f
    B(u, j) = max(B(u-1, j) + c, B(u, j-1), F(s, m-1)) + t_b,   u = p - 1 - s

where the first stage's inputs are ready at time 0 (no ``F(s-1, j)`` term for ``s = 0``,
no ``F(s, j-1)`` for ``j = 0``) and the backward of the last stage (``u = 0``) starts once
its device has run its last forward. Each finish time is the length of the longest path
through a grid of passes, and in this grid every monotone path to a cell has the same
number of passes and hops: ``s + j + 1`` forwards and ``s`` hops for ``F(s, j)``. So the
critical path is any path and its length a plain sum, which we check against the
recurrence, boundaries included, with sympy; since the recurrence has one solution, that
is a proof. The makespan is the finish of the last backward, ``B(p-1, m-1)``:

    makespan = (m + p - 1)(t_f + t_b) + 2(p - 1) c.

Validity: uniform ``t_f``, ``t_b`` on every stage; no overlap of compute and transfers.
These are derived results: the recurrences are GPipe's order and dependencies, and sympy
checks the closed forms against them. :func:`ppbook.closed_form.gpipe_timeline` puts
them on a schedule as a Timeline.
"""

from functools import cache

import sympy as sp

from ppbook.symbolic.symbols import c, j, k, m, p, s, t_b, t_f, u


@cache
def forward_finish() -> sp.Expr:
    """Finish time of the forward of stage ``s`` on micro-batch ``j``: (s+j+1) t_f + s c.

    Derived as the length of the critical path: ``s + j + 1`` forward passes and ``s``
    hops between devices, summed with :func:`sympy.summation`.
    """
    passes = sp.summation(t_f, (k, 0, s + j))
    hops = sp.summation(c, (k, 1, s))
    return sp.expand(passes + hops)


@cache
def backward_finish() -> sp.Expr:
    """Finish time of the backward of stage ``p-1-u`` on micro-batch ``j``.

    Equals ``F(p-1, m-1) + (u+j+1) t_b + u c``: the backward chain starts when the last
    stage has run its last forward, then ``u + j + 1`` backward passes and ``u`` hops.
    """
    all_forwards_done = forward_finish().subs({s: p - 1, j: m - 1})
    passes = sp.summation(t_b, (k, 0, u + j))
    hops = sp.summation(c, (k, 1, u))
    return sp.expand(all_forwards_done + passes + hops)


def first_stage_forwards_by_rsolve() -> sp.Expr:
    """The boundary row ``F(0, j) = F(0, j-1) + t_f``, ``F(0, 0) = t_f``, solved by rsolve."""
    y = sp.Function("y")
    return sp.rsolve(y(j) - y(j - 1) - t_f, y(j), {y(0): t_f})


def first_microbatch_forwards_by_rsolve() -> sp.Expr:
    """The boundary column ``F(s, 0) = F(s-1, 0) + c + t_f``, ``F(0, 0) = t_f``, by rsolve."""
    y = sp.Function("y")
    return sp.rsolve(y(s) - y(s - 1) - c - t_f, y(s), {y(0): t_f})


def forward_recurrence_residuals(finish: sp.Expr | None = None) -> list[sp.Expr]:
    """Left side minus right side of the forward recurrence, for each case; all 0 if solved.

    ``finish`` is a candidate for ``F(s, j)`` in the symbols ``s`` and ``j``
    (default: :func:`forward_finish`). The cases are the interior ``s, j >= 1``, the first
    stage ``s = 0``, the first micro-batch ``j = 0`` and the first pass.
    """
    f = forward_finish() if finish is None else finish

    def at(stage, microbatch):
        return sp.expand(f.subs({s: stage, j: microbatch}, simultaneous=True))

    interior = at(s + 1, j + 1) - (sp.Max(at(s, j + 1) + c, at(s + 1, j)) + t_f)
    first_stage = at(0, j + 1) - (at(0, j) + t_f)
    first_microbatch = at(s + 1, 0) - (at(s, 0) + c + t_f)
    first_pass = at(0, 0) - t_f
    return [sp.simplify(r) for r in (interior, first_stage, first_microbatch, first_pass)]


def backward_recurrence_residuals(finish: sp.Expr | None = None) -> list[sp.Expr]:
    """Residuals of the backward recurrence in ``u = p-1-s`` and ``j``; all 0 if solved.

    The device-order term ``F(s, m-1)`` (a device runs all its forwards first) is kept
    in the ``Max``; sympy drops it because it never binds.
    """
    b = backward_finish() if finish is None else finish
    fwd = forward_finish()

    def at(hops_from_last, microbatch):
        return sp.expand(b.subs({u: hops_from_last, j: microbatch}, simultaneous=True))

    def last_forward(hops_from_last):
        return sp.expand(fwd.subs({s: p - 1 - hops_from_last, j: m - 1}, simultaneous=True))

    interior = at(u + 1, j + 1) - (
        sp.Max(at(u, j + 1) + c, at(u + 1, j), last_forward(u + 1)) + t_b
    )
    last_stage = at(0, j + 1) - (at(0, j) + t_b)
    first_microbatch = at(u + 1, 0) - (sp.Max(at(u, 0) + c, last_forward(u + 1)) + t_b)
    first_pass = at(0, 0) - (last_forward(0) + t_b)
    return [sp.simplify(r) for r in (interior, last_stage, first_microbatch, first_pass)]


@cache
def gpipe_makespan_with_transfer() -> sp.Expr:
    """GPipe's makespan with a transfer cost: (m+p-1)(t_f+t_b) + 2(p-1)c."""
    return sp.expand(backward_finish().subs({u: p - 1, j: m - 1}))


@cache
def gpipe_makespan() -> sp.Expr:
    """GPipe's makespan without transfer cost, factored: (m+p-1)(t_f+t_b)."""
    return sp.factor(gpipe_makespan_with_transfer().subs(c, 0))
