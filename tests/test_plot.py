"""The Gantt chart draws exactly the timeline: bars, colours, memory panel, title."""

import colorsys

import matplotlib

matplotlib.use("Agg")  # tests only: the package never picks a backend

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402

from ppbook.costs import Costs  # noqa: E402
from ppbook.schedule import KINDS, OverlapFB, Schedule  # noqa: E402
from ppbook.schedules import dualpipe, gpipe, interleaved_1f1b, one_f_one_b, zb_v  # noqa: E402
from ppbook.simulate import simulate  # noqa: E402
from ppbook.timeline import Timeline  # noqa: E402
from ppbook.views.colors import DRAWN_KINDS, KIND_COLORS, KIND_NAMES  # noqa: E402
from ppbook.views.gantt import (  # noqa: E402
    HATCH_GID,
    LANE_HEIGHT,
    plot_timeline,
    timeline_figure,
)

SPLIT = Schedule.from_strings(
    [["0F0", "0F1", "0I0", "0I1", "0W0", "0W1"], ["1F0", "1I0", "1W0", "1F1", "1I1", "1W1"]],
    name="split",
)
# One rank, two stages; the middle step runs stage 0's forward of micro-batch 1 together
# with stage 1's backward of micro-batch 0 (DualPipe's overlapped F&B pair).
OVERLAP = Schedule.from_strings(
    [["0F0", "1F0", "(0F1;1B0)OVERLAP_F_B", "1F1", "1B1", "0B0", "0B1"]], name="overlap"
)

TIMELINES = {
    "1f1b": simulate(one_f_one_b(4, 8)),
    "interleaved": simulate(interleaved_1f1b(2, 4, 2), Costs(F=0.5, B=1.0, comm=0.1)),
    "split": simulate(SPLIT, Costs(F=1.0, I=1.5, W=0.5)),
    "overlap": simulate(OVERLAP),
}


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def drawn_boxes(ax):
    """(rank, kind, start, end) of every box drawn, read back from the collections."""
    boxes = []
    for collection in ax.collections:
        kind = collection.get_label()
        if kind not in KIND_COLORS:
            continue
        for path in collection.get_paths():
            xs, ys = path.vertices[:4, 0], path.vertices[:4, 1]
            boxes.append((round((ys.min() + ys.max()) / 2), kind, xs.min(), xs.max()))
    return sorted(boxes)


def expected_boxes(timeline):
    return sorted(
        (rank, iv.action.kind, iv.start - timeline.origin, iv.end - timeline.origin)
        for rank, row in enumerate(timeline.intervals)
        for iv in row
    )


@pytest.mark.parametrize("name", TIMELINES)
def test_bars_are_the_timelines_intervals(name):
    timeline = TIMELINES[name]
    fig = plot_timeline(timeline)
    got, want = drawn_boxes(fig.axes[0]), expected_boxes(timeline)
    assert [(r, k) for r, k, _, _ in got] == [(r, k) for r, k, _, _ in want]
    assert [t for _, _, a, b in got for t in (a, b)] == pytest.approx(
        [t for _, _, a, b in want for t in (a, b)]
    )


def _hue(rgb):
    return colorsys.rgb_to_hsv(*rgb[:3])[0]


@pytest.mark.parametrize("name", TIMELINES)
def test_colour_is_the_kinds_hue_and_later_microbatches_are_lighter(name):
    timeline = TIMELINES[name]
    ax = plot_timeline(timeline).axes[0]
    seen = set()
    for collection in ax.collections:
        kind = collection.get_label()
        if kind not in KIND_COLORS:
            continue
        seen.add(kind)
        base = to_rgb(KIND_COLORS[kind])
        colours = collection.get_facecolors()
        assert len(colours) == len(collection.get_paths())
        for colour in colours:
            assert _hue(colour) == pytest.approx(_hue(base), abs=1e-6)
            assert sum(colour[:3]) >= sum(base) - 1e-9  # a shade: base mixed with white
    hues = {kind: _hue(to_rgb(KIND_COLORS[kind])) for kind in seen}
    assert len(set(round(h, 3) for h in hues.values())) == len(hues)  # kinds tell apart

    # the shade follows the micro-batch: the last micro-batch's F is lighter than the first's
    microbatch_at = {
        (rank, round(iv.start - timeline.origin, 9)): iv.action.microbatch
        for rank, row in enumerate(timeline.intervals)
        for iv in row
        if iv.action.kind == "F"
    }
    by_mb = {}
    for collection in ax.collections:
        if collection.get_label() != "F":
            continue
        for path, colour in zip(collection.get_paths(), collection.get_facecolors(), strict=True):
            xs, ys = path.vertices[:4, 0], path.vertices[:4, 1]
            key = (round((ys.min() + ys.max()) / 2), round(xs.min(), 9))
            by_mb.setdefault(microbatch_at[key], sum(colour[:3]))
    first, last = min(by_mb), max(by_mb)
    assert by_mb[last] > by_mb[first]


