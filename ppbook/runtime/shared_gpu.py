"""What two ranks on one GPU do to each other, read off their measured timelines (chapter 9).

In the GPU demo's shared-GPU mode (:mod:`ppbook.runtime.devices`) two ranks run on one GPU
and every message goes device -> host -> gloo -> host -> device. Each measured step holds
every rank's action intervals (CUDA events, their compute only), and the gaps between them
say the rest. :func:`mechanism` measures, from the steps after the warm-up:

- ``interference``: how much an action slows while the other rank computes on the same
  GPU. With ``o`` the time an action overlaps the other rank's actions, its duration is
  ``work + o * c / (1 + c)``: alone it runs at full speed, overlapped at ``1 / (1 + c)``
  (:func:`ppbook.shared_device.slowdown`). ``c`` is the slope of duration on overlap,
  fitted across the instances of each (schedule, stage, kind) about their own mean, so
  that the costs of the actions do not enter it;
- ``send_copy``: the gap a rank leaves after an action that sends a message to the other
  rank, before a next action that needs nothing from outside (the device-to-host copy and
  the gloo send), per message, the median;
- ``recv_copy``: the gap before an action that takes a message from the other rank that
  was there long before (handed over before the rank's previous action started), after
  an action that sends nothing: the host-to-device copy and the receive, the median;
- ``input_copy``: the gap before a forward on the first stage that takes no message, after
  an action that sends nothing: the copy of the model's input to the device, the median;
- ``latency``: where a rank waited for a message, its start minus the producer's end,
  less both copies: the time in flight (the median, at least 0).

:func:`shared_gpu_costs` turns them into :class:`~ppbook.costs.Costs` for the simulator:
the ranks on one device (``Topology(ranks_per_device=...)`` with the measured
``interference``), the copies, and each action's work: its duration less the slowdown
while it overlapped, ``alone + overlapped / (1 + c)``, averaged as
:func:`ppbook.runtime.measure.measured_costs` averages durations.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ppbook.costs import Costs
from ppbook.dependencies import sends
from ppbook.links import Link, Topology
from ppbook.pipeline_schedule import Schedule
from ppbook.runtime.measure import measured_costs
from ppbook.runtime.result import after_warm_up
from ppbook.timeline import Timeline

ALONE = 0.05
"""An action that overlaps other ranks' actions for less than this share of its time ran
alone (:func:`interference`)."""


@dataclass(frozen=True)
class Mechanism:
    """What sharing one device and the host-memory path cost, in seconds (module docstring).

    ``samples`` counts the gaps or instances each figure comes from."""

    interference: float
    send_copy: float
    recv_copy: float
    input_copy: float
    latency: float
    samples: dict[str, int]

    def lines(self) -> list[str]:
        """The figures in words, one per line."""
        n = self.samples
        return [
            f"interference c = {self.interference:.2f}: an action runs {1 + self.interference:.2f}"
            f" x slower while the other rank computes ({n['interference']} actions)",
            f"send copy {1e3 * self.send_copy:.3f} ms per message: the sender is busy after "
            f"its action ({n['send_copy']} gaps)",
            f"receive copy {1e3 * self.recv_copy:.3f} ms per message: the receiver is busy "
            f"before its action ({n['recv_copy']} gaps)",
            f"input copy {1e3 * self.input_copy:.3f} ms before a first-stage forward "
            f"({n['input_copy']} gaps)",
            f"in flight {1e3 * self.latency:.3f} ms ({n['latency']} waits)",
        ]


def overlapped(timeline: Timeline, rank: int, position: int) -> float:
    """Seconds the action at ``position`` of ``rank`` overlaps other ranks' actions."""
    start, end = timeline.starts[rank][position], timeline.ends[rank][position]
    return sum(
        max(0.0, min(end, e) - max(start, s))
        for other in range(timeline.num_ranks)
        if other != rank
        for s, e in zip(timeline.starts[other], timeline.ends[other], strict=True)
    )


