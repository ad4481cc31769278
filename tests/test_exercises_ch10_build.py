"""Exercises 10.6 (implement), 10.7 (derive) and 10.8 (construct), and 10.2 now a
construction: right answers in any form pass, each usual slip gets its own hint, and wrong
answers of the same kinds that the checks never saw fail too.

The right answers are worked out by hand here (the messages of a two-rank order written
out, crossings counted pass by pass, a placement drawn on the rails), or are PyTorch's own
(its lowering ``_add_send_recv``), never the checks' own functions.
"""

import re

import numpy as np
import pytest
import sympy as sp

from ppbook.cost_model.across_nodes import messages_across_nodes
from ppbook.exercises import check, exercises, get
from ppbook.exercises.ch10_build import fewest_boundaries
from ppbook.links import Link, Topology
from ppbook.schedules import interleaved_1f1b

COMPUTE = re.compile(r"(\d+)([FBIW])(\d+)")


def with_comms(rows, stage_to_rank, early_recv=False):
    last = len(stage_to_rank) - 1
    out = []
    for rank, row in enumerate(rows):
        mine = []
        for text in row:
            stage, kind, mb = COMPUTE.fullmatch(text).groups()
            s = int(stage)
            if kind == "F" and s > 0 and stage_to_rank[s - 1] != rank:
                mine.append(f"{s}RECV_F{mb}")
            if kind in "BI" and s < last and stage_to_rank[s + 1] != rank:
                mine.append(f"{s}RECV_B{mb}")
            mine.append(text)
            if kind == "F" and s < last and stage_to_rank[s + 1] != rank:
                mine.append(f"{s}SEND_F{mb}")
            if kind in "BI" and s > 0 and stage_to_rank[s - 1] != rank:
                mine.append(f"{s}SEND_B{mb}")
        out.append(mine)
    return out


def pytorch_lowering(rows, stage_to_rank):
    from torch.distributed.pipelining.schedules import _Action, _add_send_recv

    compute = {r: [_Action.from_str(a) for a in row] for r, row in enumerate(rows)}
    lowered = _add_send_recv(compute, lambda s: stage_to_rank[s], len(stage_to_rank))
    return [[str(a) for a in lowered[r]] for r in sorted(lowered)]


def test_10_6_a_two_rank_order_by_hand():
    # GPipe on 2 ranks, 1 micro-batch: stage 0 sends its activation after 0F0, stage 1
    # receives it before 1F0; 1B0 sends the gradient that 0B0 receives.
    rows = [["0F0", "0B0"], ["1F0", "1B0"]]
    assert with_comms(rows, [0, 1]) == [
        ["0F0", "0SEND_F0", "0RECV_B0", "0B0"],
        ["1RECV_F0", "1F0", "1B0", "1SEND_B0"],
    ]
    assert pytorch_lowering(rows, [0, 1]) == with_comms(rows, [0, 1])


@pytest.mark.parametrize("answer", [with_comms, pytorch_lowering])
def test_10_6_right_lowerings_pass(answer):
    assert get("10.6").kind == "implement"
    verdict = check("10.6", answer)
    assert verdict, verdict.text


def _rewrite(change):
    """A lowering whose rows ``change(rows, stage_to_rank)`` edits after the right one."""
    return lambda rows, stage_to_rank: change(with_comms(rows, stage_to_rank), stage_to_rank)


def _receive_after(rows, _):
    out = []
    for row in rows:
        row = list(row)
        for i in range(len(row) - 1):
            if "RECV" in row[i]:
                row[i], row[i + 1] = row[i + 1], row[i]
        out.append(row)
    return out


def _receives_first(rows, _):
    return [[a for a in row if "RECV" in a] + [a for a in row if "RECV" not in a] for row in rows]


def _sender_names_receive(rows, _):
    fix = re.compile(r"(\d+)RECV_F(\d+)")
    return [[fix.sub(lambda g: f"{int(g[1]) - 1}RECV_F{g[2]}", a) for a in row] for row in rows]


