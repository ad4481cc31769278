"""Exercise 3.7, a grouped send/receive exchange, run on four gloo processes.

The right exchange is written here by hand (two P2POps per neighbour, posted with
batch_isend_irecv). The wrong ones are the kinds of mistake the check is built against:
a send whose receive is missing (it hangs until the process group's timeout), blocking
send-then-receive on every rank (it deadlocks: gloo waits for the receiver), the
received tensors returned the wrong way round, and an exchange that raises.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from ppbook.exercises import check
from ppbook.exercises.ch3_exchange import unmatched


def exchange(rank, world_size, activation, gradient):
    ops, from_prev, from_next = [], None, None
    if rank + 1 < world_size:
        from_next = torch.empty_like(gradient)
        ops += [
            dist.P2POp(dist.isend, activation, rank + 1),
            dist.P2POp(dist.irecv, from_next, rank + 1),
        ]
    if rank > 0:
        from_prev = torch.empty_like(activation)
        ops += [
            dist.P2POp(dist.isend, gradient, rank - 1),
            dist.P2POp(dist.irecv, from_prev, rank - 1),
        ]
    for request in dist.batch_isend_irecv(ops):
        request.wait()
    return from_prev, from_next


def forgets_the_gradient(rank, world_size, activation, gradient):
    """Sends the gradient back but never receives one: rank r-1 gets no receive posted."""
    ops, from_prev = [], None
    if rank + 1 < world_size:
        ops.append(dist.P2POp(dist.isend, activation, rank + 1))
    if rank > 0:
        from_prev = torch.empty_like(activation)
        ops += [
            dist.P2POp(dist.isend, gradient, rank - 1),
            dist.P2POp(dist.irecv, from_prev, rank - 1),
        ]
    for request in dist.batch_isend_irecv(ops):
        request.wait()
    return from_prev, None


def send_first(rank, world_size, activation, gradient):
    """Every rank sends both ways, then receives: each send waits for a rank in its send."""
    from_prev = from_next = None
    if rank + 1 < world_size:
        dist.send(activation, rank + 1)
    if rank > 0:
        dist.send(gradient, rank - 1)
        from_prev = torch.empty_like(activation)
        dist.recv(from_prev, rank - 1)
    if rank + 1 < world_size:
        from_next = torch.empty_like(gradient)
        dist.recv(from_next, rank + 1)
    return from_prev, from_next


def test_3_7_a_grouped_exchange_runs_and_delivers():
    verdict = check("3.7", exchange)
    assert verdict, verdict.text
    assert "every send met its receive" in verdict.message


@pytest.mark.timeout(120)
def test_3_7_a_send_without_its_receive_is_named():
    verdict = check("3.7", forgets_the_gradient)
    assert verdict.status == "wrong"
    assert "rank 1 sends 1 tensor(s) to rank 0, which receives 0 from rank 1" in verdict.message


@pytest.mark.timeout(120)
def test_3_7_blocking_sends_first_deadlock_and_are_refused():
    verdict = check("3.7", send_first)
    assert verdict.status == "wrong"
    assert "blocking dist.send" in verdict.message and "batch_isend_irecv" in verdict.hint


def test_3_7_tensors_the_wrong_way_round_and_errors():
    def swapped(rank, world_size, activation, gradient):
        before, after = exchange(rank, world_size, activation, gradient)
        return after, before

    wrong_way = check("3.7", swapped)
    assert "rank 0 returned ([-10.5, -11.5, -12.5], None)" in wrong_way.message
    assert "should return (None, [-10.5, -11.5, -12.5])" in wrong_way.message
    assert "ZeroDivisionError" in check("3.7", lambda r, w, a, g: 1 / 0).message
    assert "not (from_previous, from_next)" in check("3.7", lambda r, w, a, g: None).message
    assert "wants a function" in check("3.7", [1, 2]).message


def test_unmatched_pairs_are_named_without_processes():
    # rank 0 sends to 1 twice, rank 1 receives from 0 once; rank 2 names itself
    posted = {
        0: [("send", 1, (3,), "torch.float64"), ("send", 1, (3,), "torch.float64")],
        1: [("recv", 0, (3,), "torch.float64")],
        2: [("recv", 2, (3,), "torch.float64")],
    }
    problems = unmatched(posted)
    assert problems[0] == "rank 2 names peer 2, not another rank"
    assert "rank 0 sends 2 tensor(s) to rank 1, which receives 1 from rank 0" in problems
    shapes = {0: [("send", 1, (3,), "torch.float64")], 1: [("recv", 0, (4,), "torch.float64")]}
    assert unmatched(shapes) == [
        "rank 0 sends 1 tensor(s) to rank 1, which receives 1 from rank 0 of other shapes or dtypes"
    ]
