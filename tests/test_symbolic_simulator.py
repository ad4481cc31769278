"""Every closed form of ppbook.symbolic against the simulator, on a grid within its conditions.

The simulator times schedules built as data, action by action (ppbook.simulate); the
closed forms are sympy expressions, derived or as published. Each formula of
``formulas()`` is evaluated through its checked record, at exact numbers, and compared
with what the simulator measures on the same p, m and costs. Costs follow ppbook's cost
convention: the same ``Costs`` are one device's share of the model, and the simulator
runs a chunk pass of a schedule with v chunks in cost/v.
"""

from fractions import Fraction

import pytest
import sympy as sp

import ppbook.symbolic as S
from ppbook.costs import Costs
from ppbook.schedules import (
    dualpipe,
    dualpipev,
    gpipe,
    interleaved_1f1b,
    one_f_one_b,
    zb_h1,
    zb_h2,
)
from ppbook.simulate import simulate
from ppbook.symbolic import numeric
from ppbook.symbolic.symbols import c, m, p, t_b, t_f, t_i, t_w

FORMULAS = S.formulas()
PASS_TIMES = [(1, 2), (1, 1), (3, 2), (0.5, 5)]
# (F, I, W) with W <= F and W <= I: ZB-H1's conditions; the last two have I < 2W.
ZB_H1_TIMES = [(1, 2, 1), (2, 3, 1), (3, 2, 1), (2, 4, 2), (1, 1, 1), (2, 1, 1)]
# (F, I, W) with W <= F: ZB-H2's conditions, I below and above 2W.
ZB_H2_TIMES = [*ZB_H1_TIMES, (1, 0.5, 1), (3, 1, 2), (2, 5, 2)]
# (F, W, F&B) with I = F, W <= F and F&B >= F + W: the DualPipe table's conditions.
DUALPIPE_TIMES = [(1, 1, 2), (1, 1, 3), (2, 1, 3), (2, 1, 4), (1, 0.5, 2)]


def close(a, b) -> bool:
    return a == pytest.approx(float(b), rel=1e-9, abs=1e-9)


def test_gpipe_and_1f1b_makespan_bubble_and_memory():
    for pp in range(1, 7):
        for mm in range(1, 11):
            for f, b in PASS_TIMES:
                costs = Costs(F=f, B=b)
                for build in (gpipe, one_f_one_b):
                    timeline = simulate(build(pp, mm), costs)
                    assert close(timeline.makespan, FORMULAS["gpipe_makespan"](pp, mm, f, b))
                    assert close(timeline.total_idle, FORMULAS["bubble_time"](pp, mm, f, b))
                    assert close(timeline.bubble_fraction, FORMULAS["bubble_fraction"](pp, mm))
                    assert close(timeline.bubble_ratio, FORMULAS["bubble_ratio"](pp, mm))
                    idle = S.one_f_one_b_bubble().subs({p: pp, t_f: f, t_b: b})
                    assert all(close(timeline.idle(r), idle) for r in range(pp))
                peak_gpipe = simulate(gpipe(pp, mm), costs).peak_activations(0)
                peak_1f1b = simulate(one_f_one_b(pp, mm), costs).peak_activations(0)
                assert peak_gpipe == FORMULAS["gpipe_peak_activations"](mm)
                assert peak_1f1b == FORMULAS["one_f_one_b_peak_activations"](pp, mm)
                onef = S.one_f_one_b_makespan().subs({p: pp, m: mm, t_f: f, t_b: b})
                assert close(simulate(one_f_one_b(pp, mm), costs).makespan, onef)


def test_gpipe_with_a_transfer_cost():
    for pp in range(1, 6):
        for mm in (1, 3, 8):
            for hop in (0.5, 3):
                timeline = simulate(gpipe(pp, mm), Costs(F=1, B=2, comm=hop))
                at = {p: pp, m: mm, t_f: 1, t_b: 2, c: hop}
                assert close(timeline.makespan, S.gpipe_makespan_with_transfer().subs(at))