def _same_rank_too(rows, stage_to_rank):
    # ZB-V's turn: the last rank holds stages p-1 and p; a message between them is extra.
    out = [list(row) for row in rows]
    middle = len(stage_to_rank) // 2
    if stage_to_rank[middle - 1] == stage_to_rank[middle]:
        rank = stage_to_rank[middle]
        at = out[rank].index(f"{middle - 1}F0") + 1
        out[rank][at:at] = [f"{middle - 1}SEND_F0", f"{middle}RECV_F0"]
    return out


def _send_after_weight(rows, _):
    out = []
    for row in rows:
        row = list(row)
        for i, a in enumerate(row):
            if "SEND_B" in a:
                stage, mb = re.fullmatch(r"(\d+)SEND_B(\d+)", a).groups()
                weight = f"{stage}W{mb}"
                if weight in row[i:]:
                    row.pop(i)
                    row.insert(row.index(weight) + 1, a)
        out.append(row)
    return out


@pytest.mark.parametrize(
    ("change", "said", "hint"),
    [
        (_receive_after, "after the action that needs it", "receive before"),
        (_receives_first, "stops for ever", "a receive moved early"),
        (_sender_names_receive, "a message PyTorch does not send", "stage that receives"),
        (_same_rank_too, "a message PyTorch does not send", "same rank"),
        (_send_after_weight, "right after the action", "send right after"),
    ],
)
def test_10_6_the_usual_slips_are_named(change, said, hint):
    verdict = check("10.6", _rewrite(change))
    assert not verdict and said in verdict.message and hint in verdict.hint, verdict.text


def _drop_last_send(rows, _):
    out = [list(row) for row in rows]
    for row in out:
        for i in range(len(row) - 1, -1, -1):
            if "SEND" in row[i]:
                del row[i]
                return out
    return out


def _reorder_compute(rows, _):
    out = [list(row) for row in rows]
    row = out[0]
    computes = [i for i, a in enumerate(row) if "SEND" not in a and "RECV" not in a]
    row[computes[0]], row[computes[1]] = row[computes[1]], row[computes[0]]
    return out


def _lower_case(rows, _):
    return [[a.lower() for a in row] for row in rows]


def _send_before_compute(rows, _):
    out = []
    for row in rows:
        row = list(row)
        for i in range(1, len(row)):
            if "SEND" in row[i]:
                row[i - 1], row[i] = row[i], row[i - 1]
        out.append(row)
    return out


@pytest.mark.parametrize(
    "change",
    [
        _drop_last_send,
        _reorder_compute,
        _lower_case,
        _send_before_compute,
        lambda rows, _: rows[:-1],
        lambda rows, _: [" ".join(row) for row in rows],
    ],
)
def test_10_6_unseen_wrong_lowerings_fail(change):
    assert not check("10.6", _rewrite(change))


def test_10_6_refuses_what_is_not_a_function_and_reports_a_crash():
    assert "wants a function" in check("10.6", [["0F0"]]).message
    crashed = check("10.6", lambda rows, stage_to_rank: 1 / 0)
    assert not crashed and "ZeroDivisionError" in crashed.message


p, N, v, m = sp.symbols("p N v m", positive=True, integer=True)


def test_10_7_crossings_pass_by_pass_by_hand():
    # p = 8 on N = 4 nodes of 2, v = 2: each pass crosses 1|2, 3|4, 5|6 (3), the wrap 7 -> 0
    # crosses once: 7 each way per micro-batch, 112 messages for m = 8.
    nodes = Topology(Link(), Link(), devices_per_node=2)
    assert messages_across_nodes(interleaved_1f1b(8, 8, 2), nodes) == 2 * 8 * 7 == 112


@pytest.mark.parametrize(
    "answer", [2 * m * (v * N - 1), 2 * m * v * N - 2 * m, 2 * m * (v * (N - 1) + v - 1)]
)
def test_10_7_right_in_any_form(answer):
    assert get("10.7").kind == "derive"
    assert check("10.7", answer)


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (2 * m * v * (N - 1), "v - 1 times"),
        (2 * m * (2 * v - 1) * (N - 1), "the wrap crosses once"),
        (m * (v * N - 1), "both directions"),
        (2 * m * v * N, "between passes"),
        (2 * m * (p * v - 1), "every hop"),
    ],
)
def test_10_7_the_usual_slips_are_named(answer, hint):
    verdict = check("10.7", answer)
    assert not verdict and hint in verdict.hint and "the schedule sends" in verdict.message


