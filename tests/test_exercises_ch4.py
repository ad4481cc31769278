"""Chapter 4's exercises: each right answer passes and each typical slip gets its own hint.

The expected numbers are worked out by hand in the comments, at F = I = W = 1 unless said:
ZB-H1's m(F+I+W) + (p-1)(F+I-W), ZB-H2's one step m(F+I+W) + (p-1)F (its parallelogram)
and its steady state m(F+I+W), ZB-V's m(F+I+W) + (p-1)F/2 with chunk passes of half the
cost, and the activations each order holds. They never call the check's own code.
"""

import pytest
import sympy as sp

from ppbook.costs import Costs
from ppbook.exercises import check, exercises, solution
from ppbook.symbolic import symbols as sym

ZB_H1_LAST_ROW = "2F0 2I0 2F1 2I1 2F2 2I2 2W0 2F3 2I3 2W1 2W2 2W3".split()


def test_chapter_four_has_ten_exercises_most_of_them_derive_construct_or_implement():
    found = exercises("4")
    assert [e.id for e in found] == [f"4.{k}" for k in range(1, 11)]
    making = [e.id for e in found if e.kind in ("derive", "construct", "implement")]
    assert making == ["4.1", "4.2", "4.7", "4.8", "4.9", "4.10"]


def test_4_1_the_last_row_of_zb_h1():
    # p = 3, m = 4: 12 passes of 1 plus (p-1)(F+I-W) = 2: 14 time units; 1F1B takes 6 * 3 = 18
    verdict = check("4.1", ZB_H1_LAST_ROW)
    assert verdict and "14 time units" in verdict.message and "18" in verdict.message
    assert check("4.1", " ".join(ZB_H1_LAST_ROW))  # one string of actions is fine too
    assert check("4.1", tuple(ZB_H1_LAST_ROW))
    # each W right after its I: the last rank holds the gradient chain up, 16 time units
    at_once = check("4.1", "2F0 2I0 2W0 2F1 2I1 2W1 2F2 2I2 2W2 2F3 2I3 2W3")
    assert "takes 16 time units" in at_once.message and "postpone" in at_once.hint
    # each W one micro-batch late, not r = 2: 15 time units
    one_late = check("4.1", "2F0 2I0 2F1 2I1 2W0 2F2 2I2 2W1 2F3 2I3 2W2 2W3")
    assert "takes 15 time units" in one_late.message and "r = 2" in one_late.hint
    # every W at the end: four activations held at once, more than p = 3
    hoarded = check("4.1", "2F0 2I0 2F1 2I1 2F2 2I2 2F3 2I3 2W0 2W1 2W2 2W3")
    assert "holds up to 4 micro-batch activations" in hoarded.message
    whole = check("4.1", "2F0 2B0 2F1 2B1 2F2 2B2 2F3 2B3")
    assert "whole backwards" in whole.message and "split" in whole.hint
    assert "stage 2, micro-batch 3" in check("4.1", ZB_H1_LAST_ROW[:-1]).message
    assert "1F0 is not" in check("4.1", ["1F0", "2I0"]).message
    assert "wants one list of action strings" in check("4.1", 3).message


def test_4_2_costs_where_table_2_fails_for_zb_h2():
    # F = I = W = 1: one step takes 8 * 3 + 3 * 1 = 27, Table 2 says 24 + 3 * 0 = 24
    verdict = check("4.2", Costs(F=1, I=1, W=1))
    assert verdict and "27" in verdict.message and "24" in verdict.message
    assert check("4.2", {"F": 2, "I": 1, "W": 1})  # I < 2W, W <= F
    # I = 2, W = 0.5 (I >= 2W): 8 * 3.5 + 3 * (1 + 2 - 1) = 34 both ways
    holds = check("4.2", {"F": 1, "I": 2, "W": 0.5})
    assert "34 time units, exactly Table 2's value" in holds.message
    assert "W = 2 > F = 1" in check("4.2", {"F": 1, "I": 1, "W": 2}).message
    assert "free (comm = 0)" in check("4.2", Costs(F=1, I=1, W=1, comm=0.5)).message
    assert "F, I and W" in check("4.2", {"F": 1, "B": 2}).message
    assert "wants a Costs" in check("4.2", "F=1,I=1,W=1").message


