"""Exercises of chapter 7, communication (``notebooks/07_communication.ipynb``).

The right answers come from the package at check time: :func:`ppbook.links.boundary_bytes`
and :class:`ppbook.links.Link` for a message's size and time, the simulator
(:func:`ppbook.simulate.simulate`) with the link model of :mod:`ppbook.costs` for the
1F1B round trip, interleaving on a slow link and a placement across nodes, and
:func:`ppbook.cost_model.across_nodes.split_timelines` for pipeline against tensor parallelism
across nodes. The hints name the usual slips: elements counted instead of bytes, a link's
both-directions or gigabit figure used as its one-way GB/s, more chunks taken as always
better, neighbouring ranks split between nodes, the free devices taken in order. Sources:
REFERENCES.md (Megatron-LM, arXiv:2104.04473, sec. 2.2.2 and 3; LogP). GPipe's step when
messages queue (7.7) and a ring all-reduce (7.8) live in :mod:`ppbook.exercises.ch7_build`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ppbook.checks import shown
from ppbook.cost_model.across_nodes import messages_across_nodes, split_timelines
from ppbook.cost_model.memory_bytes import ModelShape
from ppbook.costs import Costs
from ppbook.exercises import close, exercise, integer, number, right, wrong
from ppbook.links import Link, Topology, boundary_bytes
from ppbook.pipeline_schedule import Schedule
from ppbook.schedules import gpipe, interleaved_1f1b, one_f_one_b, zb_v
from ppbook.simulate import simulate

MESSAGE = {"microbatch_size": 4, "seq_len": 2048, "hidden": 8192, "dtype_bytes": 2}
"""The boundary of exercises 7.1 and 7.2: b = 4, s = 2048, h = 8192, bf16."""

NDR_GB_PER_S = 50.0
"""InfiniBand NDR, GB/s each way (data/links.csv: 400 Gb/s per port and direction)."""

ROUND_TRIP = {"p": 8, "m": 32, "F": 1.0, "B": 2.0, "comm_bytes": 4e7}
"""Exercise 7.3's pipeline: 1F1B, p = 8, m = 32, F = 1, B = 2 time units, 40 MB messages."""

SLOW = Costs(F=1, B=2, comm_bytes=4e7, bandwidth=4e8, contention=True)
"""Exercise 7.4's link: 40 MB messages at 4e8 bytes per time unit (0.1 each), queued."""

MAX_CHUNKS = 8
"""The largest v exercise 7.4 simulates (p = 8, m = 16)."""

NODE = 8
"""Devices per node in exercises 7.5 and 10.2."""

SPLIT_MODEL = ModelShape(layers=64, hidden=4096, heads=32, vocab=50257, seq_len=4096)
"""Exercise 7.6's 13B model, chapter 7's (32 heads: 16 tensor-parallel devices take 2 each)."""

SPLIT = {"flops_per_second": 400e12, "intra_gb_per_s": 450.0, "inter_gb_per_s": 450.0}
"""Exercise 7.6's hardware: 400 TFLOP/s per device, 450 GB/s each way inside and across."""


@exercise(
    "7.1",
    "The bytes of one message across a stage boundary for micro-batch size b = 4, sequence "
    "length s = 2048, hidden size h = 8192, in bf16.",
    kind="compute",
    solution="b x s x h x 2 bytes = 4 x 2048 x 8192 x 2 = 134,217,728 bytes (about 134 MB): "
    "`boundary_bytes(4, 2048, 8192, 2)`. The gradient sent back has the same shape.",
    answer_name="answer_1",
)
def _boundary_bytes(answer):
    given = number(answer, "a number of bytes such as 1.5e8")
    b, s, h, size = MESSAGE.values()
    truth = boundary_bytes(b, s, h, size)
    if close(given, truth):
        return right(f"b s h x 2 bytes = {truth:,.0f} bytes.")
    slips = {
        truth / size: ("that is the number of elements b s h.", "bf16 takes 2 bytes each."),
        truth * 2: ("that is the size in fp32 (4 bytes per element).", "bf16 takes 2."),
        truth / b: ("that is one sample's share.", "the micro-batch holds b = 4 samples."),
        truth * 8: ("that is the size in bits.", "give bytes: 8 bits each."),
        truth / 1e6: ("that is megabytes.", "give the answer in bytes."),
    }
    for value, (message, hint) in slips.items():
        if close(given, value):
            return wrong(message, hint)
    return wrong(f"{given:.4g} bytes is not the message size.", "multiply b, s, h and 2.")


