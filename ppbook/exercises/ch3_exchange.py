"""Exercise 3.7 of chapter 3: a grouped send/receive exchange that cannot deadlock.

The reader writes ``exchange(rank, world_size, activation, gradient)``: in one steady-state
step of a pipeline every rank sends its activation to rank + 1 and its gradient to
rank - 1, and receives its neighbours', all posted at once with
``torch.distributed.batch_isend_irecv`` (PyTorch's ``P2POp``), so that no order of sends
and receives can leave two ranks each waiting for the other. It returns
``(from_previous, from_next)``, the tensors received (None at the ends).

The check runs it, on :data:`WORLD` CPU processes over gloo with a process-group timeout
and a deadline, so a hang fails in seconds. Each rank logs the operations it posts
*before* posting them; the check then asks what makes the exchange right:

- every send has its receive: for each pair of ranks, the sends of one and the receives
  of the other agree in number, shape and dtype (a send without its receive never
  completes);
- the ranks post their operations as a group (``batch_isend_irecv``), not as blocking
  ``send``/``recv`` whose order decides whether they deadlock;
- every rank receives its neighbours' tensors, values included.

PyTorch's maintainers say ``batch_isend_irecv`` has no stable gloo implementation and can
hang (pytorch/PiPPy#1130): when every send met its receive and the ranks still failed, the
check runs the exchange once more before it says so.

The processes are started with ``fork`` (a function defined in a notebook cannot be sent
to a ``spawn``-ed process); torch is imported only when the check runs.
"""

from __future__ import annotations

import multiprocessing
import os
import queue as queues
import tempfile
import traceback
from datetime import timedelta

from ppbook.checks import shown
from ppbook.exercises import exercise, right, wrong

WORLD = 4
"""Ranks the exchange runs on: two ends and two middles."""

DEADLINE = 20.0
"""Seconds the check waits for all ranks: a deadlocked exchange fails after that."""

GROUP_TIMEOUT = 8.0
"""Seconds a rank's send or receive may wait (the process group's timeout) before it fails."""

_SIZE = 3  # elements of each tensor


def _tensors(rank: int):
    """Rank ``rank``'s activation and gradient, each with values that name the rank."""
    import torch

    activation = torch.arange(_SIZE, dtype=torch.float64) + 10.0 * rank
    return activation, -activation - 0.5


def _child(rank: int, answer, store: str, results) -> None:
    """One rank: join the group, run the reader's exchange, report what it posted and got."""
    import torch
    import torch.distributed as dist

    posted = []

    def report_ops(ops):
        for op in ops:
            kind = "send" if "send" in op.op.__name__ else "recv"
            posted.append((kind, op.peer, tuple(op.tensor.shape), str(op.tensor.dtype)))
        results.put(("posted", rank, list(posted)))  # before the wait: a hang still tells
        return original_batch(ops)

    def blocking(kind, original):
        def call(tensor, *args, **kwargs):
            results.put(("blocking", rank, kind))
            return original(tensor, *args, **kwargs)

        return call

    original_batch = dist.batch_isend_irecv
    try:
        dist.init_process_group(
            "gloo",
            init_method=f"file://{store}",
            rank=rank,
            world_size=WORLD,
            timeout=timedelta(seconds=GROUP_TIMEOUT),
        )
        dist.batch_isend_irecv = report_ops
        dist.send, dist.recv = blocking("send", dist.send), blocking("recv", dist.recv)
        activation, gradient = _tensors(rank)
        got = answer(rank, WORLD, activation.clone(), gradient.clone())
        if not isinstance(got, tuple | list) or len(got) != 2:
            raise ValueError(f"exchange returned {shown(got)}, not (from_previous, from_next)")
        values = [None if t is None else torch.as_tensor(t).tolist() for t in got]
        results.put(("done", rank, values))
        dist.barrier()
    except Exception as error:  # the reader's code: reported, never a silent end
        line = traceback.format_exception_only(type(error), error)[-1].strip()
        results.put(("error", rank, line))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def run_exchange(answer) -> dict:
    """Run ``answer`` on :data:`WORLD` processes; what each posted, got, or raised."""
    import torch  # noqa: F401 (imported before the fork, once)

    context = multiprocessing.get_context("fork")
    results = context.Queue()
    seen = {"posted": {}, "done": {}, "error": {}, "blocking": {}, "hung": []}
    with tempfile.TemporaryDirectory(prefix="ppbook-exchange-") as folder:
        store = os.path.join(folder, "store")
        processes = [
            context.Process(target=_child, args=(r, answer, store, results), daemon=True)
            for r in range(WORLD)
        ]
        for process in processes:
            process.start()
        finished = set()
        try:
            while len(finished) < WORLD:
                kind, rank, value = results.get(timeout=DEADLINE)
                if kind in ("done", "error"):
                    finished.add(rank)
                if kind == "blocking":
                    seen[kind].setdefault(rank, []).append(value)
                else:
                    seen[kind][rank] = value
        except queues.Empty:
            seen["hung"] = sorted(set(range(WORLD)) - finished)
        finally:
            for process in processes:
                process.join(timeout=5)
                if process.is_alive():
                    process.kill()
                    process.join()
    return seen


