"""Time a schedule on devices that ranks share, with copies that occupy the ranks.

Chapter 9. :func:`ppbook.simulate.simulate` hands a schedule here when its
:class:`~ppbook.costs.Costs` ask for it (:attr:`~ppbook.costs.Costs.device_model`): a
topology whose devices hold several ranks (:class:`ppbook.links.Topology`'s
``ranks_per_device`` and ``interference``), or messages that occupy their sender and their
receiver for a copy (``send_copy``, ``recv_copy``, and ``input_copy`` for the model's
input). What happens to one step of a rank, in
order, is what the runtime does (:mod:`ppbook.runtime.execute`) when two ranks share a GPU
and their messages go through host memory:

1. receive: a forward on the first stage of its route copies the model's input to the
   device (``input_copy``); then for each message the step takes from another rank, in
   the order of its parts, the rank waits until the message has arrived, then is busy
   ``recv_copy`` (the copy from host memory to the device): ``t = max(t, arrival) +
   recv_copy``;
2. compute: the step's work (its cost, as :func:`ppbook.simulate.simulate` scales it). On
   a device where k of its ranks compute at once, each progresses
   ``1 + (k - 1) * interference`` times slower than alone; k changes whenever one of them
   starts or ends, so an action's time depends on what the other ranks do meanwhile;
3. send: for each message to another rank, in the order of its parts, the rank is busy
   ``send_copy`` (the copy to host memory and handing it to the transport); the message
   then leaves on its link (:meth:`~ppbook.costs.Costs.link`) as in the plain model
   (serialisation, queueing with ``contention``, the sender busy until it has left when
   ``overlap_send`` is False) and arrives ``latency`` after leaving.

A message to a stage on the same rank costs nothing, as in the plain model. The interval
of an action on the timeline is its compute (step 2), as the runtime measures it; without
``overlap_send`` it also covers the sends, as in the plain model. With no copies and every
rank on its own device this gives exactly the plain model's times.

An event-driven simulation: events are a rank starting a compute, a device's next compute
ending and a rank becoming free after its sends, kept in a heap, in O(n log n) for n
actions (times the ranks of one device). :func:`run` returns the times and each rank's
progress; :func:`ppbook.simulate.simulate` turns them into a timeline, or a schedule that
cannot finish into its deadlock report.
"""

from __future__ import annotations

import heapq

from ppbook.costs import Costs
from ppbook.dependencies import BACKWARD, needs, sends
from ppbook.pipeline_schedule import Schedule

START, DONE, FREE, WAKE = range(4)  # event kinds, in the order they are handled at one instant


def slowdown(computing: int, interference: float) -> float:
    """How many times slower each of ``computing`` ranks of one device runs than alone."""
    return 1.0 + max(computing - 1, 0) * interference


