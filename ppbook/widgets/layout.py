"""How every ppbook widget lays out its controls and its picture (issue 11).

Measured in JupyterLab 4 in Chromium, a notebook's output area is about 590 px wide in a
1024 px window and 850 px in a 1280 px one. So:

- every slider is :data:`CONTROL_WIDTH` wide with a :data:`DESCRIPTION_WIDTH` label, which
  leaves its track about 170 px (at least 150 px, the width a reader can drag); controls
  never shrink, they wrap into as many rows as the column needs (:func:`control_rows`);
- a picture is a 2x PNG of a :mod:`ppbook.views.figure` figure, shown at the display size
  it declares (at most the column's width, keeping its aspect) (:func:`picture`,
  :func:`show_figure`);
- a setting the model rejects hides the picture but keeps its space
  (:func:`hide_picture`): the page does not jump while the reader moves a slider;
- a readout is plain HTML text with stable wording ("makespan = 27 time units"), so a
  reader, a test or a browser can find its numbers.
"""

from __future__ import annotations

import ipywidgets as widgets
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ppbook.views.figure import display_size, png_bytes

CONTROL_WIDTH = 370
"""Width of one control, in px: the label, the track and the value readout."""

DESCRIPTION_WIDTH = 110
"""Width of a control's label, in px: fits "micro-batches m" and "memory limit K"."""

FIT_COLUMN = "calc(100% - 4px)"
"""A picture's largest width: the column less the 2 px margins ipywidgets puts on each side."""

TEXT = "font-family:monospace;line-height:1.4"
"""The style of a readout's text: monospace, lines closer than a widget row's 28 px."""


def fit_control(control: widgets.Widget) -> widgets.Widget:
    """Give ``control`` the fixed width and label width every ppbook control has.

    A fixed width that does not shrink (``flex: 0 0 auto``) keeps a slider's track wide
    however many controls share a row; a slider moved by dragging updates on release.
    """
    control.layout = widgets.Layout(width=f"{CONTROL_WIDTH}px", flex="0 0 auto")
    control.style.description_width = f"{DESCRIPTION_WIDTH}px"
    if hasattr(control, "continuous_update"):
        control.continuous_update = False
    return control


def control_rows(controls) -> widgets.HBox:
    """The controls in rows that wrap: as many per row as the column has room for."""
    return widgets.HBox(
        [fit_control(control) for control in controls],
        layout=widgets.Layout(flex_flow="row wrap"),
    )


def picture(figure: Figure) -> widgets.Image:
    """An empty image the display size of ``figure``, never wider than the column."""
    width, _ = display_size(figure)
    return widgets.Image(
        format="png",
        layout=widgets.Layout(width=f"{width}px", max_width=FIT_COLUMN, height="auto"),
    )


def show_figure(image: widgets.Image, figure: Figure) -> None:
    """Draw ``figure`` into ``image`` as a 2x PNG (:func:`ppbook.views.figure.png_bytes`,
    compressed fast: a slider's round trip is spent drawing) and show it."""
    image.value = png_bytes(figure, compress_level=1)
    image.layout.visibility = "visible"


def clear_axes(*axes: Axes) -> None:
    """Drop the last drawing (collections, texts, lines, artists) but keep each axes, its
    limits, labels and ticks: redrawing into it costs less than a new one."""
    for ax in axes:
        for artist in [*ax.collections, *ax.texts, *ax.lines, *ax.artists]:
            artist.remove()


def hide_picture(image: widgets.Image) -> None:
    """Hide the picture but keep its space (its last PNG still sizes it)."""
    image.layout.visibility = "hidden"


def readout(min_height: str = "0") -> widgets.HTML:
    """An HTML readout; ``min_height`` keeps its space when a refusal is shorter."""
    return widgets.HTML(layout=widgets.Layout(min_height=min_height))
