"""ZB-H1, ZB-H2 and ZB-V against the paper's closed forms, PyTorch's orders and invariants.

Closed forms: Qi et al. 2024, arXiv:2401.10241, Table 2 (REFERENCES.md); where one step of
the simulator differs from the table, the module docstring of
ppbook.schedules.zero_bubble says so and the tests check the exact form that holds.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from bounds import lower_bounds
from hypothesis import given, settings
from hypothesis import strategies as st

from ppbook.costs import Costs
from ppbook.pytorch_csv import read_csv_text, write_csv
from ppbook.schedule import Schedule
from ppbook.schedules import build, zb_h1, zb_h2, zb_v
from ppbook.simulate import simulate
from ppbook.validate import validate

# (F, I, W) with W <= F and W <= I: the paper's condition for ZB-H1, equal and unequal.
COSTS_W_SMALL = [(1, 1, 1), (2, 3, 1), (3, 2, 1), (1, 2, 1), (2, 1, 1), (2, 2, 0.5), (3, 3, 2)]


def _costs(f, i, w, **kwargs) -> Costs:
    return Costs(F=f, I=i, W=w, **kwargs)


def _same_order(schedule: Schedule, rows: list[list[str]]) -> bool:
    return schedule.to_strings() == rows


# ----- ZB-H1 ----------------------------------------------------------------------------


def test_zb_h1_two_stages_two_microbatches_by_hand():
    schedule = zb_h1(2, 2)
    assert _same_order(
        schedule,
        [["0F0", "0F1", "0I0", "0W0", "0I1", "0W1"], ["1F0", "1I0", "1F1", "1I1", "1W0", "1W1"]],
    )
    assert simulate(schedule, _costs(1, 1, 1)).makespan == 7


@pytest.mark.parametrize(("f", "i", "w"), COSTS_W_SMALL)
def test_zb_h1_makespan_closed_form(f, i, w):
    for p in range(1, 7):
        for m in range(1, 17):
            makespan = simulate(zb_h1(p, m), _costs(f, i, w)).makespan
            if m >= p:  # Table 2, the paper's B being our I
                expected = m * (f + i + w) + (p - 1) * (f + i - w)
            else:
                expected = (m + p - 1) * (f + i) + w
            assert makespan == pytest.approx(expected), (p, m)


def test_zb_h1_saves_two_w_per_extra_stage_over_1f1b():
    for p in range(1, 6):  # F = 1, I = 2, W = 1: 1F1B runs B = I + W = 3 in one piece
        for m in range(p, p + 6):
            one_f_one_b = simulate(build("1f1b", p, m), Costs(F=1, B=3)).makespan
            assert one_f_one_b - simulate(zb_h1(p, m), _costs(1, 2, 1)).makespan == 2 * (p - 1)


def test_zb_h1_peak_activations_as_1f1b():
    for p in range(1, 7):
        for m in range(1, 14):
            timeline = simulate(zb_h1(p, m))
            assert [timeline.peak_activations(r) for r in range(p)] == [min(p, m)] * p


def test_zb_h1_is_pytorchs_zb1p_with_one_stage_per_rank():
    schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
    for p in range(1, 7):
        for m in range(1, 17):
            rounds = max(1, m // p)
            if m % rounds:
                continue  # PyTorch refuses these counts
            fake = SimpleNamespace(
                pp_group_size=p, _n_microbatches=m, n_local_stages=1, microbatches_per_round=m
            )
            cls = schedules.ScheduleInterleavedZeroBubble
            rows = [
                [str(a) for a in cls._calculate_single_rank_operations(fake, r) if a is not None]
                for r in range(p)
            ]
            assert _same_order(zb_h1(p, m), rows), (p, m)


# ----- ZB-H2 ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("f", "i", "w"), [(1, 2, 1), (2, 3, 1), (1, 3, 1), (2, 1, 0.5), (1, 1, 0.5), (3, 4, 1)]
)
def test_zb_h2_makespan_is_table_2_when_i_at_least_2w(f, i, w):
    assert w <= f and i >= 2 * w
    for p in range(1, 7):
        for m in range(2 * p - 1, 2 * p + 8):
            makespan = simulate(zb_h2(p, m), _costs(f, i, w)).makespan
            assert makespan == pytest.approx(m * (f + i + w) + (p - 1) * (f + i - 2 * w)), (p, m)


@pytest.mark.parametrize(("f", "i", "w"), [(1, 1, 1), (2, 3, 2), (3, 2, 2), (2, 1, 1)])
def test_zb_h2_makespan_when_i_below_2w_is_the_parallelogram(f, i, w):
    assert w <= f and i < 2 * w
    for p in range(1, 7):
        for m in range(2 * p - 1, 2 * p + 8):
            makespan = simulate(zb_h2(p, m), _costs(f, i, w)).makespan
            assert makespan == pytest.approx(m * (f + i + w) + (p - 1) * f), (p, m)


def test_zb_h2_equal_costs_idle_only_before_and_after():
    for p in range(1, 7):
        for m in range(2 * p - 1, 2 * p + 4):
            timeline = simulate(zb_h2(p, m), _costs(1, 1, 1))
            assert timeline.makespan == 3 * m + p - 1
            for r in range(p):  # rank r idles r before its first F and p-1-r after its last W
                gaps = []
                if r > 0:
                    gaps.append((0, r))
                if r < p - 1:
                    gaps.append((3 * m + r, 3 * m + p - 1))
                assert timeline.idle_gaps(r) == gaps, (p, m, r)


def test_zb_h2_peak_activations():
    for p in range(1, 7):
        for m in (2 * p - 1, 2 * p + 5):
            timeline = simulate(zb_h2(p, m))
            assert [timeline.peak_activations(r) for r in range(p)] == [2 * p - 1] * p


@given(st.integers(2, 10).flatmap(lambda p: st.tuples(st.just(p), st.integers(1, 2 * p - 2))))
@settings(max_examples=40, deadline=None)
def test_zb_h2_needs_2p_minus_1_microbatches(counts):
    p, m = counts
    with pytest.raises(ValueError, match=r"m >= 2p-1") as info:
        zb_h2(p, m)
    assert f"m = {m}" in str(info.value) and f"p = {p}" in str(info.value)


# ----- ZB-V -----------------------------------------------------------------------------


def test_zb_v_places_chunks_in_a_v():
    schedule = zb_v(3, 5)
    assert schedule.stage_to_rank == (0, 1, 2, 2, 1, 0)
    assert [schedule.stages_on(r) for r in range(3)] == [(0, 5), (1, 4), (2, 3)]


@pytest.mark.parametrize(("f", "i", "w"), [(1, 1, 1), (1, 2, 1), (1, 2, 0.5), (2, 3, 3), (1, 3, 1)])
def test_zb_v_makespan_closed_form(f, i, w):
    assert f <= i and w <= i
    for p in range(1, 7):
        for m in range(2 * p - 1, 2 * p + 6):
            # Costs are a device's share (two chunks): chunk passes take f, i and w.
            makespan = simulate(zb_v(p, m), _costs(2 * f, 2 * i, 2 * w)).makespan
            expected = 2 * m * (f + i + w) + (p - 1) * (i + max(0, i - 2 * w))
            assert makespan == pytest.approx(expected), (p, m)


def test_zb_v_equal_costs_any_m():
    for p in range(1, 7):
        for m in range(1, 17):
            timeline = simulate(zb_v(p, m), _costs(2, 2, 2))  # chunk passes of 1 each
            assert timeline.makespan == 6 * m + max(p - 1, 4 * p - 2 - 2 * m), (p, m)
            if m >= 2 * p - 1:  # the parallelogram: idle only before the start and after the end
                for r in range(p):
                    assert all(
                        start == 0 or end == timeline.makespan
                        for start, end in timeline.idle_gaps(r)
                    )


def test_zb_v_peak_activations():
    for p in range(1, 7):
        for m in range(1, 2 * p + 4):
            timeline = simulate(zb_v(p, m))
            peaks = [timeline.peak_activations(r) for r in range(p)]
            assert peaks[0] == min(2 * p, m + 1) / 2, (p, m)  # chunks of half a stage
            if m >= 2 * p - 1:
                assert peaks == [p] * p  # p micro-batches of a full stage, as 1F1B


def test_zb_v_is_pytorchs_zbv():
    schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
    for p in range(1, 7):
        for m in range(1, 17):
            fake = SimpleNamespace(pp_group_size=p, _n_microbatches=m, num_stages=2 * p)
            cls = schedules.ScheduleZBVZeroBubble
            rows = [
                [str(a) for a in cls._calculate_single_rank_operations(fake, r) if a is not None]
                for r in range(p)
            ]
            assert _same_order(zb_v(p, m), rows), (p, m)


# ----- all three ------------------------------------------------------------------------

# name -> (builder, least number of micro-batches for p ranks)
BUILDERS = {
    "zb-h1": (zb_h1, lambda p: 1),
    "zb-h2": (zb_h2, lambda p: 2 * p - 1),
    "zb-v": (zb_v, lambda p: 1),
}


@pytest.mark.parametrize("name", list(BUILDERS))
def test_validates_and_round_trips_through_csv(name):
    builder, least_m = BUILDERS[name]
    for p in range(1, 6):
        for m in range(least_m(p), least_m(p) + 7):
            schedule = builder(p, m)
            assert build(name, p, m).actions == schedule.actions
            validate(schedule)
            assert schedule.split_backward
            for aligned in (True, False):
                back = read_csv_text(write_csv(schedule, aligned=aligned))
                assert back.actions == schedule.actions
                assert back.stage_to_rank == schedule.stage_to_rank
                assert back.num_microbatches == m


@pytest.mark.parametrize("builder", [zb_h1, zb_h2, zb_v])
@pytest.mark.parametrize(
    ("p", "m", "rule"),
    [(0, 4, "num_stages >= 1"), (2, 0, "num_microbatches >= 1"), (2.0, 4, "integer num_stages")],
)
def test_count_rules(builder, p, m, rule):
    with pytest.raises(ValueError, match=rule):
        builder(p, m)


@given(
    name=st.sampled_from(list(BUILDERS)),
    p=st.integers(1, 6),
    extra=st.integers(0, 8),
    f=st.integers(1, 4),
    i=st.integers(1, 4),
    w=st.integers(0, 4),
    comm=st.sampled_from([0, 0.5]),
)
@settings(max_examples=60, deadline=None)
def test_makespan_at_least_busiest_rank_and_one_microbatch_chain(name, p, extra, f, i, w, comm):
    builder, least_m = BUILDERS[name]
    schedule = builder(p, least_m(p) + extra)
    costs = _costs(f, i, w, comm=comm)
    timeline = simulate(schedule, costs)
    busiest, chain = lower_bounds(schedule, costs)
    assert timeline.makespan >= busiest - 1e-9
    assert timeline.makespan >= chain - 1e-9
    assert max(timeline.busy(r) for r in range(p)) == pytest.approx(busiest)
