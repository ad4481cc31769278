"""Exercises of chapter 3, the schedules on real processes (``notebooks/03_running.ipynb``).

The right answers come from the package at check time: the simulator
(:func:`ppbook.simulate.simulate`: speed-ups, the transfer time a speed-up tolerates), the
message rules of :mod:`ppbook.dependencies` as :mod:`ppbook.runtime.plan` lists them (which
messages a rank receives, in which order it uses them), a measured
:class:`~ppbook.timeline.Timeline` (its bubble), and, for 3.6, a real run on two processes
compared with one process (:func:`ppbook.runtime.reference.assert_matches_reference`). The
hints name the usual slips: the speed-up without the bubble, a sender's order for a
receiver's, a message between two stages of one rank, the bubble ratio r = idle/compute for
the fraction f = idle/total (REFERENCES.md), GPipe's 2(p-1)c for 1F1B's transfers, and a
run that cannot be compared. Exercise 3.6, a training run on processes, lives in
:mod:`ppbook.exercises.ch3_run`, and 3.7, a send/receive exchange run on processes, in
:mod:`ppbook.exercises.ch3_exchange`.
"""

from __future__ import annotations

import re

import ppbook.exercises.ch3_exchange  # noqa: F401 (registers 3.7, an exchange on processes)
import ppbook.exercises.ch3_run  # noqa: F401 (registers 3.6, the run on real processes)
from ppbook.checks import shown
from ppbook.costs import Costs
from ppbook.dependencies import needs
from ppbook.exercises import close, exercise, number, right, wrong
from ppbook.pipeline_schedule import Schedule
from ppbook.runtime.plan import ACTIVATION, GRADIENT, describe, sent_by, used_by
from ppbook.schedules import gpipe, one_f_one_b, zb_v
from ppbook.simulate import simulate
from ppbook.timeline import Timeline

# ----- 3.1 the ideal speed-up ---------------------------------------------------------------


@exercise(
    "3.1",
    "Without transfer costs, what speed-up over one process do GPipe and 1F1B reach with "
    "p = 2 ranks and m = 8 micro-batches?",
    kind="compute",
    solution="One process runs all p stages for each of the m micro-batches, m p (F+B); the "
    "pipeline takes (m+p-1)(F+B) (chapter 1). The speed-up is p m / (m+p-1) = 16/9 = 1.78. "
    "`simulate(gpipe(2, 8))` says the same: its `total_busy` over its `makespan`.",
    answer_name="answer_1",
)
def _ideal_speedup(answer):
    given = number(answer, "a speed-up, such as 1.5")
    timeline = simulate(gpipe(2, 8), Costs(F=1, B=2))
    truth = timeline.total_busy / timeline.makespan  # one process computes everything alone
    if close(given, truth):
        return right(f"p m / (m+p-1) = 16/9 = {truth:.4g}: the bubble keeps it below p = 2.")
    if close(given, 2):
        return wrong("2 is p, the speed-up without a bubble.", "count the idle steps: m+p-1.")
    if close(given, 1 / truth):
        return wrong(f"{given:.4g} is the pipeline's time over one process's, the inverse.")
    if close(given, 8 / 9):
        return wrong(
            f"{given:.4g} is m/(m+p-1), the busy share 1 - f of the step.",
            "one process needs p times the work of one rank: multiply by p.",
        )
    return wrong(
        f"{given:.4g} is not the speed-up.",
        "one process takes m p (F+B); the pipeline's makespan is (m+p-1)(F+B).",
    )


# ----- 3.2 the messages a rank receives -------------------------------------------------------

_MESSAGE = re.compile(r"(activation|gradient) for (\d+)([FBI])(\d+)")


