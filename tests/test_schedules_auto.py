"""zb-auto (ppbook/schedules/auto.py): valid, deadlock-free, within its memory limit, never
slower than ZB-H1 or ZB-H2, and at the lower bound where a closed form says where that is.

The memory limit is checked by the Timeline's own count, under the same costs' w_memory
(the share of an activation a waiting W holds). The Timeline adds and frees shares one by
one in floating point, so a rank at exactly K may read K + 1e-15: PEAK_SLACK allows that
rounding and nothing more."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ppbook.costs import Costs
from ppbook.schedules import build, zb_auto, zb_h1, zb_h2
from ppbook.schedules.auto import zb_span_lower_bound
from ppbook.simulate import simulate
from ppbook.validate import validate

EVEN = Costs(F=1, I=1, W=1)
QUARTERS = st.integers(0, 12).map(lambda k: k / 4)  # exact in binary: sums carry no rounding
WHOLE = st.just(1.0)  # w_memory = 1: an activation held whole until its W
SHARES = st.one_of(WHOLE, st.just(0.0), st.floats(0, 1))  # any w_memory
PEAK_SLACK = 1e-12  # relative: the Timeline's running sum of shares (module docstring)


def _measures(timeline):
    return max(timeline.rank_spans), timeline.makespan


@st.composite
def problems(draw, same_on_every_stage=False, shares=WHOLE):
    p = draw(st.integers(1, 5))
    m = draw(st.integers(1, 10))
    limit = draw(st.integers(1, 3 * p + 1))
    per_stage = QUARTERS if same_on_every_stage else st.lists(QUARTERS, min_size=p, max_size=p)
    costs = Costs(
        F=draw(per_stage),
        I=draw(per_stage),
        W=draw(per_stage),
        comm=draw(st.sampled_from([0, 0.25, 1])),
        w_memory=draw(shares),
    )
    return p, m, limit, costs


def _references(p, m, limit, costs):
    """(span, makespan) of ZB-H1 when K >= p and of ZB-H2 when K >= 2p-1 and m >= 2p-1."""
    references = []
    if limit >= p:
        references.append(_measures(simulate(zb_h1(p, m), costs)))
    if limit >= 2 * p - 1 and m >= 2 * p - 1:
        references.append(_measures(simulate(zb_h2(p, m), costs)))
    return references


@given(problems(shares=SHARES))
def test_valid_within_the_limit_and_no_slower_than_zb_h1_or_zb_h2(problem):
    p, m, limit, costs = problem
    schedule = zb_auto(p, m, costs, limit)
    validate(schedule)
    timeline = simulate(schedule, costs)  # raises if it deadlocks; counts with w_memory
    assert all(timeline.peak_activations(r) <= limit * (1 + PEAK_SLACK) for r in range(p))
    span, makespan = _measures(timeline)
    assert span >= zb_span_lower_bound(p, m, costs, limit)
    references = _references(p, m, limit, costs)
    assert all(span <= ref_span for ref_span, _ in references)
    if references:  # per-stage costs can pull the two measures apart (see zb_auto)
        assert makespan <= min(references)[1]


@given(problems(same_on_every_stage=True, shares=SHARES))
def test_equal_stages_no_slower_on_both_measures(problem):
    p, m, limit, costs = problem
    span, makespan = _measures(simulate(zb_auto(p, m, costs, limit), costs))
    for ref_span, ref_makespan in _references(p, m, limit, costs):
        assert span <= ref_span and makespan <= ref_makespan


@given(problems(shares=SHARES))
def test_the_lower_bound_holds_for_the_hand_written_schedules(problem):
    # ZB-H1 holds at most min(p, m) activations per rank and ZB-H2 min(2p - 1, m) (less
    # with w_memory < 1): neither may span less than the bound says any schedule within
    # that memory must.
    p, m, _, costs = problem
    assert max(simulate(zb_h1(p, m), costs).rank_spans) >= zb_span_lower_bound(p, m, costs, p)
    if m >= 2 * p - 1:
        h2 = max(simulate(zb_h2(p, m), costs).rank_spans)
        assert h2 >= zb_span_lower_bound(p, m, costs, 2 * p - 1)


@pytest.mark.parametrize("p", [1, 2, 3, 4, 5])
def test_equal_passes_reach_the_closed_form(p):
    # F = I = W = 1, no transfer: rank 0 cannot finish before the last rank's last I has
    # come back up, and at most min(K, m) W passes may wait; for K >= p zb-auto's longest
    # span is exactly max(3m, 3m + 2p - 1 - min(K, m)). K = p is ZB-H1's 3m + p - 1
    # (m >= p); K = 2p - 1 with m >= 2p - 1 is ZB-H2's 3m: the bubble rate 0.
    for m in range(1, 3 * p + 2):
        for limit in range(p, 2 * p + 2):
            timeline = simulate(zb_auto(p, m, EVEN, limit), EVEN)
            assert max(timeline.rank_spans) == max(3 * m, 3 * m + 2 * p - 1 - min(limit, m))
    m = 2 * p - 1 + 3
    assert simulate(zb_auto(p, m, EVEN, 2 * p - 1), EVEN).zb_bubble_rate == 0
    assert simulate(zb_h2(p, m), EVEN).zb_bubble_rate == 0
    one_p = simulate(zb_auto(p, m, EVEN, p), EVEN).zb_bubble_rate
    assert one_p <= simulate(zb_h1(p, m), EVEN).zb_bubble_rate
    assert one_p == pytest.approx(1 - 3 * m / (3 * m + p - 1))


@pytest.mark.parametrize("share", [0.5, 0.25, 0.0])
def test_a_smaller_w_memory_cannot_shorten_the_warm_up(share):
    # Before its first I a rank can only run forwards, each held whole: with K of them
    # rank 0 still waits 2p - 1 - K for the first gradient (F = I = W = 1, no transfer),
    # whatever share w a waiting W keeps. So the closed form above holds for every w, and
    # both zb-auto and the bound reach it.
    costs = Costs(F=1, I=1, W=1, w_memory=share)
    for p in (1, 2, 3, 4):
        for m in range(1, 3 * p + 2):
            for limit in range(p, 2 * p + 2):
                expected = max(3 * m, 3 * m + 2 * p - 1 - min(limit, m))
                assert zb_span_lower_bound(p, m, costs, limit) == expected
                timeline = simulate(zb_auto(p, m, costs, limit), costs)
                assert max(timeline.rank_spans) == expected


def test_the_papers_share_lets_more_w_passes_wait():
    # Zero Bubble paper, 6.2B model on p = 8, m = 24 (Table 9; its B is our I). Counting
    # w = 32h / (34h + 5as) = 0.432 of an activation for a waiting W (its Table 1), K = 2p
    # admits its ZB-2p bubble rate 0.0029 (Table 5) and more; whole activations do not.
    whole = Costs(F=29.718, I=29.444, W=19.927, comm=0.527)
    shared = Costs(F=29.718, I=29.444, W=19.927, comm=0.527, w_memory=0.432)
    p, m = 8, 24
    assert simulate(zb_auto(p, m, whole, 2 * p), whole).zb_bubble_rate > 0.05
    timeline = simulate(zb_auto(p, m, shared, 2 * p), shared)
    assert timeline.zb_bubble_rate <= 0.0029
    assert all(timeline.peak_activations(r) <= 2 * p * (1 + PEAK_SLACK) for r in range(p))
    work = m * (29.718 + 29.444 + 19.927)
    assert 1 - work / zb_span_lower_bound(p, m, shared, 2 * p) <= timeline.zb_bubble_rate


def test_paper_costs_at_two_p_reach_the_lower_bound():
    # The Zero Bubble paper's Table 9, 1.5B model, p = 8, m = 24 (its B is our I). With each
    # activation held until its W, K = 2p reaches the bound: rate 0.1015 (ZB-H2: 0.1083).
    costs = Costs(F=18.522, I=18.086, W=9.337, comm=0.601)
    p, m = 8, 24
    timeline = simulate(zb_auto(p, m, costs, 2 * p), costs)
    assert max(timeline.rank_spans) == pytest.approx(zb_span_lower_bound(p, m, costs, 2 * p))
    assert timeline.zb_bubble_rate == pytest.approx(0.1015, abs=5e-5)
    assert simulate(zb_h2(p, m), costs).zb_bubble_rate == pytest.approx(0.1083, abs=5e-5)


def test_defaults_and_build():
    assert zb_auto(4, 8) == zb_auto(4, 8, Costs(F=1, I=1, W=1), 4)
    assert zb_auto(4, 8).name == "zb-auto"
    costs = Costs(F=1, I=2, W=0.5, comm=0.1)
    assert build("zb-auto", 4, 8, costs=costs, memory_limit=6) == zb_auto(4, 8, costs, 6)
    assert build("zb-h1", 4, 8, costs=costs) == zb_h1(4, 8)  # costs: ignored by the others


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: zb_auto(4, 8, memory_limit=0), "memory_limit .* >= 1, got 0"),
        (lambda: zb_auto(4, 8, memory_limit=2.5), "integer memory_limit .*got 2.5"),
        (lambda: zb_auto(4, 8, memory_limit=True), "integer memory_limit .*got True"),
        (lambda: zb_auto(4, 8, costs={"F": 1}), "costs to be a ppbook.costs.Costs, got dict"),
        (lambda: zb_auto(4, 8, Costs(F=[1, 2, 3])), "F has 3 values, but the schedule has 4"),
        (lambda: zb_auto(0, 8), "zb-auto needs num_stages >= 1, got 0"),
        (lambda: build("zb-h1", 4, 8, memory_limit=4), "only zb-auto takes a memory limit"),
        (lambda: build("zb-auto", 4, 8, 2), "zb-auto runs exactly 1 chunk"),
    ],
)
def test_bad_arguments_are_one_line_errors(call, message):
    with pytest.raises(ValueError, match=message) as caught:
        call()
    assert "\n" not in str(caught.value)
