"""Run a schedule's dependency graph with symbols for the costs: each end time is a Max.

The same rule as :func:`ppbook.simulate.simulate`, with times that are sets of path
lengths instead of numbers: an action starts at the Max of its rank's previous end and
each dependency's end (plus the transfer time ``c`` when the dependency runs on another
rank), and ends its duration later; the makespan is the Max of every rank's last end.
What waits for what is :mod:`ppbook.dependencies`' rule, looked up through the
:class:`~ppbook.validate.ScheduleIndex` that validation builds.

A time is kept as the list of its non-dominated path lengths, each a linear form with
nonnegative integer coefficients (costs scaled by the chunk share's denominator, so that
a chunk pass of ``t_f / 2`` stays an integer). After every Max, a form that another one
dominates under the stated conditions is dropped (:meth:`.space.CostSpace.key`): this is
what keeps the expressions small, and with conditions such as "W <= F" it collapses
them while the graph is run, not only at the end.
"""

from __future__ import annotations

from fractions import Fraction
from operator import add

from ppbook.critical_path.space import CostSpace
from ppbook.pipeline_schedule import Action, Schedule
from ppbook.simulate import simulate
from ppbook.symbolic.symbols import c, t_b, t_f, t_fb, t_i, t_w
from ppbook.validate import validate

Term = tuple[int, ...]  # a form's coefficients, then its key (its values at the rays)


def variables_of(
    schedule: Schedule, *, transfer: bool, split_backward: bool | None, overlap: str
) -> tuple:
    """The symbols the makespan of ``schedule`` is written in.

    ``t_f``; ``t_i`` and ``t_w`` when backwards are split (``split_backward``, by default
    whether the schedule splits any), else ``t_b``; ``t_fb`` when the schedule has
    overlapped pairs and ``overlap == "FB"``; ``c`` when ``transfer``.
    """
    split = schedule.split_backward if split_backward is None else split_backward
    has_pairs = any(len(step.parts) > 1 for row in schedule.actions for step in row)
    return (
        (t_f,)
        + ((t_i, t_w) if split else (t_b,))
        + ((t_fb,) if has_pairs and overlap == "FB" else ())
        + ((c,) if transfer else ())
    )


def path_lengths(schedule: Schedule, space: CostSpace) -> list[tuple[Fraction, ...]]:
    """The non-dominated lengths of the longest paths that end the schedule, as forms in
    ``space.variables`` (from :func:`variables_of`): the makespan is their Max."""
    index = validate(schedule)
    share = Fraction(len(set(schedule.stage_to_rank)), len(schedule.route(0)))
    scale, d = share.denominator, len(space.variables)
    position = {v: k for k, v in enumerate(space.variables)}

    def term(coefficients: dict) -> Term:
        form = [0] * d
        for symbol, x in coefficients.items():
            form[position[symbol]] += x
        return (*form, *space.key(form))

    unit = share.numerator  # one pass of one chunk, in units of 1/scale
    pass_cost = {"F": {t_f: unit}}
    pass_cost.update(
        {"I": {t_i: unit}, "W": {t_w: unit}, "B": {t_i: unit, t_w: unit}}
        if t_i in position
        else {"B": {t_b: unit}}
    )
    durations = {kind: term(cost) for kind, cost in pass_cost.items()}
    hop = term({c: scale}) if c in position else None

    def duration(step) -> Term:
        if type(step) is Action:
            return durations[step.kind]
        if t_fb in position:  # an overlapped pair: t_fb, or F + its backward
            return term({t_fb: unit})
        return tuple(map(add, durations["F"], durations[step.parts[1].kind]))

    steps, step_rank, first, where = index.steps, index.step_rank, index.first, index.where
    waits: list[list[tuple[int, bool]]] = []
    for sid, step in enumerate(steps):
        found: dict[int, bool] = {}
        for part in step.parts:
            for key in index.dependencies(*part):
                if where[key] != sid:
                    found[where[key]] = step_rank[where[key]] != step_rank[sid]
        waits.append(list(found.items()))

    zero = (0,) * (d + len(space.rays))
    end: list[list[Term] | None] = [None] * len(steps)
    lengths = [len(row) for row in schedule.actions]
    position_of = [0] * len(lengths)
    last = [[zero] for _ in lengths]
    progress = True
    while progress:  # each rank runs as far as its dependencies allow, until none can
        progress = False
        for rank, stop in enumerate(lengths):
            while position_of[rank] < stop:
                sid = first[rank] + position_of[rank]
                if any(end[did] is None for did, _ in waits[sid]):
                    break
                start = list(last[rank])
                for did, crossing in waits[sid]:
                    if crossing and hop:
                        start += [tuple(map(add, t, hop)) for t in end[did]]
                    else:
                        start += end[did]
                step_time = duration(steps[sid])
                end[sid] = last[rank] = [tuple(map(add, t, step_time)) for t in _pruned(start, d)]
                position_of[rank] += 1
                progress = True
    if position_of != lengths:
        simulate(schedule)  # raises its report of the stuck ranks
        raise ValueError(f"schedule {schedule.name!r} cannot finish, yet simulate ran it")
    finals = _pruned([t for row in last for t in row], d)
    return [tuple(Fraction(x, scale) for x in t[:d]) for t in finals]


def _pruned(terms: list[Term], d: int) -> list[Term]:
    """The terms no other one dominates (key >= at every ray), one of each equal key."""
    ordered = sorted(set(terms), key=lambda t: (-sum(t[d:]), t))
    kept: list[Term] = []
    for t in ordered:
        key = t[d:]
        if not any(all(a >= b for a, b in zip(k[d:], key, strict=True)) for k in kept):
            kept.append(t)
    return kept
