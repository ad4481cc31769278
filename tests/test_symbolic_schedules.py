"""The derived formulas against a brute-force timeline, written here from scratch.

The brute force knows nothing of the formulas: it takes each device's ordered passes
and each pass's dependencies, and places passes one event at a time, each as early as
its device and its inputs allow. From the placed passes it counts the makespan, the
idle time and the peak number of micro-batches in flight on the first device. Times are
Fractions, so equality is exact.
"""

from fractions import Fraction

import pytest

import ppbook.symbolic as S
from ppbook.closed_form import gpipe_timeline
from ppbook.symbolic import numeric
from ppbook.symbolic.symbols import c, m, p, t_b, t_f, t_i, t_w, v

SMALL_GRID = [(pp, mm) for pp in range(1, 7) for mm in range(1, 13)]
PASS_TIMES = [(1, 1), (1, 2), (3, 2), (2, 5)]


def place(orders, duration, inputs, hop=0):
    """Place every pass as early as allowed; return {pass: (start, finish)}.

    ``orders[d]`` lists device d's passes in the order it must run them; a pass is a
    tuple ``(kind, stage, microbatch)``; ``inputs(pass)`` lists ``(pass, device)`` pairs
    it waits for, and an input from another device arrives ``hop`` later. Each event
    places the pass, among those whose inputs are placed, that can start earliest.
    """
    device_of = {x: d for d, order in enumerate(orders) for x in order}
    timed, free, nxt = {}, [0] * len(orders), [0] * len(orders)
    while any(n < len(o) for n, o in zip(nxt, orders, strict=True)):
        candidates = []
        for d, order in enumerate(orders):
            if nxt[d] == len(order):
                continue
            x = order[nxt[d]]
            needs = inputs(x)
            if all(y in timed for y in needs):
                arrivals = [timed[y][1] + (hop if device_of[y] != d else 0) for y in needs]
                candidates.append((max([free[d], *arrivals]), d, x))
        assert candidates, "deadlock: no device can run its next pass"
        start, d, x = min(candidates)
        timed[x] = (start, start + duration(x))
        free[d] = timed[x][1]
        nxt[d] += 1
    return timed


def measure(orders, timed, releases="B"):
    """Makespan, total idle time, compute time and peak in flight on device 0."""
    makespan = max(finish for _, finish in timed.values())
    compute = sum(finish - start for start, finish in timed.values())
    in_flight = peak = 0
    for kind, _, _ in orders[0]:
        in_flight += (kind == "F") - (kind == releases)
        peak = max(peak, in_flight)
    return makespan, len(orders) * makespan - compute, compute, peak


def chain_inputs(num_stages):
    """F waits for the previous stage's F; B (or I) for the next stage's, or its own F."""

    def inputs(x):
        kind, stage, mb = x
        if kind == "F":
            return [("F", stage - 1, mb)] if stage > 0 else []
        if kind == "W":
            return [("I", stage, mb)]
        if stage == num_stages - 1:
            return [("F", stage, mb)]
        return [(kind, stage + 1, mb)]

    return inputs


def gpipe_orders(num_stages, num_microbatches):
    return [
        [("F", s, j) for j in range(num_microbatches)]
        + [("B", s, j) for j in range(num_microbatches)]
        for s in range(num_stages)
    ]


def one_f_one_b_orders(num_stages, num_microbatches):
    orders = []
    for s in range(num_stages):
        warmup = min(num_stages - 1 - s, num_microbatches)
        order = [("F", s, j) for j in range(warmup)]
        for j in range(num_microbatches - warmup):  # steady state: one forward, one backward
            order += [("F", s, warmup + j), ("B", s, j)]
        order += [("B", s, j) for j in range(num_microbatches - warmup, num_microbatches)]
        orders.append(order)
    return orders


