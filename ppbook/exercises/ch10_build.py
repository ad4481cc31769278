"""Exercises 10.7 and 10.8 of chapter 10: derive and construct (``notebooks/10_cluster.ipynb``).

Each answer is judged by what makes it right, never by equality with one stored value:

- 10.7, the messages between nodes of interleaved 1F1B on N nodes, must equal
  :func:`ppbook.cost_model.across_nodes.messages_across_nodes` on the schedule itself at
  drawn p, N, v and m;
- 10.8, a tensor-by-pipeline placement on two rail-optimised nodes, is judged by its
  properties: every tensor-parallel group inside a node, the fewest stage boundaries across
  the nodes (an exhaustive search over the stages' nodes), and every message that crosses
  between GPUs on one rail.

:mod:`ppbook.exercises.ch10` registers them with the chapter's other exercises
(10.6, the sends and receives of an order, is in :mod:`ppbook.exercises.ch10_comms`).
"""

from __future__ import annotations

import itertools
import numbers
import random

from ppbook.checks import shown
from ppbook.cost_model.across_nodes import messages_across_nodes
from ppbook.exercises import exercise, right, wrong
from ppbook.exercises.ch1_derive import _expression, _value
from ppbook.links import Link, Topology
from ppbook.schedules import interleaved_1f1b

# ----- 10.7 messages between N nodes ------------------------------------------------------

NODES_SYMBOLS = ("p", "N", "v", "m")
"""The names 10.7's expression may use."""


def nodes_draws(seed: int = 107) -> list[dict[str, int]]:
    """Points (p, N, v, m) at which 10.7 is checked: p/N consecutive ranks on each of N
    nodes (N >= 2), N = p (a rank per node) included; m a multiple of p or
    below it, as interleaved 1F1B needs."""
    rng = random.Random(seed)
    draws = [dict(p=16, N=2, v=2, m=32), dict(p=8, N=4, v=2, m=8), dict(p=4, N=4, v=3, m=4)]
    while len(draws) < 12:
        per_node = rng.choice([1, 2, 3, 4])
        n = rng.randint(2, 5)
        p = per_node * n
        draws.append(dict(p=p, N=n, v=rng.randint(1, 4), m=rng.choice([p, 2 * p, max(1, p - 1)])))
    return draws