def test_4_3_sync_and_steps():
    # post-validated, the second step already runs in m(F+I+W) = 24
    verdict = check("4.3", ("none", 2))
    assert verdict and "24 time units" in verdict.message
    assert check("4.3", {"sync": "none", "steps": 2})
    # with the optimizer's synchronisation every period is the isolated step: 27, f = 3/27
    synced = check("4.3", ("optimizer", 4))
    assert "period is 27" in synced.message and "f = 0.111" in synced.message
    assert "post-validation" in synced.hint
    assert "no steady state" in check("4.3", ("none", 1)).hint
    more = check("4.3", ("none", 4))
    assert "4 steps show it, and so do 2" in more.message
    assert '"optimizer" or "none"' in check("4.3", ("sync", 2)).message
    assert "from 1 to 8" in check("4.3", ("none", 0)).message
    assert "wants a pair" in check("4.3", "none").message


def test_4_4_zb_v_runs_each_chunk_at_half_the_device_cost():
    # chunk passes of 0.5: each rank computes m(F+I+W) = 48 and idles (p-1) * 0.5 = 3.5
    assert check("4.4", 51.5)
    doubled = check("4.4", 103)  # each chunk pass at the full cost
    assert "full device's cost" in doubled.message
    assert "ZB-H1" in check("4.4", 55).message  # m(F+I+W) + (p-1)(F+I-W) = 48 + 7
    assert "compute" in check("4.4", 48).message
    assert "not ZB-V's makespan" in check("4.4", 60).message


def test_4_5_the_fastest_schedule_within_p_activations():
    # ZB-V: 24 + 3 * 0.5 = 25.5 with p = 4 full stages; ZB-H1 27; 1F1B 11 * 3 = 33; ZB-H2 holds 7
    verdict = check("4.5", "zb-v")
    assert verdict and "25.5 time units" in verdict.message
    assert check("4.5", " ZB-V ")
    assert "takes 27 time units" in check("4.5", "zb-h1").message
    assert "takes 33 time units" in check("4.5", "1f1b").message
    assert "holds up to 7 micro-batch activations" in check("4.5", "zb-h2").message
    assert "choose one of" in check("4.5", "gpipe").message


def test_4_6_the_least_memory_for_a_zero_rate():
    # rank 0 waits (2p-1)F = 7 for its first input gradient and can only run forwards: K = 7
    verdict = check("4.6", 7)
    assert verdict and "K = 7 is the least" in verdict.message
    one_p = check("4.6", 4)  # ZB-H1's memory: rate 1 - 24/27 at least
    assert "not zero" in one_p.message and "ZB-1p" in one_p.hint
    two_p = check("4.6", 8)
    assert "so does K = 7" in two_p.message and "ZB-2p" in two_p.hint
    assert "so does K = 10" in check("4.6", 11).message
    assert "not zero" in check("4.6", 6).message
    assert "from 1 to 16" in check("4.6", 0).message


@pytest.mark.parametrize("id", ["4.3", "4.4", "4.5", "4.6"])
def test_worked_solutions_give_the_right_answer(id):
    answers = {"4.3": ("none", 2), "4.4": 51.5, "4.5": "zb-v", "4.6": 7}
    text = {"4.3": '("none", 2)', "4.4": "51.5", "4.5": '"zb-v"', "4.6": "K = 2p-1 = 7"}
    assert text[id] in solution(id).markdown
    assert check(id, answers[id])


def test_construct_solutions_are_right_answers():
    assert ", ".join(f'"{a}"' for a in ZB_H1_LAST_ROW) in solution("4.1").markdown
    assert check("4.2", Costs(F=1, I=1, W=1)) and "F = I = W = 1" in solution("4.2").markdown


def test_4_7_the_zb_h1_bubble_on_every_region_of_costs():
    # By hand: ZB-H1 hides one postponed pass per wait; the idle time per rank is
    # (p-1)(F+I-W) where W is the smallest cost, (p-1)I where F is, (p-1)F where I is.
    p, f, i, w = sym.p, sym.t_f, sym.t_i, sym.t_w
    assert check("4.7", (p - 1) * (f + i - sp.Min(f, i, w)))
    assert check("4.7", "(p - 1)*(t_f + t_i - Min(t_f, t_i, t_w))")
    assert check("4.7", sp.Max((p - 1) * (f + i - w), (p - 1) * i, (p - 1) * f))
    # Table 2's formula alone is wrong where W is not the smallest cost
    table = check("4.7", (p - 1) * (f + i - w))
    assert not table and "smallest cost" in table.hint
    assert not check("4.7", (p - 1) * (f + i + w))  # 1F1B's bubble
    assert not check("4.7", (p - 1) * (f + i - sp.Min(f, w)))  # forgets the I region
    assert not check("4.7", p * (f + i - sp.Min(f, i, w)))  # off by one rank
    assert "does not contain p" in check("4.7", 3 * (f + i - w)).message
    assert "only" in check("4.7", (sym.m - 1) * (f + i - w)).message
    assert "sympy expression" in check("4.7", 3.0).message


