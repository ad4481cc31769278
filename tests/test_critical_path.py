"""ppbook.critical_path: the symbolic makespan against the numeric simulator, and the
conditions it derives for the published closed forms against hand reasoning checked by
the simulator on each side of every boundary."""

import doctest
import random
from fractions import Fraction

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import ppbook.critical_path
from ppbook.costs import Costs
from ppbook.critical_path import (
    critical_path,
    formula_conditions_on_grid,
    makespan_expression,
    pieces,
    simplify_under,
)
from ppbook.schedules import build, dualpipe, gpipe, interleaved_1f1b, one_f_one_b, zb_h1, zb_h2
from ppbook.simulate import simulate
from ppbook.symbolic import formulas, gpipe_makespan_with_transfer
from ppbook.symbolic.symbols import c, m, p, t_b, t_f, t_fb, t_i, t_w

SCHEDULES = [
    ("gpipe", 3, 4, None),
    ("1f1b", 3, 4, None),
    ("1f1b", 4, 2, None),
    ("interleaved-1f1b", 2, 4, 2),
    ("interleaved-1f1b", 3, 6, 3),
    ("looped-bfs", 2, 3, 2),
    ("zb-h1", 3, 5, None),
    ("zb-h1", 4, 3, None),
    ("zb-h2", 3, 6, None),
    ("zb-v", 2, 4, None),
    ("zb-v", 3, 6, None),
    ("dualpipe", 4, 8, None),
    ("dualpipev", 2, 4, None),
]


def simulated(schedule, F, I, W, FB=None, comm=0):  # noqa: E741 (PyTorch's name)
    return simulate(schedule, Costs(F=F, I=I, W=W, FB=FB, comm=comm)).makespan


@pytest.mark.parametrize(("name", "stages", "microbatches", "chunks"), SCHEDULES)
def test_the_symbolic_makespan_is_the_simulators_at_random_costs(
    name, stages, microbatches, chunks
):
    schedule = build(name, stages, microbatches, chunks)
    with_pair_time = critical_path(schedule).expr
    with_two_passes = critical_path(schedule, overlap="F+B").expr
    rng = random.Random(f"{name}-{stages}-{microbatches}")
    for draw in range(25):
        F, I, W, FB = (Fraction(rng.randint(1, 12), rng.randint(1, 4)) for _ in range(4))  # noqa: E741
        comm = Fraction(rng.randint(1, 6), 3) if draw % 4 else 0
        at = {t_f: F, t_i: I, t_w: W, t_b: I + W, t_fb: FB, c: comm}
        expected = simulated(schedule, F, I, W, FB, comm)
        assert float(with_pair_time.xreplace(at)) == pytest.approx(expected, rel=1e-12)
        expected = simulated(schedule, F, I, W, None, comm)
        assert float(with_two_passes.xreplace(at)) == pytest.approx(expected, rel=1e-12)


@settings(max_examples=20)
@given(
    name=st.sampled_from(["gpipe", "1f1b", "zb-h1", "zb-v"]),
    stages=st.integers(2, 4),
    microbatches=st.integers(1, 6),
    costs=st.tuples(*[st.fractions(Fraction(1, 4), 4, max_denominator=4)] * 3),
    comm=st.fractions(0, 2, max_denominator=3),
)
def test_any_small_schedule_agrees_with_the_simulator(name, stages, microbatches, costs, comm):
    schedule = build(name, stages, microbatches)
    F, I, W = costs  # noqa: E741
    at = {t_f: F, t_i: I, t_w: W, t_b: I + W, c: comm}
    expected = simulated(schedule, F, I, W, None, comm)
    assert float(makespan_expression(schedule).xreplace(at)) == pytest.approx(expected, rel=1e-12)


def test_conditions_prune_what_they_make_shorter_and_keep_the_value():
    """Under conditions the expression is smaller and equal to the unconditioned one at
    points that meet them (and only the conditioned one may be wrong outside them)."""
    schedule = zb_h2(3, 6)
    free = critical_path(schedule)
    under = critical_path(schedule, ["W <= F", "W <= I"])
    assert len(under.terms) < len(free.terms)
    rng = random.Random(7)
    for _ in range(30):
        W, a, b, comm = (Fraction(rng.randint(0, 9), rng.randint(1, 3)) for _ in range(4))
        W += 1
        at = {t_f: W + a, t_i: W + b, t_w: W, c: comm}  # F = W + a, I = W + b
        assert under.expr.xreplace(at) == free.expr.xreplace(at)