def nodes_messages(at: dict[str, int]) -> int:
    """Messages between nodes of one step of interleaved 1F1B at ``at`` (counted on the
    schedule by :func:`messages_across_nodes`)."""
    nodes = Topology(Link(), Link(), devices_per_node=at["p"] // at["N"])
    return messages_across_nodes(interleaved_1f1b(at["p"], at["m"], at["v"]), nodes)


@exercise(
    "10.7",
    "Derive the number of messages (both directions) that cross between the nodes in one "
    "step of interleaved 1F1B with p ranks, v chunks and m micro-batches on N >= 2 nodes, "
    "each holding p/N consecutive ranks: a sympy expression in p, N, v and m.",
    kind="derive",
    solution="A micro-batch's forwards pass the ranks 0..p-1 v times. Each pass crosses "
    "the N - 1 boundaries between nodes, and between passes the hop from rank p-1 back to "
    "rank 0 crosses once (the last node to the first) when N > 1: v(N-1) + (v-1) = vN - 1 "
    "crossings, whatever p. The backward crosses the same ones: `2*m*(v*N - 1)`. At N = 2 "
    "it is 2m(2v - 1), section 4's count; at N = p every hop crosses, 2m(pv - 1), "
    "chapter 7's. (At N = 1 nothing crosses, and vN - 1 = v - 1 counts the wraps that do "
    "not: the formula holds for N >= 2.)",
    answer_name="answer_7",
)
def _nodes_messages(answer):
    given = _expression(answer, NODES_SYMBOLS)
    draws = nodes_draws()
    for at in draws:
        truth = nodes_messages(at)
        mine = _value(given, at)
        if mine is None or abs(mine - truth) > 1e-9:
            p, n, v, m = (at[k] for k in NODES_SYMBOLS)
            said = "no finite number" if mine is None else f"{mine:g}"
            slips = {
                2 * m * v * (n - 1): "the hop from rank p-1 back to rank 0 between passes "
                "crosses too: v - 1 times.",
                2 * m * (2 * v - 1) * (n - 1): "that is two nodes' count per boundary: the "
                "wrap crosses once, from the last node to the first, not at every boundary.",
                m * (v * n - 1): "count both directions: each forward's crossing has a backward's.",
                2 * m * v * n: "the wrap comes between passes: v - 1 times, not v.",
                2 * m * (p * v - 1): "that is every hop: only the hops between nodes cross.",
            }
            hint = slips.get(mine, "follow one micro-batch through the v passes over the ranks.")
            return wrong(
                f"at p = {p}, N = {n}, v = {v}, m = {m} the expression gives {said}; the "
                f"schedule sends {truth} messages between the nodes.",
                hint,
            )
    return right(
        f"it equals the messages counted on the schedule at all {len(draws)} drawn points."
    )


# ----- 10.8 tensor and pipeline on rails --------------------------------------------------

RAIL_NODE = 8
"""GPUs per node in 10.8: devices 0-7 on node 0, 8-15 on node 1."""

RAIL_STAGES, RAIL_TP = 4, 4
"""10.8's layout: p = 4 pipeline stages of t = 4 tensor-parallel ranks each."""


def fewest_boundaries() -> int:
    """The fewest of the p - 1 stage boundaries that cross between the nodes when each node
    holds 8/t whole stages: an exhaustive search over the stages' nodes."""
    per_node = RAIL_NODE // RAIL_TP
    nodes = [n for n in range(RAIL_STAGES // per_node) for _ in range(per_node)]
    return min(
        sum(order[s] != order[s + 1] for s in range(RAIL_STAGES - 1))
        for order in set(itertools.permutations(nodes))
    )


@exercise(
    "10.8",
    "Construct a placement of p = 4 pipeline stages of t = 4 tensor-parallel ranks each on "
    "two rail-optimised nodes of 8 GPUs (devices 0-15; GPU k of each node on rail switch "
    "k): placement[s][i] is the device of stage s's tensor rank i, with every all-reduce "
    "inside a node, the fewest boundaries across the nodes, and every message between the "
    "nodes on one rail.",
    kind="construct",
    solution="Each stage's four ranks all-reduce twice per layer and pass: they belong on "
    "one node, so each node holds two whole stages, and stages 0-1 on one node, 2-3 on the "
    "other cut the pipeline once, between stages 1 and 2. There, with Megatron-LM's "
    "scatter/gather, tensor rank i of stage 1 sends its piece to tensor rank i of stage 2: "
    "they must have the same local GPU index (d mod 8) to meet on one rail. Devices in "
    "order, stage 2 on 8-11, would pair GPU 4 with GPU 0 (local 4-7 against 0-3): give "
    "stage 2 the local GPUs of stage 1, `[[0, 1, 2, 3], [4, 5, 6, 7], [12, 13, 14, 15], "
    "[8, 9, 10, 11]]`.",
    answer_name="answer_8",
)
def _rails(answer):
    want = f"a list of {RAIL_STAGES} lists of {RAIL_TP} devices"
    if isinstance(answer, str | bytes) or not hasattr(answer, "__iter__"):
        return wrong(f"this exercise wants {want}, got {shown(answer)}.")
    grid = [list(row) if hasattr(row, "__iter__") else row for row in answer]
    if len(grid) != RAIL_STAGES or any(not isinstance(row, list) for row in grid):
        return wrong(f"this exercise wants {want}, one list per stage, got {shown(answer)}.")
    if any(len(row) != RAIL_TP for row in grid):
        return wrong(f"give each stage {RAIL_TP} devices, one per tensor rank.")
    devices = [d for row in grid for d in row]
    if not all(isinstance(d, numbers.Integral) and not isinstance(d, bool) for d in devices):
        return wrong(f"devices are whole numbers 0-{2 * RAIL_NODE - 1}, got {shown(devices)}.")
    grid = [[int(d) for d in row] for row in grid]  # numpy's integers too
    devices = [d for row in grid for d in row]
    if sorted(devices) != list(range(2 * RAIL_NODE)):
        return wrong(f"use each of the devices 0-{2 * RAIL_NODE - 1} once, got {shown(devices)}.")
    node = [[d // RAIL_NODE for d in row] for row in grid]
    split = [s for s, row in enumerate(node) if len(set(row)) > 1]
    if split:
        return wrong(
            f"stage {split[0]}'s tensor ranks sit on both nodes: its all-reduces, twice per "
            "layer and pass, would cross between them.",
            "keep each stage's tensor-parallel group inside one node.",
        )
    crossing = [s for s in range(RAIL_STAGES - 1) if node[s][0] != node[s + 1][0]]
    fewest = fewest_boundaries()
    if len(crossing) > fewest:
        return wrong(
            f"{len(crossing)} stage boundaries cross between the nodes; {fewest} can.",
            "put neighbouring stages on one node.",
        )
    for s in crossing:
        for i in range(RAIL_TP):
            a, b = grid[s][i], grid[s + 1][i]
            if a % RAIL_NODE != b % RAIL_NODE:
                return wrong(
                    f"tensor rank {i} of stage {s} (device {a}, GPU {a % RAIL_NODE} of its "
                    f"node) sends to tensor rank {i} of stage {s + 1} (device {b}, GPU "
                    f"{b % RAIL_NODE}): different rails, so the message crosses the spine.",
                    "give the stage after the cut the same local GPUs as the one before it.",
                )
    return right(
        f"every all-reduce stays inside a node, {len(crossing)} boundary crosses (the fewest, "
        "by exhaustive search), and each of its messages goes between GPUs on one rail."
    )
