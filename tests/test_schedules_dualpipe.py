"""DualPipe and DualPipeV against DeepSeek's table, PyTorch's DualPipeV order and invariants.

Table: deepseek-ai/DualPipe README and DeepSeek-V3 report (arXiv:2412.19437) Table 2, as
quoted in REFERENCES.md: bubble (PP/2-1)(F&B+B-3W), activations PP+1 per device. The
conditions under which the simulator reproduces it are in ppbook.schedules.dualpipe.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from bounds import lower_bounds
from hypothesis import given, settings
from hypothesis import strategies as st

from ppbook.costs import Costs
from ppbook.pytorch_csv import read_csv_text, write_csv
from ppbook.schedule import Action, OverlapFB, parse_action
from ppbook.schedules import build, dualpipe, dualpipev
from ppbook.simulate import simulate
from ppbook.validate import validate

# (F, W, F&B) with I = F, W <= F and F + W <= F&B: the table holds on the middle ranks.
TABLE_COSTS = [(1, 1, 2), (1, 1, 2.5), (1, 1, 3), (1, 0.5, 2.5), (2, 1, 4), (2, 1, 3), (1, 0, 1.5)]


def _pytorch_dualpipev_rows(p: int, m: int) -> list[list[str]]:
    """PyTorch's ScheduleDualPipeV order, without a process group (it needs only p and m)."""
    schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
    fake = SimpleNamespace(pp_group_size=p, _n_microbatches=m)
    calculate = schedules.ScheduleDualPipeV._calculate_single_rank_operations
    return [[str(a) for a in calculate(fake, r) if a is not None] for r in range(p)]


# ----- structure ------------------------------------------------------------------------


def test_dualpipe_two_ranks_by_hand():
    """Read off DualPipe.step for 2 ranks (both middle ranks) and 4 micro-batches."""
    expected = [
        "0F0 3F2 0F1 3B2 (3F3;0B0)OVERLAP_F_B 3B3 0I1 0W1",
        "2F2 1F0 2F3 1B0 (1F1;2B2)OVERLAP_F_B 1B1 2I3 2W3",
    ]
    assert dualpipe(2, 4).to_strings() == [row.split() for row in expected]


def test_dualpipe_routes_and_placement():
    p, m = 4, 10
    schedule = dualpipe(p, m)
    assert schedule.stage_to_rank == (0, 1, 2, 3, 3, 2, 1, 0)
    assert schedule.routes == ((0, 1, 2, 3),) * 5 + ((4, 5, 6, 7),) * 5
    assert [schedule.model_part(p + k) for k in range(p)] == list(range(p))  # copies
    for rank, row in enumerate(schedule.actions):
        down = {a.microbatch for s in row for a in s.parts if a.stage < p}
        up = {a.microbatch for s in row for a in s.parts if a.stage >= p}
        assert down == set(range(5)) and up == set(range(5, 10)), rank


def test_dualpipev_is_pytorchs_order():
    for p in range(1, 7):
        for m in range(2 * p, 2 * p + 8):
            assert dualpipev(p, m).to_strings() == _pytorch_dualpipev_rows(p, m), (p, m)


def test_dualpipev_overlapped_steps_pair_a_forward_with_a_full_backward():
    row = dualpipev(4, 10).actions[1]
    pairs = [s for s in row if isinstance(s, OverlapFB)]
    assert pairs and all(s.forward.kind == "F" and s.backward.kind == "B" for s in pairs)
    assert parse_action(str(pairs[0])) == pairs[0]


def _relabel(step, mapping):
    if isinstance(step, OverlapFB):
        return OverlapFB(_relabel(step.forward, mapping), _relabel(step.backward, mapping))
    stage, offset = mapping[step.stage]
    return Action(stage, step.kind, step.microbatch + offset)


def test_dualpipe_halves_are_dualpipev_on_half_the_ranks():
    """DualPipe's step code depends only on p/2, the distance to the near end and m/2."""
    for p in (2, 4, 6, 8):
        for m in range(2 * p, 2 * p + 7, 2):
            half_p, half_m = p // 2, m // 2
            schedule, folded = dualpipe(p, m), dualpipev(half_p, half_m)
            for h in range(half_p):
                near_top = {h: (h, 0), 2 * half_p - 1 - h: (2 * p - 1 - h, half_m)}
                near_bottom = {h: (p + h, half_m), 2 * half_p - 1 - h: (p - 1 - h, 0)}
                for rank, mapping in ((h, near_top), (p - 1 - h, near_bottom)):
                    expected = tuple(_relabel(s, mapping) for s in folded.actions[h])
                    assert schedule.actions[rank] == expected, (p, m, rank)


# ----- the table ------------------------------------------------------------------------


@pytest.mark.parametrize(("f", "w", "fb"), TABLE_COSTS)
@pytest.mark.parametrize("name", ["dualpipe", "dualpipev"])
def test_middle_ranks_idle_the_tables_bubble(name, f, w, fb):
    i, b = f, f + w
    assert w <= f and fb >= f + w
    for p in (2, 4, 6, 8):
        for m in (2 * p, 2 * p + 2, 2 * p + 6):
            if name == "dualpipe":
                half, chunks, middle = p // 2, m // 2, (p // 2 - 1, p // 2)
            else:
                half, chunks, middle = p, m, (p - 1,)
            # Costs are a device's share; a DualPipeV chunk is half of it (chunk_share 1/2),
            # so doubled costs make its chunk passes f, i, w and fb as in the table.
            k = 2 if name == "dualpipev" else 1
            timeline = simulate(build(name, p, m), Costs(F=k * f, I=k * i, W=k * w, FB=k * fb))
            bubble = (half - 1) * (fb + b - 3 * w)  # the table, PP/2 = half
            for r in middle:
                assert timeline.idle(r) == pytest.approx(bubble), (p, m, r)
            pairs = 2 * chunks - 2 * half - 1  # overlapped pairs on a middle rank
            compute = 2 * chunks * (f + b) - pairs * (f + b - fb)
            assert timeline.makespan == pytest.approx(compute + bubble), (p, m)
            if fb == f + b:  # no overlap gain: every rank idles the table's bubble
                assert [timeline.idle(r) for r in range(p)] == pytest.approx([bubble] * p)