# ----- the published closed forms: where each one is the critical path -----------------

GRID = [(stages, mbs) for stages in (2, 3, 4) for mbs in (1, 2, stages, 2 * stages + 1)]
ZB_H2_GRID = [(stages, mbs) for stages in (2, 3, 4) for mbs in (2 * stages - 1, 2 * stages + 2)]


def test_one_f_one_b_and_gpipe_take_m_plus_p_minus_1_times_f_plus_b_at_any_costs():
    for name in ("1f1b", "gpipe"):
        found = formula_conditions_on_grid("gpipe_makespan", name, GRID)
        assert set(found) == set(GRID)
        assert set(found.values()) == {sp.true}
        assert makespan_expression(build(name, 4, 5), transfer=False) == 8 * (t_f + t_b)


def test_gpipe_with_transfers_adds_2_p_minus_1_transfers_at_any_costs():
    found = formula_conditions_on_grid(gpipe_makespan_with_transfer(), "gpipe", GRID)
    assert set(found.values()) == {sp.true}
    # by hand: m = 3, p = 4, F = 1, B = 2, c = 5: 6 passes of 3 and 6 transfers of 5
    assert simulate(gpipe(4, 3), Costs(F=1, B=2, comm=5)).makespan == 6 * 3 + 6 * 5


def test_one_f_one_b_with_transfers_is_not_gpipes():
    """1F1B alternates F and B on every rank, so its critical path crosses ranks more
    often than GPipe's once m >= 3 (the simulator agrees)."""
    found = formula_conditions_on_grid(gpipe_makespan_with_transfer(), "1f1b", GRID)
    assert found[(3, 7)] == sp.false
    assert found[(3, 1)] == sp.true
    expected = 9 * (1 + 2) + 2 * 2 * 5  # GPipe's value: (m+p-1)(F+B) + 2(p-1)c
    assert simulate(one_f_one_b(3, 7), Costs(F=1, B=2, comm=5)).makespan > expected


def test_zb_h1_needs_w_at_most_f_and_w_at_most_i():
    found = formula_conditions_on_grid("zb_h1_makespan", "zb-h1", GRID)
    assert set(found) == {(s, mb) for s, mb in GRID if mb >= s}  # the formula's m >= p
    assert set(found.values()) == {sp.And(sp.Le(t_w, t_f), sp.Le(t_w, t_i))}
    formula = formulas()["zb_h1_makespan"].function
    schedule = zb_h1(4, 9)
    # by hand: inside (W <= F, W <= I) the deferred W passes fit the gaps they fill
    assert simulated(schedule, 3, 2, 2) == formula(4, 9, 3, 2, 2)
    assert simulated(schedule, 2, 2, 2) == formula(4, 9, 2, 2, 2)  # on the boundary
    # just outside each condition they do not, and the step is longer than the formula
    assert simulated(schedule, 2, 3, 2.5) > formula(4, 9, 2, 3, 2.5)  # W > F
    assert simulated(schedule, 3, 2, 2.5) > formula(4, 9, 3, 2, 2.5)  # W > I


def table_2_zb_h2():
    return m * (t_f + t_i + t_w) + (p - 1) * (t_f + t_i - 2 * t_w)


def test_zb_h2s_table_2_form_holds_exactly_where_i_is_at_least_2w_and_w_at_most_f():
    found = formula_conditions_on_grid(table_2_zb_h2(), "zb-h2", ZB_H2_GRID)
    assert set(found.values()) == {sp.And(sp.Le(t_w, t_f), sp.Le(2 * t_w, t_i))}
    under = formula_conditions_on_grid(table_2_zb_h2(), "zb-h2", ZB_H2_GRID, "W <= F")
    assert set(under.values()) == {sp.Le(2 * t_w, t_i)}


