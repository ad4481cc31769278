"""Chapter 11's exercises (which schedule when): right answers pass, and each kind of wrong
answer (over the memory budget, slower than the best that fits, transfers forgotten, an
overlapped pair faster than its longer pass, a speed-up for a saving, a rule of thumb that
holds in one regime only, a derivation true at one point) is refused with a reason.

The expected answers are worked out here from the closed forms the chapter explains (1F1B's
(m+p-1)(F+B), ZB-V's m(F+I+W) + (p-1)F/2, GPipe's 2(p-1)c of transfers) and from the
simulator's timelines, not read from the check."""

import math

import pytest
import sympy as sp

import ppbook.exercises.ch11 as ch11
from ppbook.costs import Costs
from ppbook.exercises import check, solution
from ppbook.schedules import SCHEDULES, build
from ppbook.simulate import simulate
from ppbook.symbolic.symbols import m, p

EVEN = Costs(F=1, I=1, W=1)


def test_ranked_lists_only_schedules_that_fit_and_orders_them_by_step_time():
    found = ch11.ranked(8, 16, comm=0.5, budget=8)
    times = [t for t, _, _ in found]
    assert times == sorted(times)
    assert all(peak <= 8 for _, _, peak in found)
    names = {name for _, name, _ in found}
    assert "zb-h2" not in names  # holds 2p - 1 = 15
    one = simulate(build("1f1b", 8, 16), Costs(F=1, I=1, W=1, comm=0.5))
    assert ("1f1b" in names) and one.makespan in times


@pytest.mark.parametrize("answer", ["zb-v", "ZB-V ", "zb-h1"])
def test_11_1_accepts_the_fastest_that_fits_and_its_ties(answer):
    assert check("11.1", answer)


@pytest.mark.parametrize(
    "answer, words",
    [
        ("zb-h2", "over the budget"),  # the fastest with transfers, but 15 > 8 activations
        ("gpipe", "over the budget"),  # m = 16 activations
        ("1f1b", "fits"),  # fits, 30% slower: pays a round trip per micro-batch
        ("dualpipe", "does not run"),  # fits m, but holds 2 copies ... or is refused
        ("pipedream", "wants a schedule name"),
        (8, "wants a schedule name"),
    ],
)
def test_11_1_refuses_schedules_over_budget_slower_or_unknown(answer, words):
    verdict = check("11.1", answer)
    assert verdict.status == "wrong"
    if answer == "dualpipe":  # DualPipe runs p = 8, m = 16 and holds more than p
        assert "over the budget" in verdict.message
    else:
        assert words in verdict.message


def test_11_2_wants_the_fewest_m_with_f_at_most_five_percent():
    def f(k):  # ZB-V at F = I = W: only the ramp of p-1 chunk forwards (F/2) idles
        ramp = 7 * 0.5
        return ramp / (3 * k + ramp)

    fewest = next(k for k in range(1, 100) if f(k) <= 0.05)
    for k in (fewest - 1, fewest):
        assert simulate(build("zb-v", 8, k), EVEN).bubble_fraction == pytest.approx(f(k))
    assert check("11.2", fewest)
    assert check("11.2", fewest - 1).status == "wrong"  # f above 5%
    too_many = check("11.2", fewest + 3)
    assert too_many.status == "wrong" and "so does" in too_many.message
    assert check("11.2", 10.5).status == "wrong"


def test_11_2_names_the_bubble_ratio_when_the_answer_used_it():
    # r = idle/compute <= 5% needs more micro-batches than f <= 5%: the first such m
    ratio = next(k for k in range(1, 100) if 3.5 / (3 * k) <= 0.05)
    verdict = check("11.2", ratio)
    assert verdict.status == "wrong" and "r / (1 + r)" in verdict.hint


def test_11_3_accepts_costly_transfers_and_refuses_free_ones():
    c = 1.0
    gpipe = (8 + 4 - 1) * 3 + 2 * (4 - 1) * c  # GPipe's closed form with transfers
    assert simulate(build("gpipe", 4, 8), Costs(F=1, B=2, comm=c)).makespan == gpipe
    assert check("11.3", Costs(F=1, B=2, comm=c))
    free = check("11.3", Costs(F=1, B=2))
    assert free.status == "wrong" and "what does 1F1B wait for" in free.hint
    small = check("11.3", Costs(F=1, B=2, comm=0.2))  # 1F1B slower, but by less than 10%
    assert small.status == "wrong" and "not 10%" in small.message
    assert check("11.3", {"F": 1, "B": 2, "comm": 1}).status == "wrong"


@pytest.mark.parametrize("fb", [2, 2.2, 2.4, Costs(F=1, I=1, W=1, FB=2.2)])
def test_11_4_accepts_pairs_that_save_enough(fb):
    assert check("11.4", fb)


