"""Time a schedule under a cost model: each rank runs its actions in order, each as soon as
the rank is free and the action's dependencies are done (plus a transfer time on every
dependency that crosses ranks).

This is an event-driven list scheduler in O(number of actions): an action becomes ready
when its last dependency finishes, and a rank runs its next action once it is ready. A
schedule that cannot finish is reported at once, naming the stuck ranks (up to 12, those
that wait on their own rank first), the action each is stuck on and what that action
waits for. No recursion, so no recursion limit.

What waits for what is :mod:`ppbook.dependencies`' rule, looked up through the
:class:`~ppbook.validate.ScheduleIndex` that validation builds (integer keys computed once
per stage, kind and route). Each chunk pass takes its cost times the schedule's
:attr:`~ppbook.pipeline_schedule.Schedule.chunk_share` (costs are for one device's share of the
model); transfers are not scaled.

Communication (:mod:`ppbook.costs`, :mod:`ppbook.links`): by default a message that crosses
ranks arrives ``Costs.transfer`` after its sender's action ends. With a topology, with
contention or with sends that do not overlap compute (:attr:`Costs.per_link`), each
message is timed on its link when its sender's action ends: what it sends and to whom is
:func:`ppbook.dependencies.sends`. A rank runs its actions in order, so the messages on
one link (one direction between two ranks) are timed in the order their sender runs them
(the parts of an overlapped pair in their order), first in, first out::

    leave   = max(link_free, ready) + bytes / bandwidth   # link_free = leave (contention)
    arrival = leave + latency

``ready`` is the end of the sending action's compute (after the rank's earlier sends of
the same action, when it does not overlap them). Without contention ``link_free`` is not
kept (messages never wait for each other); without overlap the sender is busy until
``leave``, and its action's interval ends there.

Several training steps in a row (``steps``): with ``sync="optimizer"`` every rank waits
for the whole previous step (the all-reduce before the optimizer step), so each step is a
copy of the first, shifted by its makespan; with ``sync="none"`` (the Zero Bubble paper's
post-validation, its section 4) a rank starts its next step as soon as its own work and
its inputs allow, and the steps overlap at the pipeline's ends.

Ranks that share a device, and messages that occupy their sender and receiver for a copy
(:attr:`Costs.device_model`: a topology's ``ranks_per_device``, ``send_copy``,
``recv_copy``), are timed by :mod:`ppbook.shared_device`, an event-driven simulation of
the devices (chapter 9).
"""

from __future__ import annotations

from dataclasses import replace

from ppbook import limits, shared_device
from ppbook.checks import as_count, shown
from ppbook.costs import Costs
from ppbook.dependencies import sends
from ppbook.pipeline_schedule import KINDS, Action, Schedule
from ppbook.timeline import Timeline
from ppbook.validate import ScheduleError, validate

SYNC_MODES = {
    "optimizer": "every rank waits for the whole previous step (all-reduce, optimizer step)",
    "none": "a rank starts its next step as soon as its own work and inputs allow "
    "(post-validation)",
}
"""What ``sync`` may be, and what each means for the step that follows."""


def simulate(
    schedule: Schedule, costs: Costs | None = None, *, steps: int = 1, sync: str = "optimizer"
) -> Timeline:
    """Simulate ``steps`` training steps of ``schedule`` under ``costs``.

    ``costs`` defaults to F = 1, B = 2, no communication. Costs are for one device's share
    of the model; a chunk pass of a schedule with v chunks per rank takes the cost times
    ``schedule.chunk_share`` (1/v). Validates the schedule first
    (:func:`~ppbook.validate.validate`). Returns a :class:`~ppbook.timeline.Timeline` with
    every rank's intervals and the metrics (makespan, bubble fraction and ratio, activation
    memory, and per step the rank spans and the period).

    With ``steps`` > 1 the timeline's schedule is :meth:`Schedule.repeated` (micro-batch j
    of step k is ``k * m + j``). ``sync`` (:data:`SYNC_MODES`) says what joins the steps:
    ``"optimizer"`` starts every step when the whole previous one has ended, ``"none"``
    lets each rank go on as soon as its own work and its inputs allow.
    """
    steps = as_count(steps, "steps", "simulate")
    if sync not in SYNC_MODES:
        raise ValueError(
            f"sync must be one of {', '.join(map(repr, SYNC_MODES))}, got {shown(sync)}"
        )
    if steps == 1:
        return replace(_simulate_once(schedule, costs), sync=sync)
    if sync == "none":
        timeline = _simulate_once(schedule.repeated(steps), costs)
        return replace(timeline, steps=steps, sync=sync)
    one = _simulate_once(schedule, costs)
    repeated = schedule.repeated(steps)  # checks the limits before the copies are made
    period = one.makespan  # the next step starts when the last rank has finished this one
    shifts = [k * period for k in range(steps)]

    def copies(rows):
        return tuple(tuple(t + shift for shift in shifts for t in row) for row in rows)

    return replace(
        one,
        schedule=repeated,
        starts=copies(one.starts),
        ends=copies(one.ends),
        steps=steps,
        sync=sync,
    )


