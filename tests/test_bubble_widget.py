"""Chapter 1's bubble explorer and plots: moving a slider updates numbers and curves."""

import matplotlib.pyplot as plt
import pytest
from widget_layout import check_controls, check_picture

from ppbook.symbolic.numeric import bubble_fraction, bubble_ratio
from ppbook.views.bubble import (
    bubble_curve,
    plot_bubble_vs_microbatches,
)
from ppbook.widgets.bubble import BubbleExplorer, bubble_explorer


def shown(explorer):
    """The numbers the explorer shows: readout text, marker heights, curve heights."""
    markers = {k: float(line.get_ydata()[0]) for k, line in explorer.markers.items()}
    curves = {k: list(line.get_ydata()) for k, line in explorer.curves.items()}
    return explorer.readout.value, markers, curves


def test_explorer_starts_at_the_worked_example():
    explorer = bubble_explorer()
    assert isinstance(explorer, BubbleExplorer)
    text, markers, _ = shown(explorer)
    assert "p = 8, m = 32" in text
    assert "7/39 = <b>0.1795</b>" in text
    assert "7/32 = <b>0.2188</b>" in text
    assert markers == {"fraction": bubble_fraction(8, 32), "ratio": bubble_ratio(8, 32)}
    assert bytes(explorer.image.value).startswith(b"\x89PNG")


def test_moving_the_sliders_updates_numbers_and_plot():
    explorer = bubble_explorer(max_microbatches=40)
    before = bytes(explorer.image.value)
    explorer.stages_slider.value = 4
    explorer.microbatches_slider.value = 12
    text, markers, curves = shown(explorer)
    assert "p = 4, m = 12" in text
    assert "1/5 = <b>0.2000</b>" in text
    assert "1/4 = <b>0.2500</b>" in text
    assert markers == {"fraction": bubble_fraction(4, 12), "ratio": bubble_ratio(4, 12)}
    assert list(explorer.markers["ratio"].get_xdata()) == [12]
    assert curves["fraction"] == [bubble_fraction(4, mm) for mm in range(1, 41)]
    assert curves["ratio"] == [bubble_ratio(4, mm) for mm in range(1, 41)]
    assert "p = 4 stages" in explorer.axes.get_title()
    assert bytes(explorer.image.value) != before


def test_legend_says_which_convention_each_line_shows():
    explorer = bubble_explorer()
    labels = [t.get_text() for t in explorer.axes.get_legend().get_texts()]
    assert labels == ["bubble fraction f = (p-1)/(m+p-1)", "bubble ratio r = (p-1)/m"]


def test_explorer_rejects_starting_values_off_the_sliders():
    with pytest.raises(ValueError, match="num_stages p <= max_stages = 16"):
        bubble_explorer(num_stages=20, max_stages=16)
    with pytest.raises(ValueError, match="num_microbatches m >= 1, got 0"):
        bubble_explorer(num_microbatches=0)


def test_plot_bubble_vs_microbatches_draws_both_conventions():
    fig, ax = plt.subplots()
    lines = plot_bubble_vs_microbatches(ax, stages=(2, 8), max_microbatches=16)
    assert set(lines) == {("fraction", 2), ("ratio", 2), ("fraction", 8), ("ratio", 8)}
    assert list(lines["ratio", 8].get_ydata()) == [7 / mm for mm in range(1, 17)]
    assert lines["fraction", 8].get_ydata()[0] == bubble_fraction(8, 1)
    assert lines["fraction", 8].get_label() == "p = 8, fraction f"
    plt.close(fig)
    with pytest.raises(ValueError, match="convention"):
        bubble_curve("percent", 4, [1])


def test_ratio_above_one_stays_in_view():
    explorer = bubble_explorer(num_stages=8, num_microbatches=4)
    r = bubble_ratio(8, 4)
    assert r == 1.75
    assert explorer.axes.get_ylim()[1] >= r  # the dashed curve's dot is visible
    explorer.microbatches_slider.value = 32
    assert explorer.axes.get_ylim() == (0, 1)


def test_layout_wraps_controls_and_shows_a_sharp_picture():
    explorer = bubble_explorer()
    controls = explorer.children[0]
    assert len(controls.children) == 4  # p, m, v and the target
    check_controls(controls)
    check_picture(explorer.image)


