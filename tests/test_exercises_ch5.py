"""Chapter 5's exercises: each right answer passes and each typical slip gets its own hint.

The expected numbers are worked out by hand in the comments (the DualPipe table's
formula, DualPipe's per-rank idle times and makespans from its structure), never by
calling the check's own code.
"""

import pytest

from ppbook.costs import Costs
from ppbook.exercises import check, exercises, solution
from ppbook.exercises.ch5 import pairs_apart, parameters_per_rank
from ppbook.schedule import OverlapFB
from ppbook.schedules import dualpipe, dualpipev, one_f_one_b, zb_v
from ppbook.simulate import simulate
from ppbook.symbolic import symbols as sym


def test_chapter_five_has_eight_exercises_half_of_them_derive_or_construct():
    found = exercises("5")
    assert [e.id for e in found] == [f"5.{k}" for k in range(1, 9)]
    making = [e.id for e in found if e.kind in ("derive", "construct", "implement")]
    assert making == ["5.2", "5.5", "5.7", "5.8"]
    for e in found:
        assert check(e.id, None).status == "unanswered"
        assert f"Solution {e.id}" in repr(solution(e.id))


def test_5_1_the_tables_bubble():
    # (PP/2-1)(F&B+B-3W) with PP = 8, F&B = 2, B = 1 + 0.25, W = 0.25: 3 * 2.5 = 7.5
    verdict = check("5.1", 7.5)
    # The middle rank runs 7 overlapped pairs, rank 0 only 5 (each saves F+B-F&B = 0.25):
    # makespan 16 * 2.25 - 7 * 0.25 + 7.5 = 41.75; rank 0 computes 36 - 5 * 0.25 = 34.75.
    assert verdict and "the end ranks 7 " in verdict.message
    assert "PP-1" in check("5.1", 17.5).message  # 7 * 2.5
    assert "F + B where the table has F&B" in check("5.1", 8.25).message  # 3 * (2.25+1.25-0.75)
    assert "-3W" in check("5.1", 9.75).message  # 3 * (2 + 1.25)
    assert "ZB1P" in check("5.1", 12.25).message  # 7 * (1 + 1.25 - 0.5)
    assert "end ranks" in check("5.1", 7).message  # 41.75 - 34.75
    assert "not the table's bubble" in check("5.1", 3).message
    assert "wants an idle time" in check("5.1", "7.5").message


def _v(p):
    return [*range(p), *reversed(range(p))]


def test_5_2_placement_function():
    assert check("5.2", _v)
    looped = check("5.2", lambda p: [*range(p)] * 2)
    assert "interleaved" in looped.message and "rank p-1" in looped.hint
    mirrored = check("5.2", lambda p: [*reversed(range(p)), *range(p)])
    assert "puts stage 0 on rank 1" in mirrored.message  # p = 2: [1, 0, 0, 1]
    assert "2p = 4 whole rank numbers" in check("5.2", lambda p: [0] * p).message
    assert "2p = 4 whole rank numbers" in check("5.2", lambda p: [float(r) for r in _v(p)]).message
    assert "wants a function" in check("5.2", _v(4)).message
    assert "did not return a list" in check("5.2", lambda p: None).message


def test_5_3_choose_m():
    # Idle per rank 1, 2, 3, 3, 3, 3, 2, 1 (18 in all) and makespan 2m + 12, so
    # f = 18 / (8 (2m + 12)): m = 22 gives 18/448 = 0.0402, m = 24 gives 18/480 = 0.0375.
    assert check("5.3", 24)
    assert "above 0.04" in check("5.3", 22).message
    odd = check("5.3", 23)
    assert "m even" in odd.message and "24" not in odd.message  # no answer given away
    assert "m >= 2p = 16" in check("5.3", 14).message
    # every rank at the table's 3: 24 / (8 (2m + 12)) <= 0.04 needs 2m + 12 >= 75, m = 32
    table = check("5.3", 32)
    assert "every rank idled the table's 3" in table.message
    # 1F1B: 7 / (m + 7) <= 0.04 needs m >= 168
    assert "what 1F1B needs" in check("5.3", 168).message
    assert "a smaller m does too" in check("5.3", 26).message


def test_5_4_choose_schedule():
    assert check("5.4", "dualpipev") and check("5.4", " DualPipeV ")
    two_copies = check("5.4", "dualpipe")
    assert "parameters 2 x" in two_copies.message and "fewer parameters" in two_copies.message
    # ZB-V at F = I = 2, W = 1: chunk passes 1, 1, 0.5; its step takes 87 (> 80)
    assert "zb-v takes 87 time units" in check("5.4", "zb-v").message
    assert "more than 80" in check("5.4", "1f1b").message
    assert "wants one of" in check("5.4", "gpipe").message