def _simulate_once(schedule: Schedule, costs: Costs | None) -> Timeline:
    """One pass over ``schedule``'s actions (all its steps, if it is repeated)."""
    index = validate(schedule)  # refuses what is not a Schedule
    if costs is None:
        costs = Costs()
    elif not isinstance(costs, Costs):
        raise ValueError(
            f"costs must be a ppbook.costs.Costs, got {type(costs).__name__}; "
            "for example Costs(F=1, B=2)"
        )
    per_stage = costs.per_stage(schedule.num_stages, share=schedule.chunk_share)
    fb = per_stage["FB"]
    transfer = costs.transfer
    per_link = costs.per_link
    if per_link:
        arrival: list[float] = [0.0] * len(index.where)  # by part key: its message's arrival
        send, outgoing, link_free = _sender(schedule, index, costs, arrival)
        overlap, contention = costs.overlap_send, costs.contention
    steps, step_rank, first, where = index.steps, index.step_rank, index.first, index.where
    n = len(steps)
    m, num_stages = schedule.num_microbatches, schedule.num_stages
    route_id = index.route_id
    one_route = max(route_id) == 0
    forward_cost = per_stage["F"]
    # table[kind][route * num_stages + stage]: (duration, key offsets of what it waits for)
    table = {
        kind: [(per_stage[kind][i % num_stages], rule) for i, rule in enumerate(index.rules[k::4])]
        for k, kind in enumerate(KINDS)
    }

    def general_deps(sid: int) -> tuple[float, list[int]]:
        """Duration and dependency keys of any step (overlapped pairs too)."""
        step = steps[sid]
        parts = step.parts
        if len(parts) == 1:
            duration = per_stage[step.kind][step.stage]
        else:  # an overlapped pair: its own time FB, else F + B
            fwd, bwd = parts
            duration = (
                fb[fwd.stage]
                if fb is not None
                else (forward_cost[fwd.stage] + per_stage[bwd.kind][bwd.stage])
            )
        keys = []
        for part in parts:
            for key in index.dependencies(*part):
                if where[key] != sid and key not in keys:
                    keys.append(key)
        return duration, keys

    if costs.device_model:  # ranks share devices, or copies occupy them
        starts, ends, position = shared_device.run(schedule, costs, per_stage)
        if sum(position) < n:
            raise ScheduleError(_stuck_report(schedule, index, position, general_deps))
        return _timeline(schedule, costs, starts, ends)

    # Each rank runs as far as it can; a rank blocked on a step sleeps until that step ends.
    end = [-1.0] * n  # -1: not run yet
    start = [0.0] * n
    num_ranks = schedule.num_ranks
    lengths = [len(row) for row in schedule.actions]
    position = [0] * num_ranks
    free_at = [0.0] * num_ranks
    sleepers: dict[int, list[int]] = {}
    ready = list(range(num_ranks))
    finished = 0
    while ready:
        rank = ready.pop()
        pos, stop, offset, t_free = position[rank], lengths[rank], first[rank], free_at[rank]
        while pos < stop:
            sid = offset + pos
            step = steps[sid]
            if type(step) is Action:  # one part: key offsets from its rule in the index
                stage, kind, mb = step
                slot = stage if one_route else route_id[mb] * num_stages + stage
                duration, deps = table[kind][slot]
                base = (stage * m + mb) * 4
            else:  # an overlapped pair: the keys themselves
                base, slot = 0, -1
                duration, deps = general_deps(sid)
            t = t_free
            for off in deps:
                did = where[base + off]
                if did < 0:  # a backward that is split: I's key follows B's
                    off += 1
                    did = where[base + off]
                e = end[did]
                if e < 0:
                    break  # not done yet
                if step_rank[did] != rank:
                    e = arrival[base + off] if per_link else e + transfer
                if e > t:
                    t = e
            else:  # every dependency is done: run the step
                start[sid] = t
                end[sid] = t_free = t + duration
                if not per_link:
                    pass
                elif slot < 0:  # an overlapped pair's messages
                    end[sid] = t_free = send(step, t_free)
                elif out := outgoing[kind][slot]:  # send's sum for one message, written out
                    number, latency, busy, k = out
                    leave = t_free + busy
                    if contention:
                        queued = link_free[number] + busy
                        if queued > leave:
                            leave = queued
                        link_free[number] = leave
                    if not overlap:  # the rank sends it itself
                        end[sid] = t_free = leave
                    arrival[base + k] = leave + latency
                pos += 1
                if sid in sleepers:
                    ready.extend(sleepers.pop(sid))
                continue
            sleepers.setdefault(did, []).append(rank)  # sleep until step did ends
            break
        finished += pos - position[rank]
        position[rank], free_at[rank] = pos, t_free

    if finished < n:
        raise ScheduleError(_stuck_report(schedule, index, position, general_deps))
    return _timeline(
        schedule,
        costs,
        [start[first[r] : first[r] + lengths[r]] for r in range(num_ranks)],
        [end[first[r] : first[r] + lengths[r]] for r in range(num_ranks)],
    )


