"""Exercises 7.7 and 7.8 of chapter 7: derive and implement (``notebooks/07_communication.ipynb``).

Each answer is judged by what makes it right, on many drawn points, never by equality with
one stored expression or array:

- 7.7, GPipe's step when its messages queue on their links (serialisation tau, latency
  alpha, ``contention=True``), must equal the simulator's makespan
  (:func:`ppbook.simulate.simulate`) at drawn p, m, F, B, tau and alpha, on both sides of
  tau = F and tau = B;
- 7.8, a ring all-reduce written as one rank's program that may only send to the next rank
  and receive from the previous one, is run on n simulated ranks (threads) over drawn numpy
  arrays: every rank must end with numpy's sum of all of them, and the ranks together must
  send the bytes of NCCL's ring, n times
  :func:`ppbook.cost_model.step_work.ring_bytes` ("all-reduce"), 2 (n-1)/n of the data each.

:mod:`ppbook.exercises.ch7` registers them with the chapter's other exercises.
"""

from __future__ import annotations

import math
import queue
import random
import threading

import numpy as np

from ppbook.checks import shown
from ppbook.cost_model.step_work import ring_bytes
from ppbook.costs import Costs
from ppbook.exercises import exercise, right, wrong
from ppbook.exercises.ch1_derive import _expression, _value
from ppbook.schedules import gpipe
from ppbook.simulate import simulate

# ----- 7.7 GPipe when messages queue -------------------------------------------------------

QUEUE_SYMBOLS = ("p", "m", "F", "B", "tau", "alpha")
"""The names 7.7's expression may use."""


def queue_draws(seed: int = 77) -> list[dict[str, float]]:
    """Points (p >= 2, m, F, B, tau, alpha) at which 7.7 is checked: tau below F, between F
    and B, above B, and equal to either, with and without latency."""
    rng = random.Random(seed)
    draws = [
        dict(p=4, m=8, F=1, B=2, tau=0.5, alpha=0),  # tau < F: the queue never forms
        dict(p=4, m=8, F=1, B=2, tau=1.5, alpha=0),  # F < tau < B: forwards queue
        dict(p=3, m=5, F=1, B=2, tau=3, alpha=0.5),  # tau > B: both directions queue
        dict(p=2, m=1, F=2, B=3, tau=4, alpha=1),  # one micro-batch: nothing to queue behind
    ]
    while len(draws) < 14:
        draws.append(
            dict(
                p=rng.randint(2, 7),
                m=rng.randint(1, 12),
                F=rng.choice([0.5, 1, 2]),
                B=rng.choice([1, 2, 3]),
                tau=rng.choice([0.25, 0.5, 1, 1.5, 2, 2.5, 4]),
                alpha=rng.choice([0, 0, 0.2, 1]),
            )
        )
    return draws


def queued_gpipe_makespan(at: dict[str, float]) -> float:
    """GPipe's simulated makespan at ``at``: each message holds its link for tau (its bytes
    over the bandwidth) and arrives alpha later; messages on one link queue."""
    costs = Costs(
        F=at["F"],
        B=at["B"],
        comm=at["alpha"],
        comm_bytes=1.0,
        bandwidth=1.0 / at["tau"],
        contention=True,
    )
    return simulate(gpipe(int(at["p"]), int(at["m"])), costs).makespan


def _queue_slip(at: dict[str, float], mine: float) -> str:
    """The hint for a wrong 7.7 value ``mine`` at ``at``: which usual slip gives it."""
    p, m, f, b, tau, alpha = (at[k] for k in QUEUE_SYMBOLS)
    slips = [
        (
            (m + p - 1) * (f + b) + 2 * (p - 1) * (tau + alpha),
            "that is the step without queueing: once tau > F a message leaves every tau, "
            "not every F.",
        ),
        (
            p * (f + b) + 2 * (p - 1) * (tau + alpha) + (m - 1) * 2 * max(f, b, tau),
            "the forwards and the backwards flow separately: each at its own slowest step.",
        ),
        (
            p * (f + b) + 2 * (p - 1) * tau + (m - 1) * (max(f, tau) + max(b, tau)),
            "the latency does not hold the link, but each message still waits it: once per hop.",
        ),
        (
            p * (f + b)
            + 2 * (p - 1) * (tau + alpha)
            + (m - 1) * (max(f, tau + alpha) + max(b, tau + alpha)),
            "a message holds its link for tau only; its latency alpha is time in flight "
            "(LogP), so the next one may start at once.",
        ),
    ]
    for value, hint in slips:
        if math.isclose(mine, value, rel_tol=1e-9):
            return hint
    return "see the computes and the links of a micro-batch's path as stations of one flow line."


