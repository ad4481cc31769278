"""Chapter 4's zb-auto explorer, driven without a browser through update() and its controls.

The expected numbers are worked out by hand from the closed forms of ZB-H1 and ZB-H2 at
F = I = W = 1 (the Zero Bubble paper's Table 2 and the one-step parallelogram), never by
calling the widget's own code.
"""

import matplotlib

matplotlib.use("Agg")  # tests only: the package never picks a backend

import pytest  # noqa: E402
from widget_layout import check_controls, check_picture  # noqa: E402

from ppbook.widgets.zero_bubble import (  # noqa: E402
    LIMIT_COLOR,
    ZeroBubbleExplorer,
    zero_bubble_explorer,
)

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def explorer():
    return zero_bubble_explorer(memory_limit=4, num_stages=4, num_microbatches=8)


def peaks(explorer):
    timeline = explorer.timeline
    return [timeline.peak_activations(rank) for rank in range(timeline.num_ranks)]


def test_is_a_box_of_widgets_showing_zb_auto(explorer):
    assert isinstance(explorer, ZeroBubbleExplorer)
    assert explorer.error is None
    assert explorer.timeline.schedule.name == "zb-auto"
    assert bytes(explorer.image.value).startswith(PNG)
    assert explorer.state == {
        "memory_limit": 4,
        "num_stages": 4,
        "num_microbatches": 8,
        "F": 1.0,
        "I": 1.0,
        "W": 1.0,
        "comm": 0.0,
    }
    assert explorer.figure.get_figwidth() <= 8  # the notebook column


@pytest.mark.parametrize("limit", range(1, 9))  # 1 to 2p
def test_every_limit_is_kept_and_drawn(explorer, limit):
    explorer.update(memory_limit=limit)
    assert explorer.error is None
    assert max(peaks(explorer)) <= limit
    assert list(explorer.limit_line.get_ydata()) == [limit, limit]
    assert explorer.limit_line.get_color() == LIMIT_COLOR
    assert f"limit K = {limit}" in explorer.readout.value


def test_readout_names_both_bubble_measures_and_the_units(explorer):
    timeline = explorer.update(memory_limit=4)
    html = explorer.readout.value
    assert f"bubble fraction f = idle/total = {timeline.bubble_fraction:.3f}" in html
    assert "bubble rate 1 - m(F+I+W)/longest span" in html
    assert f"<b>{timeline.zb_bubble_rate:.3f}</b>" in html
    assert f"makespan = {timeline.makespan:.4g} time units" in html
    shown = ", ".join(f"{peak:.3g}" for peak in peaks(explorer))
    assert f"peak activations per rank (micro-batch activations of a full stage): [{shown}]" in html
    assert "F = 1, I = 1, W = 1, c = 0 time units" in html
    assert explorer.memory_axes.get_xlabel() == "time (time unit)"


def test_at_p_and_2p_minus_1_no_worse_than_the_handcrafted_schedules(explorer):
    # p = 4, m = 8, F = I = W = 1. ZB-H1: makespan m(F+I+W) + (p-1)(F+I-W) = 27, every rank
    # spans it, rate 1 - 24/27 = 1/9. ZB-H2: the same 27 in one step, but rank r spans only
    # m(F+I+W) = 24 (it starts rF late and ends (p-1-r)F early): rate 0.
    one_p = explorer.update(memory_limit=4)
    assert one_p.makespan <= 27 and one_p.zb_bubble_rate <= 1 / 9 + 1e-12
    assert "ZB-H1 (K = p = 4): makespan 27 time units, f = 0.111, rate = 0.111" in (
        explorer.readout.value
    )
    two_p = explorer.update(memory_limit=7)
    assert two_p.makespan <= 27 and two_p.zb_bubble_rate <= 1e-12
    assert "ZB-H2 (K = 2p-1 = 7): makespan 27 time units, f = 0.111, rate = 0.000" in (
        explorer.readout.value
    )


def test_more_memory_never_raises_the_rate(explorer):
    rates = [explorer.update(memory_limit=k).zb_bubble_rate for k in range(1, 13)]
    assert all(b <= a + 1e-12 for a, b in zip(rates, rates[1:], strict=False))
    assert rates[-1] < rates[0]


def test_the_limit_slider_follows_p(explorer):
    slider = explorer.controls["memory_limit"]
    explorer.update(num_stages=4, memory_limit=10)
    assert slider.max == 12  # 3p
    explorer.update(num_stages=2)
    assert slider.max == 6 and slider.value == 6  # K kept within the new range
    assert max(peaks(explorer)) <= 6
    explorer.controls["num_stages"].value = 3  # a slider move, as in a browser
    assert slider.max == 9 and explorer.timeline.num_ranks == 3
    explorer.update(num_stages=4, memory_limit=4)


def test_moving_a_slider_redraws(explorer):
    explorer.update(num_stages=4, num_microbatches=8, memory_limit=4)
    before = bytes(explorer.image.value)
    explorer.controls["memory_limit"].value = 7
    assert explorer.timeline.zb_bubble_rate <= 1e-12
    assert bytes(explorer.image.value) != before
    explorer.controls["num_microbatches"].value = 3  # ZB-H2 needs m >= 2p-1 = 7
    assert explorer.timeline.schedule.num_microbatches == 3
    assert "ZB-H2 needs m >= 2p-1 = 7" in explorer.readout.value
    explorer.update(num_microbatches=8)


def test_costs_reach_the_scheduler_and_the_simulator(explorer):
    timeline = explorer.update(memory_limit=4, F=1.0, I=2.0, W=0.5, comm=0.25)
    durations = {iv.action.kind: iv.duration for row in timeline.intervals for iv in row}
    assert durations == {"F": 1.0, "I": 2.0, "W": 0.5}
    assert "c = 0.25" in explorer.readout.value
    explorer.update(F=1.0, I=1.0, W=1.0, comm=0.0)


def test_bad_update_arguments_are_value_errors(explorer):
    with pytest.raises(ValueError, match="unknown control"):
        explorer.update(limit=4)
    with pytest.raises(ValueError, match="must be in 1..32"):
        explorer.update(num_microbatches=33)
    with pytest.raises(ValueError, match=r"memory limit K must be in 1..12"):
        explorer.update(memory_limit=13)


def test_layout_wraps_controls_and_shows_a_sharp_picture(explorer):
    controls = explorer.children[0]
    assert len(controls.children) == len(explorer.controls)
    check_controls(controls)
    explorer.update(memory_limit=4)
    check_picture(explorer.image)