@pytest.mark.parametrize(
    "fb, words", [(3, "not 5%"), (2.8, "not 5%"), (1.5, "longer pass"), (0, "longer pass")]
)
def test_11_4_refuses_no_overlap_too_little_and_impossible_pairs(fb, words):
    verdict = check("11.4", fb)
    assert verdict.status == "wrong" and words in verdict.message


def test_11_5_wants_the_saving_not_the_speed_up_nor_a_percentage():
    one = (16 + 8 - 1) * 3  # 1F1B, (m+p-1)(F+B)
    v_shape = 16 * 3 + (8 - 1) * 0.5  # ZB-V, m(F+I+W) + (p-1)F/2
    assert check("11.5", (one - v_shape) / one)
    speed_up = check("11.5", one / v_shape - 1)
    assert speed_up.status == "wrong" and "speed-up" in speed_up.message
    assert "percentage" in check("11.5", 100 * (one - v_shape) / one).message
    assert check("11.5", (one - 55) / one).status == "wrong"  # ZB-H1's step, not the best


def _table_rule(p, m, comm, budget):
    if budget < p:
        return "v-min"
    if comm >= 0.5:
        if budget >= 2 * p - 1 and m >= 2 * p - 1:
            return "zb-h2"
        return "zb-auto" if m <= p else "zb-v"
    return "interleaved-zb" if m <= p else "zb-v"


def test_11_6_accepts_a_rule_that_reads_the_table():
    for seed in (0, 1, 2):
        verdict = check("11.6", _table_rule, seed=seed)
        assert verdict, verdict.text
        assert f"seed {seed}" in verdict.message


@pytest.mark.parametrize(
    "rule, words",
    [
        (lambda *a: "zb-v", "over the budget"),  # ignores memory
        (lambda *a: "1f1b", "over the budget"),
        (lambda p, m, c, b: "v-min" if b < p else "1f1b", "takes"),  # slow with budget
        (lambda p, m, c, b: "v-min" if b < p else "zb-h2", "over the budget"),  # 2p-1 > p
        (lambda p, m, c, b: "v-min" if b < p else ("zb-h2" if m >= 2 * p else "zb-v"), "over"),
        (lambda p, m, c, b: None, "return a name"),
        (lambda p, m, c, b: 1 / 0, "ZeroDivisionError"),
        (lambda p, m: "zb-v", "TypeError"),
        ("zb-v", "wants a function"),
    ],
)
def test_11_6_refuses_rules_that_hold_in_one_regime_only(rule, words):
    verdict = check("11.6", rule, seed=0)
    assert verdict.status == "wrong"
    assert words in verdict.message, verdict.text


def test_11_6_regimes_and_hard_cases_cover_small_budgets_and_costly_transfers():
    assert any(b < p_ for p_, _, _, b in ch11.HARD)
    assert any(c >= 1 and b >= 2 * p_ - 1 for p_, _, c, b in ch11.HARD)
    assert set(ch11.HARD) <= set(ch11.REGIMES)
    for p_, m_, c, b in ch11.HARD:  # each hard case has a schedule that fits
        assert ch11.ranked(p_, m_, c, b)


def test_11_7_accepts_the_derived_saving_in_any_form():
    for expr in (sp.Rational(5, 2) * (p - 1), 5 * p / 2 - sp.Rational(5, 2), (5 * p - 5) / 2):
        assert check("11.7", expr), expr
    # the same difference, simulated at a point outside the check's own grid
    one, v_shape = (simulate(build(n, 7, 20), EVEN).makespan for n in ("1f1b", "zb-v"))
    assert one - v_shape == 5 * (7 - 1) / 2


@pytest.mark.parametrize(
    "expr, words",
    [
        (3 * (p - 1), "your expression gives"),  # 1F1B's whole bubble, as if ZB-V had none
        (sp.Rational(5, 2) * (p - 1) + m - 2 * p, "your expression gives"),  # one point only
        (sp.Symbol("F") * (p - 1), "use p and m"),
        ("5*(p-1)/2", "sympy expression"),
    ],
)
def test_11_7_refuses_derivations_that_do_not_match_the_simulator(expr, words):
    verdict = check("11.7", expr)
    assert verdict.status == "wrong" and words in verdict.message, verdict.text


def test_every_solution_is_shown_only_when_asked_and_every_unanswered_is_said_once():
    for entry in range(1, 8):
        assert check(f"11.{entry}", None).status == "unanswered"
        assert f"Solution 11.{entry}" in repr(solution(f"11.{entry}"))
    assert all(name in SCHEDULES for name in ("zb-v", "v-min", "zb-h2", "interleaved-zb"))
    assert math.isfinite(ch11.SLACK)
