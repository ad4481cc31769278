"""V-Half and V-Min (ppbook/schedules/v_shape.py) against Qi et al. 2024, arXiv:2405.15362.

Independent answers:

- the authors' implementation (sail-sg/zero-bubble-pipeline-parallelism,
  ``megatron/core/pipeline_parallel/zerobubble/scheduler/zbv_greedy.py``, ``PipelineGraph``
  with F = B = W = 1 and no transfer time, ``schedule_from_pattern(..., do_reorder=True)``):
  its per-rank orders for two small cases, written out below, and its longest rank span
  (``max_time``): 38 for V-Half at p = 4, m = 5 and 29 for V-Min at p = 3, m = 4; and a
  digest of its orders for every p <= 9, m <= 3p+3 and six larger cases up to p = 33,
  m = 100 (:data:`AUTHORS_EVERY_M`, :data:`AUTHORS_LARGE`);
- the activation memory the authors print, (p+2)//2 micro-batches of a full stage for
  V-Half and (p+4)//3 for V-Min, against 1F1B's p (REFERENCES.md);
- their bubbles when F = B = W: about half (V-Half) and two thirds (V-Min) of 1F1B's.

As zb-auto and ZB-V are tested: valid, deadlock-free under the simulator for several costs,
and within the stated memory at every instant of the simulated timeline.
"""

from __future__ import annotations

import hashlib

import pytest
from bounds import lower_bounds
from hypothesis import given, settings
from hypothesis import strategies as st

from ppbook.costs import Costs
from ppbook.pytorch_csv import read_csv_text, write_csv
from ppbook.schedules import build, one_f_one_b, v_half, v_min
from ppbook.simulate import simulate
from ppbook.validate import validate

