"""Chapter 1's bubble explorer and plots: moving a slider updates numbers and curves."""

import matplotlib.pyplot as plt
import pytest

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
