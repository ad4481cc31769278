"""Scores of assignment 2: a 1F1B generator for any p and m
(``notebooks/assignments/02_one_f_one_b.ipynb``); assignment 4's score is
:mod:`.score_design`.

A schedule arrives as data (one list of action strings per rank) and is judged by what
makes 1F1B (PipeDream-Flush, arXiv:2006.09503) right, not by agreement with one answer:

- **valid**: p ranks, rank r runs stage r, every micro-batch passes every stage with one
  forward and one whole backward (:func:`.schedule_rows.read_rows`, on its own), and the
  simulator runs it to the end (a deadlock names the stuck ranks and actions);
- **the 1F1B order** (:func:`order_wrong`), on every rank r: forwards in micro-batch order,
  backwards in micro-batch order, min(p-1-r, m) warm-up forwards (so min(p-r, m)
  forwards before its first backward), then one forward and one backward in turn while
  forwards remain, then the remaining backwards;
- **its time**: (m+p-1)(F+B) at F = 1, B = 2 (:data:`ONE_F_ONE_B_COSTS`), and at
  F = 1, B = 3 with a transfer of 0.5 on every message (:data:`SLOW_LINK_COSTS`) the time
  of 1F1B's own order (:func:`ppbook.schedules.one_f_one_b`), where GPipe's order, which
  matches (m+p-1)(F+B), ends sooner;
- **its memory**: rank r never holds more than min(p - r, m) micro-batches' activations.

Questions 2.1 (m >= p) and 2.2 (m < p) require validity, the order and the time; 2.3
requires validity, the order and the memory, on both kinds of case. The notebook's
self-checks use the fixed cases below; the grader asks each question on cases it draws
(:func:`varied`: p up to 8, m up to 16, with p = 1 and m = 1), none of them the fixed
ones, so a table of the fixed answers earns nothing there.
"""

from __future__ import annotations

import random

from ppbook.assign.drawn import on_drawn_cases
from ppbook.assign.schedule_rows import one_line, over_limit, read_rows
from ppbook.assign.score_design import score_design  # noqa: F401 (assignment 4's score)
from ppbook.costs import Costs
from ppbook.pipeline_schedule import Schedule
from ppbook.schedules.basic import one_f_one_b
from ppbook.simulate import simulate
from ppbook.timeline import Timeline

ONE_F_ONE_B_COSTS = Costs(F=1, B=2)
"""Uniform costs: 1F1B takes (m+p-1)(F+B) = 3(m+p-1) time units, as GPipe does."""

SLOW_LINK_COSTS = Costs(F=1, B=3, comm=0.5)
"""A slower backward and a transfer of 0.5 on every message between ranks: 1F1B's steady
state waits for each gradient's round trip, GPipe's order does not, so their times differ."""

MANY_MICROBATCHES = ((2, 4), (4, 8), (4, 4), (3, 7), (1, 3))
"""(p, m) with m >= p: question 2.1 in the notebook's self-check."""

FEW_MICROBATCHES = ((4, 2), (4, 1), (5, 3), (8, 3))
"""(p, m) with m < p: question 2.2 in the notebook's self-check."""

MAX_P, MAX_M = 8, 16
"""The largest p and m the grader draws."""

READY_MADE_ORDERS = (
    "ppbook.schedules",  # every builder, build(), SCHEDULES, zb-auto
    "ppbook.pytorch_csv",  # PyTorch's orders read from CSV
    "torch.distributed.pipelining",  # PyTorch's schedule classes
    "ppbook.runtime",  # torch_import (PyTorch's orders), examples, config.build_schedule
    "ppbook.cli",  # ppbook simulate --schedule NAME
    "ppbook.widgets",  # widgets build schedules by name
    "ppbook.cost_model.sizing_search",
    "ppbook.paper_tables",
    "ppbook.cost_model.across_nodes",
    "ppbook.closed_form",
    "ppbook.critical_path",
    "ppbook.exercises.solution",
    *(
        f"ppbook.exercises.{chapter}"
        for chapter in (
            "ch1 ch2 ch3 ch3_run ch4 ch5 ch6 ch7 ch8 ch8_jobs ch9 ch10 ch10_torch".split()
        )
    ),
    "ppbook.assign.score_schedules",
    "ppbook.assign.score_design",
)
"""What assignments 2 and 4 refuse to see called (:data:`ppbook.assign.questions.FORBIDDEN`):
every path in ppbook or PyTorch to a ready-made pipeline order."""


