"""A timeline as text, for the terminal (``ppbook simulate``) and for quick looks (chapter 2).

One line per rank, time scaled to ``width`` columns. Each column shows what the rank runs
at the middle of the column's time slice: its kind's letter (``F``, ``B``, ``I``, ``W``,
``X`` for an overlapped F&B pair), upper case on even micro-batches and lower case on odd
ones so that neighbouring actions stay apart, or ``.`` when the rank is idle.

Every action that takes time gets at least one column: a width too narrow for that is
refused with the width that would do (:func:`needed_width`), rather than drop actions.
A drawing is bounded before anything is allocated: at most :data:`MAX_COLUMNS` columns and
:data:`MAX_CELLS` characters (ranks times columns); a timeline whose shortest action would
need more is refused (:func:`check_width`), and :func:`needed_width` stops counting there.
"""

from __future__ import annotations

import math
import numbers
import operator

from ppbook.checks import shown
from ppbook.timeline import ACTIVATION_UNIT, Timeline

KIND_CHARS = {"F": "F", "B": "B", "I": "I", "W": "W", "OVERLAP_F_B": "X"}
KIND_NAMES = {
    "F": "forward",
    "B": "backward",
    "I": "input grad",
    "W": "weight grad",
    "OVERLAP_F_B": "overlapped F&B",
}
IDLE_CHAR = "."
DEFAULT_WIDTH = 100
"""Columns of a text timeline when no width is given and every action fits in them."""
MAX_COLUMNS = 100_000
"""Most columns of a text timeline (``width``); wider ones are refused before drawing."""
MAX_CELLS = 10_000_000
"""Most characters of a text timeline's rows, ranks times columns (about 10 MB of text)."""