def test_interleaved_under_the_cost_convention():
    for pp in range(1, 6):
        for vv in range(1, 4):
            for mm in (pp, 2 * pp, 3 * pp):
                for f, b in PASS_TIMES[:3]:
                    timeline = simulate(interleaved_1f1b(pp, mm, vv), Costs(F=f, B=b))
                    expected = FORMULAS["interleaved_makespan"](pp, mm, vv, f, b)
                    assert close(timeline.makespan, expected), (pp, mm, vv, f, b)
                    fraction = FORMULAS["interleaved_bubble_fraction"](pp, mm, vv)
                    ratio = FORMULAS["interleaved_bubble_ratio"](pp, mm, vv)
                    assert close(timeline.bubble_fraction, fraction)
                    assert close(timeline.bubble_ratio, ratio)
                    assert close(numeric.bubble_fraction(pp, mm, vv), fraction)
                    if vv >= 2:  # in micro-batches of a full stage: a chunk counts 1/v
                        peak = FORMULAS["interleaved_peak_activations"](pp, mm, vv)
                        assert close(timeline.peak_activations(0), peak)


def test_zb_h1_within_its_conditions():
    for pp in range(1, 7):
        for mm in range(pp, pp + 6):
            for f, i, w in ZB_H1_TIMES:
                timeline = simulate(zb_h1(pp, mm), Costs(F=f, I=i, W=w))
                expected = FORMULAS["zb_h1_makespan"](pp, mm, f, i, w)
                assert close(timeline.makespan, expected), (pp, mm, f, i, w)
                bubble = FORMULAS["zb_h1_bubble"](pp, f, i, w)
                zb1p = S.zb1p_bubble_dualpipe_notation().subs({p: pp, t_f: f, t_b: i + w, t_w: w})
                assert close(bubble, zb1p)  # the DualPipe table's ZB1P row
                for r in range(pp):
                    assert close(timeline.idle(r), bubble)
                    assert timeline.peak_activations(r) == FORMULAS["zb_h1_peak_activations"](pp)


def test_zb_h2_within_its_conditions_including_i_below_2w():
    for pp in range(1, 6):
        for mm in range(2 * pp - 1, 2 * pp + 4):
            for f, i, w in ZB_H2_TIMES:
                timeline = simulate(zb_h2(pp, mm), Costs(F=f, I=i, W=w))
                expected = FORMULAS["zb_h2_makespan"](pp, mm, f, i, w)
                assert close(timeline.makespan, expected), (pp, mm, f, i, w)
                bubble = FORMULAS["zb_h2_bubble"](pp, f, i, w)
                for r in range(pp):
                    assert close(timeline.idle(r), bubble)
                    assert timeline.peak_activations(r) == FORMULAS["zb_h2_peak_activations"](pp)


def test_zb_h2_at_equal_passes_one_step_is_not_bubble_free():
    """The issue's case: p = 4, m = 8, F = I = W = 1 takes 27, not Table 2's 24."""
    timeline = simulate(zb_h2(4, 8), Costs(F=1, I=1, W=1))
    assert timeline.makespan == 27
    assert FORMULAS["zb_h2_makespan"](p=4, m=8, t_f=1, t_i=1, t_w=1) == 27
    # I < 2W: the bubble is the parallelogram's ends, 3 F, never negative
    assert FORMULAS["zb_h2_bubble"](p=4, t_f=1, t_i=0.5, t_w=1) == 3
    assert simulate(zb_h2(4, 8), Costs(F=1, I=0.5, W=1)).idle(0) == 3


