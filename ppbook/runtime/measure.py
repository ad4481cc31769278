"""Hold a measured run against the simulator: measure the costs, simulate, compare.

:func:`measured_costs` reads a :class:`~ppbook.costs.Costs` off measured timelines: the
mean time of ``F``, ``B``, ``I``, ``W`` (and of an overlapped pair) on each stage, and the
transfer time, the simulator's delay on a dependency that crosses ranks. A transfer is
measured where a rank really waited for one: its action started after a message whose
producer ended later than the rank's own previous action, and the gap between the two is
the transfer (send, wire, receive, and the Python in between); the median of those gaps
is the estimate. A measured time is that of one pass through one stage chunk; the costs
are given, as everywhere in the package (:mod:`ppbook.costs`), for one device's share of
the model: each measured time divided by the schedule's ``chunk_share`` (times v with v
chunks per rank), which the simulator multiplies back.

:func:`compare` simulates the schedule under those costs and sets measured against
simulated makespan and bubble, in both conventions (REFERENCES.md): the bubble fraction
f = idle / total time (GPipe) and the bubble ratio r = idle / compute time (Megatron-LM,
the Ultra-Scale Playbook).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from ppbook.costs import Costs
from ppbook.pipeline_schedule import KINDS as COMPUTE_KINDS
from ppbook.runtime.result import RunResult, after_warm_up, typical_step
from ppbook.simulate import simulate
from ppbook.timeline import Timeline
from ppbook.validate import ScheduleIndex

KINDS = (*COMPUTE_KINDS, "FB")
"""What is timed: each compute kind, and "FB" for an overlapped forward-backward pair."""


def stage_times(timelines: Sequence[Timeline]) -> dict[str, dict[int, list[float]]]:
    """Every measured duration, by kind ("FB" for an overlapped pair) and stage."""
    times: dict[str, dict[int, list[float]]] = {kind: defaultdict(list) for kind in KINDS}
    for timeline in timelines:
        for row in timeline.intervals:
            for interval in row:
                action = interval.action
                kind = "FB" if len(action.parts) == 2 else action.kind
                stage = action.parts[0].stage
                times[kind][stage].append(interval.duration)
    return times


def transfer_gaps(timeline: Timeline) -> list[float]:
    """Gaps between a message's producer ending and the waiting consumer starting."""
    schedule = timeline.schedule
    index = ScheduleIndex(schedule)
    where, step_rank, first = index.where, index.step_rank, index.first
    gaps = []
    for rank, row in enumerate(schedule.actions):
        for position, step in enumerate(row):
            deps = [where[key] for part in step.parts for key in index.dependencies(*part)]
            deps = [sid for sid in deps if sid >= 0 and sid != first[rank] + position]
            if not deps:
                continue
            latest = max(deps, key=lambda sid: _end(timeline, index, sid))
            producer_rank = step_rank[latest]
            produced = _end(timeline, index, latest)
            previous = timeline.ends[rank][position - 1] if position else float("-inf")
            if producer_rank != rank and produced >= previous:  # this rank waited for it
                gaps.append(timeline.starts[rank][position] - produced)
    return gaps


def _end(timeline: Timeline, index: ScheduleIndex, sid: int) -> float:
    rank = index.step_rank[sid]
    return timeline.ends[rank][sid - index.first[rank]]


def measured_costs(timelines: Sequence[Timeline]) -> Costs:
    """Mean per-stage costs and the median transfer time, in seconds, as a :class:`Costs`.

    The costs are for one device's share of the model: a stage chunk's mean time divided
    by ``schedule.chunk_share`` (the transfer time is not scaled).
    """
    schedule = timelines[0].schedule
    times = stage_times(timelines)
    share = schedule.chunk_share
    mean = {
        kind: {stage: statistics.fmean(values) / share for stage, values in by_stage.items()}
        for kind, by_stage in times.items()
    }
    n = schedule.num_stages

    def per_stage(kind: str, fallback) -> list[float]:
        return [mean[kind].get(stage, fallback(stage)) for stage in range(n)]

    forward = per_stage("F", lambda s: 0.0)
    backward = per_stage("B", lambda s: mean["I"].get(s, 0.0) + mean["W"].get(s, 0.0))
    kwargs = {"F": forward, "B": backward}
    if mean["I"] or mean["W"]:
        kwargs["I"] = per_stage("I", lambda s: backward[s] / 2)
        kwargs["W"] = per_stage("W", lambda s: backward[s] / 2)
    if mean["FB"]:
        kwargs["FB"] = per_stage("FB", lambda s: forward[s] + backward[s])
    gaps = [gap for timeline in timelines for gap in transfer_gaps(timeline)]
    return Costs(**kwargs, comm=max(0.0, statistics.median(gaps)) if gaps else 0.0)


@dataclass(frozen=True)
class Comparison:
    """A measured timeline, the simulation of the same schedule under its measured costs."""

    measured: Timeline
    simulated: Timeline
    costs: Costs

    def rows(self) -> list[tuple[str, float, float]]:
        """``(quantity, measured, simulated)`` for makespan and both bubble conventions."""
        m, s = self.measured, self.simulated
        return [
            ("makespan (ms)", m.makespan * 1e3, s.makespan * 1e3),
            ("bubble fraction f = idle/total", m.bubble_fraction, s.bubble_fraction),
            ("bubble ratio r = idle/compute", m.bubble_ratio, s.bubble_ratio),
        ]

    def table(self) -> str:
        """The rows as a text table."""
        lines = [f"{'':32} {'measured':>10} {'simulated':>10}"]
        lines += [f"{name:32} {a:10.4f} {b:10.4f}" for name, a, b in self.rows()]
        lines.append(f"transfer time used by the simulator: {self.costs.transfer * 1e3:.3f} ms")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """Plain data, for ``ppbook run --compare --json``."""
        keys = ("makespan", "bubble_fraction", "bubble_ratio")
        return {
            "time_unit": "s",
            "measured": {k: getattr(self.measured, k) for k in keys},
            "simulated": {k: getattr(self.simulated, k) for k in keys},
            "transfer": self.costs.transfer,
        }


def compare_steps(steps: list[Timeline]) -> Comparison:
    """Measured against simulated for the measured ``steps`` of a run: costs from the steps
    after the warm-up step, compared with the typical step
    (:func:`~ppbook.runtime.result.typical_step`)."""
    costs = measured_costs(after_warm_up(steps))
    measured = typical_step(steps)
    return Comparison(measured, simulate(measured.schedule, costs), costs)


def compare(run: RunResult) -> Comparison:
    """Measured against simulated for a run (:func:`compare_steps` of its steps)."""
    return compare_steps(run.timelines)
