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
from ppbook.runtime.measure import KINDS, measured_costs, transfer_gaps
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


def test_the_transfer_time_is_the_median_gap_where_a_rank_waited():
    # GPipe p = 2, m = 3 laid out by hand (seconds). Rank 0's forwards take 10 each; rank 1
    # waits for each one, 1, 2 and 3 after it ends. Rank 1's backwards take 10; rank 0
    # waits 2 and 1 for the first two gradients and 30 for the last (a stalled message).
    # Rank 1's backwards wait on their own rank only, and rank 0's forwards on nothing.
    #   rank 0: 0F0 [0, 10], 0F1 [10, 20], 0F2 [20, 30], 0B0 [46, 47], 0B1 [55, 56],
    #           0B2 [94, 95]: its backwards start 2, 1, 30 after 1B0, 1B1, 1B2 end;
    #   rank 1: 1F0 [11, 12], 1F1 [22, 23], 1F2 [33, 34], 1B0 [34, 44], 1B1 [44, 54],
    #           1B2 [54, 64].
    # Gaps 1, 1, 2, 2, 3, 30: the median is 2; the mean, 6.5, would be the outlier's.
    starts = [[0, 10, 20, 46, 55, 94], [11, 22, 33, 34, 44, 54]]
    ends = [[10, 20, 30, 47, 56, 95], [12, 23, 34, 44, 54, 64]]
    timeline = Timeline.from_arrays(
        build("gpipe", 2, 3), starts, ends, source="measured", time_unit="s"
    )
    assert transfer_gaps(timeline) == [2, 1, 30, 1, 2, 3]
    assert measured_costs([timeline]).transfer == 2
    assert measured_costs([timeline]).comm == 2