def _messages(answer: object) -> list[str]:
    """The answer as message names, ``gradient for 2I0`` written ``gradient for 2B0``."""
    if not isinstance(answer, list | tuple) or not all(isinstance(a, str) for a in answer):
        raise ValueError(
            "this exercise wants a list of message names such as "
            f'["activation for 1F0", "gradient for 2B0"], got {shown(answer)}.'
        )
    out = []
    for text in answer:
        found = _MESSAGE.fullmatch(" ".join(text.split()))
        what, stage, kind, microbatch = found.groups() if found else (None,) * 4
        if found is None or (what == "activation") != (kind == "F"):
            raise ValueError(
                f"cannot read {shown(text)}: write 'activation for <stage>F<micro-batch>' or "
                "'gradient for <stage>B<micro-batch>', as message_order does."
            )
        out.append(f"{what} for {stage}{'F' if kind == 'F' else 'B'}{microbatch}")
    return out


def _local_messages(schedule: Schedule, rank: int) -> list[str]:
    """What ``rank``'s stages hand each other without a message (two stages on one rank)."""
    rank_of = schedule.stage_to_rank
    return [
        describe((stage, need.message, microbatch))
        for step in schedule.actions[rank]
        for stage, kind, microbatch in step.parts
        for need in needs(schedule, stage, kind, microbatch)
        if need.message is not None and rank_of[need.stage] == rank
    ]


@exercise(
    "3.2",
    "ZB-V with p = 2 ranks and m = 4 micro-batches (zb_v(2, 4)): construct the list of the "
    "messages rank 1 receives from rank 0, in the order rank 1 uses them.",
    kind="construct",
    solution="Walk rank 1's actions in order; for each, `needs(schedule, stage, kind, mb)` "
    "(ppbook.dependencies) names what it waits for; keep the needs that carry a message "
    "(`need.message` is ACTIVATION or GRADIENT) from a stage on another rank "
    "(`schedule.stage_to_rank`). Rank 1 holds stages 1 and 2, the bottom of the V: 1F needs "
    "stage 0's activation, 2I needs stage 3's gradient, both from rank 0, while 2F and 1I "
    "take theirs from the other stage of rank 1, no message. "
    "`message_order(zb_v(2, 4), 0, 1)[1]` lists the answer: 1F0, 1F1, then 2B0 before 1F2, "
    "2B1 before 1F3, 2B2, 2B3 (rank 0 sends 1F2 before 2B0: another order).",
    answer_name="answer_2",
)
def _messages_received(answer):
    schedule, rank, peer = zb_v(2, 4), 1, 0
    given = _messages(answer)
    truth = [describe(i) for src, i in used_by(schedule, rank) if src == peer]
    sent = [describe(i) for dst, i in sent_by(schedule, peer) if dst == rank]
    if given == truth:
        return right(f"rank 1 uses {len(truth)} messages from rank 0, in this order.")
    local = [m for m in given if m in _local_messages(schedule, rank)]
    if local:
        return wrong(
            f"{local[0]} never crosses between ranks: stages 1 and 2 both live on rank 1.",
            "keep only the needs whose stage is on another rank (schedule.stage_to_rank).",
        )
    if given == sent:
        return wrong(
            "that is the order in which rank 0 sends them (the order of rank 0's actions).",
            "rank 1 uses each message when its own action needs it: follow rank 1's actions.",
        )
    if sorted(given) == sorted(truth):
        at = next(i for i, (a, b) in enumerate(zip(given, truth, strict=True)) if a != b)
        return wrong(
            f"the right messages, but from entry {at} ({given[at]}) in another order.",
            "follow rank 1's actions in order, one need at a time.",
        )
    if len(set(given)) != len(given):
        return wrong("some message appears twice; every message is used once.")
    return wrong(
        f"rank 1 receives {len(truth)} messages from rank 0; {len(set(given) & set(truth))} "
        f"of your {len(given)} are among them.",
        "1F needs an activation from stage 0 and 2I a gradient from stage 3, both on rank 0.",
    )


# ----- 3.3 a schedule that mis-pairs forwards -------------------------------------------------


