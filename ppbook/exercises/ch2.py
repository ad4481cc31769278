"""Exercises of chapter 2, schedules as data (``notebooks/02_schedules.ipynb``).

Every right answer comes from the simulator (:func:`ppbook.simulate.simulate`) at check
time, under ppbook's cost convention (:mod:`ppbook.costs`): costs time one pass of one
micro-batch through one device's share of the model, and the simulator runs a chunk pass of
a schedule with v chunks per rank in cost/v. The hints name the usual slips: forgetting the
transfers, mixing up the bubble fraction f = idle/total and the bubble ratio r =
idle/compute, forgetting that interleaving divides the ramps by v, and running a chunk at
a full stage's cost. Sources: REFERENCES.md (GPipe, 1F1B, Megatron-LM sec. 2.2.2).
Exercises 2.6 to 2.8 (derive, implement) live in :mod:`ppbook.exercises.ch2_derive`.
"""

from __future__ import annotations

from ppbook.costs import Costs
from ppbook.exercises import close, exercise, integer, number, right, wrong
from ppbook.pipeline_schedule import Schedule
from ppbook.schedules import gpipe, interleaved_1f1b, one_f_one_b
from ppbook.simulate import simulate
from ppbook.timeline import ACTIVATION_UNIT, Timeline

COSTS = Costs(F=1, B=2)
"""The chapter's costs: one forward 1, one full backward 2 (time units, one device's share)."""


def schedule_of(answer: object, num_ranks: int, num_microbatches: int) -> Timeline:
    """The reader's schedule (a ``Schedule`` or per-rank lists of action strings), simulated.

    Raises a ValueError saying what is wrong when the answer is not a valid schedule of
    ``num_ranks`` ranks and ``num_microbatches`` micro-batches; :func:`ppbook.exercises.check`
    turns it into a "not yet" verdict with that message.
    """
    if isinstance(answer, Schedule):
        schedule = answer
    elif isinstance(answer, list | tuple) and all(
        isinstance(row, list | tuple) and all(isinstance(a, str) for a in row) for row in answer
    ):
        schedule = Schedule.from_strings([list(row) for row in answer])
    else:
        raise ValueError(
            "this exercise wants a Schedule, or one list of action strings per rank "
            'such as [["0F0", "0B0"], ["1F0", "1B0"]].'
        )
    if schedule.num_ranks != num_ranks:
        raise ValueError(f"expected {num_ranks} ranks (one row each), got {schedule.num_ranks}.")
    if schedule.num_microbatches != num_microbatches:
        raise ValueError(
            f"expected {num_microbatches} micro-batches (0 to {num_microbatches - 1}), "
            f"got {schedule.num_microbatches}."
        )
    return simulate(schedule, COSTS)


@exercise(
    "2.1",
    "GPipe with p = 4, m = 8, F = 1, B = 2 and a transfer time c = 0.25 on every dependency "
    "between ranks: what is the makespan, in time units?",
    kind="compute",
    solution="Without transfers the makespan is (m+p-1)(F+B) = 11 * 3 = 33. The critical "
    "path crosses p-1 = 3 rank boundaries going forward and 3 coming back, each costing c: "
    "33 + 2 * 3 * 0.25 = 34.5 time units.",
    answer_name="answer_1",
)
def _gpipe_with_comm(answer):
    given = number(answer, "a makespan in time units, such as 30.5")
    truth = simulate(gpipe(4, 8), Costs(F=1, B=2, comm=0.25)).makespan
    free = simulate(gpipe(4, 8), COSTS).makespan
    if close(given, truth):
        return right(f"{truth:g} time units: (m+p-1)(F+B) = {free:g} plus 2(p-1)c = 1.5.")
    if close(given, free):
        return wrong(
            f"{given:g} is the makespan without transfers.",
            "count the rank boundaries the critical path crosses, going forward and back.",
        )
    if close(given, free + 3 * 0.25):
        return wrong(
            f"{given:g} counts the transfers of the forward only.",
            "the backward crosses the same p-1 boundaries on its way back.",
        )
    side = "short" if given < truth else "long"
    return wrong(f"{given:g} is too {side}.", "how many transfers of c lie on the critical path?")


def _fraction(p: int, m: int, v: int) -> float:
    """Bubble fraction f of interleaved 1F1B (1F1B when v = 1), simulated."""
    return simulate(_interleaved_or_1f1b(p, m, v), COSTS).bubble_fraction


def _ratio(p: int, m: int, v: int) -> float:
    """Bubble ratio r of interleaved 1F1B (1F1B when v = 1), simulated."""
    return simulate(_interleaved_or_1f1b(p, m, v), COSTS).bubble_ratio


