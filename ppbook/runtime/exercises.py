"""Check functions for the exercises of chapter 3 (``notebooks/03_running.ipynb``).

Each ``check_*`` prints whether the answer is right, with a hint when it is not, and
returns True when it is right (None as the answer: not answered yet).
:func:`~ppbook.runtime.plan.message_order` is the chapter's tool for exercise 2: the order
in which one rank sends its messages to another, and in which that one uses them.
"""

from __future__ import annotations

import math

from ppbook.runtime.plan import ACTIVATION, describe, sent_by, used_by
from ppbook.schedule import Schedule
from ppbook.schedules.exercises import say as _say
from ppbook.simulate import simulate
from ppbook.timeline import Timeline


def check_ideal_speedup(
    answer: float | None, num_stages: int = 2, num_microbatches: int = 8
) -> bool:
    """Exercise 1: the ideal speed-up of GPipe or 1F1B over one process (no transfers)."""
    if answer is None:
        return _say("Replace None with your answer.", False)
    p, m = num_stages, num_microbatches
    expected = p * m / (m + p - 1)
    if math.isclose(answer, expected, rel_tol=1e-9):
        return _say(f"Right: p m / (m + p - 1) = {expected:.4f}.", True)
    if math.isclose(answer, p):
        return _say("That is p, the speed-up without a bubble: count the idle steps.", False)
    return _say(
        "Not quite: one process runs the whole model, p stages, on m micro-batches; the "
        "pipeline's makespan is (m + p - 1) stage steps.",
        False,
    )


def check_mispairing_schedule(schedule: Schedule | None) -> bool:
    """Exercise 2: a valid schedule in which some rank uses the *activations* it receives in
    another order than they were sent, so that a runtime without identities would hand a
    forward the wrong micro-batch's input (chapter 3 shows the backward case)."""
    if schedule is None:
        return _say("Replace None with your schedule.", False)
    simulate(schedule)  # valid and deadlock-free, or a ScheduleError says why
    gradients_only = False
    for src in range(schedule.num_ranks):
        for dst in range(schedule.num_ranks):
            if src == dst:
                continue
            sent = [i for d, i in sent_by(schedule, src) if d == dst]
            used = [i for s, i in used_by(schedule, dst) if s == src]
            if sent == used:
                continue
            forward_sent = [describe(i) for i in sent if i[1] == ACTIVATION]
            forward_used = [describe(i) for i in used if i[1] == ACTIVATION]
            if forward_sent != forward_used:
                return _say(
                    f"Right: rank {src} sends {forward_sent}, rank {dst} uses {forward_used}.",
                    True,
                )
            gradients_only = True
    if gradients_only:
        return _say(
            "Only gradients are used out of order here, as in the chapter's example: reorder "
            "the forwards of the receiving rank instead (e.g. 1F1 before 1F0).",
            False,
        )
    return _say(
        "Every rank uses its messages in the same order as they are sent: a runtime without "
        "identities would still pair them right. Reorder the forwards of one rank against "
        "its neighbour's.",
        False,
    )


def check_bubble_fraction(timeline: Timeline, answer: float | None) -> bool:
    """Exercise 3: the bubble fraction f = idle / total of a (measured) timeline."""
    if answer is None:
        return _say("Replace None with your answer.", False)
    if math.isclose(answer, timeline.bubble_fraction, rel_tol=1e-9, abs_tol=1e-12):
        return _say("Right.", True)
    if math.isclose(answer, timeline.bubble_ratio, rel_tol=1e-9, abs_tol=1e-12):
        return _say("That is the bubble ratio r = idle / compute; f divides by total time.", False)
    return _say(
        "Not quite: total time is p times the makespan (every rank, from the first start to "
        "the last end); idle time is total time minus the sum of the busy times.",
        False,
    )