def _two_by_two(answer: object) -> Schedule:
    """The reader's schedule for p = 2, m = 2, validated by the simulator."""
    if isinstance(answer, list | tuple) and all(
        isinstance(row, list | tuple) and all(isinstance(a, str) for a in row) for row in answer
    ):
        answer = Schedule.from_strings([list(row) for row in answer])
    if not isinstance(answer, Schedule):
        raise ValueError(
            "this exercise wants a Schedule or one list of action strings per rank, such as "
            f'[["0F0", "0F1", "0B0", "0B1"], ["1F0", "1F1", "1B0", "1B1"]], got {shown(answer)}.'
        )
    if (answer.num_ranks, answer.num_microbatches) != (2, 2):
        raise ValueError(
            f"expected p = 2 ranks and m = 2 micro-batches, got p = {answer.num_ranks} and "
            f"m = {answer.num_microbatches}."
        )
    simulate(answer)  # valid and free of deadlock, or a ValueError says why
    return answer


@exercise(
    "3.3",
    "Construct a valid schedule for p = 2 ranks and m = 2 micro-batches in which a runtime "
    "without message identities would give a forward the wrong micro-batch's activation.",
    kind="construct",
    solution="Let rank 1 run the forward of micro-batch 1 before that of micro-batch 0, while "
    "rank 0 sends micro-batch 0's activation first: "
    '`[["0F0", "0F1", "0B1", "0B0"], ["1F1", "1F0", "1B1", "1B0"]]`. '
    "`message_order(schedule, 0, 1)` shows rank 0 sending the activations for 1F0, 1F1 and "
    "rank 1 using them as 1F1, 1F0.",
    answer_name="answer_3",
)
def _mispaired_forward(answer):
    schedule = _two_by_two(answer)
    forward = _out_of_order(schedule, ACTIVATION)
    if forward:
        src, dst, sent, used = forward[0]
        return right(f"rank {src} sends {sent}, rank {dst} uses {used}.")
    if _out_of_order(schedule, GRADIENT):
        return wrong(
            "only gradients are used out of order here, as in the chapter's example.",
            "reorder the forwards of rank 1 instead (1F1 before 1F0).",
        )
    return wrong(
        "every rank uses its messages in the order they are sent: a runtime without "
        "identities would still pair them right.",
        "reorder the forwards of rank 1 against rank 0's.",
    )


def _out_of_order(schedule: Schedule, what: int) -> list[tuple[int, int, list, list]]:
    """``(src, dst, sent, used)`` for each pair of ranks whose messages of kind ``what``
    (ACTIVATION or GRADIENT) the receiver uses in another order than they were sent."""
    found = []
    for src in range(schedule.num_ranks):
        for dst in range(schedule.num_ranks):
            sent = [describe(i) for d, i in sent_by(schedule, src) if d == dst and i[1] == what]
            used = [describe(i) for s, i in used_by(schedule, dst) if s == src and i[1] == what]
            if sent != used:
                found.append((src, dst, sent, used))
    return found


# ----- 3.4 the bubble of a measured step ------------------------------------------------------


@exercise(
    "3.4",
    "Compute the bubble fraction f = idle/total of the measured 1F1B step from its makespan "
    "and each rank's busy time, without timeline.bubble_fraction.",
    kind="compute",
    solution="Total time is every rank's share of the makespan, p times it; idle is what the "
    "busy times leave of it: `total = timeline.num_ranks * timeline.makespan`, "
    "`busy = sum(timeline.busy(r) for r in range(timeline.num_ranks))`, "
    "`f = (total - busy) / total`.",
    answer_name="answer_4",
)
def _measured_fraction(answer, timeline=None):
    if not isinstance(timeline, Timeline):
        raise ValueError(
            "pass the measured step: check('3.4', answer_4, timeline=one_f_one_b_run.timeline)."
        )
    given = number(answer, "a fraction between 0 and 1, such as 0.15")
    f, r = timeline.bubble_fraction, timeline.bubble_ratio
    p, span = timeline.num_ranks, timeline.makespan
    if close(given, f):
        return right(f"f = {f:.4g} of the {p} ranks' time (p x {span:.4g} {timeline.time_unit}).")
    if close(given, r):
        return wrong(
            f"{given:.4g} is the bubble ratio r = idle/compute.",
            "the fraction divides the idle time by the total time, p times the makespan.",
        )
    if close(given, 1 - f):
        return wrong(f"{given:.4g} is the busy share 1 - f.", "f counts the idle time.")
    if close(given, p * f):
        return wrong(
            f"{given:.4g} divides all ranks' idle time by one makespan.",
            "the total time is p times the makespan: every rank's.",
        )
    if any(close(given, timeline.idle(rank) / span) for rank in range(p)):
        return wrong(
            f"{given:.4g} is one rank's idle share.", "add up the idle time of every rank."
        )
    return wrong(
        f"{given:.4g} is not f of this step.", "f = (p x makespan - busy) / (p x makespan)."
    )