def test_dualpipe_table_on_the_middle_ranks_and_its_memory():
    for pp in (2, 4, 6):
        for mm in (2 * pp, 2 * pp + 2):
            for f, w, fb in DUALPIPE_TIMES:
                timeline = simulate(dualpipe(pp, mm), Costs(F=f, I=f, W=w, FB=fb))
                bubble = FORMULAS["dualpipe_bubble"](pp, fb, f + w, w)
                for rank in (pp // 2 - 1, pp // 2):
                    assert close(timeline.idle(rank), bubble), (pp, mm, f, w, fb)
                if fb == 2 * f + w:  # F&B = F + B: every rank idles the table's bubble
                    assert all(close(timeline.idle(r), bubble) for r in range(pp))
                for r in range(pp):
                    peak = FORMULAS["dualpipe_peak_activations"](pp)
                    assert close(timeline.peak_activations(r), peak)


def test_dualpipev_is_the_table_with_pp_2p_in_chunk_pass_times():
    for pp in (1, 2, 3):
        for f, w, fb in DUALPIPE_TIMES:
            # the device's share costs twice a chunk pass (cost convention: share 1/2)
            costs = Costs(F=2 * f, I=2 * f, W=2 * w, FB=2 * fb)
            timeline = simulate(dualpipev(pp, 2 * pp + 2), costs)
            expected = FORMULAS["dualpipe_bubble"](2 * pp, fb, f + w, w)
            assert close(timeline.idle(pp - 1), expected), (pp, f, w, fb)
            chunks = FORMULAS["dualpipe_peak_activations"](2 * pp)  # in chunks of 1/2
            assert close(timeline.peak_activations(pp - 1), Fraction(chunks, 2))


NAMES = {"fraction": "min_microbatches_fraction", "ratio": "min_microbatches_ratio"}


@pytest.mark.parametrize("convention", ["fraction", "ratio"])
def test_sizing_inverses_give_the_smallest_m_the_simulator_accepts(convention):
    def simulated(pp, mm, vv):
        schedule = interleaved_1f1b(pp, mm, vv) if vv > 1 else one_f_one_b(pp, mm)
        timeline = simulate(schedule, Costs(F=1, B=2))
        return getattr(timeline, f"bubble_{convention}")

    for pp in (2, 3, 4):
        for target in (0.1, 0.25, 0.5):
            for vv in (1, 2):
                smallest = numeric.min_microbatches(pp, target, convention, vv)
                step = pp if vv > 1 else 1
                assert simulated(pp, smallest, vv) <= target + 1e-12
                if smallest > step:
                    assert simulated(pp, smallest - step, vv) > target
                bound = FORMULAS[NAMES[convention]](pp, target, vv)
                assert smallest == max(1, -(-bound // step) * step)


def test_gpipe_rule_of_thumb_against_the_simulator():
    for pp in range(1, 9):
        timeline = simulate(one_f_one_b(pp, 4 * pp), Costs(F=1, B=2))
        assert close(timeline.bubble_fraction, FORMULAS["bubble_fraction_at_4p"](pp))


def test_every_formula_is_covered_here():
    """A new formula in the registry needs a comparison with the simulator in this file."""
    source = open(__file__, encoding="utf-8").read()
    for name in FORMULAS:
        assert f'"{name}"' in source, name


def test_outside_their_conditions_the_formulas_are_wrong_and_refused():
    # ZB-H2 with W > F: the simulated step is not the formula's
    timeline = simulate(zb_h2(3, 6), Costs(F=1, I=3, W=2))
    unchecked = FORMULAS["zb_h2_makespan"].function(3, 6, 1, 3, 2)
    assert timeline.makespan != pytest.approx(unchecked)
    with pytest.raises(ValueError, match=r"zb_h2_makespan needs t_w <= t_f"):
        FORMULAS["zb_h2_makespan"](3, 6, 1, 3, 2)
    # DualPipe with W > F: the table's value is negative, the idle time is not
    assert FORMULAS["dualpipe_bubble"].function(4, 1, 1.5, 1) == -0.5
    timeline = simulate(dualpipe(4, 8), Costs(F=0.5, I=0.5, W=1, FB=1))
    assert min(timeline.idle(r) for r in (1, 2)) > 0
    with pytest.raises(ValueError, match=r"dualpipe_bubble needs t_b >= 2 t_w"):
        FORMULAS["dualpipe_bubble"](p=4, t_fb=1, t_b=1, t_w=1)


def test_the_issue_example_of_a_negative_zb_h2_bubble_is_gone():
    assert FORMULAS["zb_h2_bubble"](p=4, t_f=1, t_i=0.5, t_w=1) >= 0
    expr = S.zb_h2_bubble().subs({p: 4, t_f: 1, t_i: sp.Rational(1, 2), t_w: 1})
    assert expr == 3