@pytest.mark.parametrize(
    "answer",
    [
        2 * m * (v * N - 1) + (N - 2),  # right on two nodes only
        2 * m * (v * N - 1) * p / 16,  # right at p = 16 only
        2 * m * (v - 1) + 2 * m * N,
        4 * m * (N - 1),  # ZB-V's count
    ],
)
def test_10_7_unseen_wrong_expressions_fail(answer):
    assert not check("10.7", answer)


RIGHT_10_8 = [[0, 1, 2, 3], [4, 5, 6, 7], [12, 13, 14, 15], [8, 9, 10, 11]]


def test_10_8_one_boundary_is_the_fewest():
    # Two whole stages fit a node (8 / t = 2), so the two nodes hold two stages each and the
    # chain of four stages crosses at least once.
    assert fewest_boundaries() == 1


@pytest.mark.parametrize(
    "placement",
    [
        RIGHT_10_8,
        [[8, 9, 10, 11], [12, 13, 14, 15], [4, 5, 6, 7], [0, 1, 2, 3]],  # the nodes swapped
        [[3, 2, 1, 0], [7, 6, 5, 4], [15, 14, 13, 12], [11, 10, 9, 8]],  # ranks reversed
        [[0, 2, 4, 6], [1, 3, 5, 7], [9, 11, 13, 15], [8, 10, 12, 14]],  # interleaved GPUs
        np.array(RIGHT_10_8),  # numpy's integers
    ],
)
def test_10_8_placements_on_one_rail_pass(placement):
    assert get("10.8").kind == "construct"
    verdict = check("10.8", placement)
    assert verdict, verdict.text


@pytest.mark.parametrize(
    ("placement", "said", "hint"),
    [
        ([[4 * s + i for i in range(4)] for s in range(4)], "different rails", "same local GPUs"),
        ([[s + 4 * i for i in range(4)] for s in range(4)], "on both nodes", "inside one node"),
        (
            [[0, 1, 2, 3], [8, 9, 10, 11], [4, 5, 6, 7], [12, 13, 14, 15]],
            "3 stage boundaries",
            "neighbouring stages",
        ),
    ],
)
def test_10_8_the_usual_slips_are_named(placement, said, hint):
    verdict = check("10.8", placement)
    assert not verdict and said in verdict.message and hint in verdict.hint


@pytest.mark.parametrize(
    "placement",
    [
        [[0, 1, 2, 3], [4, 5, 6, 7], [15, 14, 13, 12], [8, 9, 10, 11]],  # one rail pair off
        [[0, 1, 2, 3], [4, 5, 6, 7], [13, 12, 14, 15], [8, 9, 10, 11]],
        [[0, 1, 2, 3], [12, 13, 14, 15], [4, 5, 6, 7], [8, 9, 10, 11]],  # two cuts
        [[0, 1, 2, 3], [4, 5, 6, 7], [12, 13, 14, 15], [8, 9, 10, 10]],  # a device twice
        [[0, 1, 2, 3], [4, 5, 6, 7], [12, 13, 14, 15]],
        [[0, 1, 2, 3], [4, 5, 6, 7], [12, 13, 14, 15], [8, 9, 10, 16]],
        [[0, 1, 2, 3], [4, 5, 6, 7], [12, 13, 14, 15], [8, 9, 10, 11.0]],
        "0-15",
        list(range(16)),
    ],
)
def test_10_8_unseen_wrong_placements_fail(placement):
    assert not check("10.8", placement)


def test_chapter_10_kinds_and_10_2_a_construction():
    assert get("10.2").kind == "construct"
    kinds = [e.kind for e in exercises("10")]
    assert 2 * sum(k in ("derive", "construct", "implement") for k in kinds) >= len(kinds)
    kinds_7 = [e.kind for e in exercises("7")]
    assert 2 * sum(k in ("derive", "construct", "implement") for k in kinds_7) >= len(kinds_7)
