"""A timeline as text, for the terminal (``ppbook simulate``) and for quick looks (chapter 2).

One line per rank, time scaled to ``width`` columns. Each column shows what the rank runs
at the middle of the column's time slice: its kind's letter (``F``, ``B``, ``I``, ``W``,
``X`` for an overlapped F&B pair), upper case on even micro-batches and lower case on odd
ones so that neighbouring actions stay apart, or ``.`` when the rank is idle.
"""

from __future__ import annotations

import math

from ppbook.timeline import Timeline

KIND_CHARS = {"F": "F", "B": "B", "I": "I", "W": "W", "OVERLAP_F_B": "X"}
KIND_NAMES = {
    "F": "forward",
    "B": "backward",
    "I": "input grad",
    "W": "weight grad",
    "OVERLAP_F_B": "overlapped F&B",
}
IDLE_CHAR = "."


def text_timeline(timeline: Timeline, width: int = 100, legend: bool = True) -> str:
    """``timeline`` drawn in ``width`` columns, one line per rank, then a legend."""
    if width < 1:
        raise ValueError(f"width must be >= 1 column, got {width}")
    makespan = timeline.makespan
    step = makespan / width if makespan > 0 else 1.0
    origin = timeline.origin
    label_width = len(f"rank {timeline.num_ranks - 1}")
    lines = []
    for rank, (row, starts, ends) in enumerate(
        zip(timeline.schedule.actions, timeline.starts, timeline.ends, strict=True)
    ):
        cells = [IDLE_CHAR] * width
        for action, start, end in zip(row, starts, ends, strict=True):
            # columns whose middle, (c + 1/2) * step, lies in [start, end)
            first = max(0, math.ceil((start - origin) / step - 0.5))
            stop = min(width, math.ceil((end - origin) / step - 0.5))
            char = KIND_CHARS[action.kind]
            if action.parts[0].microbatch % 2:
                char = char.lower()
            for c in range(first, stop):
                cells[c] = char
        lines.append(f"{f'rank {rank}':>{label_width}} |{''.join(cells)}|")
    if legend:
        kinds = {action.kind for row in timeline.schedule.actions for action in row}
        names = [f"{KIND_CHARS[k]} {name}" for k, name in KIND_NAMES.items() if k in kinds]
        lines.append(f"{'':>{label_width}}  " + ", ".join([*names, f"{IDLE_CHAR} idle"]))
        lines.append(
            f"{'':>{label_width}}  upper case: even micro-batch, lower case: odd; "
            f"one column = {step:.4g} {'s' if timeline.source == 'measured' else 'time units'}"
        )
    return "\n".join(lines)


def metrics_text(timeline: Timeline) -> str:
    """Makespan, both bubble conventions by name, and busy, idle and peak memory per rank."""
    schedule = timeline.schedule
    p = timeline.num_ranks
    lines = [
        f"{schedule.name} ({timeline.source}): p = {p} ranks, {schedule.num_stages} stages, "
        f"m = {schedule.num_microbatches} micro-batches",
        f"makespan                         {timeline.makespan:.6g}",
        f"bubble fraction f = idle/total   {timeline.bubble_fraction:.4f}",
        f"bubble ratio r = idle/compute    {timeline.bubble_ratio:.4f}",
    ]
    in_bytes = timeline.activation_bytes is not None
    lines.append(
        "rank        busy        idle   peak activations" + ("   peak bytes" if in_bytes else "")
    )
    for rank in range(p):
        line = (
            f"{rank:>4} {timeline.busy(rank):>11.6g} {timeline.idle(rank):>11.6g} "
            f"{timeline.peak_activations(rank):>18d}"
        )
        if in_bytes:
            line += f" {timeline.peak_activation_bytes(rank):>12.6g}"
        lines.append(line)
    return "\n".join(lines)