def _interleaved_or_1f1b(p: int, m: int, v: int) -> Schedule:
    return one_f_one_b(p, m) if v == 1 else interleaved_1f1b(p, m, v)


def _runs(p: int, m: int, v: int) -> bool:
    """Whether the builder takes m (PyTorch's rule for v > 1: m a multiple of max(1, m // p))."""
    try:
        _interleaved_or_1f1b(p, m, v)
    except ValueError:
        return False
    return True


def _smaller(p: int, m: int, v: int) -> int | None:
    """The largest m' < m the builder takes, or None."""
    return next((k for k in range(m - 1, 0, -1) if _runs(p, k, v)), None)


def _smallest(measure, p: int, m: int, v: int, target: float) -> bool:
    """Whether m is the smallest m the builder takes with ``measure`` below ``target``."""
    if measure(p, m, v) >= target:
        return False
    return all(measure(p, k, v) >= target for k in range(1, m) if _runs(p, k, v))


@exercise(
    "2.2",
    "Choose the smallest number of micro-batches m for which interleaved 1F1B with p = 8 "
    "ranks and v = 2 chunks has a bubble fraction f = idle/total below 10 %.",
    kind="choose",
    solution="Per rank the idle time is (p-1)(F+B)/v and the compute m(F+B), so "
    "f = ((p-1)/v) / (m + (p-1)/v) = 3.5/(m + 3.5) < 0.1 needs m > 31.5: m = 32 "
    "(f = 3.5/35.5 = 0.099). PyTorch's order runs m = 30 too (f = 0.1045, not enough) and "
    "refuses m = 31, which is not a multiple of its max(1, m // p) = 3 rounds.",
    answer_name="answer_2",
)
def _smallest_m(answer):
    p, v, target = 8, 2, 0.1
    given = integer(answer, "a whole number of micro-batches", minimum=1)
    f = _fraction(p, given, v)  # a ValueError names the rule an m breaks
    if f >= target:
        return wrong(f"at m = {given} the bubble fraction is f = {f:.3f}, not below {target}.")
    if _smallest(_fraction, p, given, v, target):
        below = _smaller(p, given, v)
        return right(f"m = {given} gives f = {f:.3f}, and m = {below} would not.")
    if _smallest(_ratio, p, given, v, target):
        return wrong(
            f"m = {given} brings the bubble ratio r = idle/compute below {target}; the "
            "fraction f = idle/total gets there with fewer micro-batches.",
            "the question asks for f, which divides by the total time: f = r/(1+r).",
        )
    if _smallest(_fraction, p, given, 1, target):
        return wrong(
            f"m = {given} is what plain 1F1B needs; with v = {v} chunks fewer micro-batches do.",
            "interleaving divides the ramps, (p-1)(F+B), by v.",
        )
    smaller = next(
        k for k in range(given - 1, 0, -1) if _runs(p, k, v) and _fraction(p, k, v) < target
    )
    return wrong(
        f"m = {given} works, but so does m = {smaller} (f = {_fraction(p, smaller, v):.3f})."
    )


@exercise(
    "2.3",
    "Write 1F1B for p = 2 ranks and m = 3 micro-batches by hand, one list of action strings "
    "per rank.",
    kind="construct",
    solution="Rank 0 warms up with p-1 = 1 extra forward, then alternates one forward and "
    "one backward, then drains the remaining backwards; rank 1, the last, alternates from "
    'the start: [["0F0", "0F1", "0B0", "0F2", "0B1", "0B2"], '
    '["1F0", "1B0", "1F1", "1B1", "1F2", "1B2"]].',
    answer_name="answer_3",
)
def _one_f_one_b_by_hand(answer):
    p, m = 2, 3
    run = schedule_of(answer, p, m)
    best = simulate(one_f_one_b(p, m), COSTS)
    if not close(run.makespan, best.makespan):
        return wrong(
            f"your schedule takes {run.makespan:g} time units; 1F1B takes "
            f"(m+p-1)(F+B) = {best.makespan:g}.",
            "each rank should start a backward as soon as its input gradient can arrive.",
        )
    held, most = run.peak_activations(0), best.peak_activations(0)
    if held > most:
        return wrong(
            f"rank 0 holds {held:g} {ACTIVATION_UNIT} at once; 1F1B holds only "
            f"min(p, m) = {most:g}.",
            "that is GPipe's order: run a backward before the last forwards.",
        )
    return right(
        f"a valid 1F1B: {run.makespan:g} time units, rank 0 holds at most {held:g} "
        f"{ACTIVATION_UNIT}."
    )