def _forwards(count: int) -> str:
    return f"{count} forward{'s' * (count != 1)}"


def order_wrong(schedule: Schedule, p: int, m: int, who: str) -> str | None:
    """The first place where ``schedule`` (read by :func:`.schedule_rows.read_rows`: every
    pass once, stage r on rank r) leaves 1F1B's order, as a line that says what 1F1B does
    instead; None when it is 1F1B's order."""
    for rank, row in enumerate(schedule.actions):
        for kind, name in (("F", "forwards"), ("B", "backwards")):
            order = [a.microbatch for a in row if a.kind == kind]
            late = next((k for k, j in enumerate(order) if j != k), None)
            if late is not None:
                return (
                    f"{who}: rank {rank} runs {rank}{kind}{order[late]} before "
                    f"{rank}{kind}{late}; 1F1B runs the {name} in micro-batch order"
                )
        kinds = [a.kind for a in row]
        warmup = min(p - 1 - rank, m)
        first, due = kinds.index("B"), min(p - rank, m)  # forwards before the first backward
        if first != due:
            rule = f"{_forwards(warmup)} of warm-up"
            if warmup == m:
                rule += ", all of them before its first backward"
            else:
                rule += (
                    f", then one forward before each backward: {_forwards(due)} before its first"
                )
            why = "and holds more than it needs" if first > due else "and waits for gradients"
            return (
                f"{who}: rank {rank} runs {_forwards(first)} before its first backward {why}; "
                f"1F1B runs min(p-1-r, m) = {rule}"
            )
        want = ["F"] * warmup + ["F", "B"] * (m - warmup) + ["B"] * warmup
        at = next((k for k, (got, w) in enumerate(zip(kinds, want, strict=True)) if got != w), None)
        if at is not None:
            twice = "forwards" if kinds[at] == "F" else "backwards"
            return (
                f"{who}: rank {rank} runs two {twice} in a row ({row[at - 1]}, {row[at]}) "
                "while it still has forwards to run; after its warm-up 1F1B alternates one "
                "forward and one backward until the forwards run out, then runs the "
                "remaining backwards"
            )
    return None


def _time_wrong(schedule: Schedule, timeline: Timeline, p: int, m: int, who: str) -> str | None:
    """(m+p-1)(F+B) under :data:`ONE_F_ONE_B_COSTS`, and 1F1B's own time under
    :data:`SLOW_LINK_COSTS`."""
    want = (m + p - 1) * 3.0
    if abs(timeline.makespan - want) > 1e-9:
        more = timeline.makespan - want
        return (
            f"{who} takes {timeline.makespan:g} time units, {abs(more):g} "
            f"{'more' if more > 0 else 'less'} than (m+p-1)(F+B) = {want:g} (F = 1, B = 2)"
        )
    took = simulate(schedule, SLOW_LINK_COSTS).makespan
    reference = simulate(one_f_one_b(p, m), SLOW_LINK_COSTS).makespan
    if abs(took - reference) > 1e-9:
        return (
            f"{who} takes {took:g} time units at F = 1, B = 3 and a transfer of 0.5 per "
            f"message; 1F1B's order takes {reference:g}"
        )
    return None


def _memory_wrong(schedule: Schedule, timeline: Timeline, p: int, m: int, who: str):
    """Rank r never holds more than min(p - r, m) micro-batches' activations."""
    excess = over_limit(timeline, [min(p - rank, m) for rank in range(p)])
    if excess is None:
        return None
    return (
        f"{who}: {excess} (1F1B's rank r holds at most min(p - r, m)); start each "
        "backward as soon as its gradient can arrive, before more forwards"
    )


