"""One rule for numbers across the package: what counts as a count and as a quantity.

Every layer (schedule builders, the cost model, the symbolic layer's numeric entry points,
the runtime's configuration) checks its inputs with these two functions, so that the same
value is accepted or refused the same way everywhere, with a one-line message that says
what was wrong and what would be right.

- A **count** (``num_stages`` p, ``num_microbatches`` m, ``num_chunks`` v, a number of
  steps) is an integer: ``int`` or any integral type (``numpy.int64``), never ``bool`` and
  never a float such as ``2.0``.
- A **quantity** (a pass time, a transfer time, a byte count) is a finite real number:
  ``int``, ``float``, ``fractions.Fraction``, ``decimal.Decimal`` or a numpy scalar,
  never ``bool``, a string, a complex number, NaN or infinity.

Only the standard library is imported.
"""

from __future__ import annotations

import decimal
import math
import numbers

MAX_SHOWN = 60
"""Characters of a refused value shown in an error message; longer values are cut."""


def clipped(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with ``...`` where it was cut."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def one_line(text: object, limit: int) -> str:
    """``text`` with its lines and runs of spaces joined by single spaces, cut to ``limit``
    characters (a message that must fit on one line)."""
    return clipped(" ".join(str(text).split()), limit)


def joined_lines(text: object, limit: int | None = None) -> str:
    """A message of several lines (the validator lists one problem a line) on one line:
    its non-empty lines joined by "; ", or by a space after a line that ends in a colon;
    cut to ``limit`` characters when given."""
    joined = ""
    for line in (line.strip() for line in str(text).splitlines()):
        if line:
            joined += ("" if not joined else " " if joined.endswith(":") else "; ") + line
    return joined if limit is None else clipped(joined, limit)


def shown(value: object) -> str:
    """``repr(value)``, cut to :data:`MAX_SHOWN` characters so that no message runs on."""
    return clipped(repr(value), MAX_SHOWN)


def _what(owner: str, name: str) -> str:
    return f"{owner} needs {name}" if owner else name


def as_count(value: object, name: str, owner: str = "", minimum: int = 1) -> int:
    """``value`` as an ``int`` if it is an integer >= ``minimum``, else a ValueError.

    ``owner`` names who asks (``"1f1b"``, ``"gpipe_bubble"``); the message reads
    ``"1f1b needs num_microbatches >= 1, got 0"``.
    """
    if type(value) is int and value >= minimum:  # the common case, without the ABC check
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(
            f"{_what(owner, name)} to be an integer >= {minimum}, "
            f"got {shown(value)} ({type(value).__name__})"
        )
    if value < minimum:
        raise ValueError(f"{_what(owner, name)} >= {minimum}, got {int(value)}")
    return int(value)


def is_real(value: object) -> bool:
    """Whether ``value`` is a real number of an accepted type (not bool, str or complex)."""
    if type(value) is float or type(value) is int:  # the common cases, without the ABC check
        return True
    if isinstance(value, bool):
        return False
    return isinstance(value, numbers.Real | decimal.Decimal)


def as_quantity(
    value: object,
    name: str,
    owner: str = "",
    minimum: float = 0.0,
    inclusive: bool = True,
) -> float:
    """``value`` as a finite ``float`` >= ``minimum`` (> when not ``inclusive``).

    Accepts ``int``, ``float``, ``Fraction``, ``Decimal`` and numpy scalars; refuses
    ``bool``, strings, complex numbers, NaN, infinity and values too large for a float.
    """
    relation = ">=" if inclusive else ">"
    rule = f"a finite number {relation} {minimum:g}"
    if not is_real(value):
        raise ValueError(
            f"{_what(owner, name)} to be {rule}, got {shown(value)} ({type(value).__name__})"
        )
    try:
        number = float(value)
    except (OverflowError, ValueError):
        number = math.inf
    if not math.isfinite(number):
        raise ValueError(f"{_what(owner, name)} to be {rule}, got {shown(value)}")
    if number < minimum or (not inclusive and number == minimum):
        raise ValueError(f"{_what(owner, name)} to be {rule}, got {shown(value)}")
    return number


def finite_result(value: float, what: str) -> float:
    """``value`` if finite, else a ValueError saying the inputs overflowed a float."""
    if not math.isfinite(value):
        raise ValueError(
            f"{what} is not a finite number ({value}): the inputs are too large for "
            "floating point; use smaller costs (another time unit)"
        )
    return value