@exercise(
    "7.2",
    "The time in milliseconds of exercise 7.1's message on InfiniBand NDR (50 GB/s each way, "
    "1 GB = 1e9 bytes) with no latency.",
    kind="compute",
    solution="134,217,728 bytes / 50e9 bytes per s = 2.684e-3 s = 2.68 ms: "
    "`Link.from_gb_per_s(50, time_unit_s=1e-3).time(boundary_bytes(4, 2048, 8192, 2))`.",
    answer_name="answer_2",
)
def _message_time(answer):
    given = number(answer, "a time in milliseconds such as 1.5")
    nbytes = boundary_bytes(*MESSAGE.values())
    truth = Link.from_gb_per_s(NDR_GB_PER_S, time_unit_s=1e-3).time(nbytes)
    if close(given, truth):
        return right(f"{nbytes:,.0f} bytes at 50 GB/s take {truth:.4g} ms.")
    slips = {
        truth / 2: (
            "that uses 100 GB/s, both directions together.",
            "one message uses one direction: 50 GB/s.",
        ),
        truth / 8: ("that reads NDR's 400 Gb/s as 400 GB/s.", "divide gigabits by 8."),
        truth * 1e9 / 2**30: ("that takes a GB as 2^30 bytes.", "links.csv's GB is 1e9 bytes."),
        truth / 1e3: ("that is seconds.", "give milliseconds."),
    }
    for value, (message, hint) in slips.items():
        if close(given, value):
            return wrong(message, hint)
    return wrong(f"{given:.4g} ms is not the message's time.", "bytes / (50e9 bytes per s).")


def round_trip_share(costs: Costs) -> float:
    """Exercise 7.3's measure: the time 1F1B loses to GPipe under ``costs`` (GPipe pays only
    its ramps' 2(p-1) transfers), as a share of 1F1B's step; p = 8, m = 32."""
    p, m = ROUND_TRIP["p"], ROUND_TRIP["m"]
    one = simulate(one_f_one_b(p, m), costs).makespan
    return (one - simulate(gpipe(p, m), costs).makespan) / one


@exercise(
    "7.3",
    "Construct Costs with F = 1, B = 2 and comm_bytes = 4e7 and a bandwidth at which 1F1B's "
    "round trip costs between 5 % and 10 % of its step (p = 8, m = 32).",
    kind="construct",
    solution="A transfer takes c = 4e7 / bandwidth. GPipe's step is (m+p-1)(F+B) + 2(p-1)c "
    "= 117 + 14c, 1F1B's (m+p-1)(F+B) + (2(p-1)m/p + 2(p-2))c = 117 + 68c (section 3), so "
    "the share is 54c / (117 + 68c): 5 % at c = 0.116, 10 % at c = 0.248. c = 0.2 gives "
    "10.8 / 130.6 = 8.3 %: `Costs(F=1, B=2, comm_bytes=4e7, bandwidth=2e8)`.",
    answer_name="answer_3",
)
def _round_trip(answer):
    if not isinstance(answer, Costs):
        return wrong(
            f"this exercise wants a ppbook.costs.Costs, got {shown(answer)}.",
            "Costs(F=1, B=2, comm_bytes=4e7, bandwidth=...).",
        )
    given = (answer.F, answer.B, answer.comm_bytes)
    if given != (ROUND_TRIP["F"], ROUND_TRIP["B"], ROUND_TRIP["comm_bytes"]) or answer.topology:
        return wrong(
            "keep F = 1, B = 2 and comm_bytes = 4e7, with no topology: only the link changes.",
        )
    share = round_trip_share(answer)
    c = answer.transfer
    if 0.05 <= share <= 0.10:
        return right(f"a transfer of {c:.4g} makes 1F1B {share:.1%} slower than GPipe (simulated).")
    if share < 0.05:
        return wrong(
            f"a transfer of {c:.4g} costs only {share:.1%} of the step (simulated).",
            "a lower bandwidth: 1F1B waits 2(p-1)c every p micro-batches.",
        )
    return wrong(
        f"a transfer of {c:.4g} costs {share:.1%} of the step (simulated).",
        "a higher bandwidth: section 3 gives both steps as lines in c.",
    )


def chunk_makespans() -> dict[int, float]:
    """Exercise 7.4: interleaved 1F1B's simulated step, p = 8, m = 16, on :data:`SLOW`, by v."""
    return {
        v: simulate(interleaved_1f1b(8, 16, v), SLOW).makespan for v in range(1, MAX_CHUNKS + 1)
    }


