"""The memory panel of a timeline picture: activations held per rank over time (chapter 2).

A step plot of :meth:`~ppbook.timeline.Timeline.memory`, one line per rank, drawn below
the Gantt chart by :func:`ppbook.views.gantt.plot_timeline` (``memory=True``) or on any axes.
Like :mod:`ppbook.views.gantt`, it never changes matplotlib's global settings.
"""

from __future__ import annotations

from ppbook.timeline import Timeline


def plot_memory(
    timeline: Timeline,
    ax,
    *,
    in_bytes: bool = False,
    legend: bool = True,
    time_unit: str | None = None,
):
    """Step plot of the activations each rank holds over time; return the figure.

    Adds one line per rank, in rank order, through the points ``Timeline.memory(rank)``
    (times relative to the origin), held to the end of the makespan. Where several changes
    happen at the same time only the last amount is drawn, so a free and an allocation at
    one instant leave no zero-width spike.
    """
    import matplotlib as mpl

    p = timeline.num_ranks
    origin, makespan = timeline.origin, timeline.makespan
    cmap = mpl.colormaps["viridis"]
    lines = []
    for rank in range(p):
        curve = _settled(timeline.memory(rank, in_bytes=in_bytes))
        xs = [t - origin for t, _ in curve] + [makespan]
        ys = [a for _, a in curve] + [curve[-1][1]]
        (line,) = ax.plot(
            xs,
            ys,
            drawstyle="steps-post",
            color=cmap(0.85 * rank / max(p - 1, 1)),
            linewidth=1.2,
            label=f"rank {rank}",
        )
        lines.append(line)
    what = "activation bytes" if in_bytes else "activations held\n(micro-batch × chunk)"
    ax.set_ylabel(what, fontsize="small")
    unit = f" ({time_unit})" if time_unit else ""
    ax.set_xlabel(f"time{unit}")
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
        fontsize="small",
        ncols=1 if p <= 4 else 2,
    )
    return ax.figure


def _settled(curve: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The curve with only the last amount at each time."""
    out: list[tuple[float, float]] = []
    for time, amount in curve:
        if out and out[-1][0] == time:
            out[-1] = (time, amount)
        else:
            out.append((time, amount))
    return out
