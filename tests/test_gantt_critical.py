"""The Gantt view's critical path (``plot_timeline(..., critical_path=True)``): the actions it
outlines form a chain from the step's start to the makespan with no gap (transfers aside),
each link a dependency or the rank's own order, and the chain is the longest path that
:mod:`ppbook.critical_path` finds symbolically: its passes, counted by kind, are the
coefficients of the term of the sympy ``Max`` that is largest at the costs drawn."""

import matplotlib
import pytest
import sympy as sp

matplotlib.use("Agg")

from ppbook.costs import Costs  # noqa: E402
from ppbook.critical_path import critical_path  # noqa: E402
from ppbook.dependencies import BACKWARD, needs  # noqa: E402
from ppbook.schedules import build  # noqa: E402
from ppbook.simulate import simulate  # noqa: E402
from ppbook.symbolic.symbols import t_b, t_f, t_i, t_w  # noqa: E402
from ppbook.views.gantt import (  # noqa: E402
    CRITICAL_GID,
    CRITICAL_LABEL,
    critical_actions,
    timeline_figure,
)

CASES = [
    ("gpipe", 4, 8, None),
    ("1f1b", 4, 8, None),
    ("1f1b", 5, 3, None),
    ("interleaved-1f1b", 4, 8, 2),
    ("zb-h1", 4, 8, None),
    ("zb-h2", 4, 8, None),
    ("zb-v", 4, 8, None),
]
SPLIT = {"F": 1.0, "I": 1.3, "W": 0.7}  # generic: no two path lengths tie by accident
WHOLE = {"F": 1.0, "B": 2.3}


def _costs(schedule, comm=0.0):
    return Costs(**(SPLIT if schedule.split_backward else WHOLE), comm=comm)


def _run(name, p, m, v, comm=0.0):
    schedule = build(name, p, m, v)
    return simulate(schedule, _costs(schedule, comm))


def _waits_for(schedule, later, earlier):
    """Whether action ``later`` waits for ``earlier`` by the dependency rule (a need of a
    backward is met by the full ``B`` or, when split, by ``I``)."""
    wanted = {
        (n.stage, kind, n.microbatch)
        for part in later.parts
        for n in needs(schedule, *part)
        for kind in (("B", "I") if n.kind == BACKWARD else (n.kind,))
    }
    return any((e.stage, e.kind, e.microbatch) in wanted for e in earlier.parts)


@pytest.mark.parametrize("name, p, m, v", CASES)
def test_the_marked_chain_runs_from_start_to_makespan_without_gaps(name, p, m, v):
    timeline = _run(name, p, m, v)
    path = critical_actions(timeline)
    starts = [timeline.starts[r][k] for r, k in path]
    ends = [timeline.ends[r][k] for r, k in path]
    assert starts[0] == pytest.approx(0.0) and ends[-1] == pytest.approx(timeline.makespan)
    assert all(b == pytest.approx(a) for a, b in zip(ends, starts[1:], strict=False))
    assert sum(e - s for s, e in zip(starts, ends, strict=True)) == pytest.approx(timeline.makespan)
    schedule = timeline.schedule
    for (r0, k0), (r1, k1) in zip(path, path[1:], strict=False):
        later, earlier = schedule.actions[r1][k1], schedule.actions[r0][k0]
        assert (r0 == r1 and k1 == k0 + 1) or _waits_for(schedule, later, earlier), (
            f"{earlier} -> {later} is neither the rank's order nor a dependency"
        )


def _kind_counts(timeline, path):
    counts = {}
    for r, k in path:
        for part in timeline.schedule.actions[r][k].parts:
            counts[part.kind] = counts.get(part.kind, 0) + 1
    return counts


@pytest.mark.parametrize("name, p, m, v", CASES)
def test_the_marked_passes_are_the_longest_term_of_the_symbolic_critical_path(name, p, m, v):
    timeline = _run(name, p, m, v)
    schedule = timeline.schedule
    makespan = critical_path(schedule, transfer=False)
    at = {t_f: SPLIT["F"], t_i: SPLIT["I"], t_w: SPLIT["W"], t_b: WHOLE["B"]}
    values = [float(term.xreplace(at)) for term in makespan.terms]
    longest = makespan.terms[values.index(max(values))]
    assert max(values) == pytest.approx(timeline.makespan)
    share = sp.Rational(len(set(schedule.stage_to_rank)), len(schedule.route(0)))
    counts = _kind_counts(timeline, critical_actions(timeline))
    symbols = {"F": t_f, "I": t_i, "W": t_w, "B": t_b}
    drawn = sum(share * n * symbols[kind] for kind, n in counts.items())
    assert sp.expand(drawn - longest) == 0, f"marked {drawn}, longest path {longest}"


@pytest.mark.parametrize("name, p, m, v", [("1f1b", 4, 8, None), ("zb-v", 4, 8, None)])
def test_with_transfers_each_gap_on_the_path_is_one_transfer_between_ranks(name, p, m, v):
    comm = 0.25
    timeline = _run(name, p, m, v, comm)
    path = critical_actions(timeline)
    hops = 0
    for (r0, k0), (r1, k1) in zip(path, path[1:], strict=False):
        gap = timeline.starts[r1][k1] - timeline.ends[r0][k0]
        if r0 == r1:
            assert gap == pytest.approx(0.0)
        else:
            assert gap == pytest.approx(comm)
            hops += 1
    busy = sum(timeline.ends[r][k] - timeline.starts[r][k] for r, k in path)
    assert busy + hops * comm == pytest.approx(timeline.makespan)


def test_the_figure_outlines_exactly_the_marked_actions_and_says_so_in_the_legend():
    timeline = _run("zb-h1", 4, 8, None)
    fig = timeline_figure(timeline, memory=False, critical_path=True)
    ax = fig.axes[0]
    (outlines,) = [c for c in ax.collections if c.get_gid() == CRITICAL_GID]
    drawn = sorted(
        (round(path.vertices[:, 0].min(), 9), round(path.vertices[:, 0].max(), 9))
        + (round((path.vertices[:, 1].min() + path.vertices[:, 1].max()) / 2, 9),)
        for path in outlines.get_paths()
    )
    marked = sorted(
        (round(timeline.starts[r][k], 9), round(timeline.ends[r][k], 9), float(r))
        for r, k in critical_actions(timeline)
    )
    assert drawn == marked
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert CRITICAL_LABEL in labels


def test_no_path_is_marked_unless_asked():
    fig = timeline_figure(_run("1f1b", 4, 8, None), memory=False)
    ax = fig.axes[0]
    assert not [c for c in ax.collections if c.get_gid() == CRITICAL_GID]
    assert CRITICAL_LABEL not in [t.get_text() for t in ax.get_legend().get_texts()]


def test_a_timeline_of_several_steps_is_refused_in_one_line():
    schedule = build("1f1b", 4, 8)
    several = simulate(schedule, Costs(F=1, B=2), steps=2)
    with pytest.raises(ValueError, match="one-step timeline, got 2 steps") as error:
        timeline_figure(several, critical_path=True)
    assert "\n" not in str(error.value)
