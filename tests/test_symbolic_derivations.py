"""The sympy results of ppbook.symbolic against the published formulas of REFERENCES.md.

The published formulas are typed in here, on purpose and only here: they are the
independent answer the derivations in ppbook.symbolic must reach, and the check that the
closed forms the code adds up from a schedule's structure are the published ones. Where
one step of a schedule differs from the published value (ZB-H2 when t_i < 2 t_w), the
test says so and asserts what the simulator measures (tests/test_symbolic_simulator.py
compares every formula with the simulator).
"""

import pytest
import sympy as sp

import ppbook.symbolic as S
from ppbook.symbolic.symbols import c, j, m, p, s, t_b, t_f, t_fb, t_i, t_w, u, v


def same(a, b) -> bool:
    return sp.simplify(a - b) == 0


def test_forward_finish_is_s_plus_j_plus_one_forwards_plus_s_hops():
    assert same(S.forward_finish(), (s + j + 1) * t_f + s * c)


def test_forward_closed_form_solves_the_recurrence_and_its_boundaries():
    assert S.forward_recurrence_residuals() == [0, 0, 0, 0]


def test_forward_residuals_reject_wrong_candidates():
    # one pass short: the interior still holds, the first pass does not
    residuals = S.forward_recurrence_residuals((s + j) * t_f + s * c)
    assert residuals[0] == 0
    assert residuals[3] != 0
    # hops counted twice: the interior max hides it, the first column does not
    residuals = S.forward_recurrence_residuals((s + j + 1) * t_f + 2 * s * c)
    assert residuals[0] == 0
    assert residuals[2] != 0


def test_rsolve_boundaries_agree_with_the_critical_path_sum():
    assert same(S.first_stage_forwards_by_rsolve(), S.forward_finish().subs(s, 0))
    assert same(S.first_microbatch_forwards_by_rsolve(), S.forward_finish().subs(j, 0))


def test_backward_closed_form_solves_the_recurrence():
    assert S.backward_recurrence_residuals() == [0, 0, 0, 0]
    assert S.backward_recurrence_residuals(S.backward_finish() + t_b * u) != [0, 0, 0, 0]
    assert S.backward_recurrence_residuals(S.backward_finish() - t_f) != [0, 0, 0, 0]


def test_backward_finish_starts_after_the_last_forward():
    expected = (m + p - 1) * t_f + (p - 1) * c + (u + j + 1) * t_b + u * c
    assert same(S.backward_finish(), expected)


def test_gpipe_makespan_is_m_plus_p_minus_one_times_f_plus_b():
    assert same(S.gpipe_makespan(), (m + p - 1) * (t_f + t_b))
    assert same(S.gpipe_makespan_with_transfer(), (m + p - 1) * (t_f + t_b) + 2 * (p - 1) * c)


def test_bubble_time_fraction_and_ratio():
    assert same(S.gpipe_bubble_time(), p * (p - 1) * (t_f + t_b))
    assert same(S.per_device_bubble_time(), (p - 1) * (t_f + t_b))
    assert same(S.bubble_fraction(), (p - 1) / (m + p - 1))
    assert same(S.bubble_ratio(), (p - 1) / m)
    assert not same(S.bubble_fraction(), S.bubble_ratio())


def test_the_two_conventions_describe_the_same_idle_time():
    assert S.convention_identity_residuals() == [0, 0]
    assert same(S.fraction_from_ratio(S.bubble_ratio()), S.bubble_fraction())
    assert same(S.ratio_from_fraction(S.bubble_fraction()), S.bubble_ratio())


def test_worked_example_p8_m32():
    at = {p: 8, m: 32}
    assert S.bubble_ratio().subs(at) == sp.Rational(7, 32)
    assert S.bubble_fraction().subs(at) == sp.Rational(7, 39)
    assert float(S.bubble_ratio().subs(at)) == 0.21875
    assert round(float(S.bubble_fraction().subs(at)), 4) == 0.1795


def test_gpipe_rule_of_thumb_m_equals_4p():
    assert same(S.bubble_at_microbatches_per_stage("fraction"), (p - 1) / (5 * p - 1))
    assert same(S.bubble_at_microbatches_per_stage("ratio"), (p - 1) / (4 * p))
    assert S.bubble_at_microbatches_per_stage("fraction").subs(p, 8) == sp.Rational(7, 39)
    assert round(float(S.bubble_at_microbatches_per_stage().subs(p, 8)), 2) == 0.18
    assert S.bubble_at_rule_of_thumb_limit("fraction") == sp.Rational(1, 5)
    assert S.bubble_at_rule_of_thumb_limit("ratio") == sp.Rational(1, 4)