def test_overlapped_pair_has_its_own_colour_and_both_microbatches_as_label():
    ax = plot_timeline(TIMELINES["overlap"], labels=True).axes[0]
    (pair,) = [c for c in ax.collections if c.get_label() == "OVERLAP_F_B"]
    assert _hue(pair.get_facecolors()[0]) == pytest.approx(_hue(to_rgb(KIND_COLORS["OVERLAP_F_B"])))
    assert "1|0" in [t.get_text() for t in ax.texts]


def test_idle_lanes_span_the_makespan_one_per_rank():
    timeline = TIMELINES["1f1b"]
    ax = plot_timeline(timeline).axes[0]
    (lanes,) = [c for c in ax.collections if c.get_label() == "idle"]
    assert len(lanes.get_paths()) == timeline.num_ranks
    for path in lanes.get_paths():
        xs = path.vertices[:, 0]
        assert (xs.min(), xs.max()) == pytest.approx((0.0, timeline.makespan))
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"rank {r}" for r in range(4)]


@pytest.mark.parametrize("name", ["interleaved", "split"])
def test_memory_panel_is_timeline_memory_per_rank(name):
    timeline = TIMELINES[name]
    fig = plot_timeline(timeline, memory=True)
    memory_ax = fig.axes[1]
    assert len(memory_ax.lines) == timeline.num_ranks
    for rank, line in enumerate(memory_ax.lines):
        curve = {}  # time -> amount after every change at that time (a dict keeps order)
        for time, amount in timeline.memory(rank):
            curve[time] = amount
        curve = list(curve.items())
        xs, ys = list(line.get_xdata()), list(line.get_ydata())
        assert xs[:-1] == pytest.approx([t for t, _ in curve])
        assert ys[:-1] == pytest.approx([a for _, a in curve])
        assert (xs[-1], ys[-1]) == pytest.approx((timeline.makespan, curve[-1][1]))
        assert line.get_drawstyle() == "steps-post"
        assert max(ys) == timeline.peak_activations(rank)


def test_title_names_schedule_sizes_and_both_bubble_conventions():
    timeline = TIMELINES["interleaved"]
    title = plot_timeline(timeline).axes[0].get_title()
    assert "interleaved-1f1b" in title and "p = 2" in title and "m = 4" in title
    assert "v = 2" in title and f"makespan = {timeline.makespan:.4g}" in title
    assert f"bubble fraction f = idle/total = {timeline.bubble_fraction:.3f}" in title
    assert f"bubble ratio r = idle/compute = {timeline.bubble_ratio:.3f}" in title


def test_measured_timeline_is_drawn_from_its_origin():
    simulated = simulate(gpipe(2, 2))
    offset = 1000.0  # e.g. perf_counter() seconds
    measured = Timeline.from_arrays(
        simulated.schedule,
        [[t + offset for t in row] for row in simulated.starts],
        [[t + offset for t in row] for row in simulated.ends],
        source="measured",
    )
    ax = plot_timeline(measured).axes[0]
    got, want = drawn_boxes(ax), expected_boxes(simulated)
    assert [box[:2] for box in got] == [box[:2] for box in want]
    assert [t for box in got for t in box[2:]] == pytest.approx(
        [t for box in want for t in box[2:]]
    )
    assert "(measured)" in ax.get_title()


