"""Exercise 10.6 of chapter 10, implement: the sends and receives of an order
(``notebooks/10_cluster.ipynb``).

The reader's function adds the messages to a compute-only order. Its answer is judged by
PyTorch (``torch.distributed.pipelining.schedules``, torch 2.13) on drawn schedules, never
by equality with one stored order: PyTorch's own parser (``_Action.from_str``) must read
every action; the messages must be those PyTorch's own lowering (``_add_send_recv``) adds,
each send right after the action that produces its tensor; and PyTorch's own dry run of
the ranks (``_simulate_comms_compute``) must get through the order without waiting for
ever. torch is imported only inside the check. :mod:`ppbook.exercises.ch10` registers it
with the chapter's other exercises.
"""

from __future__ import annotations

import contextlib
import io
from collections import Counter

from ppbook.checks import shown
from ppbook.exercises import exercise, right, wrong
from ppbook.schedules import gpipe, interleaved_1f1b, one_f_one_b, zb_h1, zb_v

# ----- 10.6 the sends and receives of an order ---------------------------------------------

COMMS_DRAWS = {
    "gpipe(3, 4)": lambda: gpipe(3, 4),
    "one_f_one_b(4, 6)": lambda: one_f_one_b(4, 6),
    "zb_h1(3, 5)": lambda: zb_h1(3, 5),
    "interleaved_1f1b(2, 4, 2)": lambda: interleaved_1f1b(2, 4, 2),
    "interleaved_1f1b(4, 8, 2)": lambda: interleaved_1f1b(4, 8, 2),
    "zb_v(3, 5)": lambda: zb_v(3, 5),
}
"""The compute-only orders 10.6's function is run on: one stage per rank, looped stages,
the backward split into I and W, and ZB-V's V, whose two middle stages share a rank."""

COMM_KINDS = ("SEND_F", "RECV_F", "SEND_B", "RECV_B")
"""PyTorch's communication actions."""


def _pytorch_rows(rows, stage_to_rank, num_stages: int):
    """PyTorch's own lowering of the compute-only ``rows``: one list of ``_Action`` per rank."""
    from torch.distributed.pipelining.schedules import _Action, _add_send_recv

    compute = {r: [_Action.from_str(a) for a in row] for r, row in enumerate(rows)}
    return _add_send_recv(compute, lambda s: stage_to_rank[s], num_stages)


def _read(answer_rows, num_ranks: int, where: str):
    """The reader's rows read by PyTorch's parser, or a wrong verdict saying why not."""
    from torch.distributed.pipelining.schedules import _Action

    if isinstance(answer_rows, str | bytes) or not hasattr(answer_rows, "__iter__"):
        return wrong(f"{where} your function returned {shown(answer_rows)}, not rows of actions.")
    rows = [list(row) for row in answer_rows]
    if len(rows) != num_ranks:
        return wrong(f"{where} your function returned {len(rows)} rows for {num_ranks} ranks.")
    read = []
    for rank, row in enumerate(rows):
        parsed = []
        for text in row:
            if not isinstance(text, str):
                return wrong(f"{where} rank {rank} has {shown(text)}; give action strings.")
            try:
                action = _Action.from_str(text)
            except RuntimeError:
                return wrong(
                    f"{where} PyTorch's parser refuses {text!r} on rank {rank}.",
                    "PyTorch writes a message as 1SEND_F0, 2RECV_F0, 2SEND_B0, 1RECV_B0.",
                )
            if action is not None:
                parsed.append(action)
        read.append(parsed)
    return read


def _comm_counter(row) -> Counter:
    return Counter(str(a) for a in row if a.computation_type.value in COMM_KINDS)


def _sends_follow(row) -> str | None:
    """The first send on ``row`` not right after the action that produces it (or after a
    send of that action), as a sentence; None when every send follows its producer."""
    last_compute = None
    for action in row:
        kind = action.computation_type.value
        if kind in ("F", "B", "I", "W"):
            last_compute = action
        elif kind in ("SEND_F", "SEND_B"):
            wanted = ("F",) if kind == "SEND_F" else ("B", "I")
            if (
                last_compute is None
                or last_compute.computation_type.value not in wanted
                or (last_compute.stage_index, last_compute.microbatch_index)
                != (action.stage_index, action.microbatch_index)
            ):
                return f"{action} does not come right after the action that produces it"
    return None


def _dry_run(read, stage_to_rank, num_stages: int) -> str | None:
    """PyTorch's dry run of the ranks; None when it completes, else where it stopped (its
    own report of the stuck ranks, when it can print one: torch 2.13's printer of the
    partial order fails on some orders, after the ranks have stopped)."""
    from torch.distributed.pipelining.schedules import _simulate_comms_compute

    order = {rank: list(row) for rank, row in enumerate(read)}
    said = io.StringIO()
    try:
        with contextlib.redirect_stdout(said):
            _simulate_comms_compute(order, lambda s: stage_to_rank[s], num_stages)
    except (ValueError, IndexError):
        waits = [line.strip() for line in said.getvalue().splitlines() if "next action" in line]
        return "; ".join(waits[:3]) or "a rank waits for a message that is never sent"
    return None


