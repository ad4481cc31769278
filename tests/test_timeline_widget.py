"""The schedule explorer, driven without a browser through update() and its controls."""

import matplotlib

matplotlib.use("Agg")  # tests only: the package never picks a backend

import pytest  # noqa: E402

from ppbook.costs import Costs  # noqa: E402
from ppbook.schedules import SCHEDULES, one_f_one_b  # noqa: E402
from ppbook.simulate import simulate  # noqa: E402
from ppbook.views.colors import KIND_COLORS  # noqa: E402
from ppbook.widgets.timeline import ScheduleExplorer, schedule_explorer  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def explorer():
    return schedule_explorer(schedule="1f1b", num_stages=4, num_microbatches=8)


def boxes_drawn(explorer):
    return sum(
        len(c.get_paths()) for c in explorer.axes.collections if c.get_label() in KIND_COLORS
    )


def test_is_a_box_of_widgets_showing_the_first_timeline(explorer):
    assert isinstance(explorer, ScheduleExplorer)
    assert explorer.error is None
    want = simulate(one_f_one_b(4, 8), Costs(F=1, B=2, W=1))
    assert explorer.timeline.starts == want.starts and explorer.timeline.ends == want.ends
    assert bytes(explorer.image.value).startswith(PNG)
    assert boxes_drawn(explorer) == len(want.schedule)
    assert explorer.state == {
        "schedule": "1f1b",
        "num_stages": 4,
        "num_microbatches": 8,
        "num_chunks": 1,
        "F": 1.0,
        "B": 2.0,
        "W": 1.0,
        "comm": 0.0,
    }


def test_update_simulates_and_redraws_in_the_same_figure(explorer):
    figure, axes = explorer.figure, explorer.axes
    timeline = explorer.update(
        schedule="interleaved-1f1b", num_stages=4, num_microbatches=8, num_chunks=2, comm=0.5
    )
    # The sliders time 1/p of the model: each of the v = 2 chunk passes takes half.
    durations = {
        kind: {iv.duration for row in timeline.intervals for iv in row if iv.action.kind == kind}
        for kind in ("F", "B")
    }
    assert durations == {"F": {0.5}, "B": {1.0}}
    assert explorer.figure is figure and explorer.axes is axes
    assert len(figure.axes) == 2
    assert boxes_drawn(explorer) == len(timeline.schedule)  # the old boxes are gone
    assert len(explorer.memory_axes.lines) == 4
    html = explorer.readout.value
    assert f"bubble fraction f = idle/total = {timeline.bubble_fraction:.3f}" in html
    assert f"bubble ratio r = idle/compute = {timeline.bubble_ratio:.3f}" in html
    peaks = ", ".join(f"{timeline.peak_activations(r):.3g}" for r in range(4))
    assert f"peak activations per rank (micro-batch activations of a full stage): [{peaks}]" in html


def test_readout_and_axes_state_the_units_and_the_cost_convention(explorer):
    explorer.update(schedule="interleaved-1f1b", num_stages=4, num_microbatches=8, num_chunks=2)
    html = explorer.readout.value
    assert "costs per device share (1/p of the model); a chunk pass takes cost/2" in html
    assert f"makespan = {explorer.timeline.makespan:.4g} time unit" in html
    assert explorer.memory_axes.get_xlabel() == "time (time unit)"
    assert "micro-batch activations\nof a full stage" in explorer.memory_axes.get_ylabel()
    explorer.update(schedule="zb-v")
    assert "a chunk pass takes cost/2" in explorer.readout.value
    explorer.update(schedule="1f1b")
    assert "a chunk pass takes the full cost" in explorer.readout.value


def test_rejected_combination_shows_the_rule_instead_of_crashing(explorer):
    assert explorer.update(schedule="interleaved-1f1b", num_stages=4, num_microbatches=6) is None
    assert "multiple of num_stages" in explorer.error
    assert "multiple of num_stages" in explorer.readout.value
    assert explorer.image.layout.display == "none"
    assert explorer.update(num_microbatches=8) is not None  # and it recovers
    assert explorer.error is None and explorer.image.layout.display is None


