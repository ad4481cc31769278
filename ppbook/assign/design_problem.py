"""Assignment 4's design problem, and a lower bound on its makespan that no schedule beats
(``notebooks/assignments/04_design_a_schedule.ipynb``; scored by :mod:`.score_design`).

The problem: p = 4 ranks, rank r holds stage r of the model, m = 8 micro-batches. Stages
0 to 2 are alike (F = I = W = 1); stage 3 also holds the output layer and the loss, so its
passes are heavier (F = 1.5, I = 2, W = 1.5). A backward may run whole (B = I + W) or
split into its input-gradient pass I and its weight-gradient pass W (Zero Bubble PP,
arXiv:2401.10241). Every message between ranks takes 0.5 time units. Every device has
room for the activations of :data:`MEMORY_LIMIT` = 3 micro-batches, fewer than the p = 4
that 1F1B and ZB-H1 hold on rank 0: a rank holds a micro-batch's activations from the
start of its F to the end of its W (or its B), as :meth:`ppbook.timeline.Timeline.memory`
counts them.

:func:`makespan_lower_bound` gives a time below which no schedule of one stage per rank
ends within the limit; :mod:`.score_design` scores a design by how close it comes.
"""

from __future__ import annotations

import math

from ppbook.checks import as_count, as_quantity
from ppbook.costs import Costs

DESIGN_P, DESIGN_M = 4, 8
DESIGN_COSTS = Costs(F=(1, 1, 1, 1.5), I=(1, 1, 1, 2), W=(1, 1, 1, 1.5), comm=0.5)
"""Per-stage costs (the last stage heavier: the output layer and the loss) and the transfer
time of every message between ranks; a whole backward B costs I + W."""

MEMORY_LIMIT = 3
"""Micro-batches' activations a rank may hold at any instant, the same on every rank."""


def bound_terms(p: int, m: int, costs: Costs, memory_limit: float) -> dict[str, float]:
    """The lower bounds on the makespan that :func:`makespan_lower_bound` takes the largest
    of, each named by the argument that gives it.

    For any schedule of p ranks, stage r on rank r, every micro-batch passing every stage
    with F, then I and W (or B = I + W), under the simulator's model (a transfer of c
    delays the receiver and occupies no rank), in which no rank ever holds more than
    K = floor(memory_limit) activations, each from the start of its F to the end of its W:

    - ``start r``: rank r can start nothing before micro-batch 0's forward reaches it,
      a_r = sum_{q<r} (F_q + c); then it has m(F_r + I_r + W_r) of work to run;
    - ``warm-up r``: rank r's first backward cannot start before a_r + sum_{q>=r} F_q +
      sum_{q>r} I_q + 2(p-1-r)c (a micro-batch down to the last rank and its gradient
      back). Until then it can run only forwards, and at most min(K, m) of them (each is
      held until its W): the rest of its work comes after;
    - ``cool-down s to r`` (r < s): rank s's last backward comes after all its m forwards
      and m input gradients and all but n = min(K, m) of its W passes (the others would be
      held, with it, past the limit): it ends no sooner than a_s + m(F_s + I_s) +
      (m - n) W_s. That micro-batch's gradient then climbs to rank r, one I_q and one
      transfer per rank, and rank r still runs its W.
    """
    p = as_count(p, "p", "bound_terms")
    m = as_count(m, "m", "bound_terms")
    limit = as_quantity(memory_limit, "memory_limit", "bound_terms", inclusive=False)
    if not isinstance(costs, Costs) or costs.per_link or costs.w_memory != 1:
        raise ValueError(
            "bound_terms needs a ppbook.costs.Costs with the plain transfer time (no "
            "topology, contention or overlap_send=False) and w_memory = 1"
        )
    if limit < 1:
        raise ValueError(
            f"no schedule fits a memory limit of {limit:g}: a forward holds a whole "
            "micro-batch's activations"
        )
    cost, c = costs.per_stage(p), costs.transfer
    F, I, W = cost["F"], cost["I"], cost["W"]  # noqa: E741 (PyTorch's names)
    if any(abs(b - i - w) > 1e-9 for b, i, w in zip(cost["B"], I, W, strict=True)):
        raise ValueError("bound_terms needs B = I + W on every stage (give I and W, not B)")
    held = min(math.floor(limit), m)
    start = [sum(F[q] + c for q in range(r)) for r in range(p)]
    work = [m * (F[r] + I[r] + W[r]) for r in range(p)]
    terms: dict[str, float] = {}
    for r in range(p):
        terms[f"start {r}"] = start[r] + work[r]
        first = start[r] + sum(F[r:]) + sum(I[r + 1 :]) + 2 * (p - 1 - r) * c
        terms[f"warm-up {r}"] = first + work[r] - min(held * F[r], first - start[r])
    for s in range(1, p):
        last = start[s] + m * (F[s] + I[s]) + (m - held) * W[s]
        for r in range(s):
            terms[f"cool-down {s} to {r}"] = last + sum(c + I[q] for q in range(r, s)) + W[r]
    return terms


def explained(term: str) -> str:
    """What the bound named ``term`` (a key of :func:`bound_terms`) counts, in words."""
    kind, *ranks = term.replace(" to ", " ").split()
    if kind == "start":
        return f"rank {ranks[0]}'s work, after micro-batch 0's forward reaches it"
    if kind == "warm-up":
        return f"rank {ranks[0]}'s wait for its first gradient, then the rest of its work"
    return (
        f"rank {ranks[0]}'s last backward, which the memory limit keeps late, then its "
        f"gradient's way up to rank {ranks[1]} and that rank's W"
    )


def makespan_lower_bound(
    p: int = DESIGN_P,
    m: int = DESIGN_M,
    costs: Costs = DESIGN_COSTS,
    memory_limit: float = MEMORY_LIMIT,
) -> float:
    """A makespan no schedule beats: the largest of :func:`bound_terms` (by default for
    assignment 4's problem)."""
    return max(bound_terms(p, m, costs, memory_limit).values())
