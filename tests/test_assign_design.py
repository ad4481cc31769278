"""Assignment 4 (ppbook.assign.score_design, ppbook.assign.design_problem): the bound that no
schedule beats, checked against every schedule of small problems and against random valid
schedules of the assignment's own; the library's schedules below full marks; a better
design above a worse one; the instructor's notebook at full marks; wrong rows at zero.

Schedules come from ppbook.schedules' builders, from orders written here, and from the
instructor's notebook; memory and makespans from the simulator.
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import nbformat
import pytest

from ppbook.assign.design_problem import (
    DESIGN_COSTS,
    DESIGN_M,
    DESIGN_P,
    MEMORY_LIMIT,
    bound_terms,
    makespan_lower_bound,
)
from ppbook.assign.questions import ASSIGNMENTS, FORBIDDEN
from ppbook.assign.score_design import FLOOR_AT, FULL_WITHIN, share_for
from ppbook.costs import Costs
from ppbook.schedule import Schedule
from ppbook.schedules import SCHEDULES, build, zb_auto, zb_h1
from ppbook.schedules.auto import zb_span_lower_bound
from ppbook.simulate import simulate
from ppbook.validate import ScheduleError

NOTEBOOK = Path(__file__).parents[1] / "notebooks" / "assignments" / "04_design_a_schedule.ipynb"
QUESTION = ASSIGNMENTS["04_design_a_schedule"][0]
BOUND = 45.5  # rank 3 ends its last I at 4.5 + 8 * 3.5 + 5 * 1.5 = 40; then 3 * (0.5 + 1) + 1


def score(data: object) -> tuple[float, str]:
    return QUESTION.score(json.loads(json.dumps(data)))


def makespan_within(rows, costs, limit) -> float | None:
    """The simulated makespan of ``rows``, None if it deadlocks or goes over ``limit``."""
    try:
        timeline = simulate(Schedule.from_strings(rows), costs)
    except ScheduleError:
        return None
    held = max(timeline.peak_activations(r) for r in range(timeline.num_ranks))
    return timeline.makespan if held <= limit + 1e-9 else None


def rank_orders(rank: int, m: int):
    """Every order of rank ``rank``'s passes: each micro-batch F then B, or F, I, W."""
    for whole in itertools.product((True, False), repeat=m):
        chains = [["F", "B"] if w else ["F", "I", "W"] for w in whole]
        slots = [j for j, chain in enumerate(chains) for _ in chain]
        for order in set(itertools.permutations(slots)):
            seen = [0] * m
            row = []
            for j in order:
                row.append(f"{rank}{chains[j][seen[j]]}{j}")
                seen[j] += 1
            yield row


def one_at_a_time(p: int, m: int) -> list[list[str]]:
    return [[f"{r}{kind}{j}" for j in range(m) for kind in "FIW"] for r in range(p)]


def instructor_solution():
    """``my_schedule`` as the instructor's notebook defines it, run in its own namespace."""
    cells = nbformat.read(NOTEBOOK, as_version=4).cells
    scope: dict = {}
    for cell in cells:
        if cell.cell_type == "code" and "assert_right" not in cell.source.split("import")[-1]:
            exec(cell.source, scope)  # noqa: S102 (the project's own notebook)
    return scope["my_schedule"]


@pytest.mark.parametrize(
    ("costs", "limit"),
    [
        (Costs(F=1, I=1, W=1), 1),
        (Costs(F=1, I=1, W=1), 2),
        (Costs(F=(1, 2), I=(1, 1.5), W=(0.5, 1), comm=0.5), 1),
        (Costs(F=(1, 1.5), I=(2, 1), W=(1, 0.5), comm=0.25), 2),
    ],
)
def test_no_schedule_of_a_small_problem_beats_the_bound(costs, limit):
    p, m = 2, 2
    bound = makespan_lower_bound(p, m, costs, limit)
    best = float("inf")
    for rows in itertools.product(*(list(rank_orders(r, m)) for r in range(p))):
        took = makespan_within(list(rows), costs, limit)
        if took is not None:
            assert took >= bound - 1e-9, rows
            best = min(best, took)
    assert best < float("inf")