def test_5_5_overlap_breakeven():
    # Apart: 51 time units. Paired: 24 + 10 F&B (7 pairs on the middle rank, whose idle
    # time is the table's 3 (F&B + 2 - 3)), so the two meet at F&B = 2.7.
    assert simulate(pairs_apart(dualpipe(8, 16)), Costs(F=1, I=1, W=1)).makespan == 51
    for fb in (2.5, 2.7, 3):
        run = simulate(dualpipe(8, 16), Costs(F=1, I=1, W=1, FB=fb))
        assert run.makespan == pytest.approx(24 + 10 * fb)
    assert check("5.5", Costs(F=1, I=1, W=1, FB=2.7))
    serial = check("5.5", Costs(F=1, I=1, W=1, FB=3))
    assert "F + B = 3" in serial.message and "both of its inputs" in serial.hint
    assert "largest" in check("5.5", Costs(F=1, I=1, W=1, FB=2)).message
    assert "lower FB" in check("5.5", Costs(F=1, I=1, W=1, FB=2.85)).hint
    assert "FB is not set" in check("5.5", Costs(F=1, I=1, W=1)).message
    assert "keep the question's costs" in check("5.5", Costs(F=1, B=2, FB=2.7)).message
    assert "keep the question's costs" in check("5.5", Costs(F=1, I=1, W=1, FB=2.7, comm=1)).message
    assert "wants a ppbook.costs.Costs" in check("5.5", 2.7).message


def test_5_6_dualpipev_activations():
    # the table's PP+1 with PP = 2p = 8 chunks: 9 chunks of half a stage = 4.5
    assert check("5.6", 4.5)
    assert "counts stage chunks" in check("5.6", 9).message
    assert "PP = p" in check("5.6", 5).message
    assert "not DualPipeV's peak" in check("5.6", 4).message


def test_pairs_apart_keeps_the_order_and_splits_only_the_pairs():
    schedule = dualpipe(4, 8)
    apart = pairs_apart(schedule)
    for row, new in zip(schedule.actions, apart.actions, strict=True):
        expected = [a for s in row for a in (s.parts if isinstance(s, OverlapFB) else (s,))]
        assert list(new) == expected
        assert not any(isinstance(s, OverlapFB) for s in new)
    assert apart.stage_to_rank == schedule.stage_to_rank and apart.routes == schedule.routes


def test_parameters_per_rank_in_device_shares():
    # DualPipe: two full stages (two copies); DualPipeV and ZB-V: two half chunks; 1F1B: one
    assert parameters_per_rank(dualpipe(4, 8)) == [2, 2, 2, 2]
    assert parameters_per_rank(dualpipev(4, 8)) == [1, 1, 1, 1]
    assert parameters_per_rank(zb_v(4, 8)) == [1, 1, 1, 1]
    assert parameters_per_rank(one_f_one_b(4, 8)) == [1, 1, 1, 1]


def test_5_7_dualpipev_makespan_derived():
    # By hand: each rank computes m(F + B) = m(2F + W) through two half chunks; the bottom of
    # the V idles the table's bubble with PP = 2p in chunk passes: (p-1)(3F - W)/2.
    p, m, f, w = sym.p, sym.m, sym.t_f, sym.t_w
    assert check("5.7", m * (2 * f + w) + (p - 1) * (3 * f - w) / 2)
    assert check("5.7", "m*(2*t_f + t_w) + (p - 1)*(3*t_f - t_w)/2")
    # the table read with PP = p devices: half the ramp
    half = check("5.7", m * (2 * f + w) + (p / 2 - 1) * (3 * f - w))
    assert not half and "PP = 2p" in half.hint
    # chunk passes at a full share's cost: the ramp twice as long
    assert not check("5.7", m * (2 * f + w) + (p - 1) * (3 * f - w))
    # the compute of one chunk only
    once = check("5.7", m * (2 * f + w) / 2 + (p - 1) * (3 * f - w) / 2)
    assert not once and "compute" in once.hint
    assert "both" in check("5.7", 2 * f + (p - 1) * f).message
    assert "t_i" in check("5.7", m * (f + sym.t_i + w) + (p - 1) * f).message


def test_5_8_a_small_overlap_does_not_pay():
    # By hand at F = I = W = 1, p = 8, m = 16: ZB-V takes 48 + 7 * 0.5 = 51.5; DualPipe with
    # F&B = 2.9 takes 53 (the simulator), with F&B = 2 only 44
    assert check("5.8", Costs(F=1, I=1, W=1, FB=2.9))
    assert not check("5.8", Costs(F=1, I=1, W=1, FB=2))  # a big overlap: DualPipe wins
    no_gain = check("5.8", Costs(F=1, I=1, W=1, FB=3))
    assert not no_gain and "gains nothing" in no_gain.message
    assert "FB=" in check("5.8", Costs(F=1, I=1, W=1)).message
    assert "Costs" in check("5.8", {"F": 1}).message
