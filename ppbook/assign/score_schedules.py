"""Scores of assignments 2 and 4: a 1F1B generator for any p and m, and a schedule designed
for the smallest makespan under a memory limit (``notebooks/assignments/02_one_f_one_b.ipynb``,
``04_design_a_schedule.ipynb``).

A schedule arrives as data (one list of action strings per rank) and is judged by the
package alone: :meth:`~ppbook.schedule.Schedule.from_strings` reads it,
:func:`~ppbook.validate.validate` and :func:`~ppbook.simulate.simulate` check and time it
(a deadlock names the stuck ranks and the actions they wait for), and
:meth:`~ppbook.timeline.Timeline.memory` says which rank goes over a memory limit, when,
and by how much. The thresholds of assignment 4 are the makespans of 1F1B and ZB-H1
(Zero Bubble PP, arXiv:2401.10241) on the same costs, simulated at scoring time.
"""

from __future__ import annotations

from ppbook.checks import joined_lines
from ppbook.costs import Costs
from ppbook.schedule import Schedule
from ppbook.schedules import one_f_one_b, zb_h1
from ppbook.simulate import simulate
from ppbook.timeline import ACTIVATION_UNIT, Timeline

ONE_F_ONE_B_COSTS = Costs(F=1, B=2)
"""Assignment 2's costs: (m+p-1)(F+B) = 3(m+p-1) time units."""

MANY_MICROBATCHES = ((2, 4), (4, 8), (4, 4), (3, 7), (1, 3))
"""(p, m) with m >= p, question 2.1."""

FEW_MICROBATCHES = ((4, 2), (4, 1), (5, 3), (8, 3))
"""(p, m) with m < p, question 2.2."""

DESIGN_P, DESIGN_M = 4, 8
DESIGN_COSTS = Costs(F=1, B=2, I=1, W=1)
"""Assignment 4's costs: a backward split into I and W may take 1 each, a whole B 2."""

MEMORY_LIMIT = 4.0
"""Assignment 4's limit on every rank, in micro-batch activations of a full stage (p)."""

VALID_SHARE = 0.1
"""The share of assignment 4's marks for a valid schedule within the limit, however slow."""


def one_line(error: Exception) -> str:
    """An error's message on one line (:func:`ppbook.checks.joined_lines`), cut to 400
    characters."""
    return joined_lines(error, 400)


def simulated(rows: object, p: int, m: int, costs: Costs, who: str) -> Timeline:
    """``rows`` (one list of action strings per rank) as a schedule of p ranks and m
    micro-batches, simulated; ValueError (ScheduleError for an invalid schedule or a
    deadlock) saying what is wrong."""
    if not isinstance(rows, list) or not all(
        isinstance(row, list) and all(isinstance(a, str) for a in row) for row in rows
    ):
        raise ValueError(
            f"{who} must return one list of action strings per rank, such as "
            f'[["0F0", "0B0"], ["1F0", "1B0"]], got {rows!r:.80}'
        )
    if len(rows) != p:
        raise ValueError(f"{who}: expected {p} ranks (one list each), got {len(rows)}")
    schedule = Schedule.from_strings(rows, name=who)
    if schedule.num_microbatches != m:
        raise ValueError(
            f"{who}: expected micro-batches 0 to {m - 1}, got 0 to {schedule.num_microbatches - 1}"
        )
    return simulate(schedule, costs)


def over_limit(timeline: Timeline, limits: list[float]) -> str | None:
    """Which rank first holds more activations than its limit, when, and by how much."""
    worst = None  # (time, rank, peak, limit)
    for rank, limit in enumerate(limits):
        curve = timeline.memory(rank)
        over = [(time, held) for time, held in curve if held > limit + 1e-9]
        if over and (worst is None or over[0][0] < worst[0]):
            worst = (over[0][0], rank, max(held for _, held in over), limit)
    if worst is None:
        return None
    time, rank, peak, limit = worst
    return (
        f"rank {rank} goes over its limit of {limit:g} at t = {time:g} {timeline.time_unit}s "
        f"and holds up to {peak:g} {ACTIVATION_UNIT}, {peak - limit:g} too many"
    )