def test_default_costs_every_rank_idles_the_table():
    for p in (2, 4, 6):
        timeline = simulate(dualpipe(p, 2 * p + 4))  # F = 1, B = 2, I = W = 1, F&B = 3
        assert [timeline.idle(r) for r in range(p)] == [(p // 2 - 1) * 2.0] * p


def test_table_is_not_exact_when_forward_and_input_gradient_differ():
    """The counterexamples in ppbook.schedules.dualpipe's docstring."""
    for p in (4, 6, 8):
        slow_i = simulate(dualpipe(p, 2 * p + 2), Costs(F=1, I=2, W=1, FB=4))
        slow_f = simulate(dualpipe(p, 2 * p + 2), Costs(F=2, I=1, W=1, FB=3))
        assert slow_i.idle(p // 2) == 4 * (p // 2 - 1) - 1
        assert slow_f.idle(p // 2) == 3 * (p // 2 - 1)


def test_peak_activations_pp_plus_1():
    for p in (2, 4, 6, 8):
        for m in (2 * p, 2 * p + 2, 2 * p + 8):
            timeline = simulate(dualpipe(p, m))
            assert [timeline.peak_activations(r) for r in range(p)] == [p + 1] * p
    for p in range(1, 7):  # DualPipeV: PP = 2p stage chunks on p ranks
        for m in (2 * p, 2 * p + 3):
            timeline = simulate(dualpipev(p, m))
            # 2p + 1 chunks of half a stage each
            assert [timeline.peak_activations(r) for r in range(p)] == [(2 * p + 1) / 2] * p


# ----- rules, validation, CSV -----------------------------------------------------------


@pytest.mark.parametrize(
    ("builder", "p", "m", "rule"),
    [
        (dualpipe, 3, 12, "even num_stages"),
        (dualpipe, 1, 4, "even num_stages"),
        (dualpipe, 4, 9, r"m >= 2p"),
        (dualpipe, 4, 6, r"m >= 2p"),
        (dualpipev, 3, 5, r"m >= 2p"),
        (dualpipev, 0, 4, "num_stages >= 1"),
        (dualpipe, 2, 0, "num_microbatches >= 1"),
        (dualpipev, 2, 4.0, "integer num_microbatches"),
    ],
)
def test_rules(builder, p, m, rule):
    with pytest.raises(ValueError, match=rule) as info:
        builder(p, m)
    if "2p" in rule:
        assert f"m = {m}" in str(info.value) and f"p = {p}" in str(info.value)


@given(st.integers(1, 10).flatmap(lambda p: st.tuples(st.just(p), st.integers(1, 2 * p - 1))))
@settings(max_examples=30, deadline=None)
def test_dualpipev_needs_2p_microbatches(counts):
    p, m = counts
    with pytest.raises(ValueError, match=r"m >= 2p"):
        dualpipev(p, m)


@pytest.mark.parametrize("name", ["dualpipe", "dualpipev"])
def test_validates_and_round_trips_through_csv(name):
    for p in (2, 4, 6) if name == "dualpipe" else (1, 2, 3, 4):
        for m in range(2 * p, 2 * p + 7, 2):
            schedule = build(name, p, m)
            assert schedule.actions == (dualpipe if name == "dualpipe" else dualpipev)(p, m).actions
            validate(schedule)
            for aligned in (True, False):
                back = read_csv_text(write_csv(schedule, aligned=aligned), routes=schedule.routes)
                assert back.actions == schedule.actions
                assert back.stage_to_rank == schedule.stage_to_rank
                assert back.num_microbatches == m
                assert back.routes == schedule.routes  # declared: CSV carries no routes
                validate(back)


@given(
    name=st.sampled_from(["dualpipe", "dualpipev"]),
    half_p=st.integers(1, 4),
    extra=st.integers(0, 4),
    f=st.integers(1, 4),
    i=st.integers(1, 4),
    w=st.integers(0, 4),
    fb=st.one_of(st.none(), st.integers(1, 12)),
    comm=st.sampled_from([0, 0.5]),
)
@settings(max_examples=60, deadline=None)
def test_makespan_at_least_busiest_rank_and_one_microbatch_chain(
    name, half_p, extra, f, i, w, fb, comm
):
    p = 2 * half_p if name == "dualpipe" else half_p
    schedule = build(name, p, 2 * p + 2 * extra)
    costs = Costs(F=f, I=i, W=w, FB=fb, comm=comm)
    timeline = simulate(schedule, costs)
    busiest, chain = lower_bounds(schedule, costs)
    assert timeline.makespan >= busiest - 1e-9
    assert timeline.makespan >= chain - 1e-9
    assert max(timeline.busy(r) for r in range(p)) == pytest.approx(busiest)