def _timeline(schedule: Schedule, costs: Costs, starts, ends) -> Timeline:
    """The simulated timeline of ``schedule`` from each rank's start and end times."""
    return Timeline.from_arrays(
        schedule,
        starts,
        ends,
        activation_bytes=costs.activation_bytes_per_stage(
            schedule.num_stages, share=schedule.chunk_share
        ),
        source="simulated",
        time_unit=costs.time_unit,
        w_memory=costs.w_memory,
    )


def _sender(schedule: Schedule, index, costs: Costs, arrival: list[float]):
    """``(send, outgoing, link_free)``: how the messages of a step leave when its compute
    ends.

    ``outgoing[kind][route * num_stages + stage]`` is what a part's message needs:
    ``(link number, latency, serialisation, kind number)``, or None when the part sends
    nothing or hands over on its own rank. ``link_free[link number]`` is when that link's
    last message has left. The simulator's loop times a single action's message from the
    table itself (the path nearly every step takes); ``send(step, done)`` times the messages
    of an overlapped pair whose compute ends at ``done``, recording each one's arrival under
    its part's key in ``arrival``, and returns when the rank is free again (``done``, or
    after its sends when they do not overlap)."""
    if costs.topology is not None:
        costs.topology.check(schedule.num_ranks)
    m, stage_to_rank, route_id = schedule.num_microbatches, schedule.stage_to_rank, index.route_id
    num_stages = schedule.num_stages
    nbytes, contention, overlap = costs.comm_bytes, costs.contention, costs.overlap_send
    links: dict[tuple[int, int], int] = {}  # (sender, receiver) -> link number
    link_free: list[float] = []
    representative: dict[int, int] = {}  # route number -> its first micro-batch
    for j, r in enumerate(route_id):
        representative.setdefault(r, j)
    outgoing = {kind: [None] * (max(representative, default=0) + 1) * num_stages for kind in KINDS}
    for r, j in representative.items():
        route = schedule.route(j) if schedule.routes is not None else range(num_stages)
        for stage in route:
            for k, kind in enumerate(KINDS):
                target = sends(schedule, stage, kind, j)
                sender = stage_to_rank[stage]
                if target is None or stage_to_rank[target[0]] == sender:
                    continue  # sends nothing, or hands over on its own rank
                pair = (sender, stage_to_rank[target[0]])
                if pair not in links:
                    links[pair] = len(links)
                    link_free.append(0.0)
                figures = costs.link(*pair)
                latency, busy = figures.latency, figures.serialisation(nbytes)
                outgoing[kind][r * num_stages + stage] = (links[pair], latency, busy, k)

    def send(step, done: float) -> float:
        free = done
        for stage, kind, mb in step.parts:
            out = outgoing[kind][route_id[mb] * num_stages + stage]
            if out is None:
                continue
            number, latency, busy, k = out
            leave = (done if overlap else free) + busy
            if contention:
                leave = max(leave, link_free[number] + busy)
                link_free[number] = leave
            if not overlap:
                free = leave
            arrival[(stage * m + mb) * 4 + k] = leave + latency
        return free

    return send, outgoing, link_free


def _stuck_report(schedule: Schedule, index, position, general_deps) -> str:
    """Every stuck rank and what it waits for; ranks that wait on their own rank first,
    as a chain of waiting ranks ends there. At most 12 ranks are listed."""
    steps, step_rank, first = index.steps, index.step_rank, index.first
    lines: list[tuple[int, str]] = []
    for rank, row in enumerate(schedule.actions):
        if position[rank] >= len(row):
            continue
        sid = first[rank] + position[rank]
        waits = []
        own = 1
        for did in (index.where[key] for key in general_deps(sid)[1]):
            drank = step_rank[did]
            dpos = did - first[drank]
            if dpos < position[drank]:
                continue  # done
            if drank == rank:
                own = 0
                waits.append(f"{steps[did]} later on its own rank (position {dpos})")
            else:
                waits.append(
                    f"{steps[did]} on rank {drank} (position {dpos}; rank {drank} is stuck "
                    f"at position {position[drank]} on {steps[first[drank] + position[drank]]})"
                )
        lines.append(
            (
                own,
                f"  rank {rank} is stuck at position {position[rank]} on {steps[sid]}, "
                "which waits for " + "; ".join(waits),
            )
        )
    lines.sort(key=lambda line: line[0])  # stable: by rank within each group
    head = f"schedule {str(schedule.name)[:60]!r} cannot finish (deadlock):"
    return limits.listed(head, [line.strip() for _, line in lines], most=12)


def unit_cost_steps(schedule: Schedule) -> list[list[int]]:
    """Each rank's start steps when every action takes one step and transfers are free."""
    timeline = simulate(schedule, Costs(F=1, B=1, I=1, W=1, FB=1))
    share = schedule.chunk_share  # every step took 1 * share
    return [[round(start / share) for start in row] for row in timeline.starts]
