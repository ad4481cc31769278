"""Input checks for the symbolic layer's numeric entry points, on ppbook's one number rule.

Counts (``num_stages p``, ``num_microbatches m``, ``num_chunks v``) and pass times are
checked by :func:`ppbook.checks.as_count` and :func:`ppbook.checks.as_quantity`, the rule
every layer uses: ``int``, ``float``, ``Fraction``, ``Decimal`` and numpy scalars are
accepted alike; ``bool``, strings, NaN and infinity are not. What is particular to this
layer is kept here: a value handed on to a formula stays exact when it is exact
(:func:`exact`), and a bubble a reader types is read as the decimal it was typed as
(:func:`check_share`).
"""

import math
import numbers
from decimal import Decimal
from fractions import Fraction

from ppbook.checks import as_count, as_quantity, is_real, shown


def check_count(func: str, label: str, value, minimum: int = 1) -> int:
    """``value`` as an int if it is an integer >= ``minimum``: :func:`ppbook.checks.as_count`."""
    return as_count(value, label, func, minimum)


def exact(value) -> int | Fraction | float:
    """A checked real number for a formula: exact (an int or a Fraction) when it is.

    An integer becomes an ``int``, ``Decimal("0.1")`` ``Fraction(1, 10)``; a float stays
    the float it is.
    """
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Rational):
        return Fraction(int(value.numerator), int(value.denominator))
    if isinstance(value, Decimal):
        return Fraction(value)
    return float(value)


def check_time(func: str, label: str, value, positive: bool = True) -> int | Fraction | float:
    """A pass time (> 0) or a transfer time (>= 0 with ``positive=False``), kept exact."""
    as_quantity(value, label, func, inclusive=not positive)
    return exact(value)


def check_share(func: str, label: str, value, open_unit_interval: bool) -> Fraction:
    """A bubble (fraction or ratio) as an exact Fraction: 0.3 becomes 3/10, as typed."""
    if not is_real(value):
        raise ValueError(
            f"{func} needs {label} to be a number, got {shown(value)} ({type(value).__name__})"
        )
    try:
        finite = math.isfinite(float(value))
    except OverflowError:
        finite = False
    if not finite:
        raise ValueError(f"{func} needs {label} to be finite, got {shown(value)}")
    number = exact(value)
    share = Fraction(repr(number)) if isinstance(number, float) else Fraction(number)
    if open_unit_interval and not 0 < share < 1:
        raise ValueError(f"{func} needs {label} strictly between 0 and 1, got {shown(value)}")
    return share
