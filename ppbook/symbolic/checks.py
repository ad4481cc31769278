"""Input checks for the numeric entry points: say what was wrong and what would be right.

Counts (``num_stages p``, ``num_microbatches m``, ``num_chunks v``) are integers: ``int``
or an integral numpy integer, never ``bool`` and never a float such as ``2.5``. Pass
times are finite numbers > 0. A bubble is a finite real number, kept exact as a Fraction.
"""

import math
import numbers
from fractions import Fraction


def check_count(func: str, label: str, value, minimum: int = 1) -> int:
    """``value`` as an int if it is an integer >= ``minimum``, else a ValueError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(
            f"{func} needs {label} to be an integer >= {minimum}, "
            f"got {value!r} ({type(value).__name__})"
        )
    if value < minimum:
        raise ValueError(f"{func} needs {label} >= {minimum}, got {value!r}")
    return int(value)


def check_duration(func: str, label: str, value) -> float:
    """``value`` as a float if it is a finite real number > 0, else a ValueError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{func} needs {label} to be a number > 0, got {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{func} needs {label} > 0 and finite, got {value!r}")
    return float(value)


def check_share(func: str, label: str, value, open_unit_interval: bool) -> Fraction:
    """A bubble (fraction or ratio) as an exact Fraction: 0.3 becomes 3/10, as typed."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{func} needs {label} to be a number, got {value!r}")
    if isinstance(value, numbers.Rational):
        exact = Fraction(int(value.numerator), int(value.denominator))
    elif math.isfinite(value):
        exact = Fraction(repr(float(value)))
    else:
        raise ValueError(f"{func} needs {label} to be finite, got {value!r}")
    if open_unit_interval and not 0 < exact < 1:
        raise ValueError(f"{func} needs {label} strictly between 0 and 1, got {value!r}")
    return exact
