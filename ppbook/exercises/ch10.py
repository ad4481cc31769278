"""Exercises of chapter 10, from the book to a cluster (``notebooks/10_cluster.ipynb``).

The right answers come from the package and from PyTorch at check time: torchrun's own
argument parser (``torch.distributed.run.get_args_parser``) and ``ppbook run``'s
(:func:`ppbook.cli.run.add_arguments`) read the reader's command; the simulator
(:func:`ppbook.simulate.simulate`) with a two-node :class:`~ppbook.links.Topology`, queued
messages (``contention=True``) and :func:`ppbook.cost_model.across_nodes.messages_across_nodes` time
a placement and a schedule; :func:`ppbook.runtime.torch_import.from_pytorch` builds
PyTorch's order of the class the reader names. torch is imported only inside the checks
that need it. The hints name the usual slips: ``--nproc-per-node`` taken as the total,
``--standalone`` or a loopback address for a run on two machines, the free devices taken in
order, the node cut placed across the two-way hops of an interleaved pipeline, messages
counted one way only.
:func:`two_node_costs` is the chapter's cost model, which the notebook uses too. Exercises
10.1 and 10.5, whose checks ask PyTorch, live in :mod:`ppbook.exercises.ch10_torch`; the
sends and receives of an order (10.6) in :mod:`ppbook.exercises.ch10_comms`; the messages
between N nodes (10.7) and a tensor-by-pipeline placement on rails (10.8) in
:mod:`ppbook.exercises.ch10_build`.
"""

from __future__ import annotations

from functools import partial

from ppbook.checks import shown
from ppbook.cost_model.across_nodes import messages_across_nodes
from ppbook.cost_model.flops import layer_flops
from ppbook.cost_model.model_shape import ModelShape, Parallel
from ppbook.costs import Costs
from ppbook.exercises import close, exercise, number, right, wrong
from ppbook.exercises.ch7 import NODE, Placed, placed
from ppbook.links import Link, Topology, boundary_bytes
from ppbook.schedules import interleaved_1f1b, one_f_one_b, zb_v
from ppbook.simulate import simulate

MODEL = ModelShape(layers=64, hidden=4096, heads=32, vocab=50257, seq_len=4096)
"""Chapter 7's 13B model (bf16, micro-batch size 1), split into p = 16 stages of 4 layers
(and into 32 chunks of 2 layers with interleaving, v = 2)."""

STAGES = 16
"""Pipeline ranks of chapter 10's two nodes of 8, one GPU each."""

FLOPS_PER_SECOND = 400e12
"""An assumed 400 TFLOP/s per device, as in chapter 7."""

INTRA_GB_PER_S = 450.0
"""NVLink 4 inside a node, GB/s each way (data/links.csv)."""


def two_node_costs(inter_gb_per_s: float, placement=None) -> Costs:
    """The 13B model's stage costs (ms) on nodes of 8: NVLink 4 inside a node,
    ``inter_gb_per_s`` (GB/s each way) between the nodes, messages queued on their links.

    F, I and W of 64/16 = 4 whole layers at :data:`FLOPS_PER_SECOND`
    (:func:`ppbook.cost_model.flops.layer_flops`, embedding and head left out); one
    message is b s h x 2 bytes. Each rank is one GPU with its own network card (rails:
    each pair of ranks in different nodes has its own link, which the topology gives every
    direction between two ranks). ``placement``: each rank's device (default rank r on
    device r; devices 0-7 are node 0, 8-15 node 1, and so on).
    """
    if MODEL.layers % STAGES:
        raise ValueError(f"{MODEL.layers} layers do not split into {STAGES} whole stages")
    per_layer = layer_flops(MODEL, Parallel(microbatch_size=1))
    passes = {k: per_layer[k] * MODEL.layers / STAGES / FLOPS_PER_SECOND * 1e3 for k in "FIW"}
    nodes = Topology(
        Link.from_gb_per_s(INTRA_GB_PER_S, time_unit_s=1e-3, name="NVLink 4"),
        Link.from_gb_per_s(inter_gb_per_s, time_unit_s=1e-3, name="between the nodes"),
        devices_per_node=NODE,
        placement=placement,
    )
    message = boundary_bytes(1, MODEL.seq_len, MODEL.hidden, MODEL.bytes_per_element)
    return Costs(**passes, comm_bytes=message, topology=nodes, contention=True, time_unit="ms")