def interference(timelines: Sequence[Timeline]) -> tuple[float, int]:
    """The measured ``c`` (1 when nothing measures it) and the number of overlapped actions
    it comes from.

    Within each (schedule, stage, kind), the instances that overlap the other ranks for
    less than 5 % of their time give the work ``w`` (their mean duration); each instance
    that overlaps them for ``o`` gives ``beta = (duration - w) / o``, the time lost per
    second overlapped, ``c / (1 + c)``. The median ``beta`` gives ``c``."""
    groups: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    for timeline in timelines:
        schedule = timeline.schedule
        for rank, row in enumerate(schedule.actions):
            for position, step in enumerate(row):
                kind = "FB" if len(step.parts) > 1 else step.kind
                duration = timeline.ends[rank][position] - timeline.starts[rank][position]
                shared = overlapped(timeline, rank, position)
                groups[(schedule.name, step.parts[0].stage, kind)].append((shared, duration))
    betas = []
    for pairs in groups.values():
        alone = [d for o, d in pairs if o < ALONE * d]
        if alone:
            work = statistics.fmean(alone)
            betas += [(d - work) / o for o, d in pairs if o >= ALONE * d]
    if not betas:
        return 1.0, 0
    beta = min(max(statistics.median(betas), 0.0), 0.99)  # c from 0 to 99
    return beta / (1.0 - beta), len(betas)


def _messages_out(schedule: Schedule, rank: int, step) -> int:
    """Messages ``step`` sends to other ranks."""
    count = 0
    for part in step.parts:
        target = sends(schedule, *part)
        count += target is not None and schedule.stage_to_rank[target[0]] != rank
    return count


def _messages_in(schedule: Schedule, rank: int, step) -> list[tuple]:
    """The parts on other ranks whose messages ``step`` takes."""
    producers = []
    for stage, kind, mb in step.parts:
        before, after = schedule.neighbours(stage, mb)
        source = before if kind == "F" else (after if kind in ("B", "I") else None)
        if source is not None and schedule.stage_to_rank[source] != rank:
            producers.append((source, "F" if kind == "F" else "backward", mb))
    return producers


def _ends(timeline: Timeline) -> dict[tuple, tuple[float, int]]:
    """Each part's end time and the messages its step sends before its own (the copies)."""
    schedule, found = timeline.schedule, {}
    for rank, row in enumerate(schedule.actions):
        for position, step in enumerate(row):
            sent = 0
            for stage, kind, mb in step.parts:
                target = sends(schedule, stage, kind, mb)
                sent += target is not None and schedule.stage_to_rank[target[0]] != rank
                name = "F" if kind == "F" else ("backward" if kind in ("B", "I") else kind)
                found[(stage, name, mb)] = (timeline.ends[rank][position], sent)
    return found


def _gaps(timelines: Sequence[Timeline]):
    """Per pair of neighbouring actions on a rank: (gap, messages out of the first, the
    second's incoming messages with their producers' ends and copies before them, whether
    the second takes the model's input, the first's start, the first's end)."""
    for timeline in timelines:
        schedule, produced = timeline.schedule, _ends(timeline)
        for rank, row in enumerate(schedule.actions):
            for i in range(len(row) - 1):
                first, second = row[i], row[i + 1]
                incoming = [produced[p] for p in _messages_in(schedule, rank, second)]
                model_input = any(
                    p.kind == "F" and schedule.neighbours(p.stage, p.microbatch)[0] is None
                    for p in second.parts
                )
                start, end = timeline.starts[rank][i], timeline.ends[rank][i]
                gap = timeline.starts[rank][i + 1] - end
                yield gap, _messages_out(schedule, rank, first), incoming, model_input, start, end