def test_zb_h2s_single_step_makespan_changes_at_i_equal_2w():
    for stages, mbs in ZB_H2_GRID:
        at = {p: stages, m: mbs}
        compute = mbs * (t_f + t_i + t_w)
        found = pieces(zb_h2(stages, mbs), "W <= F", transfer=False)
        assert {(sp.expand(e), cond) for e, cond in found} == {
            (sp.expand(table_2_zb_h2().subs(at)), sp.Le(2 * t_w, t_i)),
            (sp.expand(compute + (stages - 1) * t_f), sp.Le(t_i, 2 * t_w)),
        }
    # by hand, p = 4, m = 8, F = W = 1: Table 2 is 8(2 + I) + 3(I - 1)
    schedule = zb_h2(4, 8)
    assert simulated(schedule, 1, 2.5, 1) == 8 * 4.5 + 3 * 1.5  # I > 2W: Table 2's
    assert simulated(schedule, 1, 1.5, 1) == 8 * 3.5 + 3 * 1  # I < 2W: the parallelogram
    assert 8 * 3.5 + 3 * 1 > 8 * 3.5 + 3 * 0.5  # where Table 2 would promise less


def test_ppbooks_zb_h2_formula_holds_beyond_its_recorded_condition():
    """The record asks W <= F; with its Max(0, I - 2W) the formula also holds when W > F
    as long as I <= 2F and I <= 2W, and only there."""
    found = formula_conditions_on_grid("zb_h2_makespan", "zb-h2", ZB_H2_GRID)
    inside = sp.And(sp.Le(t_w, t_f), sp.Le(2 * t_w, t_i))
    beyond = sp.And(sp.Le(t_i, 2 * t_f), sp.Le(t_i, 2 * t_w))
    assert set(found.values()) == {sp.Or(inside, beyond)}
    formula = formulas()["zb_h2_makespan"].function  # unchecked: W > F on purpose
    schedule = zb_h2(3, 6)
    assert simulated(schedule, 2, 3, 2.5) == formula(3, 6, 2, 3, 2.5)  # W > F, I <= 2F, 2W
    assert simulated(schedule, 2, 6, 2.5) > formula(3, 6, 2, 6, 2.5)  # W > F, I > 2W


def test_interleaved_1f1b_takes_megatrons_makespan_at_any_costs():
    grid = [(2, 2), (2, 4), (3, 3), (3, 6), (4, 4), (4, 8)]
    for chunks in (2, 3):
        found = formula_conditions_on_grid(
            "interleaved_makespan", lambda s, mb, v=chunks: interleaved_1f1b(s, mb, v), grid
        )
        assert set(found) == set(grid)
        assert set(found.values()) == {sp.true}


def zb_v_makespan():
    """The ZB-V closed form of ppbook.schedules.zero_bubble, per chunk there,
    2m(F+I+W) + (p-1)(I + max(0, I-2W)), here in a device's share (a chunk pass is
    half of it)."""
    return m * (t_f + t_i + t_w) + (p - 1) * (t_i + sp.Max(0, t_i - 2 * t_w)) / 2


def test_zb_v_needs_f_at_most_i_and_w_at_most_i():
    found = formula_conditions_on_grid(zb_v_makespan(), "zb-v", [(3, 5), (3, 7), (4, 7), (4, 9)])
    assert set(found.values()) == {sp.And(sp.Le(t_f, t_i), sp.Le(t_w, t_i))}
    formula = sp.lambdify((p, m, t_f, t_i, t_w), zb_v_makespan())
    schedule = build("zb-v", 3, 7)
    assert simulated(schedule, 2, 3, 1) == formula(3, 7, 2, 3, 1)  # inside
    assert simulated(schedule, 2, 3, 3) == formula(3, 7, 2, 3, 3)  # W = I, a boundary
    assert simulated(schedule, 4, 3, 1) > formula(3, 7, 4, 3, 1)  # F > I
    assert simulated(schedule, 2, 3, 4) > formula(3, 7, 2, 3, 4)  # W > I


def dualpipe_makespan():
    """ppbook.schedules.dualpipe's makespan: the table's bubble (P-1)(F&B+B-3W) plus the
    middle rank's compute 2M(F+B) - (2M-2P-1)(F+B-F&B), P = p/2, M = m/2, B = I + W."""
    big_p, big_m, b = p / 2, m / 2, t_i + t_w
    bubble = (big_p - 1) * (t_fb + b - 3 * t_w)
    return bubble + 2 * big_m * (t_f + b) - (2 * big_m - 2 * big_p - 1) * (t_f + b - t_fb)