@exercise(
    "7.4",
    "Choose the v (1 to 8) that gives interleaved 1F1B (p = 8, m = 16, F = 1, B = 2) the "
    "shortest step on a link where each message takes 0.1 and messages queue.",
    kind="choose",
    solution="The bubble shrinks like 1/v, but each rank sends about v times as many "
    "messages as 1F1B's, each holding the link for 0.1 while a chunk's forward takes 1/v. "
    "`ppbook.exercises.ch7.chunk_makespans()` simulates each v: 73 at v = 1, 61.5 at 2, "
    "59.6 at 3, 59.45 at 4, 60 at 5 and more beyond: v = 4.",
    answer_name="answer_4",
)
def _choose_chunks(answer):
    v = integer(answer, f"a whole number of chunks from 1 to {MAX_CHUNKS}", 1, MAX_CHUNKS)
    times = chunk_makespans()
    best = min(times, key=times.get)
    if v == best:
        return right(f"v = {v} takes {times[v]:.4g} time units, the shortest (simulated).")
    if v > best:
        return wrong(
            f"v = {v} takes {times[v]:.4g} time units (simulated): its v-times more messages "
            "queue on the slow link.",
            "fewer chunks: the smaller bubble no longer pays for the messages.",
        )
    return wrong(
        f"v = {v} takes {times[v]:.4g} time units (simulated).",
        "more chunks still pay here: the bubble shrinks by v.",
    )


NODES = 3
"""Nodes of exercises 7.5 and 10.2: devices 0-7, 8-15 and 16-23."""

RANKS = 16
"""Ranks to place in exercises 7.5 and 10.2."""


def free_devices(busy) -> list[int]:
    """The devices of :data:`NODES` nodes of :data:`NODE` that another job does not hold."""
    return [d for d in range(NODES * NODE) if d not in set(busy)]


