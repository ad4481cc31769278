"""Timeline (Gantt) pictures of a schedule, simulated or measured (chapter 2).

One lane per rank, one box per action, coloured by kind (``F``, ``B``, ``I``, ``W`` and an
overlapped F&B pair) and shaded by micro-batch (dark early, light late; the colours are
:mod:`ppbook.views.colors`), with the micro-batch number inside the box when it can be
read (:mod:`ppbook.views.labels`: left out of a box too small for text
:data:`~ppbook.views.figure.MIN_TEXT_PX` pixels high; on a light patch on a hatched box).
Idle time is the grey lane showing through. An optional panel below plots the
activations each rank holds over time (:meth:`~ppbook.timeline.Timeline.memory`) as a
step plot. With ``critical_path=True`` the actions of one critical path
(:func:`critical_actions`: the chain of actions, each started by the end of the one before,
that runs from the step's start to its makespan) are outlined in black, and the legend says
so; :mod:`ppbook.critical_path` gives the same path's length as a sympy expression.

The title names both bubble conventions (REFERENCES.md): the bubble fraction
f = idle/total (GPipe, arXiv:1811.06965) and the bubble ratio r = idle/compute
(Megatron-LM, arXiv:2104.04473; the Ultra-Scale Playbook's r_bubble). A timeline of a
schedule with several chunks per rank also states the cost convention that lets it be
compared with others (:mod:`ppbook.costs`): costs time one device's share of the model,
and a chunk pass takes ``cost * schedule.chunk_share``. The time axis names
:attr:`~ppbook.timeline.Timeline.time_unit`.

The boxes of one kind on one chunk are one :class:`~matplotlib.collections.PolyCollection`
(label = the kind), so drawing stays fast for tens of thousands of actions; a later chunk's
hatching lies over its boxes as one compound path (gid :data:`HATCH_GID`). Times are
drawn relative to :attr:`~ppbook.timeline.Timeline.origin`. On axes that share their time
axis with others (two runs one above the other), the axis ends at the longest of their
makespans, in whichever order they are drawn. A new figure is as wide as the notebook column
(:mod:`ppbook.views.figure`). The memory panel is
:func:`ppbook.views.memory_panel.plot_memory`. This module never changes matplotlib's
global settings; it imports pyplot only to make a new figure when no axes are given.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.patches import Patch, PathPatch
from matplotlib.path import Path

from ppbook.pipeline_schedule import Schedule
from ppbook.timeline import Timeline
from ppbook.validate import validate
from ppbook.views.colors import DRAWN_KINDS, IDLE_COLOR, KIND_COLORS, KIND_NAMES, shade, shades
from ppbook.views.figure import COLUMN_WIDTH, column_figure, min_font_size, text_size
from ppbook.views.labels import BoxLabel
from ppbook.views.memory_panel import plot_memory
from ppbook.views.text import plural

LANE_HEIGHT = 0.8  # box height, in rank units
MAX_HATCHED = 600  # hatch chunks by default up to this many boxes (hatching draws slowly)
CHUNK_HATCHES = (None, "////", "\\\\\\\\", "xxxx")  # a rank's first, second, ... chunk
LANES_GID = "ppbook-timeline-lanes"  # the idle lanes' id: where a drawn timeline ends
HATCH_GID = "ppbook-chunk-hatching"  # the hatching over a later chunk's boxes
CRITICAL_GID = "ppbook-critical-path"  # the outlines of the critical path's actions
CRITICAL_LABEL = "critical path"


def chunk_cost_note(schedule: Schedule) -> str:
    """The cost convention, said for ``schedule``: what one chunk pass takes."""
    share = schedule.chunk_share
    scaled = "the full cost" if share == 1 else f"cost/{1 / share:g}"
    return f"costs per device share (1/p of the model); a chunk pass takes {scaled}"


def title_text(timeline: Timeline, convention: bool = True) -> str:
    """Schedule, p, m, v, makespan (with its unit) and both bubble conventions, by name.

    With ``convention``, a simulated or closed-form timeline whose ranks hold several
    chunks adds :func:`chunk_cost_note` on a third line.
    """
    schedule = timeline.schedule
    p, m = schedule.num_ranks, schedule.num_microbatches
    v = schedule.num_stages / p
    measured = "" if timeline.source == "simulated" else f" ({timeline.source})"
    text = (
        f"{schedule.name}{measured}: p = {p}, m = {m}, v = {v:g}, "
        f"makespan = {timeline.makespan:.4g} {plural(timeline.time_unit)}\n"
        f"bubble fraction f = idle/total = {timeline.bubble_fraction:.3f},  "
        f"bubble ratio r = idle/compute = {timeline.bubble_ratio:.3f}"
    )
    if convention and timeline.source != "measured" and v != 1:
        text += "\n" + chunk_cost_note(schedule)
    return text


class Boxes(NamedTuple):
    """The boxes of one kind on one chunk: times relative to the origin, ranks, labels."""

    starts: list[float]
    ends: list[float]
    ranks: list[int]
    microbatches: list[int]
    steps: list  # the actions, for their labels


def timeline_boxes(timeline: Timeline) -> dict[tuple[str, int], Boxes]:
    """The boxes to draw, grouped by ``(kind, chunk)``.

    ``chunk`` is the position of the action's stage among its rank's stages (0 for
    schedules with one stage per rank). An overlapped pair is kind ``"OVERLAP_F_B"``,
    shaded by its forward's micro-batch.
    """
    origin = timeline.origin
    schedule = timeline.schedule
    chunk_of = {
        s: c for r in range(schedule.num_ranks) for c, s in enumerate(schedule.stages_on(r))
    }
    out: dict[tuple[str, int], Boxes] = {}
    for rank, (row, starts, ends) in enumerate(
        zip(schedule.actions, timeline.starts, timeline.ends, strict=True)
    ):
        for action, start, end in zip(row, starts, ends, strict=True):
            first = action.parts[0]
            key = (action.kind, chunk_of[first.stage])
            boxes = out.get(key)
            if boxes is None:
                boxes = out[key] = Boxes([], [], [], [], [])
            boxes.starts.append(start - origin)
            boxes.ends.append(end - origin)
            boxes.ranks.append(rank)
            boxes.microbatches.append(first.microbatch)
            boxes.steps.append(action)
    return out


def plot_timeline(
    timeline: Timeline,
    ax=None,
    *,
    memory: bool = False,
    memory_ax=None,
    in_bytes: bool = False,
    labels: bool | None = None,
    title: bool | str = True,
    legend: bool = True,
    max_hatched: int = MAX_HATCHED,
    critical_path: bool = False,
):
    """Draw ``timeline`` as a Gantt chart; return the figure.

    ``ax``: axes to draw into (default: a new pyplot figure). ``memory`` (or a given
    ``memory_ax``) adds the activations-over-time panel below
    (:func:`~ppbook.views.memory_panel.plot_memory`: micro-batch activations of a full stage, or
    bytes with ``in_bytes``). ``labels``: micro-batch numbers in the boxes (default
    ``None``: where they can be read; ``True``: in every box, at least at the smallest
    readable size; ``False``: none). On axes that share x with others the time axis
    ends at the last end any of them needs: a shorter run never cuts off a longer one.
    The boxes of a rank's second, third, ... chunk are hatched when there are at most
    ``max_hatched`` of them (hatching is slow to draw; 0 turns it off). The time axis
    says the timeline's :attr:`~ppbook.timeline.Timeline.time_unit`. ``critical_path``:
    outline the actions of :func:`critical_actions` (a one-step timeline only) and add
    "critical path" to the legend.
    """
    marked = critical_actions(timeline) if critical_path else []
    if ax is None:
        _, ax, memory_ax = _new_figure(timeline.num_ranks, memory or memory_ax is not None)
    elif memory and memory_ax is None:
        raise ValueError("plot_timeline(ax=...) with memory=True also needs memory_ax")
    p = timeline.num_ranks
    m = timeline.schedule.num_microbatches
    end = timeline.makespan if timeline.makespan > 0 else 1.0
    half = LANE_HEIGHT / 2

    right = _shared_right(ax, end)
    lanes = np.array(
        [[(0.0, r - half), (0.0, r + half), (end, r + half), (end, r - half)] for r in range(p)]
    )
    ax.add_collection(
        PolyCollection(
            lanes, facecolors=IDLE_COLOR, edgecolors="none", label="idle", gid=LANES_GID, zorder=1
        ),
        autolim=False,
    )
    groups = timeline_boxes(timeline)
    px_per_unit = _axes_width_px(ax) / right
    widths = np.sort(np.concatenate([np.subtract(g.ends, g.starts) for g in groups.values()]))
    narrow = not widths.size or widths[widths.size // 2] * px_per_unit < 4
    hatched = sum(len(g.starts) for (_, chunk), g in groups.items() if chunk)
    hatch_chunks = 0 < hatched <= max_hatched
    for (kind, chunk), g in groups.items():
        a, b = np.asarray(g.starts), np.asarray(g.ends)
        low, high = np.asarray(g.ranks) - half, np.asarray(g.ranks) + half
        verts = np.stack(
            [
                np.stack([a, low], 1),
                np.stack([a, high], 1),
                np.stack([b, high], 1),
                np.stack([b, low], 1),
            ],
            axis=1,
        )  # (boxes, 4 corners, xy)
        boxes = PolyCollection(
            verts,
            facecolors=shades(kind, g.microbatches, m),
            edgecolors="white",
            linewidths=0.0 if narrow else 0.6,
            label=kind,
            zorder=2,
        )
        ax.add_collection(boxes, autolim=False)  # the limits are set below
        hatch = CHUNK_HATCHES[chunk % len(CHUNK_HATCHES)] if hatch_chunks else None
        if hatch:
            ax.add_artist(_hatching(verts, hatch))
    if labels is None or labels:
        _label_boxes(ax, timeline, groups, px_per_unit, hatch_chunks, force=bool(labels))
    if marked:
        ax.add_collection(_outlines(timeline, marked), autolim=False)

    ax.set_xlim(0, right)
    ax.set_ylim(p - 1 + 0.6, -0.6)  # rank 0 on top
    ax.set_yticks(range(p), [f"rank {r}" for r in range(p)])
    ax.tick_params(axis="y", length=0)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    if memory_ax is None:
        ax.set_xlabel(f"time ({timeline.time_unit})")
    if legend:
        handles = _legend_handles(groups, hatch_chunks)
        if marked:
            handles.append(
                Patch(facecolor="none", edgecolor="black", linewidth=1.6, label=CRITICAL_LABEL)
            )
        ax.legend(
            handles=handles,
            ncols=1 if len(handles) <= max(p, 4) else 2,
            loc="upper left",
            bbox_to_anchor=(1.005, 1.0),
            frameon=False,
            fontsize=text_size(ax.figure, "small"),
            title="kind (lighter =\nlater micro-batch)",
            title_fontsize=text_size(ax.figure, "small"),
        )
    if title:
        text = title if isinstance(title, str) else title_text(timeline)
        ax.set_title(text, fontsize=text_size(ax.figure, "medium"))
    if memory_ax is not None:
        plot_memory(timeline, memory_ax, in_bytes=in_bytes, legend=legend)
        memory_ax.set_xlim(0, right)
    return ax.figure


def critical_actions(timeline: Timeline) -> list[tuple[int, int]]:
    """One critical path of ``timeline``: ``(rank, position)`` of its actions, first to last.

    Walked back from the action that ends last: each action's predecessor is the one whose
    end let it start, its rank's previous action when that ended at its start, else the
    dependency (:mod:`ppbook.dependencies`' rule) that ended last (the gap between them is a
    transfer). Without transfers the path's durations add up to the makespan with no gap;
    where two predecessors end together the rank's own comes first. Measured timelines
    take the same walk (their gaps include waits the simulator does not model).
    """
    if timeline.steps != 1:
        raise ValueError(
            f"the critical path is marked on a one-step timeline, got {timeline.steps} steps; "
            "simulate with steps=1"
        )
    index = validate(timeline.schedule)
    starts, ends = timeline.starts, timeline.ends
    if not any(ends):
        return []
    tol = 1e-9 * max(1.0, abs(timeline.makespan))
    place = {}  # step id -> (rank, position)
    for rank, row in enumerate(timeline.schedule.actions):
        for position in range(len(row)):
            place[index.first[rank] + position] = (rank, position)
    last = max(
        ((r, k) for r, row in enumerate(ends) for k in range(len(row))),
        key=lambda rk: (ends[rk[0]][rk[1]], -rk[0]),
    )
    path = [last]
    while True:
        rank, position = path[-1]
        start = starts[rank][position]
        step_id = index.first[rank] + position
        needed = {
            index.where[key]
            for part in index.steps[step_id].parts
            for key in index.dependencies(*part)
        } - {step_id, -1}
        before = [place[sid] for sid in needed]
        previous = (rank, position - 1) if position else None
        if previous and abs(ends[rank][position - 1] - start) <= tol:
            path.append(previous)
        elif before:
            path.append(max(before, key=lambda rk: (ends[rk[0]][rk[1]], -rk[0])))
        elif previous:
            path.append(previous)
        else:
            break
    return path[::-1]


def _outlines(timeline: Timeline, marked: list[tuple[int, int]]) -> PolyCollection:
    """Black outlines of the boxes of ``marked`` actions (gid :data:`CRITICAL_GID`)."""
    origin, half = timeline.origin, LANE_HEIGHT / 2
    verts = [
        [(a, r - half), (a, r + half), (b, r + half), (b, r - half)]
        for r, k in marked
        for a, b in [(timeline.starts[r][k] - origin, timeline.ends[r][k] - origin)]
    ]
    return PolyCollection(
        verts,
        facecolors="none",
        edgecolors="black",
        linewidths=1.6,
        label=CRITICAL_LABEL,
        gid=CRITICAL_GID,
        zorder=2.5,
    )


def _shared_right(ax, end: float) -> float:
    """The right end of ``ax``'s time axis: ``end``, or the end of a longer timeline whose
    lanes are drawn on an axes that shares the time axis (found by :data:`LANES_GID`)."""
    ends = [end]
    for other in ax.get_shared_x_axes().get_siblings(ax):
        for collection in other.collections:
            if collection.get_gid() == LANES_GID:
                ends += [path.vertices[:, 0].max() for path in collection.get_paths()]
    return float(max(ends))


def _hatching(verts: np.ndarray, hatch: str) -> PathPatch:
    """White ``hatch`` over the boxes ``verts`` (boxes, 4 corners, xy) as one compound
    path: Agg fills it with the pattern once, where a hatched collection renders the
    pattern box by box (four times slower for a few hundred boxes, the same pixels)."""
    closed = np.concatenate([verts, verts[:, :1]], axis=1).reshape(-1, 2)
    codes = np.tile(
        [Path.MOVETO, Path.LINETO, Path.LINETO, Path.LINETO, Path.CLOSEPOLY], len(verts)
    )
    patch = PathPatch(
        Path(closed, codes),
        facecolor="none",
        edgecolor="white",
        linewidth=0.0,
        hatch=hatch,
        gid=HATCH_GID,
        zorder=2.1,
    )
    if hasattr(patch, "set_hatch_linewidth"):  # matplotlib >= 3.10
        patch.set_hatch_linewidth(0.6)
    return patch


def _legend_handles(groups, hatch_chunks: bool) -> list[Patch]:
    kinds = {kind for kind, _ in groups}
    handles = [Patch(color=KIND_COLORS[k], label=KIND_NAMES[k]) for k in DRAWN_KINDS if k in kinds]
    handles.append(Patch(color=IDLE_COLOR, label="idle"))
    chunks = sorted({chunk for _, chunk in groups})
    if hatch_chunks and len(chunks) > 1:
        handles += [
            Patch(
                facecolor="#777777",
                edgecolor="white",
                hatch=CHUNK_HATCHES[c % len(CHUNK_HATCHES)],
                label=f"chunk {c}",
            )
            for c in chunks
        ]
    return handles


def timeline_figure(
    timeline: Timeline,
    *,
    memory: bool = True,
    pyplot: bool = False,
    width: float = COLUMN_WIDTH,
    **kwargs,
):
    """A new figure of ``timeline`` (with the memory panel unless ``memory=False``),
    ``width`` inches wide (default: the notebook column, :mod:`ppbook.views.figure`).

    The figure is not registered with pyplot unless ``pyplot=True``, so it can be saved
    (``fig.savefig``) or embedded in a widget without touching pyplot's state.
    ``kwargs`` go to :func:`plot_timeline`.
    """
    fig, ax, memory_ax = _new_figure(timeline.num_ranks, memory, pyplot, width)
    return plot_timeline(timeline, ax, memory_ax=memory_ax, **kwargs)


def _new_figure(num_ranks: int, memory: bool, pyplot: bool = True, width: float = COLUMN_WIDTH):
    lane_in = 0.36 if num_ranks <= 8 else 0.24  # inches per rank
    memory_in = 1.2 if num_ranks <= 4 else 1.6
    height = 1.2 + max(lane_in * num_ranks, 1.6) + (memory_in + 0.4 if memory else 0.0)
    fig = column_figure(height, width=width, pyplot=pyplot)
    if not memory:
        return fig, fig.add_subplot(), None
    ax, memory_ax = fig.subplots(
        2, 1, sharex=True, height_ratios=(max(lane_in * num_ranks, 1.6), memory_in)
    )
    return fig, ax, memory_ax


def _axes_width_px(ax) -> float:
    fig = ax.figure
    return ax.get_position().width * fig.get_figwidth() * fig.dpi


def _label_boxes(
    ax, timeline: Timeline, groups, px_per_unit: float, hatch_chunks: bool, force: bool
) -> None:
    """Micro-batch numbers inside the boxes (:class:`~ppbook.views.labels.BoxLabel`: each
    decides when drawn whether it fits). Boxes far too narrow for one digit at the plot's
    present scale get no label at all, so a chart of thousands of actions stays fast."""
    fig = ax.figure
    smallest = min_font_size(fig)
    one_char_px = 0.5 * smallest * fig.dpi / 72  # half a digit: slack for a later layout
    m = timeline.schedule.num_microbatches
    for (kind, chunk), g in groups.items():
        for a, b, r, j, step in zip(
            g.starts, g.ends, g.ranks, g.microbatches, g.steps, strict=True
        ):
            if (b - a) * px_per_unit < one_char_px and not force:
                continue
            red, green, blue = shade(kind, j, m)
            dark = 0.299 * red + 0.587 * green + 0.114 * blue < 0.6
            label = BoxLabel(
                a,
                b,
                r,
                "|".join(str(part.microbatch) for part in step.parts),
                height=LANE_HEIGHT,
                largest=max(9.0, smallest),
                smallest=smallest,
                force=force,
                hatched=hatch_chunks and chunk > 0,
                color="white" if dark else "black",
            )
            ax.add_artist(label)