def test_bubble_vanishes_as_m_grows():
    assert S.bubble_limit("fraction") == 0
    assert S.bubble_limit("ratio") == 0


def test_min_microbatches_expressions():
    b = sp.Symbol("b", positive=True)
    assert same(S.min_microbatches_expr("ratio"), sp.ceiling((p - 1) / (v * b)))
    assert same(S.min_microbatches_expr("fraction"), sp.ceiling((p - 1) * (1 - b) / (v * b)))


def test_one_f_one_b_has_gpipes_makespan():
    assert same(S.one_f_one_b_makespan(), S.gpipe_makespan())
    assert same(S.one_f_one_b_bubble(), (p - 1) * (t_f + t_b))


def test_interleaved_formulas():
    assert same(S.interleaved_makespan(), m * (t_f + t_b) + (p - 1) * (t_f + t_b) / v)
    assert same(S.interleaved_bubble_ratio(), (p - 1) / (v * m))
    assert same(S.interleaved_bubble_fraction(), (p - 1) / (v * m + p - 1))
    assert same(S.interleaved_bubble_fraction().subs(v, 1), S.bubble_fraction())
    assert same(S.interleaved_makespan().subs(v, 1), S.gpipe_makespan())
    # the Playbook's p = 8 plot: r = 7/(v m)
    assert same(S.interleaved_bubble_ratio().subs(p, 8), 7 / (v * m))


def test_zero_bubble_formulas():
    compute = m * (t_f + t_i + t_w)
    assert same(S.zb_h1_makespan(), compute + (p - 1) * (t_f + t_i - t_w))
    assert same(S.zb_h1_bubble(), (p - 1) * (t_f + t_i - t_w))
    # ZB-H2, one step: Table 2's bubble when t_i >= 2 t_w, the parallelogram's ends below
    assert same(S.zb_h2_bubble(), (p - 1) * (t_f + sp.Max(0, t_i - 2 * t_w)))
    assert same(S.zb_h2_makespan(), compute + S.zb_h2_bubble())
    d = sp.Symbol("d", nonnegative=True)
    at_least_2w = {t_i: 2 * t_w + d}
    assert same(
        S.zb_h2_bubble().subs(at_least_2w), ((p - 1) * (t_f + t_i - 2 * t_w)).subs(at_least_2w)
    )
    equal_passes = {t_i: t_f, t_w: t_f}
    # Table 2's zero bubble at F = I = W needs post-validation across steps; one step
    # idles (p-1) t_f per device, as the simulator measures (27, not 24, at p = 4, m = 8)
    assert S.zb_h2_bubble().subs(equal_passes) == (p - 1) * t_f
    assert S.zb_h2_makespan().subs(equal_passes).subs({p: 4, m: 8, t_f: 1}) == 27
    # ZB-H1 cuts 1F1B's bubble (p-1)(F+B+W) to a third when F = B = W (paper, sec. 2.1)
    one_f_one_b = S.one_f_one_b_bubble().subs(t_b, t_i + t_w)
    assert same(S.zb_h1_bubble().subs(equal_passes) * 3, one_f_one_b.subs(equal_passes))


def test_zero_bubble_and_dualpipe_tables_agree_once_b_means_the_same():
    # DualPipe's table writes B for the full backward, t_i + t_w
    zb1p = S.zb1p_bubble_dualpipe_notation().subs(t_b, t_i + t_w)
    assert same(zb1p, S.zb_h1_bubble())
    assert same(S.dualpipe_bubble(), (p / 2 - 1) * (t_fb + t_b - 3 * t_w))
    assert S.dualpipe_bubble().subs(p, 2) == 0


def test_peak_activations():
    assert S.gpipe_peak_activations() == m
    assert S.one_f_one_b_peak_activations() == sp.Min(p, m)
    interleaved = S.interleaved_peak_activations()
    assert isinstance(interleaved, sp.Min)
    cap, warmup = sorted(interleaved.args, key=lambda a: a != m)
    assert cap == m
    assert same(warmup, p + (p - 1) / v)
    assert S.zb_h1_peak_activations() == p
    assert S.zb_h2_peak_activations() == 2 * p - 1
    assert S.dualpipe_peak_activations() == p + 1


