"""The schedule explorer, driven without a browser through update() and its controls."""

import matplotlib

matplotlib.use("Agg")  # tests only: the package never picks a backend

import pytest  # noqa: E402

from ppbook.costs import Costs  # noqa: E402
from ppbook.schedules import SCHEDULES, interleaved_1f1b, one_f_one_b  # noqa: E402
from ppbook.simulate import simulate  # noqa: E402
from ppbook.views.gantt import KIND_COLORS  # noqa: E402
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
    want = simulate(interleaved_1f1b(4, 8, 2), Costs(F=0.5, B=1, W=0.5, comm=0.5))
    assert timeline.makespan == want.makespan
    assert explorer.figure is figure and explorer.axes is axes
    assert len(figure.axes) == 2
    assert boxes_drawn(explorer) == len(want.schedule)  # the old boxes are gone
    assert len(explorer.memory_axes.lines) == 4
    html = explorer.readout.value
    assert f"bubble fraction f = idle/total = {want.bubble_fraction:.3f}" in html
    assert f"bubble ratio r = idle/compute = {want.bubble_ratio:.3f}" in html
    peaks = [want.peak_activations(r) for r in range(4)]
    assert f"peak activations per rank (micro-batches of one chunk): {peaks}" in html


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


def test_split_backward_costs_come_from_B_and_W(explorer):
    explorer.update(
        schedule="gpipe", num_stages=3, B=2.0, W=2.5
    )  # W larger than B: I would be negative
    assert explorer.timeline is None and "negative" in explorer.error
    explorer.update(W=0.5)
    assert explorer.error is None


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
