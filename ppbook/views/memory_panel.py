"""The memory panel of a timeline picture: activations held per rank over time (chapter 2).

A step plot of :meth:`~ppbook.timeline.Timeline.memory`, one line per rank, drawn below
the Gantt chart by :func:`ppbook.views.gantt.plot_timeline` (``memory=True``) or on any axes.
Amounts are micro-batch activations of a full stage (one device's share of the model:
a chunk of a schedule with v chunks per rank counts 1/v), or bytes.

Ranks often hold the same amounts at the same times (DualPipe's rank r and rank p-1-r
mirror each other), so each rank gets its own colour, dash pattern and width: rank 0
is drawn widest and at the bottom, each later rank narrower and on top, so a line that
coincides with another still shows around and between its dashes. Small text is never
below :data:`~ppbook.views.figure.MIN_TEXT_PX` display pixels. Like
:mod:`ppbook.views.gantt`, it never changes matplotlib's global settings.
"""

from __future__ import annotations

from ppbook.timeline import ACTIVATION_UNIT, Timeline
from ppbook.views.figure import text_size

DASHES = ("-", "--", ":", "-.")
"""Line styles of ranks 0, 1, 2, 3, then again: solid, dashed, dotted, dash-dotted."""
WIDEST, NARROWEST = 3.6, 1.0  # line widths (points) of rank 0 and of the last rank


def rank_style(rank: int, num_ranks: int) -> dict:
    """Colour, dashes, width and drawing order of ``rank``'s line."""
    import matplotlib as mpl

    position = rank / max(num_ranks - 1, 1)  # 0 for rank 0, 1 for the last rank
    return {
        "color": mpl.colormaps["viridis"](0.85 * position),
        "linestyle": DASHES[rank % len(DASHES)],
        "linewidth": WIDEST - (WIDEST - NARROWEST) * position,
        "zorder": 2 + position,
    }


def plot_memory(timeline: Timeline, ax, *, in_bytes: bool = False, legend: bool = True):
    """Step plot of the activations each rank holds over time; return the figure.

    Adds one line per rank, in rank order (labelled ``rank r``, styled by
    :func:`rank_style`), through the points ``Timeline.memory(rank)`` (times relative to
    the origin), held to the end of the makespan. Where several changes happen at the
    same time only the last amount is drawn, so a free and an allocation at one instant
    leave no zero-width spike. The axes say both units: the timeline's time unit and
    the activation unit.
    """
    p = timeline.num_ranks
    origin, makespan = timeline.origin, timeline.makespan
    lines = []
    for rank in range(p):
        curve = _settled(timeline.memory(rank, in_bytes=in_bytes))
        xs = [t - origin for t, _ in curve] + [makespan]
        ys = [a for _, a in curve] + [curve[-1][1]]
        (line,) = ax.plot(
            xs, ys, drawstyle="steps-post", label=f"rank {rank}", **rank_style(rank, p)
        )
        lines.append(line)
    ax.set_ylabel(memory_label(in_bytes), fontsize=text_size(ax.figure, "small"))
    ax.set_xlabel(f"time ({timeline.time_unit})")
    ax.set_ylim(bottom=0)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    if not legend:
        return ax.figure
    shown = lines if p <= 8 else [lines[0], lines[-1]]
    ax.legend(
        handles=shown,
        loc="upper left",
        bbox_to_anchor=(1.005, 1.0),
        frameon=False,
        fontsize=text_size(ax.figure, "small"),
        ncols=1 if p <= 4 else 2,
        handlelength=3.0,  # long enough to show each rank's dashes
    )
    return ax.figure


def memory_label(in_bytes: bool = False) -> str:
    """The memory axis label, with its unit."""
    if in_bytes:
        return "activations held\n(bytes)"
    return "held (" + ACTIVATION_UNIT.replace(" of ", "\nof ", 1) + ")"


def _settled(curve: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The curve with only the last amount at each time."""
    out: list[tuple[float, float]] = []
    for time, amount in curve:
        if out and out[-1][0] == time:
            out[-1] = (time, amount)
        else:
            out.append((time, amount))
    return out
