"""Figures sized for the notebook column and sharp on high-density screens (every chapter).

Measured in JupyterLab 4 in Chromium at a 1280 x 800 window, a notebook's output area is
about 850 px wide. A figure wider than that is shrunk to fit, and its text with it; a
PNG drawn at one pixel per display pixel blurs on a screen with two. So every figure
the package draws:

- is at most :data:`MAX_WIDTH` inches wide at :data:`DISPLAY_DPI` (:data:`COLUMN_WIDTH`
  by default, 750 px), so it is shown at its full size;
- has no text smaller than :data:`MIN_TEXT_PX` display pixels (:func:`text_size`);
- is rendered at :data:`PIXEL_RATIO` times its display size and declares that size:
  the widgets show ``png_bytes(fig)`` in an image of ``display_size(fig)`` pixels, and
  :func:`setup_notebook` makes the notebook's inline figures 2x PNGs that carry their
  display width (IPython's ``retina`` format).

Nothing here changes matplotlib's global settings (``rcParams``).
"""

from __future__ import annotations

import io

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties

from ppbook.checks import as_quantity

DISPLAY_DPI = 100
"""Display pixels per inch of a figure: matplotlib's default, as the inline backend shows it."""

COLUMN_WIDTH = 7.5
"""Default width of a figure, in inches: 750 display pixels."""

MAX_WIDTH = 8.5
"""Widest figure that is shown unshrunk in the notebook column at a 1280 px window (850 px)."""

PIXEL_RATIO = 2
"""Pixels drawn per display pixel, for high-density screens."""

MIN_TEXT_PX = 9.0
"""Smallest text the package draws, in display pixels (font size times dpi / 72)."""


def column_figure(
    height: float,
    *,
    width: float = COLUMN_WIDTH,
    pyplot: bool = False,
    layout: str | None = "constrained",
) -> Figure:
    """A new figure ``width`` x ``height`` inches at :data:`DISPLAY_DPI`, fit for the column.

    Not registered with pyplot unless ``pyplot=True`` (then ``plt.show()`` shows it); a
    figure for a widget is drawn with :func:`png_bytes` and shown at :func:`display_size`.
    """
    height = as_quantity(height, "height (inches)", "column_figure", inclusive=False)
    width = as_quantity(width, "width (inches)", "column_figure", inclusive=False)
    if width > MAX_WIDTH:
        raise ValueError(
            f"column_figure needs width <= {MAX_WIDTH} inches (the notebook column at a "
            f"1280 px window), got {width:g}"
        )
    if pyplot:
        import matplotlib.pyplot as plt

        return plt.figure(figsize=(width, height), dpi=DISPLAY_DPI, layout=layout)
    fig = Figure(figsize=(width, height), dpi=DISPLAY_DPI, layout=layout)
    FigureCanvasAgg(fig)
    return fig


def display_size(fig: Figure) -> tuple[int, int]:
    """``(width, height)`` of ``fig`` in display pixels: its inches times its dpi."""
    width, height = fig.get_size_inches() * fig.dpi
    return round(width), round(height)


def png_bytes(fig: Figure, pixel_ratio: int = PIXEL_RATIO, compress_level: int = 6) -> bytes:
    """``fig`` as a PNG of ``pixel_ratio`` times :func:`display_size` (the whole figure,
    not cropped, so the declared size holds). ``compress_level`` is zlib's, 0-9 (6, PIL's
    default; a widget redrawing on every slider move takes 1: it is spent drawing, not
    squeezing bytes that stay on the reader's machine)."""
    buffer = io.BytesIO()
    fig.savefig(
        buffer,
        format="png",
        dpi=fig.dpi * pixel_ratio,
        pil_kwargs={"compress_level": compress_level},
    )
    return buffer.getvalue()


def min_font_size(fig: Figure) -> float:
    """The smallest font size, in points, that ``fig`` shows :data:`MIN_TEXT_PX` pixels high."""
    return MIN_TEXT_PX * 72 / fig.dpi


def text_size(fig: Figure, size: float | str = "small") -> float:
    """``size`` (points, or a name such as ``"small"``) in points, raised to at least
    :func:`min_font_size`."""
    return max(FontProperties(size=size).get_size_in_points(), min_font_size(fig))


def setup_notebook() -> None:
    """Call in a chapter's first code cell: inline figures become 2x PNGs that declare
    their display size (IPython's ``retina`` format), sharp on high-density screens.

    Outside IPython (a script, a plain ``python``) it does nothing. It changes no
    ``rcParams``: figures keep matplotlib's default :data:`DISPLAY_DPI`.
    """
    from IPython import get_ipython

    if get_ipython() is None:
        return
    from matplotlib_inline.backend_inline import set_matplotlib_formats

    set_matplotlib_formats("retina")