def interleaved_orders(num_stages, num_microbatches, num_chunks):
    """Megatron-LM's interleaved 1F1B: rank r runs stages r, r+p, ..., in groups of p."""
    p_, total = num_stages, num_microbatches * num_chunks
    orders = []
    for r in range(p_):

        def fwd(k, r=r):
            stage = ((k // p_) % num_chunks) * p_ + r
            return ("F", stage, (k // (p_ * num_chunks)) * p_ + k % p_)

        def bwd(k, r=r):
            stage = (num_chunks - 1 - (k // p_) % num_chunks) * p_ + r
            return ("B", stage, (k // (p_ * num_chunks)) * p_ + k % p_)

        warmup = min((p_ - r - 1) * 2 + (num_chunks - 1) * p_, total)
        order = [fwd(k) for k in range(warmup)]
        for k in range(total - warmup):  # steady state
            order += [fwd(warmup + k), bwd(k)]
        order += [bwd(k) for k in range(total - warmup, total)]
        orders.append(order)
    return orders


def zb1p_orders(num_stages, num_microbatches):
    """ZB-H1 as torch's ZB1P runs it: 1F1B order with I, and rank r's W passes r behind."""
    orders = []
    for r in range(num_stages):
        warmup = min(num_stages - 1 - r, num_microbatches)
        order = [("F", r, j) for j in range(warmup)]
        done_i = done_w = 0
        for step in range(num_microbatches):
            if warmup + step < num_microbatches:
                order.append(("F", r, warmup + step))
            order.append(("I", r, done_i))
            done_i += 1
            if step >= r:
                order.append(("W", r, done_w))
                done_w += 1
        order += [("W", r, j) for j in range(done_w, num_microbatches)]
        orders.append(order)
    return orders


def run(orders, inputs, times, hop=0):
    """Place ``orders`` with a time per kind of pass, e.g. ``{"F": 1, "B": 2}``."""
    return place(orders, lambda x: times[x[0]], inputs, hop)


@pytest.mark.parametrize(
    ("name", "make_orders", "peak"),
    [
        ("gpipe", gpipe_orders, S.gpipe_peak_activations()),
        ("1f1b", one_f_one_b_orders, S.one_f_one_b_peak_activations()),
    ],
)
def test_gpipe_and_1f1b_against_brute_force(name, make_orders, peak):
    for pp, mm in SMALL_GRID:
        for tf, tb in PASS_TIMES:
            orders = make_orders(pp, mm)
            timed = run(orders, chain_inputs(pp), {"F": tf, "B": tb})
            makespan, idle, compute, in_flight = measure(orders, timed)
            at = {p: pp, m: mm, t_f: tf, t_b: tb}
            assert makespan == S.gpipe_makespan().subs(at), (name, pp, mm, tf, tb)
            assert idle == S.gpipe_bubble_time().subs(at)
            assert Fraction(idle, pp * makespan) == S.bubble_fraction().subs(at)
            assert Fraction(idle, compute) == S.bubble_ratio().subs(at)
            assert in_flight == peak.subs(at)
            assert numeric.bubble_fraction(pp, mm) == pytest.approx(idle / (pp * makespan))
            assert numeric.bubble_ratio(pp, mm) == pytest.approx(idle / compute)


def test_gpipe_with_transfer_cost_against_brute_force():
    for pp, mm in SMALL_GRID[::3]:
        for hop in (Fraction(1, 2), 3):
            orders = gpipe_orders(pp, mm)
            timed = run(orders, chain_inputs(pp), {"F": 1, "B": 2}, hop=hop)
            at = {p: pp, m: mm, t_f: 1, t_b: 2, c: hop}
            assert measure(orders, timed)[0] == S.gpipe_makespan_with_transfer().subs(at)


def test_closed_form_timeline_matches_brute_force_pass_by_pass():
    for pp, mm in SMALL_GRID[::5]:
        timed = run(gpipe_orders(pp, mm), chain_inputs(pp), {"F": 1, "B": 3})
        closed = gpipe_timeline(pp, mm, t_forward=1, t_backward=3)
        intervals = [iv for row in closed.intervals for iv in row]
        assert len(intervals) == len(timed) == 2 * pp * mm
        for iv in intervals:
            stage, kind, microbatch = iv.action
            assert timed[kind, stage, microbatch] == (iv.start, iv.end)


def test_naive_model_parallelism_is_gpipe_with_one_microbatch():
    closed = gpipe_timeline(4, 1)
    busy = sum(iv.end - iv.start for row in closed.intervals for iv in row)
    makespan = max(iv.end for row in closed.intervals for iv in row)
    assert 1 - busy / (4 * makespan) == numeric.bubble_fraction(4, 1) == 3 / 4
    assert closed.bubble_fraction == 3 / 4


def test_interleaved_against_brute_force():
    for pp in range(1, 6):
        for vv in range(1, 4):
            for mm in (pp, 2 * pp, 3 * pp):
                for tf, tb in PASS_TIMES[:3]:
                    orders = interleaved_orders(pp, mm, vv)
                    times = {"F": Fraction(tf, vv), "B": Fraction(tb, vv)}
                    timed = run(orders, chain_inputs(pp * vv), times)
                    makespan, idle, compute, in_flight = measure(orders, timed)
                    at = {p: pp, m: mm, v: vv, t_f: tf, t_b: tb}
                    assert makespan == S.interleaved_makespan().subs(at), (pp, mm, vv, tf, tb)
                    assert Fraction(idle, compute) == S.interleaved_bubble_ratio().subs(at)
                    assert numeric.bubble_ratio(pp, mm, vv) == pytest.approx(idle / compute)
                    assert numeric.bubble_fraction(pp, mm, vv) == pytest.approx(
                        idle / (pp * makespan)
                    )
                    if vv >= 2:  # chunk activations are 1/v of a stage's
                        peak = S.interleaved_peak_activations().subs(at)
                        assert Fraction(in_flight, vv) == peak


ZB_TIMES = [(1, 1, 1), (2, 2, 1), (3, 2, 1), (2, 3, 2), (3, 3, 2), (4, 3, 2), (3, 4, 3)]


def test_zb_h1_against_brute_force():
    for pp in range(1, 7):
        for mm in range(pp, 13):
            for tf, ti, tw in ZB_TIMES:
                assert tw <= tf and tw <= ti
                orders = zb1p_orders(pp, mm)
                timed = run(orders, chain_inputs(pp), {"F": tf, "I": ti, "W": tw})
                makespan, idle, _, in_flight = measure(orders, timed, releases="W")
                at = {p: pp, m: mm, t_f: tf, t_i: ti, t_w: tw}
                assert makespan == S.zb_h1_makespan().subs(at), (pp, mm, tf, ti, tw)
                assert idle == pp * S.zb_h1_bubble().subs(at)
                assert in_flight == S.zb_h1_peak_activations().subs(at)


def test_zb_h1_formula_needs_w_at_most_f():
    """Outside its condition the formula stops matching: the condition is not decoration."""
    orders = zb1p_orders(4, 8)
    timed = run(orders, chain_inputs(4), {"F": 1, "I": 3, "W": 3})
    at = {p: 4, m: 8, t_f: 1, t_i: 3, t_w: 3}
    assert measure(orders, timed, releases="W")[0] != S.zb_h1_makespan().subs(at)


def test_brute_force_respects_dependencies_and_device_order():
    orders = one_f_one_b_orders(3, 4)
    inputs = chain_inputs(3)
    timed = run(orders, inputs, {"F": 1, "B": 2})
    for order in orders:
        for a, b in zip(order, order[1:], strict=False):
            assert timed[a][1] <= timed[b][0]
    for x, (start, _) in timed.items():
        assert all(timed[y][1] <= start for y in inputs(x))
    with pytest.raises(AssertionError, match="deadlock"):
        place([[("B", 0, 0)]], lambda x: 1, chain_inputs(2))
