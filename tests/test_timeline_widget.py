"""The schedule explorer, driven without a browser through update() and its controls."""

import matplotlib

matplotlib.use("Agg")  # tests only: the package never picks a backend

import re  # noqa: E402
from itertools import product  # noqa: E402

import pytest  # noqa: E402
from widget_layout import check_controls, check_picture  # noqa: E402

from ppbook.costs import Costs  # noqa: E402
from ppbook.schedules import SCHEDULES, build, one_f_one_b, zb_h1  # noqa: E402
from ppbook.simulate import simulate  # noqa: E402
from ppbook.views.colors import KIND_COLORS  # noqa: E402
from ppbook.widgets.compare import (  # noqa: E402
    CLOSED_FORMS,
    closed_form_html,
    microbatch_steps,
    stage_steps,
)
from ppbook.widgets.timeline import ScheduleExplorer, _hint, schedule_explorer  # noqa: E402

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


def test_rejected_setting_keeps_the_pictures_space_and_names_a_reachable_value(explorer):
    explorer.update(schedule="zb-h1", num_stages=4, num_microbatches=8, F=1.0, B=2.0, W=1.0)
    before = bytes(explorer.image.value)
    assert explorer.update(W=2.5) is None  # W is the part of B: I = B - W < 0
    assert "negative" in explorer.error and "negative" in explorer.readout.value
    assert "move W to at most B = 2" in explorer.readout.value  # the W slider reaches 2
    assert "--" not in explorer.readout.value  # no command-line flags
    layout = explorer.image.layout
    assert layout.visibility == "hidden" and layout.display is None  # hidden, space kept
    assert layout.width == "750px" and bytes(explorer.image.value) == before
    assert explorer.update(W=1.0) is not None  # and it recovers
    assert explorer.error is None
    check_picture(explorer.image)


def test_interleaving_makes_the_m_slider_step_by_p(explorer):
    slider = explorer.controls["num_microbatches"]
    explorer.update(schedule="1f1b", num_stages=4, num_microbatches=6)
    assert (slider.min, slider.step, slider.max) == (1, 1, 64)
    explorer.update(schedule="interleaved-1f1b")
    assert (slider.min, slider.step, slider.max, slider.value) == (4, 4, 64, 8)  # 6 up to 8
    assert explorer.error is None
    assert (
        "the m slider offers interleaved-1f1b the multiples of p = 4, which PyTorch always "
        "runs: 4, 8, ..., 64" in explorer.readout.value
    )
    explorer.controls["num_stages"].value = 5  # a slider move, as in a browser
    assert (slider.min, slider.step, slider.max, slider.value) == (5, 5, 60, 10)
    assert explorer.timeline.schedule.num_microbatches == 10
    with pytest.raises(ValueError, match="must be in 5..60 in steps of 5 for interleaved-1f1b"):
        explorer.update(num_microbatches=12)
    explorer.update(schedule="dualpipe")  # p even, m even and m >= 2p
    p_slider = explorer.controls["num_stages"]
    assert (p_slider.min, p_slider.step, p_slider.value) == (2, 2, 6)
    assert (slider.min, slider.step, slider.value) == (12, 2, 12)
    assert "dualpipe takes p even (the p slider steps by 2) and m even and at least 2p = 12" in (
        explorer.readout.value
    )
    explorer.update(schedule="gpipe")
    assert (p_slider.min, p_slider.step, slider.min, slider.step) == (1, 1, 1, 1)


@pytest.mark.parametrize("name", [n for n in SCHEDULES if n != "zb-auto"])
def test_every_value_the_sliders_offer_builds(name):
    # The builders are the judges: every (p, m) the sliders offer is accepted, and the value
    # just below the m slider's start is refused.
    chunks = 2 if SCHEDULES[name].chunks == "any" else None
    p_low, p_step = stage_steps(name)
    for p in range(p_low, 17, p_step):
        low, step = microbatch_steps(name, p)
        offered = range(low, 65, step)
        for m in [*offered[:3], offered[-1]]:  # the first few and the last
            build(name, p, m, chunks)
        if low > 1 and SCHEDULES[name].chunks != "any":
            with pytest.raises(ValueError):
                build(name, p, low - 1, chunks)
    if p_low > 1:
        with pytest.raises(ValueError):
            build(name, p_low - 1, 4, chunks)


def test_layout_wraps_controls_and_shows_a_sharp_picture(explorer):
    controls = explorer.children[0]
    assert len(controls.children) == len(explorer.controls)
    check_controls(controls)
    explorer.update(schedule="1f1b", num_stages=4, num_microbatches=8, W=1.0)
    check_picture(explorer.image)
    assert "ScheduleExplorer" in repr(explorer)