def test_draws_into_given_axes_and_returns_their_figure():
    fig, (ax, memory_ax) = plt.subplots(2, 1)
    assert plot_timeline(TIMELINES["1f1b"], ax, memory_ax=memory_ax) is fig
    assert len(memory_ax.lines) == 4
    with pytest.raises(ValueError, match="memory_ax"):
        plot_timeline(TIMELINES["1f1b"], ax, memory=True)


def test_later_chunks_are_hatched_when_few():
    timeline = TIMELINES["interleaved"]
    ax = plot_timeline(timeline).axes[0]
    hatching = [a for a in ax.get_children() if a.get_gid() == HATCH_GID]
    assert {a.get_hatch() for a in hatching} == {"////"}
    # The hatching covers exactly the second chunk's boxes: every one, and only those.
    later = {
        (r, i.start - timeline.origin, i.end - timeline.origin)
        for r, row in enumerate(timeline.intervals)
        for i in row
        if any(timeline.schedule.stages_on(r).index(s) == 1 for s, _, _ in i.action.parts)
    }
    covered = {
        (round(v[0][1] + LANE_HEIGHT / 2), v[0][0], v[2][0])
        for a in hatching
        for v in a.get_path().vertices.reshape(-1, 5, 2)
    }
    assert covered == later
    ax = plot_timeline(timeline, max_hatched=0).axes[0]
    assert not [a for a in ax.get_children() if a.get_gid() == HATCH_GID]


def test_timeline_figure_is_not_a_pyplot_figure_and_rcparams_stay():
    before = dict(matplotlib.rcParams)
    fig = timeline_figure(TIMELINES["split"])
    assert not plt.get_fignums()  # pyplot does not know it
    assert len(fig.axes) == 2
    assert dict(matplotlib.rcParams) == before


def test_kinds_drawn_are_the_schedules_kinds_and_the_overlapped_pair():
    assert DRAWN_KINDS == (*KINDS, OverlapFB.kind)
    assert set(KIND_COLORS) == set(KIND_NAMES) == set(DRAWN_KINDS)


def test_every_axis_says_its_time_unit():
    simulated = TIMELINES["1f1b"]
    measured = Timeline.from_arrays(
        simulated.schedule, simulated.starts, simulated.ends, source="measured"
    )
    for timeline, unit, amount in ((simulated, "time unit", "time units"), (measured, "s", "s")):
        fig, ax = plt.subplots()  # as chapter 3 draws a measured run: no memory panel
        plot_timeline(timeline, ax=ax)
        assert ax.get_xlabel() == f"time ({unit})"
        assert f"makespan = {timeline.makespan:.4g} {amount}\n" in ax.get_title()
        fig = plot_timeline(timeline, memory=True)
        assert fig.axes[1].get_xlabel() == f"time ({unit})"


def test_memory_axis_says_its_unit():
    fig = plot_timeline(TIMELINES["interleaved"], memory=True)
    assert fig.axes[1].get_ylabel() == "held (micro-batch activations\nof a full stage)"
    sized = simulate(one_f_one_b(2, 2), Costs(activation_bytes=1e6))
    fig = plot_timeline(sized, memory=True, in_bytes=True)
    assert fig.axes[1].get_ylabel() == "activations held\n(bytes)"


@pytest.mark.parametrize(
    ("build", "note"),
    [
        (lambda: interleaved_1f1b(2, 4, 2), "a chunk pass takes cost/2"),
        (lambda: interleaved_1f1b(2, 4, 3), "a chunk pass takes cost/3"),
        (lambda: zb_v(2, 4), "a chunk pass takes cost/2"),
        (lambda: dualpipe(4, 8), "a chunk pass takes the full cost"),  # two copies, p stages
    ],
)
def test_title_of_a_schedule_with_chunks_states_the_cost_convention(build, note):
    title = plot_timeline(simulate(build())).axes[0].get_title()
    assert title.endswith("\ncosts per device share (1/p of the model); " + note)


def test_title_of_one_stage_per_rank_or_a_measured_run_has_no_convention_note():
    assert "device share" not in plot_timeline(TIMELINES["1f1b"]).axes[0].get_title()
    simulated = TIMELINES["interleaved"]
    measured = Timeline.from_arrays(
        simulated.schedule, simulated.starts, simulated.ends, source="measured"
    )
    assert "device share" not in plot_timeline(measured).axes[0].get_title()