def _per_case(data: object, cases, judge, refused, right_line: str) -> tuple[float, str]:
    """Assignment 2's schedules ``data``, one per (p, m) of ``cases``, each simulated and
    judged: ``judge(timeline, p, m, who)`` is None when right, else what is wrong;
    ``refused(error, who)`` says what is wrong with a schedule that does not run. A share of
    the marks each, the first problem's line, or ``right_line`` when all are right."""
    if not isinstance(data, list) or len(data) != len(cases):
        return 0.0, f"expected one schedule per (p, m) of {list(cases)}, got {data!r:.80}"
    right, first = 0, ""
    for (p, m), rows in zip(cases, data, strict=True):
        who = f"one_f_one_b_rows({p}, {m})"
        try:
            timeline = simulated(rows, p, m, ONE_F_ONE_B_COSTS, who)
        except ValueError as error:
            first = first or refused(error, who)
            continue
        wrong = judge(timeline, p, m, who)
        if wrong is None:
            right += 1
        elif not first:
            first = wrong
    if right == len(cases):
        return 1.0, right_line
    return right / len(cases), f"{right} of {len(cases)} right; {first}"


def _makespan_wrong(timeline: Timeline, p: int, m: int, who: str) -> str | None:
    want = (m + p - 1) * 3.0
    more = timeline.makespan - want
    if abs(more) <= 1e-9:
        return None
    return (
        f"{who} takes {timeline.makespan:g} time units, {abs(more):g} "
        f"{'more' if more > 0 else 'less'} than (m+p-1)(F+B) = {want:g} (F = 1, B = 2)"
    )


def _memory_wrong(timeline: Timeline, p: int, m: int, who: str) -> str | None:
    excess = over_limit(timeline, [min(p - rank, m) for rank in range(p)])
    if excess is None:
        return None
    return (
        f"{who}: {excess} (1F1B's rank r holds at most min(p - r, m)); start each "
        "backward as soon as its gradient can arrive, before more forwards"
    )


def _one_f_one_b_cases(cases):
    def score(data: object) -> tuple[float, str]:
        """1F1B's makespan (m+p-1)(F+B) at every (p, m) of ``cases``; a share each."""
        return _per_case(
            data,
            cases,
            _makespan_wrong,
            lambda error, who: one_line(error),
            f"right: valid, and (m+p-1)(F+B) for every (p, m) of {list(cases)}",
        )

    return score


score_many_microbatches = _one_f_one_b_cases(MANY_MICROBATCHES)
score_few_microbatches = _one_f_one_b_cases(FEW_MICROBATCHES)


def score_memory(data: object) -> tuple[float, str]:
    """1F1B's memory: rank r never holds more than min(p - r, m) micro-batches, at every
    (p, m) of both questions (their schedules in that order)."""
    return _per_case(
        data,
        MANY_MICROBATCHES + FEW_MICROBATCHES,
        _memory_wrong,
        lambda error, who: f"{who} does not run yet (questions 2.1 and 2.2 say why)",
        "right: rank r holds at most min(p - r, m) micro-batches, as 1F1B does",
    )


def score_design(data: object) -> tuple[float, str]:
    """Assignment 4: a valid schedule within :data:`MEMORY_LIMIT` earns
    :data:`VALID_SHARE`; the rest grows linearly from 1F1B's makespan to ZB-H1's."""
    who = "my_schedule()"
    try:
        timeline = simulated(data, DESIGN_P, DESIGN_M, DESIGN_COSTS, who)
    except ValueError as error:
        return 0.0, one_line(error)
    excess = over_limit(timeline, [MEMORY_LIMIT] * DESIGN_P)
    if excess is not None:
        return 0.0, f"over the memory limit: {excess}"
    slow = simulate(one_f_one_b(DESIGN_P, DESIGN_M), DESIGN_COSTS).makespan
    fast = simulate(zb_h1(DESIGN_P, DESIGN_M), DESIGN_COSTS).makespan
    took = timeline.makespan
    if took <= fast + 1e-9:
        return 1.0, f"full marks: {took:g} time units, at or below ZB-H1's {fast:g}"
    if took >= slow - 1e-9:
        return VALID_SHARE, (
            f"valid and within the memory limit, but {took:g} time units is no faster than "
            f"1F1B's {slow:g}; ZB-H1 takes {fast:g}: split the backward and move the W passes"
        )
    gained = (slow - took) / (slow - fast)
    return VALID_SHARE + (1 - VALID_SHARE) * gained, (
        f"{took:g} time units: {gained:.0%} of the way from 1F1B's {slow:g} to ZB-H1's {fast:g}"
    )