PEAK = {"v-half": lambda p: (p + 2) // 2, "v-min": lambda p: (p + 4) // 3}
BUILDERS = {"v-half": v_half, "v-min": v_min}
EVEN = Costs(F=1, I=1, W=1)
COSTS = [
    EVEN,
    Costs(F=1, I=2, W=1, comm=0.25),
    Costs(F=2, I=1, W=0.5),
    Costs(F=1, I=1, W=1, w_memory=0.5),
]

AUTHORS = {  # rows of zbv_greedy.py's order, rank by rank (module docstring)
    ("v-half", 4, 5): [
        "0F0 0F1 0F2 0F3 0F4 7F0 7I0 7W0 7F1 7I1 7W1 7F2 0I0 7I2 7W2 0W0 0I1 0W1 7F3 7I3 "
        "0I2 7W3 7F4 7I4 7W4 0W2 0I3 0W3 0I4 0W4",
        "1F0 1F1 1F2 1F3 6F0 6F1 6I0 6W0 6F2 6I1 6W1 1I0 1W0 6I2 6W2 1I1 1W1 1F4 6F3 1I2 "
        "6I3 6F4 6W3 1W2 6I4 1I3 6W4 1W3 1I4 1W4",
        "2F0 2F1 2F2 5F0 5F1 5F2 5I0 5W0 2F3 5I1 2I0 5W1 2W0 2I1 5I2 5F3 5W2 2F4 2I2 2W1 "
        "5F4 5I3 5W3 2W2 2I3 5I4 5W4 2W3 2I4 2W4",
        "3F0 4F0 3F1 4F1 3F2 4F2 4I0 4W0 3I0 3W0 3F3 4I1 4W1 3I1 3W1 4F3 4I2 3I2 4W2 3F4 "
        "4F4 3W2 4I3 3I3 4W3 3W3 4I4 3I4 4W4 3W4",
    ],
    ("v-min", 3, 4): [
        "0F0 0F1 0F2 5F0 5I0 5W0 5F1 0I0 5I1 5W1 0W0 5F2 0F3 0I1 5I2 5W2 0W1 5F3 5I3 0I2 "
        "5W3 0W2 0I3 0W3",
        "1F0 1F1 4F0 4F1 4I0 4W0 1I0 1F2 1W0 4I1 4F2 4W1 1I1 1F3 1W1 4I2 4F3 4W2 1I2 4I3 "
        "4W3 1W2 1I3 1W3",
        "2F0 3F0 2F1 3F1 3I0 2I0 3W0 2W0 2F2 3F2 3I1 2I1 3W1 2W1 2F3 3F3 3I2 2I2 3W2 2W2 "
        "3I3 2I3 3W3 2W3",
    ],
}
AUTHORS_SPAN = {("v-half", 4, 5): 38, ("v-min", 3, 4): 29}

# The first 16 hex digits of the sha256 of zbv_greedy.py's orders (the repository's commit
# 39f2c186; PipelineGraph(p, m, "half" or "min", 1, 1, 1, 0).schedule_from_pattern(
# stable_pattern_v_half or _v_min(p), m, [1] * 6, do_reorder=True), its third value),
# written as AUTHORS' rows: each rank's row, joined by newlines; by p, the cases m = 1,
# ..., 3p+3 joined by blank lines.
AUTHORS_EVERY_M = {
    ("v-half", 1): "eb69731cd636ac86",
    ("v-half", 2): "0e68f7cf58ac2fa4",
    ("v-half", 3): "371116fe210c78b8",
    ("v-half", 4): "753df9f6cf13cd03",
    ("v-half", 5): "3e627b40fe2c320c",
    ("v-half", 6): "d899a5d54b7adf7f",
    ("v-half", 7): "5fac1c1cb7734b67",
    ("v-half", 8): "de659d8bdfcc392c",
    ("v-half", 9): "87841e21b97a77dd",
    ("v-min", 1): "99e2d2305a43412a",
    ("v-min", 2): "5008950e83555c67",
    ("v-min", 3): "0822a598372ad413",
    ("v-min", 4): "843e17a72d509ce7",
    ("v-min", 5): "91b8a6928e32565e",
    ("v-min", 6): "3f26d9a933b74074",
    ("v-min", 7): "d0c282aec6254787",
    ("v-min", 8): "cad2bfb08411b0b5",
    ("v-min", 9): "bf72c564bc87cbe7",
}
AUTHORS_LARGE = {
    ("v-half", 16, 64): "3e2b255251843c82",
    ("v-min", 16, 64): "babdc3a83baeb1b0",
    ("v-half", 24, 50): "a8aa710b6692ac26",
    ("v-min", 24, 50): "6fc2bfadafd99d23",
    ("v-half", 32, 100): "5f52ac7a7a86579a",
    ("v-min", 33, 100): "d5d25244155c2b86",
}


def _digest(texts: list[str]) -> str:
    return hashlib.sha256("\n\n".join(texts).encode()).hexdigest()[:16]


def _text(schedule) -> str:
    return "\n".join(" ".join(row) for row in schedule.to_strings())


@pytest.mark.parametrize("case", list(AUTHORS))
def test_the_authors_order_and_span(case):
    name, p, m = case
    schedule = BUILDERS[name](p, m)
    assert [" ".join(row) for row in schedule.to_strings()] == AUTHORS[case]
    # their passes take one slot each: a chunk pass of 1 is a device share of 2
    timeline = simulate(schedule, Costs(F=2, I=2, W=2))
    assert max(timeline.rank_spans) == AUTHORS_SPAN[case]


@pytest.mark.parametrize("name", list(BUILDERS))
def test_the_authors_order_for_every_small_case_and_a_few_large_ones(name):
    """Every m up to 3p+3 for p <= 9, where warm-up, steady state and cool-down meet in
    every way, and larger pipelines, where the reordering moves many passes."""
    for p in range(1, 10):
        texts = [_text(BUILDERS[name](p, m)) for m in range(1, 3 * p + 4)]
        assert _digest(texts) == AUTHORS_EVERY_M[name, p], (name, p)
    for (kind, p, m), digest in AUTHORS_LARGE.items():
        if kind == name:
            assert _digest([_text(BUILDERS[name](p, m))]) == digest, (name, p, m)


@pytest.mark.parametrize("name", list(BUILDERS))
def test_valid_deadlock_free_and_within_the_stated_memory_at_every_instant(name):
    for p in range(1, 9):
        for m in range(1, 3 * p + 3):
            schedule = BUILDERS[name](p, m)
            validate(schedule)
            assert schedule.split_backward and schedule.chunk_share == 0.5
            limit = PEAK[name](p)
            for costs in COSTS:
                timeline = simulate(schedule, costs)  # raises if any rank waits for ever
                for rank in range(p):
                    held = [amount for _, amount in timeline.memory(rank)]
                    assert max(held) <= limit + 1e-12, (name, p, m, rank, costs)
            even = simulate(schedule, EVEN)
            peak = max(even.peak_activations(r) for r in range(p))
            assert peak == min(m, limit), (name, p, m)  # reached once m >= the limit


def test_memory_is_a_half_and_a_third_of_1f1bs():
    for p in range(2, 17):
        m = 4 * p
        assert simulate(one_f_one_b(p, m)).peak_activations(0) == p
        halved, thirded = simulate(v_half(p, m)), simulate(v_min(p, m))
        half = max(halved.peak_activations(r) for r in range(p))
        third = max(thirded.peak_activations(r) for r in range(p))
        assert half == (p + 2) // 2 and third == (p + 4) // 3, p
        assert half <= p / 2 + 1 and third <= p / 3 + 4 / 3


@pytest.mark.parametrize(("name", "share"), [("v-half", 1 / 2), ("v-min", 2 / 3)])
def test_bubble_when_f_b_w_are_equal_is_the_papers_share_of_1f1bs(name, share):
    """The idle time in the longest rank span is at most half (V-Half) or two thirds (V-Min)
    of 1F1B's (p-1)(F+I+W), and not far below: between 0.8 and 1 times that share for
    p >= 8 (small pipelines, and V-Half with p even, do better)."""
    for p in range(2, 13):
        m = 8 * p
        timeline = simulate(BUILDERS[name](p, m), EVEN)
        idle = max(timeline.rank_spans) - 3 * m
        ratio = idle / (3 * (p - 1))
        assert ratio <= share, (name, p)
        if p >= 8:
            assert ratio >= 0.8 * share, (name, p)
        # the authors' bubble rate, 1 - (F+B+W)m / longest span: about p/2m and 2p/3m
        assert timeline.zb_bubble_rate <= share * p / m, (name, p)


@pytest.mark.parametrize("name", list(BUILDERS))
def test_registered_and_round_trips_through_pytorchs_csv(name):
    for p in range(1, 6):
        for m in range(1, 2 * p + 3):
            schedule = BUILDERS[name](p, m)
            assert build(name, p, m).actions == schedule.actions
            for aligned in (True, False):
                back = read_csv_text(write_csv(schedule, aligned=aligned))
                assert back.actions == schedule.actions
                assert back.stage_to_rank == schedule.stage_to_rank
    with pytest.raises(ValueError, match=f"{name} runs exactly 2 chunk"):
        build(name, 4, 8, 3)


@pytest.mark.parametrize("builder", [v_half, v_min])
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
    m=st.integers(1, 14),
    f=st.integers(1, 4),
    i=st.integers(1, 4),
    w=st.integers(0, 4),
    comm=st.sampled_from([0, 0.5]),
)
@settings(max_examples=60, deadline=None)
def test_makespan_at_least_busiest_rank_and_one_microbatch_chain(name, p, m, f, i, w, comm):
    schedule = BUILDERS[name](p, m)
    costs = Costs(F=f, I=i, W=w, comm=comm)
    timeline = simulate(schedule, costs)
    busiest, chain = lower_bounds(schedule, costs)
    assert timeline.makespan >= busiest - 1e-9
    assert timeline.makespan >= chain - 1e-9
    assert max(timeline.busy(r) for r in range(p)) == pytest.approx(busiest)


@pytest.mark.parametrize(
    ("name", "idle"), [("v-half", (22.5, 30.5, 46.5)), ("v-min", (63, 111, 207))]
)
def test_bubble_grows_with_m_when_f_i_w_differ_as_the_docstrings_say(name, idle):
    """The order is fixed for unit slots (the authors' README: V-Min degrades when F, B, W
    are not balanced); 1F1B's idle time, (p-1)(F+B), does not grow with m."""
    costs = Costs(F=1, I=1.5, W=0.5)
    for m, expected in zip((32, 64, 128), idle, strict=True):
        timeline = simulate(BUILDERS[name](8, m), costs)
        assert max(timeline.rank_spans) - 3 * m == pytest.approx(expected), m
        assert simulate(one_f_one_b(8, m), Costs(F=1, B=2)).makespan - 3 * m == 21