def test_chunks_slider_only_for_schedules_that_take_chunks(explorer):
    slider = explorer.controls["num_chunks"]
    explorer.update(schedule="interleaved-1f1b", num_stages=2, num_microbatches=4, num_chunks=3)
    assert not slider.disabled and explorer.timeline.schedule.num_stages == 6
    explorer.update(schedule="gpipe")
    assert slider.disabled and slider.value == 1
    two = next(name for name, spec in SCHEDULES.items() if spec.chunks == "two")
    explorer.update(schedule=two)
    assert slider.disabled and slider.value == 2
    explorer.update(schedule="looped-bfs")
    assert not slider.disabled and slider.value == 3  # the reader's choice comes back


def test_moving_a_slider_redraws(explorer):
    explorer.update(schedule="gpipe", num_stages=3, num_microbatches=4, F=1.0, B=2.0, comm=0.0)
    explorer.controls["num_microbatches"].value = 6
    assert explorer.timeline.schedule.num_microbatches == 6
    assert explorer.timeline.makespan == (6 + 3 - 1) * (1 + 2)  # (m+p-1)(F+B)
    explorer.controls["B"].value = 1.0
    assert explorer.timeline.makespan == (6 + 3 - 1) * (1 + 1)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_schedules_that_never_split_the_backward_take_any_w(schedule):
    # W is a part of B only for schedules that split it; these run B whole, whatever W says.
    p, m = 3, 4
    explorer = schedule_explorer(schedule=schedule, num_stages=p, num_microbatches=m, W=1.0)
    for F, B, W in ((1.0, 0.5, 1.0), (1.0, 2.0, 2.5), (0.5, 0.1, 4.0)):
        timeline = explorer.update(F=F, B=B, W=W)
        assert explorer.error is None
        assert timeline.makespan == pytest.approx((m + p - 1) * (F + B))  # (m+p-1)(F+B)
        assert {a.kind for row in timeline.schedule.actions for a in row} == {"F", "B"}


def test_split_backward_costs_come_from_B_and_W(explorer):
    explorer.update(schedule="zb-h1", num_stages=3, num_microbatches=6, F=1.0, B=2.0, W=0.5)
    assert explorer.error is None
    durations = {iv.action.kind: iv.duration for row in explorer.timeline.intervals for iv in row}
    assert durations == {"F": 1.0, "I": 1.5, "W": 0.5}  # I = B - W
    explorer.update(W=2.5)  # W larger than B: I would be negative
    assert explorer.timeline is None and "negative" in explorer.error


def test_one_f_one_b_with_a_short_backward_as_the_issue_reported():
    explorer = schedule_explorer(schedule="1f1b")
    explorer.update(B=0.5)
    assert explorer.error is None
    assert explorer.timeline.makespan == pytest.approx((8 + 4 - 1) * (1.0 + 0.5))


def test_bad_update_arguments_are_value_errors(explorer):
    with pytest.raises(ValueError, match="unknown control"):
        explorer.update(stages=4)
    with pytest.raises(ValueError, match="must be in 1..64"):
        explorer.update(num_microbatches=65)
    with pytest.raises(ValueError, match="unknown schedule"):
        explorer.update(schedule="nope")


def test_more_chunks_shrink_the_bubble_as_in_the_chapter(explorer):
    spans = [
        explorer.update(
            schedule="interleaved-1f1b",
            num_stages=4,
            num_microbatches=8,
            num_chunks=v,
            F=1.0,
            B=2.0,
            comm=0.0,
        ).makespan
        for v in (1, 2, 4)
    ]
    assert spans == [8 * 3 + 3 * 3, 8 * 3 + 3 * 3 / 2, 8 * 3 + 3 * 3 / 4]  # m(F+B)+(p-1)(F+B)/v


def test_memory_panel_follows_the_peak(explorer):
    explorer.update(schedule="1f1b", num_stages=16, num_microbatches=64)
    assert explorer.memory_axes.get_ylim()[1] >= 16
    explorer.update(num_stages=2, num_microbatches=4)
    assert 2 <= explorer.memory_axes.get_ylim()[1] < 4


def test_w_slider_only_for_schedules_that_split_the_backward(explorer):
    explorer.update(schedule="1f1b", num_stages=4, num_microbatches=8, W=1.0)
    assert explorer.controls["W"].disabled
    explorer.update(schedule="zb-h1")
    assert not explorer.controls["W"].disabled