def packed_placement(free: list[int], ranks: int = RANKS) -> list[int]:
    """A placement that cuts a chain of ``ranks`` ranks (rank r talks to r+1) the fewest
    times: the fewest nodes whose free devices hold them all (the emptiest nodes first),
    filled in rank order, so the chain crosses between nodes once per node added.
    Exercises 7.5 and 10.2 count the crossings of this placement as the fewest."""
    by_node: dict[int, list[int]] = {}
    for d in free:
        by_node.setdefault(d // NODE, []).append(d)
    chosen, room = [], 0
    for node in sorted(by_node, key=lambda n: (-len(by_node[n]), n)):
        if room >= ranks:
            break
        chosen.append(node)
        room += len(by_node[node])
    if room < ranks:
        raise ValueError(f"{len(free)} free devices cannot hold {ranks} ranks")
    return [d for node in sorted(chosen) for d in by_node[node]][:ranks]


def _nodes(placement) -> Costs:
    """Nodes of :data:`NODE`: a message takes 0.1 inside a node, 1 across (F = I = W = 1)."""
    nodes = Topology(
        Link(bandwidth=10.0, name="inside a node"),
        Link(bandwidth=1.0, name="across nodes"),
        devices_per_node=NODE,
        placement=placement,
    )
    return Costs(F=1, I=1, W=1, comm_bytes=1, topology=nodes)


def free_device_list(answer, busy):
    """The answer as a list of :data:`RANKS` distinct devices that ``busy`` leaves free
    (rank r on ``devices[r]``), or the verdict that says what is wrong with it (chapters 7
    and 10 place 16 ranks on three nodes of 8)."""
    free = free_devices(busy)
    if isinstance(answer, str | bytes) or not hasattr(answer, "__iter__"):
        return wrong(f"this exercise wants a list of {RANKS} devices, got {shown(answer)}.")
    devices = list(answer)
    if len(devices) != RANKS or not all(isinstance(d, int) for d in devices):
        return wrong(
            f"give each of the {RANKS} ranks a device (a whole number), got {shown(devices)}.",
            "one device per rank, rank r on devices[r].",
        )
    if len(set(devices)) != RANKS:
        return wrong(f"give each rank its own device, got {shown(devices)}.")
    taken = [d for d in devices if d not in free]
    if taken:
        return wrong(
            f"device {taken[0]} is not free (another job holds devices {min(busy)}-"
            f"{max(busy)}, and the three nodes have devices 0-{NODES * NODE - 1}).",
            f"the free devices are {shown(free)}.",
        )
    return devices


@dataclass(frozen=True)
class Placed:
    """A placement of 16 ranks on three nodes, simulated: messages across the nodes per
    micro-batch for it (``crossing``) and for :func:`packed_placement` (``fewest``), and its
    step time (``step``)."""

    crossing: float
    fewest: float
    step: float
    schedule: Schedule
    best: Costs

    def shortest(self) -> float:
        """The packed placement's step time (simulated)."""
        return simulate(self.schedule, self.best).makespan


def placed(answer, schedule: Schedule, costs: Callable[..., Costs], per_microbatch: int, busy):
    """The :class:`Placed` of the placement ``answer`` (read by :func:`free_device_list`),
    or the verdict that says what is wrong with it (chapters 7 and 10). ``costs(placement)``
    gives the costs with the placement's topology; the messages are counted over
    ``per_microbatch``, and the fewest are those of :func:`packed_placement` of the free
    devices, counted the same way."""
    devices = free_device_list(answer, busy)
    if not isinstance(devices, list):
        return devices
    given, best = costs(devices), costs(packed_placement(free_devices(busy)))
    crossing = messages_across_nodes(schedule, given.topology) / per_microbatch
    fewest = messages_across_nodes(schedule, best.topology) / per_microbatch
    return Placed(crossing, fewest, simulate(schedule, given).makespan, schedule, best)


BUSY_7_5 = tuple(range(5))
"""Exercise 7.5: another job holds devices 0-4 (five of node 0's eight)."""


@exercise(
    "7.5",
    "Construct a placement of ZB-V's 16 ranks (one free device per rank) on three nodes of "
    "8, devices 0-7, 8-15 and 16-23, where another job holds devices 0-4, that sends as "
    "few messages across the nodes as possible.",
    kind="construct",
    solution="ZB-V's rank r holds stages r and 31 - r, so a micro-batch goes down the ranks "
    "0, 1, ..., 15 and back up 15, ..., 0: every message is between ranks r and r+1, and "
    "each pair of neighbours on different nodes costs 4 messages per micro-batch (down and "
    "up, forward and backward). Each node the chain uses beyond the first cuts it at least "
    "once. The free devices in order, 5-20, spread the chain over three nodes: 2 cuts, 8 "
    "messages. Nodes 1 and 2 are wholly free and hold all 16 ranks: ranks 0-7 on one and "
    "8-15 on the other, `list(range(8, 24))`, one cut, 4 messages per micro-batch.",
    answer_name="answer_5",
)
def _placement(answer):
    schedule = zb_v(RANKS, RANKS)
    got = placed(answer, schedule, _nodes, RANKS, BUSY_7_5)
    if not isinstance(got, Placed):
        return got
    said = (
        f"{got.crossing:g} messages per micro-batch cross the nodes; the step takes {got.step:.4g}"
    )
    if got.crossing <= got.fewest:
        return right(f"{said} time units (simulated), the fewest crossings.")
    nodes = len({d // NODE for d in answer})
    if nodes > 2:
        hint = "count the free devices on each node: two nodes can hold all 16 ranks."
    else:
        hint = "ZB-V's messages go between ranks r and r+1: keep neighbours on one node."
    return wrong(
        f"{said} time units (simulated; {got.fewest:g} crossings give {got.shortest():.4g}).",
        hint,
    )


@exercise(
    "7.6",
    'Choose "pipeline" or "tensor" across two nodes of 8 for a 13B model (m = 2 micro-batches, '
    "400 TFLOP/s per device, 450 GB/s each way inside and across the nodes).",
    kind="choose",
    solution="`split_timelines(SPLIT_MODEL, 2, **SPLIT)` simulates both: with only 2 "
    "micro-batches the pipeline of p = 2 idles a third of its step, while on a link as "
    'fast as NVLink the all-reduces across the nodes cost little. "tensor" takes 187 ms, '
    '"pipeline" 223 ms. (On InfiniBand NDR rails, a 50 GB/s card per GPU, "pipeline" wins '
    "from m = 4 micro-batches on, by 1.24 at m = 16.)",
    answer_name="answer_6",
)
def _across_nodes(answer):
    choice = answer.strip().lower() if isinstance(answer, str) else None
    if choice not in ("pipeline", "tensor"):
        return wrong(f'this exercise wants "pipeline" or "tensor", got {shown(answer)}.')
    times = {k: t.makespan for k, t in split_timelines(SPLIT_MODEL, 2, **SPLIT).items()}
    other = "tensor" if choice == "pipeline" else "pipeline"
    said = f"{choice} takes {times[choice] * 1e3:.4g} ms, {other} {times[other] * 1e3:.4g} ms"
    if times[choice] <= times[other]:
        return right(f"{said} (simulated).")
    if choice == "pipeline":
        return wrong(
            f"{said}: two micro-batches leave the pipeline's bubble large.",
            "with a fast link across the nodes the all-reduces cost little.",
        )
    return wrong(f"{said}.", "the all-reduces cross between the nodes 256 times per micro-batch.")


import ppbook.exercises.ch7_build  # noqa: E402, F401 (registers 7.7 and 7.8)
