"""Export a timeline to the Chrome trace format, for Perfetto and chrome://tracing (chapter 2).

The format is the "Trace Event Format" (Google, "Trace Event Format" document, used by
chrome://tracing, https://ui.perfetto.dev and PyTorch's profiler): a JSON object with a
``traceEvents`` list. Each action becomes a complete event (``"ph": "X"``) with ``ts`` and
``dur`` in microseconds, on the track (``tid``) of its rank, named ``rank r`` by a
``thread_name`` metadata event (``"ph": "M"``). The activations each rank holds are
counter events (``"ph": "C"``), one counter track per rank.

Times are relative to the timeline's origin and scaled by ``time_unit_us``, the number of
microseconds one unit of :attr:`~ppbook.timeline.Timeline.time_unit` stands for. A measured
timeline (:mod:`ppbook.runtime`) is in seconds: 1 s = 1e6 us. A simulated or closed-form
timeline is unitless (``"time unit"``: whatever the costs were given in, one forward = 1 by
default); every unitless timeline is drawn at one scale, 1 time unit = 1 ms, so the trace
reads "forward = 1 ms". ``otherData`` records the unit, the scale and what it means, and the
unit of the activation counters.
"""

from __future__ import annotations

import json
from pathlib import Path

from ppbook.timeline import ACTIVATION_UNIT, Timeline

UNIT_US = {"s": 1e6, "ms": 1e3, "us": 1.0}
"""Microseconds in each physical time unit a timeline may be in."""
UNITLESS_US = 1000.0  # one time unit of a unitless timeline is drawn as 1 ms


def to_chrome_trace(
    timeline: Timeline, path: str | Path | None = None, time_unit_us: float | None = None
) -> dict:
    """The Chrome trace of ``timeline`` as a dict; also written as JSON to ``path`` if given.

    ``time_unit_us``: microseconds per unit of ``timeline.time_unit`` (default: 1e6 for
    seconds, as :data:`UNIT_US` says for physical units, and :data:`UNITLESS_US` = 1000
    for a unitless timeline).
    """
    unit = timeline.time_unit
    if time_unit_us is None:
        time_unit_us = UNIT_US.get(unit, UNITLESS_US)
    if not time_unit_us > 0:
        raise ValueError(
            f"time_unit_us must be > 0 (microseconds per time unit), got {time_unit_us}"
        )
    schedule = timeline.schedule
    origin = timeline.origin
    pid = 0
    events: list[dict] = [
        {
            "name": "process_name",
            "ph": "M",
            "pid": pid,
            "tid": 0,
            "args": {"name": f"ppbook {timeline.source}: {schedule.name}"},
        }
    ]
    for rank in range(timeline.num_ranks):
        events.append(
            {
                "name": "thread_name",
                "ph": "M",
                "pid": pid,
                "tid": rank,
                "args": {"name": f"rank {rank}"},
            }
        )
        events.append(
            {
                "name": "thread_sort_index",
                "ph": "M",
                "pid": pid,
                "tid": rank,
                "args": {"sort_index": rank},
            }
        )
    for rank, (row, starts, ends) in enumerate(
        zip(schedule.actions, timeline.starts, timeline.ends, strict=True)
    ):
        for action, start, end in zip(row, starts, ends, strict=True):
            parts = action.parts
            if len(parts) == 1:
                args = {"stage": action.stage, "kind": action.kind, "microbatch": action.microbatch}
            else:
                args = {
                    "stage": [a.stage for a in parts],
                    "kind": action.kind,
                    "microbatch": [a.microbatch for a in parts],
                }
            events.append(
                {
                    "name": str(action),
                    "cat": action.kind,
                    "ph": "X",
                    "pid": pid,
                    "tid": rank,
                    "ts": (start - origin) * time_unit_us,
                    "dur": (end - start) * time_unit_us,
                    "args": args,
                }
            )
        for time, amount in timeline.memory(rank):
            events.append(
                {
                    "name": f"activations rank {rank}",
                    "ph": "C",
                    "pid": pid,
                    "ts": (time - origin) * time_unit_us,
                    "args": {ACTIVATION_UNIT: amount},
                }
            )
    trace = {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "time_unit": unit,
            "time_unit_us": time_unit_us,
            "time_scale": _scale_text(unit, time_unit_us),
            "activation_unit": ACTIVATION_UNIT,
            "source": timeline.source,
            "schedule": schedule.name,
            "num_ranks": timeline.num_ranks,
            "num_stages": schedule.num_stages,
            "num_microbatches": schedule.num_microbatches,
            "makespan": timeline.makespan,
            "bubble_fraction (idle/total)": timeline.bubble_fraction,
            "bubble_ratio (idle/compute)": timeline.bubble_ratio,
        },
    }
    if path is not None:
        Path(path).write_text(json.dumps(trace))
    return trace


def _scale_text(unit: str, time_unit_us: float) -> str:
    """What one time unit of the timeline is in the trace, and whether that is measured."""
    text = f"1 {unit} of the timeline = {time_unit_us:g} us in this trace"
    if unit in UNIT_US:
        return text
    return text + " (the timeline's times are unitless costs, so this scale is a choice)"