@exercise(
    "2.4",
    "Choose the number of chunks v (1 to 4) that gives the shortest step for p = 4, m = 8, "
    "F = 1, B = 2 (one device's share) and a transfer time c = 0.5 between ranks.",
    kind="choose",
    solution="Without transfers more chunks always help: the ramps are (p-1)(F+B)/v. But "
    "each micro-batch now crosses p*v - 1 stage boundaries instead of p-1, each a transfer. "
    "Simulated at c = 0.5: v = 1 takes 41, v = 2 35.5, v = 3 39.3 and v = 4 45 time units, "
    "so v = 2.",
    answer_name="answer_4",
)
def _choose_chunks(answer):
    p, m, c = 4, 8, 0.5
    given = integer(answer, "a whole number of chunks from 1 to 4", minimum=1, maximum=4)
    with_comm = Costs(F=1, B=2, comm=c)
    times = {v: simulate(_interleaved_or_1f1b(p, m, v), with_comm).makespan for v in range(1, 5)}
    best = min(times, key=times.get)
    table = ", ".join(f"v = {v}: {t:.4g}" for v, t in times.items())
    if given == best:
        return right(f"v = {given} is fastest at c = {c} ({table} time units).")
    without = {v: simulate(_interleaved_or_1f1b(p, m, v), COSTS).makespan for v in range(1, 5)}
    if given == min(without, key=without.get):
        return wrong(
            f"v = {given} is fastest without transfers, but at c = {c} it takes "
            f"{times[given]:.4g} time units against {times[best]:.4g}.",
            "every chunk boundary is a transfer: try the simulator with Costs(comm=0.5).",
        )
    if given == 1:
        return wrong(
            f"plain 1F1B takes {times[1]:.4g} time units; some v > 1 is faster at c = {c}.",
            "interleaving still pays while the ramps it saves cost more than its transfers.",
        )
    return wrong(
        f"v = {given} takes {times[given]:.4g} time units; another v is faster.",
        "simulate each v with Costs(F=1, B=2, comm=0.5).",
    )


_CAP, _WITHIN = 2, 51
"""Exercise 2.5: rank 0 holds at most _CAP micro-batches, and the step takes at most _WITHIN
time units (F = 1, B = 2; 1F1B takes 33 and holds 4, one micro-batch at a time takes 96)."""


@exercise(
    "2.5",
    "Construct a schedule for p = 4 ranks and m = 8 micro-batches in which rank 0 never "
    f"holds more than {_CAP} {ACTIVATION_UNIT} and the step (F = 1, B = 2) takes at most "
    f"{_WITHIN} time units.",
    kind="construct",
    solution="Every action of a micro-batch lies between its forward and its backward on "
    "rank 0, so the cap allows two micro-batches in flight, each a round trip of at least "
    "4F + 4B = 12: eight of them need at least 8 x 12 / 2 = 48. Run two lanes: micro-batch "
    "j starts at 12 (j // 2) on rank 0, plus 3 when j is odd, and rank r runs its F at "
    "offset r and its B at offset 4 + 2(3 - r) of the micro-batch's start; order each rank's "
    "actions by those times. Rank 3, for one, is busy from offset 3 to 6 of each lane: "
    "lanes 1 or 2 apart collide there, and 3 is the smallest offset at which no rank is "
    "asked for two passes at once, so nothing waits: 3 + 4 x 12 = 51. The usual 1F1B "
    "with a warm-up of one forward holds 2 too but takes "
    "69, and one micro-batch at a time 96: the cap alone does not make a good schedule.",
    answer_name="answer_5",
)
def _capped_activations(answer):
    p, m = 4, 8
    run = schedule_of(answer, p, m)
    held = run.peak_activations(0)
    if held > _CAP:
        hint = (
            "that is 1F1B's p: start fewer forwards on rank 0 before its first backward."
            if close(held, p)
            else f"run a backward on rank 0 before starting micro-batch {_CAP + 1}."
        )
        return wrong(f"rank 0 holds up to {held:g} {ACTIVATION_UNIT}, more than {_CAP}.", hint)
    plain = simulate(one_f_one_b(p, m), COSTS).makespan
    if run.makespan > _WITHIN:
        hint = (
            "one micro-batch at a time wastes the second place the cap leaves."
            if run.peak_activations(0) < _CAP
            else f"keep {_CAP} micro-batches in flight all the time, their round trips "
            "staggered so that no rank is asked for two passes at once."
        )
        return wrong(
            f"rank 0 holds at most {held:g} {ACTIVATION_UNIT}, but the step takes "
            f"{run.makespan:g} time units, more than {_WITHIN}.",
            hint,
        )
    return right(
        f"rank 0 holds at most {held:g} {ACTIVATION_UNIT}; the step takes {run.makespan:g} "
        f"time units, against 1F1B's {plain:g} (F = 1, B = 2) with {p} held."
    )


import ppbook.exercises.ch2_derive  # noqa: E402, F401 (registers 2.6 to 2.8: derive, implement)
