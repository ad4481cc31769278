"""The checked numeric entry points and the import boundary (the exercise checks of chapter 1
are tested in tests/test_exercises_ch1.py)."""

import ast
import subprocess
import sys
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ppbook.symbolic as S
from ppbook.closed_form import gpipe_timeline
from ppbook.symbolic import numeric
from ppbook.symbolic.symbols import m, p, t_b, t_f, v

stages = st.integers(1, 64)
microbatches = st.integers(1, 512)
targets = st.fractions(Fraction(1, 1000), Fraction(999, 1000))


def test_worked_example_p8_m32():
    assert numeric.bubble_ratio(8, 32) == 0.21875
    assert numeric.bubble_fraction(8, 32) == pytest.approx(7 / 39)
    assert round(numeric.bubble_fraction(8, 32), 4) == 0.1795


@given(stages, microbatches)
def test_numeric_matches_the_sympy_expressions(pp, mm):
    at = {p: pp, m: mm}
    assert numeric.bubble_fraction(pp, mm) == pytest.approx(float(S.bubble_fraction().subs(at)))
    assert numeric.bubble_ratio(pp, mm) == pytest.approx(float(S.bubble_ratio().subs(at)))
    assert numeric.gpipe_makespan(pp, mm, 1.5, 2.5) == pytest.approx(
        float(S.gpipe_makespan().subs(at | {t_f: 1.5, t_b: 2.5}))
    )


@given(stages, st.integers(1, 8), st.integers(1, 8))
def test_interleaved_numeric_matches_sympy(pp, groups, vv):
    mm = groups * pp
    at = {p: pp, m: mm, v: vv}
    assert numeric.bubble_ratio(pp, mm, vv) == pytest.approx(
        float(S.interleaved_bubble_ratio().subs(at))
    )
    assert numeric.bubble_fraction(pp, mm, vv) == pytest.approx(
        float(S.interleaved_bubble_fraction().subs(at))
    )


@given(stages, microbatches)
def test_conventions_convert_into_each_other(pp, mm):
    f, r = numeric.bubble_fraction(pp, mm), numeric.bubble_ratio(pp, mm)
    assert numeric.fraction_from_ratio(r) == pytest.approx(f)
    assert numeric.ratio_from_fraction(f) == pytest.approx(r)


@settings(max_examples=200)
@given(stages, targets, st.sampled_from(["fraction", "ratio"]), st.integers(1, 4))
def test_min_microbatches_is_the_smallest_that_meets_the_target(pp, target, convention, vv):
    smallest = numeric.min_microbatches(pp, target, convention, vv)
    exact = S.bubble_expr(convention)

    def bubble(mm):
        return exact.subs({p: pp, m: mm, v: vv})

    assert smallest >= 1
    assert bubble(smallest) <= target
    if vv > 1:
        assert smallest % pp == 0
        assert smallest == pp or bubble(smallest - pp) > target
    else:
        assert smallest == 1 or bubble(smallest - 1) > target


def test_min_microbatches_examples():
    assert numeric.min_microbatches(8, 0.1, convention="ratio") == 70
    assert numeric.min_microbatches(8, 0.1, convention="fraction") == 63
    assert numeric.min_microbatches(4, 0.3, convention="fraction") == 7  # 3/10 exactly
    assert numeric.min_microbatches(4, 0.3, convention="ratio") == 10  # not 11: 0.3 is 3/10
    assert numeric.min_microbatches(1, 0.01) == 1
    assert numeric.min_microbatches(8, 0.1, convention="ratio", v=2) == 40  # 35, up to 8k
    assert numeric.min_microbatches(np.int64(8), np.float64(0.1), "ratio") == 70


def test_numpy_integers_are_counts():
    assert numeric.bubble_ratio(np.int64(8), np.int32(32)) == 0.21875