def most_columns(num_ranks: int) -> int:
    """The widest text timeline of ``num_ranks`` ranks that is drawn: :data:`MAX_COLUMNS`,
    or fewer so that the rows hold at most :data:`MAX_CELLS` characters."""
    return max(1, min(MAX_COLUMNS, MAX_CELLS // max(1, num_ranks)))


def check_width(width: int, num_ranks: int = 1, flag: str = "width") -> int:
    """``width`` if a text timeline of ``num_ranks`` ranks may be drawn that wide, else a
    ValueError naming ``flag`` and the widest allowed (checked before anything is drawn)."""
    if isinstance(width, bool) or not isinstance(width, numbers.Integral) or width < 1:
        raise ValueError(f"{flag} must be a whole number of columns >= 1, got {shown(width)}")
    width = int(width)
    most = most_columns(num_ranks)
    if width > most:
        ranks = f" for {num_ranks:,} ranks" if most < MAX_COLUMNS else ""
        raise ValueError(
            f"{flag} {width:,} is too wide for a text timeline: give {flag} {most:,} or fewer "
            f"columns{ranks} (at most {MAX_COLUMNS:,} columns and {MAX_CELLS:,} characters)"
        )
    return width


def plural(unit: str) -> str:
    """``"time units"`` for ``"time unit"``; a symbol such as ``"s"`` stays as it is."""
    return unit + "s" if unit == "time unit" else unit


def needed_width(timeline: Timeline) -> int:
    """The fewest columns that give every action of positive duration a column of its own.

    With a column no longer than the shortest action, every action covers the middle of
    some column: about ``ceil(makespan / shortest)`` (1 when no action takes time), more
    where rounding at a column's middle needs it. Beyond what may be drawn
    (:func:`most_columns`) nothing is drawn to count: the answer is then that lower bound
    (at most ``2**63``), enough to say the timeline is too wide.
    """
    durations = (
        map(operator.sub, e, s) for s, e in zip(timeline.starts, timeline.ends, strict=True)
    )
    shortest = min((d for row in durations for d in row if d > 0), default=0.0)
    if shortest <= 0:
        return 1
    ratio = min(timeline.makespan / shortest - 1e-9, 2.0**63)  # 104.99999... is 105; inf
    width = max(1, math.ceil(ratio))
    most = most_columns(timeline.num_ranks)
    while width <= most and _draw(timeline, width) is None:  # rounding: one more column
        width += 1
    return width


def text_timeline(timeline: Timeline, width: int | None = None, legend: bool = True) -> str:
    """``timeline`` drawn in ``width`` columns, one line per rank, then a legend.

    ``width=None`` takes :data:`DEFAULT_WIDTH` columns, or :func:`needed_width` when every
    action needs more. A given width too narrow to show every action is refused, and so
    is one wider than :func:`most_columns` allows (also when the actions would need it),
    before anything is drawn.
    """
    if width is not None:
        width = check_width(width, timeline.num_ranks)
    else:
        width = max(DEFAULT_WIDTH, needed_width(timeline))
        most = most_columns(timeline.num_ranks)
        if width > most:
            raise ValueError(
                f"a text timeline would need {width:,} columns to show every action, more "
                f"than the {most:,} drawn at most; look at the timeline as a picture or a "
                "Chrome trace instead (ppbook.views)"
            )
    rows = _draw(timeline, width)
    if rows is None:
        needed = needed_width(timeline)
        more = "" if needed <= most_columns(timeline.num_ranks) else ", more than are drawn"
        raise ValueError(
            f"a text timeline {width} columns wide would drop actions shorter than a column; "
            f"{needed} columns show every action{more}"
        )
    label_width = len(f"rank {timeline.num_ranks - 1}")
    lines = [f"{f'rank {rank}':>{label_width}} |{row}|" for rank, row in enumerate(rows)]
    if legend:
        step = timeline.makespan / width if timeline.makespan > 0 else 1.0
        kinds = {action.kind for row in timeline.schedule.actions for action in row}
        names = [f"{KIND_CHARS[k]} {name}" for k, name in KIND_NAMES.items() if k in kinds]
        lines.append(f"{'':>{label_width}}  " + ", ".join([*names, f"{IDLE_CHAR} idle"]))
        lines.append(
            f"{'':>{label_width}}  upper case: even micro-batch, lower case: odd; "
            f"one column = {step:.4g} {plural(timeline.time_unit)}"
        )
    return "\n".join(lines)


def _draw(timeline: Timeline, width: int) -> list[str] | None:
    """Each rank's ``width`` cells, or None if an action that takes time gets no column."""
    makespan = timeline.makespan
    step = makespan / width if makespan > 0 else 1.0
    origin = timeline.origin
    rows = []
    for row, starts, ends in zip(
        timeline.schedule.actions, timeline.starts, timeline.ends, strict=True
    ):
        cells = [IDLE_CHAR] * width
        for action, start, end in zip(row, starts, ends, strict=True):
            # columns whose middle, (c + 1/2) * step, lies in [start, end)
            first = max(0, math.ceil((start - origin) / step - 0.5))
            stop = min(width, math.ceil((end - origin) / step - 0.5))
            if first >= stop:
                if end > start:
                    return None
                continue
            char = KIND_CHARS[action.kind]
            if action.parts[0].microbatch % 2:
                char = char.lower()
            cells[first:stop] = char * (stop - first)
        rows.append("".join(cells))
    return rows


def metrics_text(timeline: Timeline) -> str:
    """Makespan, both bubble conventions and the Zero Bubble paper's rate by name, the period
    when several steps ran, and busy, idle, peak memory and span per rank."""
    metrics = timeline.metrics()
    schedule = timeline.schedule
    unit = plural(timeline.time_unit)
    lines = [
        f"{schedule.name} ({timeline.source}): p = {metrics['num_ranks']} ranks, "
        f"{schedule.num_stages} stages, m = {metrics['num_microbatches']} micro-batches"
        + (f" per step, {timeline.steps} steps; " if timeline.steps > 1 else "; ")
        + f"times in {unit}",
        f"makespan                         {metrics['makespan']:.6g} {unit}",
        f"bubble fraction f = idle/total   {metrics['bubble_fraction']:.4f}",
        f"bubble ratio r = idle/compute    {metrics['bubble_ratio']:.4f}",
        f"Zero Bubble paper's bubble rate  {metrics['zb_bubble_rate']:.4f}"
        + "  (1 - most compute of a rank / longest rank span"
        + (", in the last step)" if timeline.steps > 1 else ")"),
    ]
    if timeline.steps > 1:
        lines += [
            f"steps                            {timeline.steps}, sync {timeline.sync}",
            f"period (steady-state step time)  {metrics['period']:.6g} {unit}",
            f"bubble fraction of one period    {metrics['period_bubble_fraction']:.4f}",
        ]
    lines.append(f"peak activations: in {ACTIVATION_UNIT} (one device's share of the model)")
    span = "span in the last step" if timeline.steps > 1 else "span"
    in_bytes = "peak_activation_bytes" in metrics
    lines.append(
        "rank        busy        idle   peak activations"
        + ("   peak bytes" if in_bytes else "")
        + f"   {span}"
    )
    for rank in range(metrics["num_ranks"]):
        line = (
            f"{rank:>4} {metrics['busy'][rank]:>11.6g} {metrics['idle'][rank]:>11.6g} "
            f"{metrics['peak_activations_full_stage'][rank]:>18.4g}"
        )
        if in_bytes:
            line += f" {metrics['peak_activation_bytes'][rank]:>12.6g}"
        line += f"   {metrics['rank_spans'][rank]:.6g}"
        lines.append(line)
    return "\n".join(lines)
