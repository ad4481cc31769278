"""Micro-batch numbers inside a Gantt chart's boxes, shown only where they can be read.

Whether a number fits depends on the box's size in pixels, known only when the figure is
drawn (after the layout engine and any shared axis have set the axes' size and limits).
So each label is a :class:`BoxLabel`: at draw time it measures its box in pixels and
takes the largest font size, up to ``largest``, at which its text fits inside: the
text's width is reckoned as :data:`CHAR_WIDTH` em per character (DejaVu Sans digits are
0.64 em wide), its height as :data:`HEIGHT_SHARE` of the box's. Below ``smallest`` (the
figure's :func:`~ppbook.views.figure.min_font_size`, so that text is at least
:data:`~ppbook.views.figure.MIN_TEXT_PX` pixels on screen) the label is left out.

A label on a hatched box sits on a light background patch, so the hatch does not cross
its digits.
"""

from __future__ import annotations

from matplotlib.text import Text

CHAR_WIDTH = 0.66
"""Width of one character, in em (font sizes): a little more than a digit's 0.64."""

HEIGHT_SHARE = 0.6
"""Largest share of a box's height that a label's font size may take."""

BACKGROUND_PAD = 0.15
"""Padding of the light patch behind a label on a hatched box, in em."""

BACKGROUND = {"boxstyle": f"square,pad={BACKGROUND_PAD}", "facecolor": "white",
              "alpha": 0.85, "edgecolor": "none"}  # fmt: skip


class BoxLabel(Text):
    """The text of one box from ``start`` to ``end`` (data x) on row ``row`` (data y),
    ``height`` data units high; drawn at the largest size in [``smallest``, ``largest``]
    points that fits, or left out.

    With ``force`` a label too small to read is drawn at ``smallest`` anyway. After a
    draw, :attr:`shown_size` is the size drawn in points, or ``None`` if left out.
    """

    def __init__(
        self,
        start: float,
        end: float,
        row: float,
        text: str,
        *,
        height: float,
        largest: float,
        smallest: float,
        force: bool = False,
        hatched: bool = False,
        color: str = "black",
    ):
        super().__init__(
            (start + end) / 2,
            row,
            text,
            ha="center",
            va="center",
            fontsize=largest,
            color="black" if hatched else color,
            zorder=3,
            clip_on=True,
            bbox=BACKGROUND if hatched else None,
        )
        self.set_in_layout(False)  # inside its box: never moves the layout
        self.box = (start, end, row - height / 2, row + height / 2)
        self.largest, self.smallest, self.force = largest, smallest, force
        self.hatched = hatched
        self.shown_size: float | None = None

    def fitted_size(self, renderer) -> float | None:
        """The font size (points) at which the text fits its box as drawn now, or None."""
        start, end, low, high = self.box
        (x0, y0), (x1, y1) = self.axes.transData.transform([(start, low), (end, high)])
        px_per_pt = renderer.points_to_pixels(1.0)
        ems = CHAR_WIDTH * len(self.get_text()) + (2 * BACKGROUND_PAD if self.hatched else 0)
        room = abs(x1 - x0) - 2 * px_per_pt  # a point of margin on each side
        size = min(self.largest, room / (ems * px_per_pt), HEIGHT_SHARE * abs(y1 - y0) / px_per_pt)
        if size >= self.smallest:
            return size
        return self.smallest if self.force else None

    def draw(self, renderer) -> None:
        if not self.get_visible():
            return
        size = self.fitted_size(renderer)
        self.shown_size = size
        if size is None:
            return
        if size != self.get_fontsize():
            self.set_fontsize(size)
        super().draw(renderer)