def test_dualpipe_needs_i_equal_f_w_at_most_f_and_a_pair_at_least_f_plus_w():
    grid = [(4, 8), (4, 12)]
    assert set(formula_conditions_on_grid(dualpipe_makespan(), "dualpipe", grid).values()) == {
        sp.false
    }
    found = formula_conditions_on_grid(dualpipe_makespan(), "dualpipe", grid, "I = F")
    assert set(found.values()) == {sp.And(sp.Le(t_w, t_f), sp.Le(t_f + t_w, t_fb))}
    formula = sp.lambdify((p, m, t_f, t_i, t_w, t_fb), dualpipe_makespan())
    schedule = dualpipe(4, 8)
    assert simulated(schedule, 2, 2, 1, FB=4) == formula(4, 8, 2, 2, 1, 4)  # inside
    assert simulated(schedule, 2, 2, 1, FB=2.5) != formula(4, 8, 2, 2, 1, 2.5)  # F&B < F+W
    assert simulated(schedule, 2, 2, 3, FB=6) != formula(4, 8, 2, 2, 3, 6)  # W > F


# ----- simplification under conditions ----------------------------------------------


def test_simplify_under_collapses_zb_h2_to_table_2():
    expr = makespan_expression(zb_h2(4, 8), transfer=False)
    assert isinstance(expr, sp.Max)
    collapsed = simplify_under(expr, ["W <= F", "I >= 2W"])
    assert sp.expand(collapsed - table_2_zb_h2().subs({p: 4, m: 8})) == 0
    # the same by the parametrisation F = W + a, I = 2W + b (a, b >= 0): every term of
    # the Max is at most Table 2's, whatever a, b and W
    a, b = sp.symbols("a b", nonnegative=True)
    at = {t_f: t_w + a, t_i: 2 * t_w + b}
    for term in expr.args:
        gap = sp.Poly(sp.expand((collapsed - term).subs(at)), t_w, a, b)
        assert all(x >= 0 for x in gap.coeffs())


def test_every_argument_of_the_max_is_the_makespan_somewhere():
    """One ZB-H2 step, p = 4, m = 8: three paths, each the longest in its own region
    (by hand: 2F <= I with F <= W; I <= 2F and I <= 2W; 2W <= I with W <= F)."""
    expr = makespan_expression(zb_h2(4, 8), transfer=False)
    terms = {
        5 * t_f + 11 * t_i + 8 * t_w,
        11 * t_f + 8 * t_i + 8 * t_w,
        11 * t_f + 11 * t_i + 2 * t_w,
    }
    assert set(expr.args) == terms
    longest = set()
    for F, I, W in [(1, 3, 2), (2, 3, 2), (2, 5, 1)]:  # noqa: E741
        values = {t: t.subs({t_f: F, t_i: I, t_w: W}) for t in terms}
        top = max(values, key=values.get)
        assert sorted(values.values())[-2] < values[top]  # strictly the longest there
        assert simulated(zb_h2(4, 8), F, I, W) == float(values[top])
        longest.add(top)
    assert longest == terms


def test_simplify_under_an_equality_substitutes_and_sympy_relations_work():
    expr = sp.Max(2 * t_f + t_i, t_f + 2 * t_i, 3 * t_w)
    assert simplify_under(expr, "I = F") == sp.Max(3 * t_f, 3 * t_w)
    assert simplify_under(expr, [sp.Eq(t_i, t_f), sp.Ge(t_f, t_w)]) == 3 * t_f
    assert simplify_under(sp.Max(0, t_i - 2 * t_w) + t_f, "I <= 2W") == t_f


def test_pieces_of_an_expression_and_of_a_makespan_agree():
    expr = makespan_expression(zb_h2(2, 3), "W <= F", transfer=False)
    assert pieces(expr, "W <= F") == pieces(zb_h2(2, 3), "W <= F", transfer=False)


def test_the_module_examples_run_as_shown():
    assert doctest.testmod(ppbook.critical_path, raise_on_error=False).failed == 0


def test_dualpipe_overlapped_pairs_cost_t_fb():
    assert t_fb in critical_path(dualpipe(4, 8), transfer=False).symbols
    assert t_fb not in critical_path(dualpipe(4, 8), transfer=False, overlap="F+B").symbols
