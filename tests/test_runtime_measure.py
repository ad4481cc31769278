"""Measured costs are per stage chunk; the simulator is fed costs of one device's share.

No process is started: a "measured" timeline is laid out by hand, every action one after
another in an order that respects the schedule, each kind with its own duration per stage
chunk. Simulated under the costs read off it, every action must take as long as it was
measured to take, for schedules with one chunk per rank and with two (interleaved 1F1B,
ZB-V, DualPipeV), which is what ``ppbook run --compare`` relies on.
"""

from __future__ import annotations

import pytest

from ppbook.costs import Costs
from ppbook.runtime.measure import KINDS, measured_costs
from ppbook.schedule import KINDS as COMPUTE_KINDS
from ppbook.schedules import build
from ppbook.simulate import simulate
from ppbook.timeline import Timeline

CHUNK_TIME = {"F": 1.0, "B": 2.0, "I": 1.5, "W": 0.5, "FB": 2.75}  # seconds per chunk pass


def kind_of(step) -> str:
    return "FB" if len(step.parts) == 2 else step.kind


def measured(schedule) -> Timeline:
    """Every action alone, in the order of a simulated run, each taking CHUNK_TIME."""
    order = simulate(schedule, Costs(F=1, B=2, W=1))  # any valid order will do
    positions = sorted(
        (
            (order.starts[r][i], r, i)
            for r, row in enumerate(schedule.actions)
            for i in range(len(row))
        )
    )
    starts = [[0.0] * len(row) for row in schedule.actions]
    ends = [[0.0] * len(row) for row in schedule.actions]
    clock = 0.0
    for _, rank, position in positions:
        starts[rank][position] = clock
        clock += CHUNK_TIME[kind_of(schedule.actions[rank][position])]
        ends[rank][position] = clock
    return Timeline.from_arrays(schedule, starts, ends, source="measured", time_unit="s")


CASES = [
    ("1f1b", None, 1.0),
    ("zb-h1", None, 1.0),
    ("interleaved-1f1b", 2, 0.5),
    ("interleaved-1f1b", 3, 1 / 3),
    ("zb-v", None, 0.5),
    ("dualpipev", None, 0.5),
]


@pytest.mark.parametrize(("name", "chunks", "share"), CASES)
def test_costs_are_for_a_device_share_and_simulate_to_the_measured_times(name, chunks, share):
    schedule = build(name, 2, 6 if chunks == 3 else 4, chunks)
    assert schedule.chunk_share == pytest.approx(share)
    timeline = measured(schedule)
    costs = measured_costs([timeline])
    forward = costs.per_stage(schedule.num_stages)["F"]
    assert forward == pytest.approx([CHUNK_TIME["F"] / share] * schedule.num_stages)
    simulated = simulate(schedule, costs)
    for row in simulated.intervals:
        for interval in row:
            kind = "FB" if len(interval.action.parts) == 2 else interval.action.kind
            assert interval.duration == pytest.approx(CHUNK_TIME[kind]), interval.action


def test_the_measured_kinds_are_the_schedule_kinds_and_the_overlapped_pair():
    assert KINDS == (*COMPUTE_KINDS, "FB")
