"""Exercises 7.7 (derive) and 7.8 (implement): right answers in any form pass, each usual slip
gets its own hint, and wrong answers of the same kinds that the checks never saw fail too.

The right answers are worked out by hand here: GPipe's queued step from an event trace
written out below, the ring's bytes from its chunks; never by calling the checks' own
functions.
"""

import numpy as np
import pytest
import sympy as sp

from ppbook.costs import Costs
from ppbook.exercises import check, get
from ppbook.schedules import gpipe
from ppbook.simulate import simulate

p, m, F, B, tau, alpha = sp.symbols("p m F B tau alpha", positive=True)

QUEUED = p * (F + B) + 2 * (p - 1) * (tau + alpha) + (m - 1) * (sp.Max(F, tau) + sp.Max(B, tau))


def test_7_7_the_flow_line_by_hand():
    # p = 2, m = 2, F = B = 1, tau = 2, no latency, by hand: rank 0 runs F0 0-1 and F1 1-2;
    # the link carries F0's message 1-3 and F1's 3-5 (it queues); rank 1 runs F0 3-4, F1 5-6,
    # B0 6-7, B1 7-8; the gradients leave 7-9 and 9-11; rank 0 runs B0 9-10, B1 11-12.
    costs = Costs(F=1, B=1, comm_bytes=1, bandwidth=1 / 2, contention=True)
    assert simulate(gpipe(2, 2), costs).makespan == 12
    assert QUEUED.subs({p: 2, m: 2, F: 1, B: 1, tau: 2, alpha: 0}) == 12


def test_7_7_right_in_any_form():
    assert get("7.7").kind == "derive"
    assert check("7.7", QUEUED)
    # The same step written as chapter 1's plus what the queue adds.
    plus_queue = (m + p - 1) * (F + B) + 2 * (p - 1) * (tau + alpha)
    plus_queue += (m - 1) * (sp.Max(0, tau - F) + sp.Max(0, tau - B))
    assert check("7.7", plus_queue)
    plain = sp.symbols("p m F B tau alpha")  # symbols without assumptions, read by name
    assert check("7.7", QUEUED.subs(dict(zip((p, m, F, B, tau, alpha), plain, strict=True))))


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        ((m + p - 1) * (F + B) + 2 * (p - 1) * (tau + alpha), "without queueing"),
        (
            p * (F + B) + 2 * (p - 1) * (tau + alpha) + (m - 1) * 2 * sp.Max(F, B, tau),
            "each at its own slowest",
        ),
        (
            p * (F + B) + 2 * (p - 1) * tau + (m - 1) * (sp.Max(F, tau) + sp.Max(B, tau)),
            "once per hop",
        ),
        (
            p * (F + B)
            + 2 * (p - 1) * (tau + alpha)
            + (m - 1) * (sp.Max(F, tau + alpha) + sp.Max(B, tau + alpha)),
            "holds its link for tau only",
        ),
    ],
)
def test_7_7_the_usual_slips_are_named(answer, hint):
    verdict = check("7.7", answer)
    assert not verdict and hint in verdict.hint and "the simulator measures" in verdict.message


@pytest.mark.parametrize(
    "answer",
    [
        p * (F + B) + 2 * (p - 1) * (tau + alpha) + (m - 1) * (sp.Max(F, tau) + B),  # B only
        p * (F + B) + 2 * p * (tau + alpha) + (m - 1) * (sp.Max(F, tau) + sp.Max(B, tau)),
        (m + p - 1) * sp.Max(F, tau) + (m + p - 1) * sp.Max(B, tau),
        QUEUED + sp.Rational(1, 1000),
    ],
)
def test_7_7_unseen_wrong_expressions_fail(answer):
    assert not check("7.7", answer)


def test_7_7_refuses_what_is_not_an_expression_in_its_symbols():
    assert "sympy expression" in check("7.7", 45.5).message
    c = sp.Symbol("c")
    assert "c" in check("7.7", QUEUED + c - c + c).message


def ring_all_reduce(rank, n, data, send, recv):
    chunks = [c.copy() for c in np.array_split(data, n)]
    for k in range(n - 1):  # reduce-scatter
        send(chunks[(rank - k) % n])
        chunks[(rank - k - 1) % n] += recv()
    for k in range(n - 1):  # all-gather
        send(chunks[(rank + 1 - k) % n])
        chunks[(rank - k) % n] = recv()
    return np.concatenate(chunks)