def run(
    schedule: Schedule, costs: Costs, per_stage: dict
) -> tuple[list[list[float]], list[list[float]], list[int]]:
    """``(starts, ends, position)``: each rank's start and end times of its steps and how
    many of them it ran (fewer than its steps only when the schedule cannot finish).

    ``per_stage`` is :meth:`Costs.per_stage` at the schedule's chunk share."""
    num_ranks = schedule.num_ranks
    topology = costs.topology
    if topology is not None:
        topology.check(num_ranks)
    device = [topology.device(r) if topology is not None else r for r in range(num_ranks)]
    interference = topology.interference if topology is not None else 0.0
    owner: dict[tuple, tuple[int, int]] = {}  # part -> (rank, position)
    for rank, row in enumerate(schedule.actions):
        for position, step in enumerate(row):
            for part in step.parts:
                owner[part] = (rank, position)
    plans = [
        [_plan(schedule, rank, step, owner, per_stage) for step in row]
        for rank, row in enumerate(schedule.actions)
    ]
    starts = [[0.0] * len(row) for row in schedule.actions]
    ends = [[-1.0] * len(row) for row in schedule.actions]  # -1: not computed yet
    arrival: dict[tuple, float] = {}  # a part's message to another rank: when it arrives
    position = [0] * num_ranks
    free_at = [0.0] * num_ranks
    link_free: dict[tuple[int, int], float] = {}
    computing: dict[int, dict[int, float]] = {d: {} for d in device}  # {rank: work left}
    updated = dict.fromkeys(device, 0.0)  # when a device's work left was brought up to date
    version = dict.fromkeys(device, 0)  # a DONE event planned under an older one is stale
    sleepers: dict[tuple[int, int], list[int]] = {}  # (rank, position) -> ranks waiting on it
    events: list[tuple[float, int, int, int, int]] = []  # (time, kind, order, who, version)
    counter = [0]

    def push(time: float, kind: int, who: int, stamp: int = 0) -> None:
        counter[0] += 1
        heapq.heappush(events, (time, kind, counter[0], who, stamp))

    def bring_up_to_date(d: int, now: float) -> None:
        work = computing[d]
        factor = slowdown(len(work), interference)
        elapsed = now - updated[d]
        for r in work:
            work[r] -= elapsed / factor
        updated[d] = now

    def reschedule(d: int, now: float) -> None:
        version[d] += 1
        work = computing[d]
        if work:
            factor = slowdown(len(work), interference)
            push(now + max(min(work.values()), 0.0) * factor, DONE, d, version[d])

    def try_next(rank: int, now: float) -> None:
        """Start the rank's next step if what it needs is known, else sleep on it."""
        pos = position[rank]
        if pos == len(plans[rank]):
            return
        plan = plans[rank][pos]
        t = free_at[rank] + plan.inputs * costs.input_copy
        for producer, message in plan.waits:
            p_rank, p_pos = owner[producer]
            if ends[p_rank][p_pos] < 0:
                sleepers.setdefault((p_rank, p_pos), []).append(rank)
                return
            if message:  # from another rank: wait until it is there, then copy it in
                t = max(t, arrival[producer]) + costs.recv_copy
        push(max(t, now), START, rank)

    for rank in range(num_ranks):
        try_next(rank, 0.0)
    while events:
        now, kind, _, who, stamp = heapq.heappop(events)
        if kind == START:
            d = device[who]
            starts[who][position[who]] = now
            bring_up_to_date(d, now)
            computing[d][who] = plans[who][position[who]].work
            reschedule(d, now)
        elif kind == DONE:
            if stamp != version[who]:
                continue  # the device's work changed since this event was planned
            bring_up_to_date(who, now)
            work = computing[who]
            least = min(work.values())
            tolerance = 1e-9 * max(1.0, *(plans[r][position[r]].work for r in work))
            for rank in [r for r, left in work.items() if left <= least + tolerance]:
                del work[rank]
                pos = position[rank]
                free_at[rank] = _send(costs, rank, plans[rank][pos], now, arrival, link_free)
                ends[rank][pos] = now if costs.overlap_send else free_at[rank]
                push(free_at[rank], FREE, rank)
                for sleeper in sleepers.pop((rank, pos), ()):
                    push(now, WAKE, sleeper)
            reschedule(who, now)
        elif kind == FREE:  # the rank's step and its sends are done
            position[who] += 1
            try_next(who, now)
        else:  # WAKE: what the rank waited for is computed
            try_next(who, now)
    return starts, ends, position


class _Plan:
    """One step, worked out once: its work, what it waits for and what it sends."""

    __slots__ = ("inputs", "messages", "waits", "work")

    def __init__(self, work: float, inputs: int, waits: list, messages: list):
        self.work = work
        self.inputs = inputs  # forwards on the first stage of their route
        self.waits = waits  # (producer part, whether it is a message from another rank)
        self.messages = messages  # (the part that sends, the receiving rank)


def _plan(schedule: Schedule, rank: int, step, owner: dict, per_stage: dict) -> _Plan:
    parts = step.parts
    if len(parts) == 1:
        work = per_stage[step.kind][step.stage]
    else:  # an overlapped pair: its own time FB, else F + B
        fwd, bwd = parts
        fb = per_stage["FB"]
        work = (
            fb[fwd.stage]
            if fb is not None
            else per_stage["F"][fwd.stage] + per_stage[bwd.kind][bwd.stage]
        )
    waits, messages, inputs = [], [], 0
    for stage, kind, mb in parts:
        inputs += kind == "F" and schedule.neighbours(stage, mb)[0] is None
        for need in needs(schedule, stage, kind, mb):
            kinds = ("B", "I") if need.kind == BACKWARD else (need.kind,)
            producer = next(
                p for p in ((need.stage, k, need.microbatch) for k in kinds) if p in owner
            )
            if producer in parts:
                continue  # the other half of an overlapped pair
            waits.append((producer, owner[producer][0] != rank))
        target = sends(schedule, stage, kind, mb)
        if target is not None and schedule.stage_to_rank[target[0]] != rank:
            messages.append(((stage, kind, mb), schedule.stage_to_rank[target[0]]))
    return _Plan(work, inputs, waits, messages)


def _send(costs: Costs, rank: int, plan: _Plan, done: float, arrival: dict, link_free: dict):
    """Time the step's messages from ``done``; return when the rank is free again."""
    free = done
    for part, receiver in plan.messages:
        free += costs.send_copy
        link = costs.link(rank, receiver)
        busy = link.serialisation(costs.comm_bytes)
        leave = free + busy
        if costs.contention:
            leave = max(leave, link_free.get((rank, receiver), 0.0) + busy)
            link_free[(rank, receiver)] = leave
        if not costs.overlap_send:
            free = leave
        arrival[part] = leave + link.latency
    return free