def test_formula_registry_gives_expression_latex_and_number():
    table = S.formulas()
    f = table["bubble_fraction"]
    assert f.latex == r"\frac{p - 1}{m + p - 1}"
    assert f(8, 32) == f(p=8, m=32) == 7 / 39
    assert table["bubble_ratio"](m=32, p=8) == 0.21875
    assert table["gpipe_makespan"](4, 8, 1.0, 2.0) == 33.0
    assert table["min_microbatches_ratio"](8, sp.Rational(1, 10), 1) == 70
    for formula in table.values():
        assert formula.source and formula.conditions and formula.meaning
        assert formula.expr.free_symbols <= set(formula.args), formula.name
        for condition, words in formula.requires:
            assert condition.free_symbols <= set(formula.args) and words, formula.name


def test_only_what_sympy_derives_is_called_derived():
    derived = {name for name, f in S.formulas().items() if f.provenance == S.DERIVED}
    assert derived == {
        "gpipe_makespan",
        "bubble_time",
        "bubble_fraction",
        "bubble_ratio",
        "bubble_fraction_at_4p",
        "min_microbatches_fraction",
        "min_microbatches_ratio",
    }
    published = {name for name, f in S.formulas().items() if f.provenance == S.PUBLISHED}
    assert published == set(S.formulas()) - derived
    assert S.PUBLISHED == "closed form as published, checked against the simulator"


def test_formula_call_rejects_wrong_arguments():
    f = S.formulas()["bubble_ratio"]
    with pytest.raises(TypeError, match=r"missing \['m'\]"):
        f(p=8)
    with pytest.raises(TypeError, match="takes"):
        f(8, 32, q=1)
    with pytest.raises(TypeError, match="takes"):
        f(8, 32, 1)
    with pytest.raises(TypeError, match="once each"):
        f(8, p=8)


@pytest.mark.parametrize(
    ("name", "values", "message"),
    [
        # the cases: -1.5 and -1.0 before; refused or the right one-step value now
        ("zb_h2_bubble", {"p": 4, "t_f": 1, "t_i": 2, "t_w": 3}, r"t_w <= t_f"),
        ("dualpipe_bubble", {"p": 4, "t_fb": 1, "t_b": 1, "t_w": 1}, r"t_b >= 2 t_w"),
        ("dualpipe_bubble", {"p": 4, "t_fb": 2, "t_b": 3, "t_w": 1}, r"t_fb >= t_b"),
        ("dualpipe_bubble", {"p": 5, "t_fb": 4, "t_b": 3, "t_w": 1}, r"an even number of ranks"),
        ("zb_h1_makespan", {"p": 4, "m": 3, "t_f": 1, "t_i": 1, "t_w": 1}, r"m >= p"),
        ("zb_h1_bubble", {"p": 4, "t_f": 2, "t_i": 1, "t_w": 2}, r"t_w <= t_i"),
        ("zb_h2_makespan", {"p": 4, "m": 6, "t_f": 1, "t_i": 1, "t_w": 1}, r"m >= 2p-1"),
        ("interleaved_makespan", {"p": 4, "m": 6, "v": 2, "t_f": 1, "t_b": 2}, r"multiple"),
        ("interleaved_peak_activations", {"p": 4, "m": 8, "v": 1}, r"v >= 2"),
        ("gpipe_makespan", {"p": 4, "m": 8, "t_f": 0, "t_b": 2}, r"t_f to be a finite"),
        ("bubble_ratio", {"p": 4, "m": 2.0}, r"integer >= 1, got 2.0"),
        ("min_microbatches_ratio", {"p": 8, "b": 1.5, "v": 1}, r"strictly between 0 and 1"),
    ],
)
def test_formula_calls_refuse_inputs_outside_their_conditions(name, values, message):
    with pytest.raises(ValueError, match=f"^{name} needs .*{message}"):
        S.formulas()[name](**values)


def test_formula_calls_give_the_right_piecewise_value_and_stay_exact():
    from decimal import Decimal
    from fractions import Fraction

    import numpy as np

    table = S.formulas()
    assert table["zb_h2_bubble"](p=4, t_f=1, t_i=0.5, t_w=1) == 3  # was -1.5
    assert table["zb_h2_makespan"](p=4, m=8, t_f=1, t_i=1, t_w=1) == 27  # was 24
    assert table["zb_h2_bubble"](p=4, t_f=1, t_i=3, t_w=1) == 6  # Table 2's (p-1)(F+B-2W)
    assert table["dualpipe_bubble"](p=4, t_fb=3, t_b=2, t_w=1) == 2
    # one rule for numbers: Fraction, Decimal and numpy scalars alike
    assert table["gpipe_makespan"](4, 8, Fraction(1, 3), Decimal("0.5")) == Fraction(55, 6)
    assert table["gpipe_makespan"](np.int64(4), np.int32(8), np.float64(1), 2) == 33
