"""The simulator against the sympy closed forms of ppbook.symbolic, wherever those hold.

Two independent answers: the closed forms are derived symbolically (chapter 1), the
simulator times schedules built as data, action by action.
"""

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from ppbook import symbolic
from ppbook.costs import Costs
from ppbook.schedules import dualpipe, gpipe, interleaved_1f1b, one_f_one_b, zb_h1, zb_h2
from ppbook.simulate import simulate
from ppbook.symbolic.symbols import c, m, p, t_b, t_f, t_fb, t_i, t_w, v

cost = st.integers(min_value=1, max_value=6)


def value(expr, **subs):
    symbols = {
        "p": p,
        "m": m,
        "v": v,
        "t_f": t_f,
        "t_b": t_b,
        "t_i": t_i,
        "t_w": t_w,
        "c": c,
        "t_fb": t_fb,
    }
    return float(expr.subs({symbols[k]: sp.nsimplify(x) for k, x in subs.items()}))


@settings(max_examples=40, deadline=None)
@given(pp=st.integers(1, 8), mm=st.integers(1, 24), f=cost, b=cost, comm=st.integers(0, 3))
def test_gpipe_and_1f1b(pp, mm, f, b, comm):
    expected = value(symbolic.gpipe_makespan(), p=pp, m=mm, t_f=f, t_b=b)
    assert simulate(gpipe(pp, mm), Costs(F=f, B=b)).makespan == pytest.approx(expected)
    expected = value(symbolic.one_f_one_b_makespan(), p=pp, m=mm, t_f=f, t_b=b)
    one_f = simulate(one_f_one_b(pp, mm), Costs(F=f, B=b))
    assert one_f.makespan == pytest.approx(expected)
    with_comm = value(symbolic.gpipe_makespan_with_transfer(), p=pp, m=mm, t_f=f, t_b=b, c=comm)
    assert simulate(gpipe(pp, mm), Costs(F=f, B=b, comm=comm)).makespan == pytest.approx(with_comm)
    # Both bubble conventions, derived, against the simulated idle time.
    assert one_f.bubble_fraction == pytest.approx(value(symbolic.bubble_fraction(), p=pp, m=mm))
    assert one_f.bubble_ratio == pytest.approx(value(symbolic.bubble_ratio(), p=pp, m=mm))


@settings(max_examples=40, deadline=None)
@given(pp=st.integers(1, 8), mm=st.integers(1, 24))
def test_peak_activations(pp, mm):
    assert simulate(gpipe(pp, mm)).peak_activations(0) == value(
        symbolic.gpipe_peak_activations(), p=pp, m=mm
    )
    assert simulate(one_f_one_b(pp, mm)).peak_activations(0) == value(
        symbolic.one_f_one_b_peak_activations(), p=pp, m=mm
    )


@settings(max_examples=40, deadline=None)
@given(pp=st.integers(1, 6), groups=st.integers(1, 4), vv=st.integers(2, 4), f=cost, b=cost)
def test_interleaved(pp, groups, vv, f, b):
    mm = groups * pp
    # Costs of a device's share: each chunk pass takes F/v and B/v (chunk_share = 1/v).
    timeline = simulate(interleaved_1f1b(pp, mm, vv), Costs(F=f, B=b))
    expected = value(symbolic.interleaved_makespan(), p=pp, m=mm, v=vv, t_f=f, t_b=b)
    assert timeline.makespan == pytest.approx(expected)
    # Peak in full-stage units (a chunk counts 1/v of a stage), as the closed form.
    peak = value(symbolic.interleaved_peak_activations(), p=pp, m=mm, v=vv)
    assert timeline.peak_activations(0) == pytest.approx(peak)


@settings(max_examples=60, deadline=None)
@given(
    pp=st.integers(1, 7),
    extra=st.integers(0, 12),
    w=cost,
    df=st.integers(0, 3),
    di=st.integers(0, 3),
)
def test_zb_h1_when_w_at_most_f_and_i(pp, extra, w, df, di):
    mm = pp + extra  # the closed form holds for m >= p
    f, i = w + df, w + di
    timeline = simulate(zb_h1(pp, mm), Costs(F=f, I=i, W=w))
    expected = value(symbolic.zb_h1_makespan(), p=pp, m=mm, t_f=f, t_i=i, t_w=w)
    assert timeline.makespan == pytest.approx(expected)
    assert timeline.peak_activations(0) == value(symbolic.zb_h1_peak_activations(), p=pp)


@settings(max_examples=40, deadline=None)
@given(
    pp=st.integers(1, 6),
    extra=st.integers(0, 10),
    w=cost,
    df=st.integers(0, 3),
    di=st.integers(0, 3),
)
def test_zb_h2_when_i_at_least_2w(pp, extra, w, df, di):
    mm = 2 * pp - 1 + extra
    f, i = w + df, 2 * w + di
    timeline = simulate(zb_h2(pp, mm), Costs(F=f, I=i, W=w))
    expected = value(symbolic.zb_h2_makespan(), p=pp, m=mm, t_f=f, t_i=i, t_w=w)
    assert timeline.makespan == pytest.approx(expected)
    assert timeline.peak_activations(0) == value(symbolic.zb_h2_peak_activations(), p=pp)


@settings(max_examples=40, deadline=None)
@given(
    half=st.integers(1, 4),
    extra=st.integers(0, 3),
    f=cost,
    w_part=st.integers(0, 2),
    fb_extra=st.integers(0, 3),
)
def test_dualpipe_table_bubble_on_the_middle_ranks(half, extra, f, w_part, fb_extra):
    # The DualPipe table's (p/2-1)(F&B + B - 3W) holds on the middle ranks when I = F,
    # W <= F and F&B >= F + W (B = I + W is the full backward).
    pp = 2 * half
    mm = 2 * pp + 2 * extra
    w = min(w_part, f)
    fb = f + w + fb_extra
    timeline = simulate(dualpipe(pp, mm), Costs(F=f, I=f, W=w, FB=fb))
    expected = value(symbolic.dualpipe_bubble(), p=pp, t_b=f + w, t_fb=fb, t_w=w)
    for rank in (pp // 2 - 1, pp // 2):
        assert timeline.idle(rank) == pytest.approx(expected)
