"""Checks shared by the widget tests: the layout every ppbook widget promises (issue 11).

Measured in JupyterLab 4.6 in Chromium (1024 to 1920 px windows): an ipywidgets slider
spends about 96 px on its value readout and margins besides its label, so a slider
370 px wide with a 110 px label has a 164 px track. The tests check the widths the
widgets set against that measurement, and the PNG's pixels against the size the image
declares (twice as many, for high-density screens).
"""

import struct

import ipywidgets as widgets

READOUT_AND_MARGINS_PX = 96  # measured, see above
MIN_TRACK_PX = 150


def px(length: str) -> int:
    assert length.endswith("px"), length
    return int(length[:-2])


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height of a PNG, from its header."""
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    return struct.unpack(">II", data[16:24])


def check_controls(box: widgets.Box) -> None:
    """The controls wrap into rows, never shrink, and leave each track >= 150 px."""
    assert box.layout.flex_flow == "row wrap"
    for control in box.children:
        assert control.layout.flex == "0 0 auto"
        track = px(control.layout.width) - px(control.style.description_width)
        if isinstance(control, widgets.IntSlider | widgets.FloatSlider):
            assert track - READOUT_AND_MARGINS_PX >= MIN_TRACK_PX, control.description


def check_picture(image: widgets.Image, width_px: int = 750) -> None:
    """Shown at its declared width (at most the column's), drawn at twice its pixels."""
    assert image.layout.width == f"{width_px}px"
    assert image.layout.max_width == "calc(100% - 4px)"  # the column less the margins
    assert image.layout.display is None and image.layout.visibility == "visible"
    assert png_size(bytes(image.value))[0] == 2 * width_px