def _input_grad(grad_out, weight):
    return grad_out @ weight


def _weight_grad(grad_out, x):
    g = grad_out.reshape(-1, grad_out.shape[-1])
    return g.T @ x.reshape(-1, x.shape[-1]), g.sum(axis=0)


def test_4_8_the_linear_backward_split_by_hand_against_autograd():
    assert check("4.8", (_input_grad, _weight_grad))
    # the weight used untransposed the wrong way round: shapes differ (in != out)
    wrong_way = check("4.8", (lambda g, wt: g @ wt.T, _weight_grad))
    assert (
        not wrong_way and "input_grad raised" in wrong_way.message and "(out, in)" in wrong_way.hint
    )
    # bias gradient taken over the last batch dimension only: right for 2-D, wrong for 3-D
    last_only = check("4.8", (_input_grad, lambda g, x: (_weight_grad(g, x)[0], g.sum(axis=-2))))
    assert not last_only and "dL/db" in last_only.message
    # the weight gradient of the first sequence only
    first = check(
        "4.8",
        (
            _input_grad,
            lambda g, x: _weight_grad(g.reshape(-1, g.shape[-1])[:1], x[..., :1, :].reshape(1, -1)),
        ),
    )
    assert not first
    assert "pair (input_grad, weight_grad)" in check("4.8", _input_grad).message
    raising = check("4.8", (_input_grad, lambda g, x: 1 / 0))
    assert not raising and "weight_grad raised ZeroDivisionError" in raising.message
    # the transposed weight gradient has the shape (in, out): named, not a crash
    flipped = check(
        "4.8", (_input_grad, lambda g, x: (_weight_grad(g, x)[0].T, _weight_grad(g, x)[1]))
    )
    assert not flipped and "dL/dA has shape" in flipped.message


def test_4_9_costs_where_zb_h2_beats_zb_h1():
    # ZB-H2 gains only where W < I (its second postponed W fits the wait of I): by hand at
    # F = 1, I = 2, W = 0.5, ZB-H1 35.5 = 28 + 3 * 2.5 and ZB-H2 34 = 28 + 3 * 2
    assert check("4.9", Costs(F=1, I=2, W=0.5))
    assert check("4.9", dict(F=1, I=1, W=0.6))
    for tie in (
        dict(F=1, I=1, W=1),
        dict(F=2, I=1, W=1),
        dict(F=1, I=0.8, W=1),
        dict(F=1, I=1, W=0),
    ):
        assert not check("4.9", tie), tie
    assert "outside ZB-H2's condition" in check("4.9", dict(F=1, I=3, W=2)).message


def test_4_10_the_least_limit_with_transfers_as_a_function_of_p():
    # By hand: rank 0's first I arrives after (2p-1)F + 2(p-1)c = 3p-2 at F = 1, c = 0.5
    assert check("4.10", lambda p: 3 * p - 2)
    assert check("4.10", 3 * sym.p - 2)
    assert check("4.10", "3*p - 2")
    no_transfer = check("4.10", lambda p: 2 * p - 1)  # ZB-H2's limit, transfers forgotten
    assert not no_transfer and "transfers" in no_transfer.hint
    assert not check("4.10", lambda p: 2 * p)  # right at p = 2 only
    assert "so does" in check("4.10", lambda p: 3 * p - 1).message
    assert "function of p" in check("4.10", 7).message


def test_4_7_reads_the_reader_s_own_symbols_by_name():
    # a reader's sp.Symbol("p") without the glossary's assumptions is the same p
    p, f, i, w = (sp.Symbol(n) for n in ("p", "t_f", "t_i", "t_w"))
    assert check("4.7", (p - 1) * (f + i - sp.Min(f, i, w)))
    assert "outside ZB-H2's condition" in check("4.2", dict(F=1, I=3, W=2)).message