def ring_other_way_round(rank, n, data, send, recv):
    # Each rank starts with the chunk after its own and ends owning chunk rank + 2: the
    # same bytes, another rotation, and the result as a list.
    chunks = [c.copy() for c in np.array_split(data, n)]
    for k in range(n - 1):
        send(chunks[(rank + 1 - k) % n])
        chunks[(rank - k) % n] = chunks[(rank - k) % n] + recv()
    for k in range(n - 1):
        send(chunks[(rank + 2 - k) % n])
        chunks[(rank + 1 - k) % n] = recv()
    return list(np.concatenate(chunks))


def test_7_8_the_ring_by_hand():
    # n = 4 ranks, 8 float64 elements (64 bytes): chunks of 2 elements, 16 bytes; each rank
    # sends 3 chunks in the reduce-scatter and 3 in the all-gather, 96 bytes = 2(n-1)/n x 64.
    from ppbook.cost_model.step_work import ring_bytes

    assert ring_bytes("all-reduce", 64, 4) == 6 * 16 == 96


@pytest.mark.parametrize("answer", [ring_all_reduce, ring_other_way_round])
def test_7_8_right_ring_all_reduces_pass(answer):
    assert get("7.8").kind == "implement"
    verdict = check("7.8", answer)
    assert verdict, verdict.text


def reduce_scatter_only(rank, n, data, send, recv):
    chunks = [c.copy() for c in np.array_split(data, n)]
    for k in range(n - 1):
        send(chunks[(rank - k) % n])
        chunks[(rank - k - 1) % n] += recv()
    return np.concatenate(chunks)


def whole_array_round_the_ring(rank, n, data, send, recv):
    total, passing = data.copy(), data.copy()
    for _ in range(n - 1):
        send(passing)
        passing = recv()
        total += passing
    return total


def equal_split(rank, n, data, send, recv):
    chunks = [c.copy() for c in np.split(data, n)]
    for k in range(n - 1):
        send(chunks[(rank - k) % n])
        chunks[(rank - k - 1) % n] += recv()
    for k in range(n - 1):
        send(chunks[(rank + 1 - k) % n])
        chunks[(rank - k) % n] = recv()
    return np.concatenate(chunks)


def off_by_one(rank, n, data, send, recv):
    chunks = [c.copy() for c in np.array_split(data, n)]
    for k in range(n - 1):
        send(chunks[(rank - k) % n])
        chunks[(rank - k) % n] += recv()
    for k in range(n - 1):
        send(chunks[(rank + 1 - k) % n])
        chunks[(rank - k) % n] = recv()
    return np.concatenate(chunks)


def receive_first(rank, n, data, send, recv):
    got = recv()
    send(data)
    return data + got


@pytest.mark.parametrize(
    ("answer", "said", "hint"),
    [
        (reduce_scatter_only, "sum of all data", "all-gather"),
        (whole_array_round_the_ring, "where a ring all-reduce sends", "chunks of 1/n"),
        (equal_split, "equal division", "np.array_split"),
        (off_by_one, "sum of all data", "chunk (r - k - 1) mod n"),
        (receive_first, "never came", "send before you receive"),
    ],
)
def test_7_8_the_usual_slips_are_named(answer, said, hint):
    verdict = check("7.8", answer)
    assert not verdict and said in verdict.message and hint in verdict.hint


def all_gather_of_inputs(rank, n, data, send, recv):
    # Gathers every rank's whole input and sums: right result, (n-1) times the data sent.
    parts, passing = [data.copy()], data.copy()
    for _ in range(n - 1):
        send(passing)
        passing = recv()
        parts.append(passing)
    return np.sum(parts, axis=0)


def sends_twice(rank, n, data, send, recv):
    out = ring_all_reduce(rank, n, data, send, recv)
    send(out[:1])
    recv()
    return out


def mean_not_sum(rank, n, data, send, recv):
    return ring_all_reduce(rank, n, data, send, recv) / n


def own_data_times_n(rank, n, data, send, recv):
    return data * n


def chunks_not_joined(rank, n, data, send, recv):
    full = ring_all_reduce(rank, n, data, send, recv)
    return np.array_split(full, n)


@pytest.mark.parametrize(
    "answer", [all_gather_of_inputs, sends_twice, mean_not_sum, own_data_times_n, chunks_not_joined]
)
def test_7_8_unseen_wrong_programs_fail(answer):
    assert not check("7.8", answer)


def test_7_8_refuses_what_is_not_a_function():
    assert "wants a function" in check("7.8", "ring").message
