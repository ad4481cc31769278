"""Which messages a schedule sends, between which ranks, in which order (no torch here).

A message is named by its identity ``(stage, what, microbatch)``: the stage that receives
it, ``ACTIVATION`` (the input of that stage's ``F``) or ``GRADIENT`` (the gradient of its
output, for its ``B`` or ``I``), and the micro-batch. Which action sends and which one
receives each message is the rule of :mod:`ppbook.dependencies` (``sends`` and ``needs``).
The schedule alone fixes, for every pair of ranks, the order in which one sends its
messages to the other (the order of the sender's actions) and the order in which the
other uses them (the order of its own actions). The two orders can differ;
:mod:`ppbook.runtime.comm` copes with that, and knowing the sender's order lets a rank post
its receives before it needs the data.
"""

from __future__ import annotations

from ppbook.dependencies import ACTIVATION, GRADIENT, needs, sends
from ppbook.pipeline_schedule import Schedule

__all__ = [  # ACTIVATION and GRADIENT are named here too, with the identities
    "ACTIVATION",
    "GRADIENT",
    "Identity",
    "describe",
    "incoming",
    "message_order",
    "sent_by",
    "used_by",
]

Identity = tuple[int, int, int]


def describe(identity: Identity) -> str:
    """``(1, ACTIVATION, 3)`` as ``"activation for 1F3"``."""
    stage, what, microbatch = identity
    if what == ACTIVATION:
        return f"activation for {stage}F{microbatch}"
    return f"gradient for {stage}B{microbatch}"


def sent_by(schedule: Schedule, rank: int) -> list[tuple[int, Identity]]:
    """``(destination rank, identity)`` of every message ``rank`` sends, in sending order."""
    rank_of = schedule.stage_to_rank
    out = []
    for step in schedule.actions[rank]:
        for stage, kind, mb in step.parts:
            sent = sends(schedule, stage, kind, mb)
            if sent is not None and rank_of[sent[0]] != rank:
                receiver, what = sent
                out.append((rank_of[receiver], (receiver, what, mb)))
    return out


def used_by(schedule: Schedule, rank: int) -> list[tuple[int, Identity]]:
    """``(source rank, identity)`` of every message ``rank`` receives, in the order of use."""
    rank_of = schedule.stage_to_rank
    out = []
    for step in schedule.actions[rank]:
        for stage, kind, mb in step.parts:
            for need in needs(schedule, stage, kind, mb):
                if need.message is not None and rank_of[need.stage] != rank:
                    out.append((rank_of[need.stage], (stage, need.message, mb)))
    return out


def incoming(schedule: Schedule, rank: int) -> dict[int, list[Identity]]:
    """For each peer, the messages it sends to ``rank``, in the order it sends them."""
    out: dict[int, list[Identity]] = {}
    for src in range(schedule.num_ranks):
        if src != rank:
            messages = [identity for dst, identity in sent_by(schedule, src) if dst == rank]
            if messages:
                out[src] = messages
    return out


def message_order(schedule: Schedule, src: int, dst: int) -> tuple[list[str], list[str]]:
    """``(sent, used)``: the messages from rank ``src`` to rank ``dst``, described, in the
    order ``src`` sends them and in the order ``dst`` uses them."""
    sent = [describe(i) for d, i in sent_by(schedule, src) if d == dst]
    used = [describe(i) for s, i in used_by(schedule, dst) if s == src]
    return sent, used
