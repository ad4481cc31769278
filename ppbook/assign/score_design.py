"""Score of assignment 4: a schedule designed for :mod:`.design_problem` (per-stage costs
with a heavier last stage, a transfer time, a memory limit of 3 micro-batches per rank),
scored by how close its makespan comes to a lower bound that no schedule beats
(:func:`.design_problem.makespan_lower_bound`), not by a schedule we wrote.

No schedule of :mod:`ppbook.schedules` is best here: 1F1B, ZB-H1 and ZB-H2 hold 4 or more
micro-batches on rank 0, over the limit; zb-auto built for these very costs and limit
takes 51 time units, 12 % above the bound 45.5; interleaved 1F1B, ZB-V and DualPipe cut
the model into more stages than the 4 the problem has. A list scheduler written in the
instructor's notebook reaches the bound.

The share of the marks: 0 for rows that are not a schedule of the problem (every
micro-batch through every stage, stage r on rank r), deadlock, or go over the limit on
any rank; :data:`VALID_SHARE` for a valid schedule within the limit at least
:data:`FLOOR_AT` above the bound; all of it within :data:`FULL_WITHIN` of the bound; in
between, linear in the makespan (so monotone: a faster design never earns less).
"""

from __future__ import annotations

from ppbook.assign.design_problem import (
    DESIGN_COSTS,
    DESIGN_M,
    DESIGN_P,
    MEMORY_LIMIT,
    bound_terms,
    explained,
)
from ppbook.assign.schedule_rows import one_line, over_limit, read_rows
from ppbook.simulate import simulate

FULL_WITHIN = 0.02
"""Full marks for a makespan at most this share above the bound."""

FLOOR_AT = 0.20
"""A makespan this share above the bound, or more, earns only :data:`VALID_SHARE`."""

VALID_SHARE = 0.1
"""The share of the marks for a valid schedule within the memory limit, however slow."""


def share_for(makespan: float, bound: float) -> float:
    """The share of the marks for a valid ``makespan`` within the limit, given ``bound``."""
    above = makespan / bound - 1
    if above <= FULL_WITHIN + 1e-9:  # a makespan at the threshold, in floating point
        return 1.0
    if above >= FLOOR_AT:
        return VALID_SHARE
    return VALID_SHARE + (1 - VALID_SHARE) * (FLOOR_AT - above) / (FLOOR_AT - FULL_WITHIN)


def score_design(data: object) -> tuple[float, str]:
    """Assignment 4: the share of the marks for the schedule ``data`` (one list of action
    strings per rank) on :mod:`.design_problem`, and one line saying why."""
    who = "my_schedule()"
    try:
        schedule = read_rows(data, DESIGN_P, DESIGN_M, split=True, who=who)
        timeline = simulate(schedule, DESIGN_COSTS)
    except ValueError as error:
        return 0.0, one_line(error)
    excess = over_limit(timeline, [MEMORY_LIMIT] * DESIGN_P)
    if excess is not None:
        return 0.0, f"over the memory limit: {excess}"
    terms = bound_terms(DESIGN_P, DESIGN_M, DESIGN_COSTS, MEMORY_LIMIT)
    bound = max(terms.values())
    took = timeline.makespan
    share = share_for(took, bound)
    where = (
        f"{took:g} time units, {took / bound - 1:.1%} above the lower bound {bound:g} that no "
        f"schedule beats ({explained(max(terms, key=terms.get))})"
    )
    if share == 1.0:
        return 1.0, f"full marks: {where}"
    return share, (
        f"{where}; full marks within {FULL_WITHIN:.0%} of it ({bound * (1 + FULL_WITHIN):g}), "
        f"a tenth of them at {FLOOR_AT:.0%} above it or slower"
    )