def judged(data: object, cases, measure, right_line: str) -> tuple[float, str]:
    """Schedules ``data``, one per (p, m) of ``cases``, each read, simulated under
    :data:`ONE_F_ONE_B_COSTS`, and held to 1F1B's order and to ``measure(schedule,
    timeline, p, m, who)`` (None when right, else what is wrong). A share of the marks
    each; the first wrong case's problems (where it leaves 1F1B's order, then what it
    measures wrong), or ``right_line`` when all are right."""
    if not isinstance(data, list) or len(data) != len(cases):
        return 0.0, f"expected one schedule per (p, m) of {list(cases)}, got {data!r:.80}"
    right, first = 0, ""
    for (p, m), rows in zip(cases, data, strict=True):
        who = f"one_f_one_b_rows({p}, {m})"
        try:
            schedule = read_rows(rows, p, m, split=False, who=who)
            timeline = simulate(schedule, ONE_F_ONE_B_COSTS)
        except ValueError as error:
            first = first or one_line(error)
            continue
        found = (order_wrong(schedule, p, m, who), measure(schedule, timeline, p, m, who))
        wrong = "; ".join(problem for problem in found if problem) or None
        if wrong is None:
            right += 1
        elif not first:
            first = wrong
    if right == len(cases):
        return 1.0, right_line
    return right / len(cases), f"{right} of {len(cases)} right; {first}"


def score_order_and_time(cases):
    """Questions 2.1 and 2.2 on ``cases``: valid, 1F1B's order, and its time."""

    def score(data: object) -> tuple[float, str]:
        """Valid, 1F1B's order and 1F1B's time at every (p, m) of the cases; a share each."""
        return judged(
            data,
            cases,
            _time_wrong,
            f"right: valid, 1F1B's order, and 1F1B's time for every (p, m) of {list(cases)}",
        )

    return score


def score_order_and_memory(cases):
    """Question 2.3 on ``cases``: valid, 1F1B's order, and min(p - r, m) on rank r."""

    def score(data: object) -> tuple[float, str]:
        """Valid, 1F1B's order, and rank r holding at most min(p - r, m) micro-batches, at
        every (p, m) of the cases; a share each."""
        return judged(
            data,
            cases,
            _memory_wrong,
            "right: 1F1B's order, and rank r holds at most min(p - r, m) micro-batches",
        )

    return score


score_many_microbatches = score_order_and_time(MANY_MICROBATCHES)
score_few_microbatches = score_order_and_time(FEW_MICROBATCHES)
score_memory = score_order_and_memory(MANY_MICROBATCHES + FEW_MICROBATCHES)


def draw_many(rng: random.Random, count: int = 5) -> tuple[tuple[int, int], ...]:
    """``count`` cases with m >= p, none of :data:`MANY_MICROBATCHES`: one with p = 1, one
    with m = p, the rest with m > p."""
    cases: list[tuple[int, int]] = []

    def add(case):
        if case not in cases and case not in MANY_MICROBATCHES:
            cases.append(case)

    while not cases:
        add((1, rng.randint(1, MAX_M)))
    while len(cases) < 2:
        p = rng.randint(2, MAX_P)
        add((p, p))
    while len(cases) < count:
        p = rng.randint(2, MAX_P)
        add((p, rng.randint(p + 1, MAX_M)))
    return tuple(cases)


def draw_few(rng: random.Random, count: int = 4) -> tuple[tuple[int, int], ...]:
    """``count`` cases with m < p, none of :data:`FEW_MICROBATCHES`: one with m = 1, the
    rest with 2 <= m < p."""
    cases: list[tuple[int, int]] = []

    def add(case):
        if case not in cases and case not in FEW_MICROBATCHES:
            cases.append(case)

    while not cases:
        add((rng.randint(2, MAX_P), 1))
    while len(cases) < count:
        p = rng.randint(3, MAX_P)
        add((p, rng.randint(2, p - 1)))
    return tuple(cases)


def calls(cases) -> str:
    """The source that calls one_f_one_b_rows on every case, as the grader collects it."""
    return f"[one_f_one_b_rows(*case) for case in {[list(case) for case in cases]!r}]"


DRAWS = {
    "2.1": (draw_many, score_order_and_time),
    "2.2": (draw_few, score_order_and_time),
    "2.3": (lambda rng: draw_many(rng, 3) + draw_few(rng, 3), score_order_and_memory),
}
"""For each question, how the grader draws its cases and what scores them."""


def varied(question):
    """``question`` (2.1, 2.2 or 2.3) with a ``variant``: the same question on cases drawn
    by :data:`DRAWS` at grading time."""
    draw, scorer = DRAWS[question.name]
    return on_drawn_cases(question, draw, scorer, calls)