@exercise(
    "7.7",
    "Derive GPipe's step time when each message holds its link for tau (its serialisation) "
    "and arrives alpha after (its latency), and messages on one link queue: a sympy "
    "expression in p (>= 2), m, F, B, tau and alpha.",
    kind="derive",
    solution="A micro-batch's forwards pass p computes and p - 1 links, each a station of a "
    "flow line that holds it F (a compute) or tau (a link); the latency alpha only delays "
    "it, holding nothing. The first micro-batch takes pF + (p-1)(tau + alpha) to the end, "
    "and each later one follows the slowest station, max(F, tau) behind. The backwards, "
    "started once the last rank's forwards are done, are the same line with B: "
    "`p*(F + B) + 2*(p - 1)*(tau + alpha) + (m - 1)*(sp.Max(F, tau) + sp.Max(B, tau))`. "
    "While tau <= F it is chapter 1's (m+p-1)(F+B) + 2(p-1)c with c = tau + alpha; beyond, "
    "the link, not the compute, sets the pace.",
    answer_name="answer_7",
)
def _queued_gpipe(answer):
    given = _expression(answer, QUEUE_SYMBOLS)
    draws = queue_draws()
    for at in draws:
        truth = queued_gpipe_makespan(at)
        mine = _value(given, at)
        if mine is None or not math.isclose(mine, truth, rel_tol=1e-9, abs_tol=1e-9):
            said = "no finite number" if mine is None else f"{mine:.6g}"
            where = ", ".join(f"{k} = {at[k]:g}" for k in QUEUE_SYMBOLS)
            hint = "see the stations of one flow line." if mine is None else _queue_slip(at, mine)
            return wrong(
                f"at {where} the expression gives {said}; the simulator measures {truth:g}.",
                hint,
            )
    return right(
        f"it equals the simulator's queued step at all {len(draws)} drawn points, with tau "
        "below F, between F and B and above B."
    )


# ----- 7.8 a ring all-reduce ----------------------------------------------------------------

RING_CASES = ((3, 6), (4, 8), (4, 10), (5, 7), (2, 9), (8, 40), (6, 5))
"""(ranks n, elements) on which 7.8 runs: lengths that n does not divide, and fewer
elements than ranks, included."""

RECV_TIMEOUT_S = 2.0
"""How long a simulated rank waits for a message before 7.8 calls the program stuck."""


class _Stuck(Exception):
    """A simulated rank waited for a message that never came."""


def _run_ring(program, arrays: list[np.ndarray]):
    """Run ``program(rank, n, data, send, recv)`` on ``len(arrays)`` threads, rank r
    holding a copy of ``arrays[r]``: ``send(x)`` hands a copy of array ``x`` to rank
    (r + 1) mod n, ``recv()`` returns the next array from rank (r - 1) mod n. Returns
    (each rank's result, bytes each rank sent) or raises ValueError saying what went wrong."""
    n = len(arrays)
    inbox = [queue.Queue() for _ in range(n)]
    sent = [0] * n
    results: list[object] = [None] * n
    errors: list[str | None] = [None] * n

    def run(rank: int) -> None:
        def send(x) -> None:
            piece = np.array(x, dtype=np.float64, copy=True)  # (elements,)
            sent[rank] += piece.nbytes
            inbox[(rank + 1) % n].put(piece)

        def recv() -> np.ndarray:
            try:
                return inbox[rank].get(timeout=RECV_TIMEOUT_S)
            except queue.Empty:
                raise _Stuck(f"rank {rank} waited for a message that never came") from None

        try:
            results[rank] = program(rank, n, arrays[rank].copy(), send, recv)
        except _Stuck as stuck:
            errors[rank] = str(stuck)
        except Exception as error:  # the reader's code: any failure is a verdict
            errors[rank] = f"rank {rank} raised {type(error).__name__}: {error}"

    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=4 * RECV_TIMEOUT_S + 5)
    if any(thread.is_alive() for thread in threads):
        raise ValueError(f"with n = {n} ranks your program did not finish within seconds.")
    failed = [e for e in errors if e]
    if failed:
        raise ValueError(f"with n = {n} ranks and {arrays[0].size} elements {failed[0]}.")
    leftover = [r for r in range(n) if not inbox[r].empty()]
    if leftover:
        raise ValueError(
            f"with n = {n} ranks, rank {leftover[0]} was sent a message it never received."
        )
    return results, sent