def test_closed_form_against_simulated_says_where_a_formula_holds(explorer):
    explorer.update(
        schedule="zb-h1", num_stages=3, num_microbatches=9, F=1.0, B=2.0, W=0.5, comm=0.0
    )
    # m(F+I+W) + (p-1)(F+I-W) with I = 1.5: 9 * 3 + 2 * 2 = 31
    text = explorer.closed_form.value
    assert "closed form m(F+I+W) + (p-1)(F+I-W) with I = B - W = 31 time units" in text
    assert "simulated makespan = 31 time units" in text
    assert "formula holds: yes (needs W &lt;= F and W &lt;= I and m &gt;= p and c = 0" in text
    explorer.update(B=3.0, W=1.5)  # W > F: 9 * 4 + 2 * 1 = 38, but the simulator takes longer
    want = simulate(zb_h1(3, 9), Costs(F=1.0, I=1.5, W=1.5)).makespan
    assert want > 38
    text = explorer.closed_form.value
    assert "= 38 time units" in text and f"simulated makespan = {want:.4g} time units" in text
    assert "formula holds: no (needs W &lt;= F)" in text
    explorer.update(schedule="gpipe", comm=0.5)  # (m+p-1)(F+B) = 11 * 4 = 44, plus transfers
    text = explorer.closed_form.value
    assert "(m+p-1)(F+B) = 44 time units" in text
    assert "formula holds: no (needs c = 0 (no transfer time))" in text
    explorer.update(schedule="looped-bfs", comm=0.0)
    assert "no closed form in ppbook.symbolic for looped-bfs" in explorer.closed_form.value


@pytest.mark.parametrize("name", list(CLOSED_FORMS))
def test_where_the_readout_says_a_formula_holds_it_gives_the_simulated_makespan(name):
    held = 0
    for p, m, F, B, W in product((2, 4), (8, 12), (1.0, 0.5), (2.0, 1.2), (0.5, 1.0)):
        if name == "interleaved-1f1b" and m % p:
            continue
        state = {"num_stages": p, "num_microbatches": m, "num_chunks": 2}
        state |= {"schedule": name, "F": F, "B": B, "W": W, "comm": 0.0}
        want = simulate(
            build(name, p, m, 2 if name == "interleaved-1f1b" else None),
            Costs(F=F, I=B - W, W=W) if name.startswith("zb") else Costs(F=F, B=B),
        )
        text = closed_form_html(want, state)
        if "formula holds: yes" in text:
            held += 1
            closed, simulated = re.findall(r"= ([\d.]+) time units", text)
            assert float(closed) == pytest.approx(want.makespan, rel=1e-3)
            assert float(simulated) == pytest.approx(want.makespan, rel=1e-3)
    assert held > 0


def test_schedules_side_by_side_on_the_same_costs(explorer):
    explorer.update(
        schedule="1f1b", num_stages=4, num_microbatches=8, num_chunks=2, F=1.0, B=2.0, W=1.0
    )
    rows = dict(
        re.findall(
            r"<tr style='[^']*'><td [^>]*>([\w-]+)</td>(.*?)</tr>", explorer.comparison.value
        )
    )
    assert list(rows) == list(SCHEDULES)
    cells = {name: re.findall(r">([^<>]*)</td>", row) for name, row in rows.items()}
    # v, makespan, f, r, ZB rate, peak; by hand: GPipe and 1F1B (m+p-1)(F+B) = 33, f = 3/11,
    # r = 3/8; GPipe holds all m = 8 micro-batches, 1F1B p = 4; interleaved with v = 2:
    # m(F+B) + (p-1)(F+B)/2 = 28.5; ZB-H1: m(F+I+W) + (p-1)(F+I-W) = 27.
    assert cells["gpipe"] == ["1", "33", "0.273", "0.375", "0.273", "8"]
    assert cells["1f1b"][:2] == ["1", "33"] and cells["1f1b"][-1] == "4"
    assert cells["interleaved-1f1b"][:2] == ["2", "28.5"]
    assert cells["zb-h1"][:2] == ["1", "27"]
    bold = re.findall(r"font-weight:bold;'><td [^>]*>([\w-]+)<", explorer.comparison.value)
    assert bold == ["1f1b"]  # the current schedule
    explorer.update(num_microbatches=5)  # zb-h2 needs m >= 2p-1 = 7
    assert "zb-h2 needs num_microbatches &gt;= 2 * num_stages - 1" in explorer.comparison.value


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


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_a_refusals_rule_names_no_command_line_flag(name):
    state = {"schedule": name, "W": 1.0, "B": 2.0}
    assert "--" not in _hint(state) and "default" not in _hint(state)
    assert _hint(state).startswith(f"the rule of {name}: ")
