"""The colours and names of a timeline's boxes, shared by the Gantt chart and the widgets.

Each kind a box can have (:data:`DRAWN_KINDS`: ``ppbook.pipeline_schedule.KINDS`` and DualPipe's
overlapped pair) has a base colour and a legend name; a micro-batch's box mixes the
base colour with white, lighter for later micro-batches, so its hue still says the kind.
"""

from __future__ import annotations

import numpy as np
from matplotlib.colors import to_rgb

from ppbook.pipeline_schedule import KINDS, OverlapFB

DRAWN_KINDS = (*KINDS, OverlapFB.kind)
"""The kinds a box can have: the compute kinds and DualPipe's overlapped pair."""

KIND_COLORS = {
    "F": "#1f6fb4",  # blue
    "B": "#1a9e77",  # green: full backward
    "I": "#e08a00",  # orange: backward for the input only
    "W": "#c8463c",  # red: weight-gradient pass
    "OVERLAP_F_B": "#8e5aa8",  # purple: DualPipe's overlapped forward-and-backward pair
}
"""Base colour of each kind; a micro-batch's shade mixes it with white, keeping its hue."""

KIND_NAMES = {
    "F": "F forward",
    "B": "B backward",
    "I": "I input grad",
    "W": "W weight grad",
    "OVERLAP_F_B": "F&B overlapped",
}

IDLE_COLOR = "#e6e6e6"
MAX_LIGHTEN = 0.55  # the last micro-batch is this far from the base colour towards white


def shade(kind: str, microbatch: int, num_microbatches: int) -> tuple[float, float, float]:
    """The colour of ``kind`` on ``microbatch``: the kind's colour, lighter for later ones."""
    t = MAX_LIGHTEN * microbatch / (num_microbatches - 1) if num_microbatches > 1 else 0.0
    return tuple(c + (1.0 - c) * t for c in to_rgb(KIND_COLORS[kind]))


def shades(kind: str, microbatches, num_microbatches: int) -> np.ndarray:
    """:func:`shade` for many micro-batches at once: an array of RGB rows."""
    t = MAX_LIGHTEN * np.asarray(microbatches, dtype=float) / max(num_microbatches - 1, 1)
    base = np.array(to_rgb(KIND_COLORS[kind]))
    return base + (1.0 - base) * t[:, None]