def test_random_valid_schedules_of_the_assignment_never_beat_the_bound():
    """A list scheduler with random choices: every rank, when free, runs a pass that is
    ready (its input has arrived) chosen at random, F only while it has room."""
    rng = random.Random(16)
    cost = DESIGN_COSTS.per_stage(DESIGN_P)
    tried = 0
    for _ in range(150):
        rows = [[] for _ in range(DESIGN_P)]
        done = {(r, k): 0 for r in range(DESIGN_P) for k in "FIW"}
        while any(len(row) < 3 * DESIGN_M for row in rows):
            r = rng.randrange(DESIGN_P)
            ready = []
            f, i, w = (done[(r, k)] for k in "FIW")
            if f < DESIGN_M and f - w < MEMORY_LIMIT and (r == 0 or done[(r - 1, "F")] > f):
                ready.append("F")
            if i < f and (r == DESIGN_P - 1 or done[(r + 1, "I")] > i):
                ready.append("I")
            if w < i:
                ready.append("W")
            if ready:
                kind = rng.choice(ready)
                rows[r].append(f"{r}{kind}{done[(r, kind)]}")
                done[(r, kind)] += 1
        took = makespan_within(rows, DESIGN_COSTS, MEMORY_LIMIT)
        assert took is not None and took >= BOUND - 1e-9
        tried += 1
    assert tried == 150 and cost["F"][3] == 1.5


def test_the_bound_agrees_with_the_zero_bubble_span_bound_and_is_reached_where_known():
    assert makespan_lower_bound() == BOUND
    assert BOUND == zb_span_lower_bound(DESIGN_P, DESIGN_M, DESIGN_COSTS, MEMORY_LIMIT)
    uniform = Costs(F=1, I=1, W=1)
    for p, m in ((4, 8), (3, 5), (2, 6)):
        zb = simulate(zb_h1(p, m), uniform).makespan  # ZB-H1: 3m + p - 1 at K = p
        assert makespan_lower_bound(p, m, uniform, p) == zb == 3 * m + p - 1


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ((4, 8, Costs(F=1, I=1, W=1, w_memory=0.5), 3), "w_memory = 1"),
        ((4, 8, Costs(F=1, B=3, I=1, W=1), 3), r"B = I \+ W on every stage"),
        ((4, 8, DESIGN_COSTS, 0.5), "no schedule fits a memory limit of 0.5"),
        ((0, 8, DESIGN_COSTS, 3), "p"),
    ],
)
def test_the_bound_refuses_what_it_does_not_cover(arguments, message):
    with pytest.raises(ValueError, match=message):
        bound_terms(*arguments)


def test_no_library_schedule_earns_full_marks():
    points = {}
    for name in SCHEDULES:
        try:
            schedule = build(name, DESIGN_P, DESIGN_M)
        except ValueError:  # DualPipe and the like need other p or m
            continue
        points[name] = score(schedule.to_strings())[0]
    for limit in (1, 2, 3):
        points[f"zb-auto K={limit}"] = score(zb_auto(4, 8, DESIGN_COSTS, limit).to_strings())[0]
    assert {"1f1b", "zb-h1", "zb-h2", "zb-v", "interleaved-1f1b", "zb-auto K=3"} <= set(points)
    assert max(points.values()) <= 5, points
    took = simulate(zb_auto(4, 8, DESIGN_COSTS, 3), DESIGN_COSTS).makespan
    assert took == 51 and points["zb-auto K=3"] == round(10 * share_for(took, BOUND), 2)
    got, line = score(zb_h1(4, 8).to_strings())  # today: 10, "at or below ZB-H1's 27"
    assert got == 0 and line == (
        "over the memory limit: rank 0 goes over its limit of 3 at t = 3 time units and "
        "holds up to 4 micro-batch activations of a full stage, 1 too many"
    )
    assert (
        "rank 0 runs 7F0, but rank r holds stage r only"
        in score(build("zb-v", 4, 8).to_strings())[1]
    )