def unmatched(posted: dict[int, list]) -> list[str]:
    """For each ordered pair of ranks whose sends and receives disagree, a sentence."""
    problems = []
    for src in range(WORLD):
        for dst in range(WORLD):
            sent = [op[2:] for op in posted.get(src, []) if op[0] == "send" and op[1] == dst]
            got = [op[2:] for op in posted.get(dst, []) if op[0] == "recv" and op[1] == src]
            if sent != got:
                problems.append(
                    f"rank {src} sends {len(sent)} tensor(s) to rank {dst}, which receives "
                    f"{len(got)} from rank {src}"
                    + ("" if len(sent) != len(got) else " of other shapes or dtypes")
                )
    for rank, ops in posted.items():
        strange = [op[1] for op in ops if not 0 <= op[1] < WORLD or op[1] == rank]
        if strange:
            problems.insert(0, f"rank {rank} names peer {strange[0]}, not another rank")
    return problems


@exercise(
    "3.7",
    "Implement exchange(rank, world_size, activation, gradient): send the activation to "
    "rank + 1 and the gradient to rank - 1, receive the neighbours', grouped with "
    "batch_isend_irecv so that it cannot deadlock; return (from_previous, from_next).",
    kind="implement",
    solution="Post every operation of the step at once, and post a receive for every send "
    "the neighbours make: ```python\ndef exchange(rank, world_size, activation, gradient):\n"
    "    ops, from_prev, from_next = [], None, None\n"
    "    if rank + 1 < world_size:\n"
    "        from_next = torch.empty_like(gradient)\n"
    "        ops += [dist.P2POp(dist.isend, activation, rank + 1),\n"
    "                dist.P2POp(dist.irecv, from_next, rank + 1)]\n"
    "    if rank > 0:\n"
    "        from_prev = torch.empty_like(activation)\n"
    "        ops += [dist.P2POp(dist.isend, gradient, rank - 1),\n"
    "                dist.P2POp(dist.irecv, from_prev, rank - 1)]\n"
    "    for request in dist.batch_isend_irecv(ops):\n"
    "        request.wait()\n"
    "    return from_prev, from_next\n```\n"
    "With blocking `send` then `recv` on every rank, each rank waits in its send for a "
    "neighbour that is itself waiting in its send: the check shows gloo deadlock so. "
    "`ppbook.runtime` reaches the same end another way, with non-blocking `isend` and "
    "receives posted ahead (`ppbook/runtime/comm.py`), because `batch_isend_irecv` has no "
    "stable gloo implementation and can hang (a PyTorch maintainer, pytorch/PiPPy#1130).",
    answer_name="answer_7",
)
def _exchange(answer):
    if not callable(answer):
        return wrong(
            f"this exercise wants a function exchange(rank, world_size, activation, "
            f"gradient), got {shown(answer)}."
        )
    seen = run_exchange(answer)
    problems = unmatched(seen["posted"])
    if not problems and not seen["blocking"] and (seen["hung"] or seen["error"]):
        seen = run_exchange(answer)  # once more: gloo's grouped ops can hang (module docstring)
        problems = unmatched(seen["posted"])
    if problems:
        ending = " (the ranks hung, as an unmatched send or receive does)" if seen["hung"] else ""
        return wrong(
            f"{problems[0]}{ending}.",
            "every send needs the receive its peer posts for it: rank r sends to r+1 what "
            "r+1 receives from r, and to r-1 what r-1 receives from r.",
        )
    if seen["blocking"]:
        rank, kinds = min(seen["blocking"].items())
        return wrong(
            f"rank {rank} calls the blocking dist.{kinds[0]}: whether blocking sends and "
            "receives deadlock depends on their order on every rank.",
            "build dist.P2POp(dist.isend or dist.irecv, tensor, peer) and post them all "
            "with dist.batch_isend_irecv.",
        )
    if seen["error"]:
        rank, line = min(seen["error"].items())
        return wrong(f"rank {rank} raised: {line}")
    if seen["hung"]:
        return wrong(
            f"ranks {seen['hung']} did not finish within {DEADLINE:g} s.",
            "post every operation with one dist.batch_isend_irecv and wait for each request.",
        )
    if not seen["posted"]:
        return wrong(
            "no rank posted its operations with dist.batch_isend_irecv.",
            "group them: dist.batch_isend_irecv([dist.P2POp(...), ...]).",
        )
    for rank in range(WORLD):
        before, after = seen["done"][rank]
        want_before = None if rank == 0 else _values(rank - 1)[0]
        want_after = None if rank == WORLD - 1 else _values(rank + 1)[1]
        if before != want_before or after != want_after:
            return wrong(
                f"rank {rank} returned ({before}, {after}); it should return ({want_before}, "
                f"{want_after}): the previous rank's activation and the next rank's gradient.",
                "return (from_previous, from_next), None where there is no such rank.",
            )
    return right(
        f"on {WORLD} processes every send met its receive, all posted as one group, and every "
        "rank got its neighbours' activation and gradient."
    )


def _values(rank: int) -> tuple[list[float], list[float]]:
    activation = [i + 10.0 * rank for i in range(_SIZE)]
    return activation, [-a - 0.5 for a in activation]
