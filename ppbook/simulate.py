"""Time a schedule under a cost model: each rank runs its actions in order, each as soon as
the rank is free and the action's dependencies are done (plus a transfer time on every
dependency that crosses ranks).

This is an event-driven list scheduler in O(number of actions): an action becomes ready
when its last dependency finishes, and a rank runs its next action once it is ready. A
schedule that cannot finish is reported at once, naming every stuck rank, the action it is
stuck on and what that action waits for. No recursion, so no recursion limit.
"""

from __future__ import annotations

from collections import deque

from ppbook.costs import Costs
from ppbook.schedule import Action, Schedule
from ppbook.timeline import Interval, Timeline
from ppbook.validate import ScheduleError, backward_kinds, dependencies, validate


def simulate(schedule: Schedule, costs: Costs | None = None, check: bool = True) -> Timeline:
    """Simulate ``schedule`` under ``costs`` (default: F = 1, B = 2, no communication).

    Returns a :class:`~ppbook.timeline.Timeline` with every rank's intervals and the
    metrics (makespan, bubble fraction and ratio, activation memory). ``check=False`` skips
    :func:`~ppbook.validate.validate` (for callers that validated already).
    """
    costs = costs if costs is not None else Costs()
    if check:
        validate(schedule)
    num_stages = schedule.num_stages
    per_stage = costs.per_stage(num_stages)
    fb = per_stage["FB"]
    transfer = costs.transfer
    last_stage = num_stages - 1
    bkind = backward_kinds(schedule)

    # Flatten every rank's steps into ids; map each compute part to the step that runs it.
    step_rank: list[int] = []
    step_list = []
    part_step: dict[Action, int] = {}
    first_id: list[int] = []
    for rank, row in enumerate(schedule.actions):
        first_id.append(len(step_list))
        for step in row:
            sid = len(step_list)
            step_list.append(step)
            step_rank.append(rank)
            for part in step.parts:
                part_step[part] = sid
    n = len(step_list)

    duration = [0.0] * n
    remaining = [0] * n
    waiters: list[list[int]] = [[] for _ in range(n)]
    step_deps: list[list[int]] = [[] for _ in range(n)]
    for sid, step in enumerate(step_list):
        parts = step.parts
        if len(parts) == 1:
            stage, kind, _ = parts[0]
            duration[sid] = per_stage[kind][stage]
        else:
            fwd, bwd = parts  # an overlapped pair: its own time FB, else F + B
            if fb is not None:
                duration[sid] = fb[fwd.stage]
            else:
                duration[sid] = per_stage["F"][fwd.stage] + per_stage[bwd.kind][bwd.stage]
        deps = step_deps[sid]
        for part in parts:
            for dep in dependencies(part, bkind, last_stage):
                did = part_step[dep]
                if did != sid and did not in deps:
                    deps.append(did)
                    waiters[did].append(sid)
        remaining[sid] = len(deps)

    start = [0.0] * n
    end = [0.0] * n
    done = [False] * n
    num_ranks = schedule.num_ranks
    lengths = [len(row) for row in schedule.actions]
    position = [0] * num_ranks
    free_at = [0.0] * num_ranks
    ready = deque(r for r in range(num_ranks) if lengths[r] and remaining[first_id[r]] == 0)
    finished = 0
    while ready:
        rank = ready.popleft()
        sid = first_id[rank] + position[rank]
        t = free_at[rank]
        for did in step_deps[sid]:
            arrive = end[did] + (transfer if step_rank[did] != rank else 0.0)
            if arrive > t:
                t = arrive
        start[sid] = t
        end[sid] = free_at[rank] = t + duration[sid]
        done[sid] = True
        finished += 1
        position[rank] += 1
        for wid in waiters[sid]:
            remaining[wid] -= 1
            wrank = step_rank[wid]
            # A rank is queued once: by the finish of its head's last dependency on another
            # rank, or (below) by its own previous step.
            if remaining[wid] == 0 and wrank != rank and wid == first_id[wrank] + position[wrank]:
                ready.append(wrank)
        if position[rank] < lengths[rank] and remaining[sid + 1] == 0:
            ready.append(rank)

    if finished < n:
        raise ScheduleError(_stuck_report(schedule, step_list, step_rank, step_deps, done,
                                          first_id, position))
    intervals = []
    for rank in range(num_ranks):
        lo = first_id[rank]
        intervals.append(tuple(
            Interval(step_list[s], start[s], end[s]) for s in range(lo, lo + lengths[rank])
        ))
    return Timeline(
        schedule=schedule,
        intervals=tuple(intervals),
        activation_bytes=costs.activation_bytes_per_stage(num_stages),
        source="simulated",
    )


def _stuck_report(schedule, step_list, step_rank, step_deps, done, first_id, position) -> str:
    lines = [f"schedule {schedule.name!r} cannot finish (deadlock):"]
    for rank, row in enumerate(schedule.actions):
        if position[rank] >= len(row):
            continue
        sid = first_id[rank] + position[rank]
        waits = []
        for did in step_deps[sid]:
            if done[did]:
                continue
            drank = step_rank[did]
            dpos = did - first_id[drank]
            if drank == rank:
                waits.append(f"{step_list[did]} later on its own rank (position {dpos})")
            else:
                blocker = first_id[drank] + position[drank]
                waits.append(
                    f"{step_list[did]} on rank {drank} (position {dpos}; rank {drank} is "
                    f"stuck at position {position[drank]} on {step_list[blocker]})"
                )
        lines.append(
            f"  rank {rank} is stuck at position {position[rank]} on {step_list[sid]}, "
            f"which waits for " + "; ".join(waits)
        )
    return "\n".join(lines)


def unit_cost_steps(schedule: Schedule) -> list[list[int]]:
    """Each rank's start steps when every action takes one step and transfers are free."""
    timeline = simulate(schedule, Costs(F=1, B=1, I=1, W=1, FB=1))
    return [[round(iv.start) for iv in row] for row in timeline.intervals]
