"""Checks of a timeline against answers computed here, from its intervals alone.

- :func:`assert_bubble_from_gaps`: the bubble fraction f and ratio r against the idle time
  summed gap by gap from each rank's intervals (not the timeline's own total minus busy);
- :func:`fastest_possible`: the simulator's timeline of a measured schedule when every
  pass takes the shortest time measured for its kind and stage and transfers are free.
  The simulator starts each action as early as the rank's order and the dependencies
  allow, so no run of the schedule whose passes took at least those times can end sooner:
  a measured makespan below it is a run the simulator's rules do not describe;
- :func:`assert_simulated_busy_is_the_measured_mean`: a run's comparison
  (:func:`ppbook.runtime.measure.compare`) simulates each rank's measured compute time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from ppbook.costs import Costs
from ppbook.simulate import simulate
from ppbook.timeline import Timeline


def assert_bubble_from_gaps(timeline: Timeline) -> None:
    """f = idle / (p * span) and r = idle / busy, with idle the sum of every gap between a
    rank's intervals and between them and the first start and last end of the run."""
    rows = [sorted((i.start, i.end) for i in row) for row in timeline.intervals]
    first = min(start for row in rows for start, _ in row)
    last = max(end for row in rows for _, end in row)
    idle = busy = 0.0
    for row in rows:
        t = first
        for start, end in row:
            idle += max(0.0, start - t)
            busy += end - start
            t = max(t, end)
        idle += last - t
    total = len(rows) * (last - first)
    assert 0 < idle < total
    assert idle + busy == pytest.approx(total, rel=1e-9)  # the intervals do not overlap
    assert timeline.bubble_fraction == pytest.approx(idle / total, rel=1e-9)
    assert timeline.bubble_ratio == pytest.approx(idle / busy, rel=1e-9)


def fastest_possible(timelines: Sequence[Timeline]) -> Timeline:
    """Simulated with each pass's shortest measured time (per kind and stage; an overlapped
    pair under "FB", by its forward's stage) and free transfers; see the module docstring."""
    schedule = timelines[0].schedule
    shortest: dict[str, dict[int, float]] = {kind: {} for kind in ("F", "B", "I", "W", "FB")}
    for timeline in timelines:
        for row in timeline.intervals:
            for interval in row:
                parts = interval.action.parts
                kind = "FB" if len(parts) == 2 else parts[0].kind
                by_stage = shortest[kind]
                stage = parts[0].stage
                by_stage[stage] = min(by_stage.get(stage, math.inf), interval.duration)
    share = schedule.chunk_share  # the simulator multiplies a device share's cost by it

    def per_stage(kind: str) -> list[float]:
        return [shortest[kind].get(s, 0.0) / share for s in range(schedule.num_stages)]

    kinds = ["F", "B", "I", "W"] + (["FB"] if shortest["FB"] else [])
    return simulate(schedule, Costs(**{kind: per_stage(kind) for kind in kinds}))


def assert_no_faster_than_the_simulator_allows(result) -> None:
    """Each measured step of a run takes at least :func:`fastest_possible`'s makespan (less
    the clocks' error bound on every hop between ranks, at most one per action)."""
    bound = fastest_possible(result.timelines)
    slack = len(result.schedule) * (max(result.clock_errors) + 1e-6)
    for step, timeline in enumerate(result.timelines):
        assert timeline.makespan >= bound.makespan - slack, (step, timeline.makespan, bound)


def assert_simulated_busy_is_the_measured_mean(comparison, result) -> None:
    """Each rank's compute time in the comparison's simulation (measured costs) is that
    rank's compute time measured in the steps after the warm-up, on average: the costs
    read off the run, scaled to a device's share and back, simulate to what was measured."""
    steps = result.timelines[1:] or result.timelines
    for rank in range(result.schedule.num_ranks):
        measured = sum(sum(i.duration for i in t.intervals[rank]) for t in steps) / len(steps)
        assert comparison.simulated.busy(rank) == pytest.approx(measured, rel=1e-9), rank