def test_chunks_make_m_step_by_p_and_use_the_interleaved_formulas():
    explorer = bubble_explorer(num_stages=8, num_microbatches=30)
    slider = explorer.microbatches_slider
    explorer.chunks_slider.value = 2
    assert (slider.min, slider.step, slider.value) == (8, 8, 32)  # 30 up to a multiple of 8
    assert slider.max == 128
    text = explorer.readout.value
    assert "m must be a multiple of p = 8" in text and "steps by 8" in text
    assert "7/71 = <b>0.0986</b>" in text  # f = (p-1)/(vm+p-1) = 7/(64+7)
    assert "7/64 = <b>0.1094</b>" in text  # r = (p-1)/(vm)
    assert list(explorer.curves["fraction"].get_xdata()) == list(range(8, 129, 8))
    explorer.stages_slider.value = 5
    assert (slider.min, slider.step, slider.max, slider.value) == (5, 5, 125, 35)
    explorer.chunks_slider.value = 1
    assert (slider.min, slider.step, slider.value) == (1, 1, 35)
    assert "multiple" not in explorer.readout.value


def test_target_gives_the_smallest_m_that_meets_it():
    explorer = bubble_explorer(num_stages=8, num_microbatches=32, target=0.1)
    # f = 7/(m+7) <= 1/10 first at m + 7 = 70.
    assert "the smallest m with f &lt;= b is <b>m = 63</b>" in explorer.readout.value
    assert "m = 32 does not meet it yet" in explorer.readout.value
    assert list(explorer.needed_line.get_xdata()) == [63, 63]
    assert list(explorer.target_line.get_ydata()) == [0.1, 0.1]
    explorer.target_slider.value = 0.2  # 7/(m+7) <= 1/5 at m = 28
    assert "<b>m = 28</b>" in explorer.readout.value and "m = 32 meets it" in explorer.readout.value
    explorer.chunks_slider.value = 2  # 7/(2m+7) <= 1/5 at m = 14, a multiple of 8: 16
    assert "<b>m = 16</b>" in explorer.readout.value


def test_timeline_ramps_shrink_as_m_grows():
    explorer = bubble_explorer(num_stages=4, num_microbatches=2)
    ramps = []
    for m in (2, 8, 32):
        explorer.microbatches_slider.value = m
        makespan = (m + 4 - 1) * 3  # GPipe at t_f = 1, t_b = 2
        assert explorer.timeline.makespan == makespan
        assert explorer.timeline.bubble_fraction == pytest.approx(3 / (m + 3))
        # per rank: idle lane, forward bars, backward bars; the last rank's first forward
        # starts after the ramp of (p-1) t_f
        forwards = explorer.timeline_axes.collections[3 * 3 + 1]
        start = min(path.vertices[:, 0].min() for path in forwards.get_paths())
        assert start == pytest.approx(3 / makespan)
        ramps.append(start)
    assert ramps[0] > ramps[1] > ramps[2]
    assert "idle grey = 8.6% of the step" in explorer.timeline_axes.get_title()  # 3/35


def test_update_sets_several_sliders_and_refuses_what_they_cannot_take():
    explorer = bubble_explorer(num_stages=8, num_microbatches=32)
    explorer.update(num_stages=4, num_chunks=2, num_microbatches=12, target=0.2)
    text = explorer.readout.value
    assert "p = 4, m = 12, v = 2" in text
    assert "(p-1)/(vm+p-1) = 1/9 = <b>0.1111</b>" in text  # 3/(2 * 12 + 3)
    assert explorer.microbatches_slider.step == 4
    with pytest.raises(ValueError, match="m must be a multiple of p = 4"):
        explorer.update(num_microbatches=10)
    with pytest.raises(ValueError, match="m must be a multiple of p = 5"):
        explorer.update(num_stages=5, num_microbatches=12)  # p is set before m is refused
    assert explorer.state == {"num_stages": 4, "num_microbatches": 12, "num_chunks": 2,
                              "target": 0.2}  # fmt: skip
    assert explorer.microbatches_slider.step == 4
    with pytest.raises(ValueError, match=r"stages p must be in 1\.\.32, got 40"):
        explorer.update(num_stages=40)
    with pytest.raises(ValueError, match="unknown control"):
        explorer.update(p=4)
    assert "p = 4, m = 12, v = 2" in explorer.readout.value  # unchanged by the refusals
