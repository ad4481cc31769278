"""A schedule handed in as data (one list of action strings per rank), read for the scores
of assignments 2 and 4 (:mod:`.score_schedules`, :mod:`.score_design`).

Before anything is simulated, :func:`read_rows` checks the rows against the problem they
answer, on its own and whatever :func:`ppbook.validate.validate` accepts: p ranks, rank r
runs stage r only, every micro-batch 0..m-1 passes every stage, each pass exactly once, in
the kinds the assignment allows (whole backwards B, or a split I and W). A schedule that
leaves a stage idle, drops a micro-batch or runs one twice is refused here with the rank
and the actions that are missing or extra. The scores then time it with
:func:`ppbook.simulate.simulate` (a deadlock names the stuck ranks and the actions they
wait for), and :func:`over_limit` says which rank goes over a memory limit, when, and by
how much.
"""

from __future__ import annotations

import re
from collections import Counter

from ppbook.checks import joined_lines
from ppbook.pipeline_schedule import Schedule
from ppbook.timeline import ACTIVATION_UNIT, Timeline

_ACTION = re.compile(r"^(\d{1,6})([FBIW])(\d{1,6})$")


def one_line(error: Exception) -> str:
    """An error's message on one line (:func:`ppbook.checks.joined_lines`), cut to 400
    characters."""
    return joined_lines(error, 400)


def _listed(actions: list[str], most: int = 4) -> str:
    shown = ", ".join(actions[:most])
    return shown + (f" and {len(actions) - most} more" if len(actions) > most else "")


def read_rows(rows: object, p: int, m: int, split: bool, who: str) -> Schedule:
    """``rows`` as the schedule of p ranks and m micro-batches it must be, stage r on rank r;
    ValueError saying what is wrong with it.

    Every micro-batch j passes every stage r: rank r runs ``rFj`` once and its backward,
    ``rBj`` once, or with ``split`` either that or ``rIj`` and ``rWj`` once each.
    """
    if not isinstance(rows, list) or not all(
        isinstance(row, list) and all(isinstance(a, str) for a in row) for row in rows
    ):
        raise ValueError(
            f"{who} must return one list of action strings per rank, such as "
            f'[["0F0", "0B0"], ["1F0", "1B0"]], got {rows!r:.80}'
        )
    if len(rows) != p:
        raise ValueError(f"{who}: expected {p} ranks (one list each), got {len(rows)}")
    backward = "B, or I and W" if split else "B"
    for rank, row in enumerate(rows):
        if not row:
            raise ValueError(
                f"{who}: rank {rank} runs nothing, so no micro-batch passes stage {rank}; "
                f"every micro-batch passes every stage: rank r runs F and {backward} of each "
                f"micro-batch 0..{m - 1} on stage r"
            )
        _check_row(row, rank, m, split, who)
    return Schedule.from_strings(rows, tuple(range(p)), m, name=who)


def _check_row(row: list[str], rank: int, m: int, split: bool, who: str) -> None:
    kinds = "FBIW" if split else "FB"
    for text in row:
        match = _ACTION.match(text.strip())
        if not match or match.group(2) not in kinds:
            raise ValueError(
                f"{who}: cannot read {text!r:.40} on rank {rank}: write each action as "
                f"<stage><{'|'.join(kinds)}><micro-batch>, such as '{rank}F0'"
            )
        stage, _, microbatch = match.groups()
        if int(stage) != rank:
            raise ValueError(
                f"{who}: rank {rank} runs {text.strip()}, but rank r holds stage r only "
                f"(its actions read '{rank}F0', '{rank}B0', ...)"
            )
        if int(microbatch) >= m:
            raise ValueError(
                f"{who}: rank {rank} runs {text.strip()}, but the micro-batches are 0 to {m - 1}"
            )
    counts = Counter(text.strip() for text in row)
    twice = [action for action, count in counts.items() if count > 1]
    if twice:
        raise ValueError(
            f"{who}: rank {rank} runs {_listed(twice)} more than once; each pass of each "
            "micro-batch runs exactly once"
        )
    missing, mixed = [], []
    for j in range(m):
        forward, whole, parts = f"{rank}F{j}", f"{rank}B{j}", (f"{rank}I{j}", f"{rank}W{j}")
        if forward not in counts:
            missing.append(forward)
        split_parts = [part for part in parts if part in counts]
        if whole in counts and split_parts:
            mixed.append(j)
        elif whole not in counts and not split_parts:
            missing.append(f"{whole} (or {parts[0]} and {parts[1]})" if split else whole)
        elif whole not in counts:
            missing += [part for part in parts if part not in counts]
    if mixed:
        j = mixed[0]
        raise ValueError(
            f"{who}: rank {rank} runs both {rank}B{j} and a split backward ({rank}I{j}, "
            f"{rank}W{j}) of micro-batch {j}: run B, or I and W, once per micro-batch"
        )
    if missing:
        raise ValueError(
            f"{who}: rank {rank} never runs {_listed(missing)}: every micro-batch passes every "
            f"stage, so rank r runs F and {'B, or I and W' if split else 'B'} of each "
            f"micro-batch 0..{m - 1}"
        )


def over_limit(timeline: Timeline, limits: list[float]) -> str | None:
    """Which rank first holds more activations than its limit, when, and by how much (None
    when no rank does)."""
    worst = None  # (time, rank, peak, limit)
    for rank, limit in enumerate(limits):
        curve = timeline.memory(rank)
        over = [(time, held) for time, held in curve if held > limit + 1e-9]
        if over and (worst is None or over[0][0] < worst[0]):
            worst = (over[0][0], rank, max(held for _, held in over), limit)
    if worst is None:
        return None
    time, rank, peak, limit = worst
    return (
        f"rank {rank} goes over its limit of {limit:g} at t = {time:g} {timeline.time_unit}s "
        f"and holds up to {peak:g} {ACTIVATION_UNIT}, {peak - limit:g} too many"
    )