def mechanism(timelines: Sequence[Timeline]) -> Mechanism:
    """The mechanism's figures from measured steps (pass them without their warm-up
    steps: :func:`~ppbook.runtime.result.after_warm_up`), of one schedule or of several:
    they are the same machine's, and several schedules give more gaps to measure."""
    c, n_actions = interference(timelines)
    pairs = list(_gaps(timelines))
    out = [gap / n for gap, n, incoming, model, _, _ in pairs if n and not incoming and not model]
    send_copy = statistics.median(out) if out else 0.0
    early = [
        gap
        for gap, n, incoming, model, start, _ in pairs
        if not n and len(incoming) == 1 and not model
        if incoming[0][0] + incoming[0][1] * send_copy <= start
    ]
    recv_copy = statistics.median(early) if early else 0.0
    loads = [gap for gap, n, incoming, model, _, _ in pairs if not n and not incoming and model]
    input_copy = statistics.median(loads) if loads else 0.0
    flight = []
    for gap, n, incoming, _, _, end in pairs:
        if len(incoming) != 1:
            continue
        produced, copies = incoming[0]
        free = end + n * send_copy
        handed = produced + copies * send_copy
        if handed > free:  # the rank waited for the message
            flight.append(end + gap - handed - recv_copy)
    latency = max(0.0, statistics.median(flight)) if flight else 0.0
    samples = {
        "interference": n_actions,
        "send_copy": len(out),
        "recv_copy": len(early),
        "input_copy": len(loads),
        "latency": len(flight),
    }
    return Mechanism(c, send_copy, recv_copy, input_copy, latency, samples)


def work_timeline(timeline: Timeline, interference: float) -> Timeline:
    """``timeline`` with each action's duration cut to its work: alone time plus overlapped
    time / (1 + interference), the time it would have taken alone."""
    ends = []
    for rank in range(timeline.num_ranks):
        row = []
        for position, start in enumerate(timeline.starts[rank]):
            duration = timeline.ends[rank][position] - start
            shared = min(overlapped(timeline, rank, position), duration)
            row.append(start + duration - shared + shared / (1.0 + interference))
        ends.append(row)
    return Timeline.from_arrays(
        timeline.schedule, timeline.starts, ends, source="measured", time_unit=timeline.time_unit
    )


def shared_gpu_costs(
    steps: Sequence[Timeline], found: Mechanism | None = None, ranks_per_device: int = 2
) -> Costs:
    """The simulator's costs for a run whose ``ranks_per_device`` ranks share each GPU and
    talk through host memory, from its measured ``steps`` (the first warms up and is left
    out when there are several): each action's work, and the mechanism ``found`` (by
    default :func:`mechanism` of these steps; the GPU demo's comparison measures it on
    every schedule of the recording)."""
    timelines = after_warm_up(list(steps))
    if found is None:
        found = mechanism(timelines)
    compute = measured_costs([work_timeline(t, found.interference) for t in timelines])
    topology = Topology(
        intra_node=Link(latency=found.latency, name="host memory (gloo)"),
        ranks_per_device=ranks_per_device,
        interference=found.interference,
    )
    return replace(
        compute,
        comm=0.0,
        topology=topology,
        send_copy=found.send_copy,
        recv_copy=found.recv_copy,
        input_copy=found.input_copy,
        time_unit="s",
    )


def makespans(recording) -> list[tuple[str, float, float, float]]:
    """``(schedule, measured, plain, shared)`` makespans in seconds for every schedule of a
    :class:`~ppbook.runtime.recording.Recording`: its typical step, and the simulations
    under the plain model and the shared-device model (:meth:`Recording.comparison`)."""
    rows = []
    for name in recording.runs:
        shared = recording.comparison(name, shared=True)
        plain = recording.comparison(name, shared=False)
        measured = shared.measured.makespan
        rows.append((name, measured, plain.simulated.makespan, shared.simulated.makespan))
    return rows


def makespan_table(recording) -> str:
    """:func:`makespans` as a Markdown table, in ms, with measured / simulated."""
    lines = [
        "| schedule | measured (ms) | plain model (ms) | measured / plain | shared-GPU model "
        "(ms) | measured / shared |",
        "|---|---|---|---|---|---|",
    ]
    for name, measured, plain, shared in makespans(recording):
        lines.append(
            f"| {name} | {1e3 * measured:.2f} | {1e3 * plain:.2f} | {measured / plain:.2f} | "
            f"{1e3 * shared:.2f} | {measured / shared:.3f} |"
        )
    return "\n".join(lines)