def test_one_rule_for_numbers_fraction_decimal_and_numpy_alike():
    """ppbook.checks' rule: these were refused or mishandled by the layer's own checks."""
    assert numeric.gpipe_makespan(4, 8, Fraction(1, 2), Decimal("1.5")) == 22.0
    assert numeric.gpipe_makespan(4, 8, np.float32(1), np.int64(2)) == 33.0
    assert numeric.min_microbatches(8, Decimal("0.1"), "ratio") == 70
    assert numeric.fraction_from_ratio(Decimal("0.25")) == 0.2
    with pytest.raises(ValueError, match="target bubble to be finite, got Decimal"):
        numeric.min_microbatches(8, Decimal("NaN"))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: numeric.bubble_fraction(0, 4), "bubble_fraction needs num_stages p >= 1, got 0"),
        (lambda: numeric.bubble_ratio(4, 0), "bubble_ratio needs num_microbatches m >= 1, got 0"),
        (lambda: numeric.bubble_ratio(4, 8, 0), "needs num_chunks v >= 1, got 0"),
        (lambda: numeric.bubble_fraction(2.5, 4), r"num_stages p to be an integer >= 1, got 2.5"),
        (lambda: numeric.bubble_fraction(4, True), r"integer >= 1, got True \(bool\)"),
        (lambda: numeric.bubble_fraction(4.0, 8), r"got 4.0 \(float\)"),
        (
            lambda: numeric.bubble_ratio(4, 6, 2),
            "m to be a multiple of num_stages p = 4, got m = 6",
        ),
        (
            lambda: numeric.min_microbatches(8, 1.5),
            "target bubble strictly between 0 and 1, got 1.5",
        ),
        (lambda: numeric.min_microbatches(8, 0), "strictly between 0 and 1, got 0"),
        (lambda: numeric.min_microbatches(8, 1), "strictly between 0 and 1, got 1"),
        (lambda: numeric.min_microbatches(8, float("nan")), "target bubble to be finite"),
        (lambda: numeric.min_microbatches(8, "0.1"), "target bubble to be a number, got '0.1'"),
        (lambda: numeric.min_microbatches(8, 0.1, "percent"), '"fraction" or "ratio"'),
        (lambda: numeric.min_microbatches(0, 0.1), "num_stages p >= 1, got 0"),
        (lambda: numeric.fraction_from_ratio(-0.1), "bubble ratio r >= 0, got -0.1"),
        (lambda: numeric.ratio_from_fraction(1), "bubble fraction 0 <= f < 1, got 1"),
        (
            lambda: numeric.gpipe_makespan(4, 8, 0, 1),
            "gpipe_makespan needs forward time t_f to be a finite number > 0, got 0",
        ),
        (
            lambda: numeric.gpipe_makespan(4, 8, 1, "2"),
            r"backward time t_b to be a finite number > 0, got '2' \(str\)",
        ),
        (lambda: numeric.gpipe_makespan(4, 8, 1, float("inf")), "finite number > 0, got inf"),
        (lambda: gpipe_timeline(4, 0), "gpipe_timeline needs num_microbatches m >= 1"),
        (lambda: S.bubble_expr("percent"), 'convention must be "fraction" or "ratio"'),
    ],
)
def test_bad_input_says_what_was_wrong_and_what_would_be_right(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_symbolic_layer_imports_neither_torch_nor_matplotlib():
    code = (
        "import sys, ppbook, ppbook.widgets, ppbook.symbolic, ppbook.symbolic.numeric\n"
        "ppbook.symbolic.numeric.bubble_fraction(8, 32)\n"
        "print(sorted(n for n in ('torch', 'matplotlib', 'ipywidgets') if n in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_symbolic_layer_imports_nothing_of_ppbook_but_itself_and_checks():
    """The import cycle is gone: no schedules, no timeline, no simulator below sympy."""
    folder = Path(S.__file__).parent
    for path in sorted(folder.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                if name == "ppbook" or name.startswith("ppbook."):
                    allowed = name == "ppbook.checks" or name.startswith("ppbook.symbolic")
                    assert allowed, f"{path.name} imports {name}"
    code = (
        "import sys, ppbook.symbolic, ppbook.symbolic.numeric\n"
        "print(sorted(n for n in sys.modules if n.startswith('ppbook.')"
        " and not n.startswith('ppbook.symbolic')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['ppbook.checks']"


def test_plain_import_of_ppbook_does_not_import_sympy():
    code = "import sys, ppbook; print('sympy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