# ----- 3.5 the transfer time a speed-up tolerates ---------------------------------------------

_P, _M, _TARGET = 4, 8, 2.5
_STEP = 1e-3
"""3.5's resolution in ms: the largest c is right to the microsecond; a c that misses the
speed-up is wrong however close (a relative tolerance would let 0.339 through)."""


def _speedup(build, c: float) -> tuple[float, float]:
    """(speed-up over one process, makespan) of ``build(p, m)`` with F = 1, B = 2, comm c."""
    timeline = simulate(build(_P, _M), Costs(F=1, B=2, comm=c))
    return timeline.total_busy / timeline.makespan, timeline.makespan


def _reaches(build, c: float) -> bool:
    """Whether ``build`` at transfer time ``c`` reaches the speed-up target (to rounding)."""
    return _speedup(build, c)[0] >= _TARGET * (1 - 1e-12)


def _largest_transfer(build) -> float:
    """The largest c at which ``build`` keeps the speed-up target, by bisection."""
    low, high = 0.0, 10.0
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if _reaches(build, middle) else (low, middle)
    return low


@exercise(
    "3.5",
    "Costs measured for 1F1B on p = 4 ranks: F = 1 ms and B = 2 ms per stage. Choose the "
    "largest transfer time c (ms, to the microsecond) at which 1F1B with m = 8 still runs "
    "2.5 times faster than one process; the check simulates 1F1B at your c and at c + 1 us.",
    kind="choose",
    solution="One process takes m p (F+B) = 96 ms, so the step may take 96/2.5 = 38.4 ms. "
    "Simulate 1F1B at c = 0 (33 ms) and c = 1 (49 ms): the makespan grows by 16c, not by "
    "GPipe's 2(p-1)c = 6c, because in 1F1B's steady state each forward and backward waits "
    "for a message that has just crossed. 33 + 16c = 38.4 gives c = 0.3375 ms; 0.338 ms "
    "(three significant digits, rounded up) already misses the speed-up.",
    answer_name="answer_5",
)
def _largest_c(answer):
    given = number(answer, "a transfer time in ms, such as 0.5")
    if given < 0:
        return wrong(f"a transfer takes no less than 0 ms, got {given:g}.")
    speedup, makespan = _speedup(one_f_one_b, given)
    said = f"at c = {given:g} ms the simulator's 1F1B step takes {makespan:.4g} ms"
    if not _reaches(one_f_one_b, given):
        if close(given, _largest_transfer(gpipe)):
            return wrong(
                f"{said}, a speed-up of {speedup:.3f}: {given:g} is GPipe's answer, whose "
                "makespan grows by 2(p-1)c.",
                "simulate 1F1B at c = 0 and c = 1: how much does one ms of transfer add?",
            )
        return wrong(
            f"{said}: a speed-up of {speedup:.4f}, below 2.5.",
            "the largest c is exact here: round it down, not up.",
        )
    if _reaches(one_f_one_b, given + _STEP):
        return wrong(
            f"{said}: a speed-up of {speedup:.4f}; a larger c still reaches 2.5 (c + 1 us does).",
            "the makespan grows linearly in c: two simulations give its slope.",
        )
    slope = _speedup(one_f_one_b, 1)[1] - _speedup(one_f_one_b, 0)[1]
    return right(
        f"c = {given:g} ms keeps the speed-up at {speedup:.4f} and c + 1 us would not: each "
        f"ms of transfer adds {slope:g} ms to 1F1B's step (GPipe's: 2(p-1) = {2 * (_P - 1)}), "
        "and 96 / 2.5 = 38.4 ms is reached."
    )