def test_a_better_design_earns_more_and_the_instructor_s_earns_full_marks():
    solution = instructor_solution()()
    designs = [
        one_at_a_time(DESIGN_P, DESIGN_M),
        zb_auto(4, 8, DESIGN_COSTS, 2).to_strings(),
        zb_auto(4, 8, DESIGN_COSTS, 3).to_strings(),
        solution,
    ]
    times = [makespan_within(rows, DESIGN_COSTS, MEMORY_LIMIT) for rows in designs]
    points = [score(rows)[0] for rows in designs]
    assert times == sorted(times, reverse=True) and len(set(times)) == 4
    assert points == sorted(points) and points[0] == 1 and points[-1] == 10
    assert times[-1] == BOUND
    got, line = score(solution)
    assert line.startswith("full marks: 45.5 time units, 0.0% above the lower bound 45.5")
    got, line = score(designs[2])
    assert "51 time units, 12.1% above the lower bound 45.5 that no schedule beats" in line
    assert "full marks within 2% of it (46.41)" in line


def test_the_share_is_continuous_and_monotone_in_the_makespan():
    times = [BOUND * (1 + k / 1000) for k in range(0, 300)]
    shares = [share_for(t, BOUND) for t in times]
    assert all(a >= b for a, b in itertools.pairwise(shares))
    assert all(abs(a - b) < 0.01 for a, b in itertools.pairwise(shares))
    assert share_for(BOUND * (1 + FULL_WITHIN), BOUND) == 1
    assert share_for(BOUND * (1 + FLOOR_AT), BOUND) == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("change", "feedback"),
    [
        (lambda rows: rows.__setitem__(3, []), "rank 3 runs nothing, so no micro-batch passes"),
        (
            lambda rows: rows.__setitem__(2, [a for a in rows[2] if not a.endswith("5")]),
            "rank 2 never runs 2F5, 2B5 (or 2I5 and 2W5): every micro-batch",
        ),
        (lambda rows: rows[1].append("1B0"), "rank 1 runs both 1B0 and a split backward"),
        (lambda rows: rows[0].insert(0, rows[0].pop()), "cannot finish (deadlock)"),
        (lambda rows: rows.append([]), "expected 4 ranks (one list each), got 5"),
    ],
)
def test_rows_that_are_not_a_schedule_of_the_problem_score_zero(change, feedback):
    rows = instructor_solution()()
    change(rows)
    got, line = score(rows)
    assert got == 0 and feedback in line, line
    assert score(None)[0] == 0


def test_ready_made_orders_are_forbidden_and_the_notebook_s_own_cells_are_not():
    from ppbook.assign.forbidden import scan

    for stem in ("02_one_f_one_b", "04_design_a_schedule"):
        cells = nbformat.read(NOTEBOOK.with_name(f"{stem}.ipynb"), as_version=4).cells
        sources = {f"cell {i}": c.source for i, c in enumerate(cells) if c.cell_type == "code"}
        assert scan(sources, FORBIDDEN[stem]) == []
        for code, used in [
            ("from ppbook.schedules import zb_h1", "ppbook.schedules.zb_h1"),
            ("from ppbook.schedules.auto import zb_auto", "ppbook.schedules.auto.zb_auto"),
            ("from ppbook.exercises.ch2 import one_f_one_b", "ppbook.exercises.ch2.one_f_one_b"),
            ("import ppbook.pytorch_csv as orders", "ppbook.pytorch_csv"),
            ("from torch.distributed.pipelining import Schedule1F1B", "torch.distributed"),
            ("from ppbook.runtime.examples import split_one_f_one_b", "ppbook.runtime.examples"),
            ("from ppbook.runtime.torch_import import from_pytorch", "ppbook.runtime.torch_import"),
            ("from ppbook.sizing import SCHEDULES", "ppbook.sizing.SCHEDULES"),
            ("import ppbook.sizing as old_sizing; old_sizing.SCHEDULES", "ppbook.sizing.SCHEDULES"),
            ("x = 'ppbook.sizing.SCHEDULES'", "ppbook.sizing.SCHEDULES"),
            (
                "from ppbook.cost_model.sizing_search import SCHEDULES",
                "ppbook.cost_model.sizing_search.SCHEDULES",
            ),
        ]:
            found = scan({**sources, "cell 99": code}, FORBIDDEN[stem])
            assert len(found) == 1 and found[0].startswith(f"cell 99 uses {used}"), found