def _late_receive(read) -> str | None:
    """The first receive that comes after the action that needs it, as a sentence."""
    for rank, row in enumerate(read):
        done = set()
        for action in row:
            kind = action.computation_type.value
            key = (action.stage_index, action.microbatch_index)
            if kind in ("RECV_F", "RECV_B"):
                needs = ("F",) if kind == "RECV_F" else ("B", "I")
                if any((k, *key) in done for k in needs):
                    return f"rank {rank} receives {action} after the action that needs it"
            else:
                done.add((kind, *key))
    return None


@exercise(
    "10.6",
    "Implement with_comms(rows, stage_to_rank): given a compute-only order (one list of "
    "action strings per rank, PyTorch's notation) and each stage's rank, return the order "
    "with the messages PyTorch's runtime executes (1SEND_F0, 2RECV_F0, 2SEND_B0, 1RECV_B0), "
    "each send right after the action that produces it, each receive before the action "
    "that needs it.",
    kind="implement",
    solution="A forward of stage s sends its output to stage s + 1 and a backward (B, or "
    "its input half I) its gradient to stage s - 1, unless that stage is on the same rank "
    "(ZB-V's turn at the last rank) or there is none; W sends nothing. PyTorch names a "
    "send by the sending stage and a receive by the receiving one. So each rank emits, per "
    "action: the receive it needs just before it, the action, its send just after.\n\n"
    "```python\ndef with_comms(rows, stage_to_rank):\n"
    "    last = len(stage_to_rank) - 1\n"
    "    out = []\n"
    "    for rank, row in enumerate(rows):\n"
    "        mine = []\n"
    "        for text in row:\n"
    "            stage, kind, mb = re.fullmatch(r'(\\d+)([FBIW])(\\d+)', text).groups()\n"
    "            s = int(stage)\n"
    "            if kind == 'F' and s > 0 and stage_to_rank[s - 1] != rank:\n"
    "                mine.append(f'{s}RECV_F{mb}')\n"
    "            if kind in 'BI' and s < last and stage_to_rank[s + 1] != rank:\n"
    "                mine.append(f'{s}RECV_B{mb}')\n"
    "            mine.append(text)\n"
    "            if kind == 'F' and s < last and stage_to_rank[s + 1] != rank:\n"
    "                mine.append(f'{s}SEND_F{mb}')\n"
    "            if kind in 'BI' and s > 0 and stage_to_rank[s - 1] != rank:\n"
    "                mine.append(f'{s}SEND_B{mb}')\n"
    "        out.append(mine)\n"
    "    return out\n```\n\n"
    "A send never waits here, so a receive just before its action cannot hang; receives "
    "moved to the start of a rank can, as the dry run shows for 1F1B.",
    answer_name="answer_6",
)
def _with_comms(answer):
    if not callable(answer):
        return wrong(
            f"this exercise wants a function, got {shown(answer)}.",
            "def with_comms(rows, stage_to_rank): ... return rows",
        )
    for name, build in COMMS_DRAWS.items():
        schedule = build()
        rows = [[a for a in row if a] for row in schedule.to_strings()]
        stage_to_rank = list(schedule.stage_to_rank)
        where = f"on {name},"
        try:
            made = answer([list(row) for row in rows], list(stage_to_rank))
        except Exception as error:  # the reader's code: any failure is a verdict
            return wrong(f"{where} your function raised {type(error).__name__}: {error}.")
        read = _read(made, schedule.num_ranks, where)
        if not isinstance(read, list):
            return read
        theirs = _pytorch_rows(rows, stage_to_rank, schedule.num_stages)
        for rank, row in enumerate(read):
            compute = [str(a) for a in row if a.computation_type.value not in COMM_KINDS]
            if compute != rows[rank]:
                return wrong(
                    f"{where} rank {rank}'s compute actions are not the order given.",
                    "add messages only: keep every compute action where it was.",
                )
            mine, wanted = _comm_counter(row), _comm_counter(theirs[rank])
            if mine != wanted:
                extra = sorted((mine - wanted).elements())
                missing = sorted((wanted - mine).elements())
                said = f"{where} rank {rank} " + (
                    f"has {extra[0]}, a message PyTorch does not send"
                    if extra
                    else f"lacks {missing[0]}"
                )
                if extra and "RECV" in extra[0] and missing and "RECV" in missing[0]:
                    hint = (
                        "PyTorch names a receive by the stage that receives: 1RECV_F0 on stage 1."
                    )
                elif extra and "SEND_B" in extra[0] and missing and "SEND_B" in missing[0]:
                    hint = "PyTorch names a send by the stage that sends it."
                elif extra:
                    hint = "no message between two stages on the same rank, nor beyond the ends."
                else:
                    hint = "a forward sends to the next stage, a B or an I to the previous one."
                return wrong(said + ".", hint)
            late = _sends_follow(row)
            if late:
                return wrong(
                    f"{where} on rank {rank} {late}.",
                    "send right after the action that produced the tensor: the other rank waits.",
                )
        stuck = _dry_run(read, stage_to_rank, schedule.num_stages)
        if stuck:
            late = _late_receive(read)
            return wrong(
                f"{where} PyTorch's dry run of the ranks stops for ever: {late or stuck}.",
                "receive before the action that needs the tensor."
                if late
                else "a receive moved early waits for a send that comes later: receive "
                "just before the action that needs the tensor.",
            )
    return right(
        f"on {len(COMMS_DRAWS)} schedules PyTorch's parser reads your orders, they send "
        "what PyTorch's lowering sends, and PyTorch's dry run of the ranks completes."
    )