def _as_result(value, size: int) -> np.ndarray | None:
    """A rank's returned value as a float array of ``size`` elements, or None."""
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    return array if array.shape == (size,) else None


@exercise(
    "7.8",
    "Implement a ring all-reduce as one rank's program ring_all_reduce(rank, n, data, send, "
    "recv): data is the rank's 1-D numpy array, send(x) sends an array to rank (rank+1) "
    "mod n, recv() returns the next array from rank (rank-1) mod n; return the sum of all "
    "ranks' data, while each rank sends only 2(n-1)/n of it.",
    kind="implement",
    solution="Cut the data into n chunks, `chunks = np.array_split(data, n)` (n need not "
    "divide its length). Reduce-scatter: in step k = 0..n-2 rank r sends chunk (r - k) mod "
    "n and adds what it receives into chunk (r - k - 1) mod n; after n - 1 steps rank r "
    "holds the whole sum of chunk (r + 1) mod n. All-gather: in step k it sends chunk "
    "(r + 1 - k) mod n and stores what it receives as chunk (r - k) mod n. Each rank sent "
    "2(n-1) chunks of 1/n: 2(n-1)/n of the data, whatever n (NCCL's ring).\n\n"
    "```python\ndef ring_all_reduce(rank, n, data, send, recv):\n"
    "    chunks = [c.copy() for c in np.array_split(data, n)]\n"
    "    for k in range(n - 1):  # reduce-scatter\n"
    "        send(chunks[(rank - k) % n])\n"
    "        chunks[(rank - k - 1) % n] += recv()\n"
    "    for k in range(n - 1):  # all-gather\n"
    "        send(chunks[(rank + 1 - k) % n])\n"
    "        chunks[(rank - k) % n] = recv()\n"
    "    return np.concatenate(chunks)\n```",
    answer_name="answer_8",
)
def _ring_all_reduce(answer):
    if not callable(answer):
        return wrong(
            f"this exercise wants a function, got {shown(answer)}.",
            "def ring_all_reduce(rank, n, data, send, recv): ...",
        )
    rng = np.random.default_rng(78)
    for n, size in RING_CASES:
        arrays = [rng.normal(size=size) for _ in range(n)]  # (elements,) per rank
        try:
            results, sent = _run_ring(answer, arrays)
        except ValueError as error:
            said = str(error)
            if "equal division" in said:
                hint = "np.array_split cuts an array into n chunks that n need not divide."
            elif "never came" in said:
                hint = "send before you receive: a send never waits here, a receive does."
            else:
                hint = "each message sent must be received, once."
            return wrong(said, hint)
        where = f"with n = {n} ranks and {size} elements"
        total = np.sum(arrays, axis=0)  # (elements,)
        for rank, value in enumerate(results):
            got = _as_result(value, size)
            if got is None:
                return wrong(
                    f"{where} rank {rank} returned {shown(value)}, not an array of {size} numbers."
                )
            if not np.allclose(got, total, rtol=1e-12, atol=1e-12):
                held = [
                    i for i, c in enumerate(np.array_split(np.arange(size), n))
                    if c.size and np.allclose(got[c], total[c], rtol=1e-12, atol=1e-12)
                ]  # fmt: skip
                hint = (
                    "after the reduce-scatter each rank holds one summed chunk: an "
                    "all-gather passes them round the ring."
                    if len(held) == 1 and n > 2
                    else "in step k rank r sends chunk (r - k) mod n and adds what it "
                    "receives into chunk (r - k - 1) mod n."
                )
                return wrong(f"{where} rank {rank} does not end with the sum of all data.", hint)
        nbytes = arrays[0].nbytes
        ring = ring_bytes("all-reduce", nbytes, n)  # each rank, when n divides the data
        largest = 2 * (n - 1) * math.ceil(size / n) * arrays[0].itemsize
        if sum(sent) > n * ring + 1e-9 or max(sent) > largest:
            return wrong(
                f"{where} the ranks sent {sum(sent):,} bytes in all ({max(sent):,} the most "
                f"from one), where a ring all-reduce sends {n * ring:,.0f}: "
                f"2(n-1)/n of the {nbytes:,} bytes from each rank.",
                "send chunks of 1/n of the data, never the whole array.",
            )
        if sum(sent) < n * ring - 1e-9:
            return wrong(f"{where} the ranks sent only {sum(sent):,} bytes in all.")
    return right(
        f"on {len(RING_CASES)} drawn rings every rank ends with numpy's sum, and each sends "
        "2(n-1)/n of the data (ring_bytes), n dividing the data or not."
    )
