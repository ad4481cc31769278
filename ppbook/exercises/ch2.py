"""Exercises of chapter 2, schedules as data (``notebooks/02_schedules.ipynb``).

Every right answer comes from the simulator (:func:`ppbook.simulate.simulate`) at check
time, under ppbook's cost convention (:mod:`ppbook.costs`): costs time one pass of one
micro-batch through one device's share of the model, and the simulator runs a chunk pass of
a schedule with v chunks per rank in cost/v. The hints name the usual slips: forgetting the
transfers, mixing up the bubble fraction f = idle/total and the bubble ratio r =
idle/compute, forgetting that interleaving divides the ramps by v, and running a chunk at
a full stage's cost. Sources: REFERENCES.md (GPipe, 1F1B, Megatron-LM sec. 2.2.2).
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


def _smallest(measure, p: int, m: int, v: int, target: float) -> bool:
    """Whether m (a multiple of p) is the smallest such m with ``measure`` below ``target``."""
    return measure(p, m, v) < target and (m == p or measure(p, m - p, v) >= target)


@exercise(
    "2.2",
    "Choose the smallest number of micro-batches m for which interleaved 1F1B with p = 8 "
    "ranks and v = 2 chunks has a bubble fraction f = idle/total below 10 %.",
    kind="choose",
    solution="Per rank the idle time is (p-1)(F+B)/v and the compute m(F+B), so "
    "f = ((p-1)/v) / (m + (p-1)/v) = 3.5/(m + 3.5) < 0.1 needs m > 31.5. Interleaved 1F1B "
    "needs m to be a multiple of p = 8: m = 32 (f = 3.5/35.5 = 0.099).",
    answer_name="answer_2",
)
def _smallest_m(answer):
    p, v, target = 8, 2, 0.1
    given = integer(answer, "a whole number of micro-batches")
    if given < p or given % p:
        return wrong(
            f"interleaved 1F1B needs m to be a positive multiple of p = {p}, got m = {given}.",
            "Megatron-LM sends micro-batches through the chunks in groups of p.",
        )
    f = _fraction(p, given, v)
    if f >= target:
        return wrong(f"at m = {given} the bubble fraction is f = {f:.3f}, not below {target}.")
    if _smallest(_fraction, p, given, v, target):
        return right(f"m = {given} gives f = {f:.3f}, and m = {given - p} would not.")
    smaller = given - p
    f_smaller = _fraction(p, smaller, v)
    if _smallest(_ratio, p, given, v, target):
        return wrong(
            f"m = {given} brings the bubble ratio r = idle/compute below {target}; the "
            f"fraction f = idle/total is already {f_smaller:.3f} at m = {smaller}.",
            "the question asks for f, which divides by the total time: f = r/(1+r).",
        )
    if _smallest(_fraction, p, given, 1, target):
        return wrong(
            f"m = {given} is what plain 1F1B needs; with v = {v} chunks m = {smaller} "
            f"already gives f = {f_smaller:.3f}.",
            "interleaving divides the ramps, (p-1)(F+B), by v.",
        )
    return wrong(f"m = {given} works, but so does m = {smaller} (f = {f_smaller:.3f}).")


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


@exercise(
    "2.5",
    "Construct a schedule for p = 4 ranks and m = 8 micro-batches in which rank 0 never "
    f"holds more than 2 {ACTIVATION_UNIT}.",
    kind="construct",
    solution="Limit rank 0's warm-up to one forward: rank r runs min(1, p-1-r) forwards, "
    "then alternates one forward and one backward, then drains its backwards. Rank 0 "
    "then holds at most 2 micro-batches, but each new forward on rank 0 now waits for a "
    "backward to come back: after the first, every micro-batch costs a chain of one forward "
    "and one backward on each of the first three ranks, 3F + 3B = 9, instead of F + B = 3. "
    "The step takes 69 time units against 1F1B's 33: memory traded for time.",
    answer_name="answer_5",
)
def _capped_activations(answer):
    p, m, limit = 4, 8, 2
    run = schedule_of(answer, p, m)
    held = run.peak_activations(0)
    if held > limit:
        hint = (
            "that is 1F1B's p: start fewer forwards on rank 0 before its first backward."
            if close(held, p)
            else "run a backward on rank 0 before starting a third micro-batch."
        )
        return wrong(f"rank 0 holds up to {held:g} {ACTIVATION_UNIT}, more than {limit}.", hint)
    plain = simulate(one_f_one_b(p, m), COSTS).makespan
    return right(
        f"rank 0 holds at most {held:g} {ACTIVATION_UNIT}; the step takes {run.makespan:g} "
        f"time units, against 1F1B's {plain:g} (F = 1, B = 2)."
    )