# ----- construct: the placement -----------------------------------------------------------


BUSY_10_2 = tuple(range(8, 13))
"""Exercise 10.2: another job holds devices 8-12 (five of node 1's eight)."""


@exercise(
    "10.2",
    "Construct a placement (one free device per rank) of interleaved 1F1B's 16 ranks (v = 2, "
    "m = 32) on three nodes of 8, devices 0-7, 8-15 and 16-23, where another job holds "
    "devices 8-12, that sends as few messages across the nodes as possible.",
    kind="construct",
    solution="A micro-batch goes through the ranks 0, 1, ..., 15, back to 0, and through "
    "0, ..., 15 again: each hop between ranks r and r+1 twice each way, the wrap from 15 to "
    "0 once. Nodes 0 and 2 are wholly free and hold all 16 ranks; the free devices in "
    "order, 0-7, 13-15 and 16-20, spread the ranks over three nodes and cut the ring three "
    "times (5 crossings each way per micro-batch). On two nodes any split cuts the ring of "
    "ranks twice; the cheapest cut uses the wrap: ranks 0-7 on one node and 8-15 on the "
    "other, `list(range(8)) + list(range(16, 24))`, 3 crossings each way per micro-batch "
    "(192 messages per step). Ranks 4-11 on one node cut two hops used twice: 4 each way.",
    answer_name="answer_2",
)
def _placement(answer):
    m = 32  # the messages are counted each way: over 2m
    schedule = interleaved_1f1b(STAGES, m, 2)
    got = placed(answer, schedule, partial(two_node_costs, 12.5), 2 * m, BUSY_10_2)
    if not isinstance(got, Placed):
        return got
    said = (
        f"{got.crossing:g} messages each way per micro-batch cross the nodes; on a 12.5 GB/s "
        f"link the step takes {got.step:.5g} ms (simulated)"
    )
    if got.crossing <= got.fewest:
        return right(f"{said}, the fewest crossings.")
    if len({d // NODE for d in answer}) > 2:
        hint = "count the free devices on each node: two nodes can hold all 16 ranks."
    elif got.crossing > 4:
        hint = "neighbouring ranks exchange every message: keep them on one node."
    else:
        hint = "the hop from rank 15 back to rank 0 is used once per micro-batch, the others twice."
    return wrong(f"{said}; {got.fewest:g} crossings give {got.shortest():.5g} ms.", hint)


# ----- choose: the schedule ---------------------------------------------------------------

SCHEDULES = {
    "1f1b": lambda m: one_f_one_b(16, m),
    "interleaved-1f1b": lambda m: interleaved_1f1b(16, m, 2),
    "zb-v": lambda m: zb_v(16, m),
}
"""Exercise 10.3's choices on p = 16 ranks (interleaved with v = 2 chunks)."""

SLOW_GB_PER_S = 1.0
"""Exercise 10.3's link between the nodes, GB/s each way."""


def schedule_steps(num_microbatches: int, inter_gb_per_s: float) -> dict[str, float]:
    """Each of :data:`SCHEDULES`' simulated step time (ms) under :func:`two_node_costs`."""
    costs = two_node_costs(inter_gb_per_s)
    return {
        name: simulate(build(num_microbatches), costs).makespan for name, build in SCHEDULES.items()
    }


@exercise(
    "10.3",
    'Choose the schedule, "1f1b", "interleaved-1f1b" (v = 2) or "zb-v", with the shortest '
    "step for the 13B model on two nodes of 8 (m = 16) when the link between the nodes "
    "gives 1 GB/s each way.",
    kind="choose",
    solution='`schedule_steps(16, 1.0)` simulates the three: "1f1b". A 33.6 MB message takes '
    "34 ms on 1 GB/s, longer than a stage's forward (19 ms). 1F1B sends 1 message each way "
    "per micro-batch across the nodes, ZB-V 2 and interleaved 1F1B (v = 2) 3: on a link "
    "this slow the queue of messages costs more than the bubble they save.",
    answer_name="answer_3",
)
def _schedule(answer):
    choice = answer.strip().lower() if isinstance(answer, str) else None
    if choice not in SCHEDULES:
        return wrong(
            f"this exercise wants one of {', '.join(map(repr, SCHEDULES))}, got {shown(answer)}."
        )
    steps = schedule_steps(16, SLOW_GB_PER_S)
    said = ", ".join(f"{name} {t:.5g} ms" for name, t in steps.items())
    if steps[choice] <= min(steps.values()):
        return right(f"simulated steps: {said}.")
    return wrong(
        f"simulated steps: {said}.",
        "count the messages each schedule sends across the nodes per micro-batch: on this "
        "link each one takes 34 ms.",
    )


# ----- compute: bytes between the nodes ---------------------------------------------------

CROSSING = {"p": 16, "m": 16, "v": 4, "seq_len": 2048, "hidden": 8192, "layers": 64}
"""Exercise 10.4: interleaved 1F1B on two nodes of 8, b = 1, bf16, a model of 64 layers
(one a chunk: p v = 64)."""


@exercise(
    "10.4",
    "The bytes that cross between two nodes of 8 in one step of interleaved 1F1B with p = 16, "
    "v = 4, m = 16 (ranks 0-7 on node 0), for 64 layers, h = 8192, s = 2048, b = 1, bf16.",
    kind="compute",
    solution="One message is b s h x 2 = 33,554,432 bytes. A micro-batch passes the ranks "
    "v = 4 times: it crosses between ranks 7 and 8 in each pass and from rank 15 back to 0 "
    "between passes, 2v - 1 = 7 times each way; forward and backward make 14 messages, "
    "224 for m = 16: 7,516,192,768 bytes (`messages_across_nodes` counts them).",
    answer_name="answer_4",
)
def _bytes_across(answer):
    given = number(answer, "a number of bytes such as 1.5e9")
    p, m, v = CROSSING["p"], CROSSING["m"], CROSSING["v"]
    message = boundary_bytes(1, CROSSING["seq_len"], CROSSING["hidden"], 2)
    nodes = Topology(Link(), Link(), devices_per_node=NODE)
    count = messages_across_nodes(interleaved_1f1b(p, m, v), nodes)
    truth = count * message
    if close(given, truth):
        return right(f"{count} messages of {message:,.0f} bytes: {truth:,.0f} bytes per step.")
    slips = [
        (truth / 2, "that is half: one direction, or elements.", "count the gradients coming "
         "back as well, at 2 bytes an element."),
        (2 * v * 2 * m * message, "that counts 2v crossings each way per micro-batch.",
         "the wrap from rank 15 to rank 0 comes only between passes: v - 1 times."),
        (2 * m * message, "that is 1F1B's count, one crossing each way.",
         "each of the v passes crosses between ranks 7 and 8."),
        (truth * 8, "that is bits.", "count bytes."),
        (truth / m, "that is one micro-batch.", "a step has m = 16."),
    ]  # fmt: skip
    for value, said, hint in slips:
        if close(given, value):
            return wrong(f"{given:.4g}: {said}", hint)
    return wrong(
        f"{given:.4g} is not the bytes per step.",
        "count the crossings of one micro-batch each way, then messages times bytes.",
    )


import ppbook.exercises.ch10_build  # noqa: E402, F401 (registers 10.7 and 10.8)
import ppbook.exercises.ch10_comms  # noqa: E402, F401 (registers 10.6)
import ppbook.exercises.ch10_torch  # noqa: E402, F401 (registers 10.1 and 10.5)
