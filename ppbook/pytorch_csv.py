"""PyTorch's CSV form of a schedule, both ways: one row per rank, one action per cell.

``torch.distributed.pipelining`` writes a schedule with ``_dump_csv`` in one of two forms:
compute only (``0F0``, ``1B0``, ``(0F4;7B1)OVERLAP_F_B``, an empty cell for an idle step),
or, by default for its multi-stage schedules, with communication and sharding as well:
``0SEND_F1`` (stage 0 sends micro-batch 1's activation), ``1RECV_F0``, ``1SEND_B0``
(stage 1 sends the gradient back), ``0RECV_B0``, ``0UNSHARD``, ``0RESHARD`` and
``0REDUCE_GRAD``. :func:`read_csv` reads both: ppbook simulates compute, so it drops the
other actions and says how many in
:attr:`Schedule.notes <ppbook.pipeline_schedule.Schedule.notes>`. :func:`write_csv` writes the
compute-only form, which PyTorch's ``_load_csv`` reads (``format="compute_only"``).

CSV carries no routes: a DualPipe file is read with ``read_csv(path, routes="two-way")``
(``ppbook simulate --from-csv PATH --routes two-way``); without them validation refuses its
micro-batches, each of which misses half the stages. PyTorch's engine expects every
micro-batch on every stage and refuses such a file ("Got 4 FORWARD microbatches for stage
0, expected 8"). Every other schedule of :mod:`ppbook.schedules`, DualPipeV included,
loads in PyTorch's engine (``tests/test_pytorch_csv.py`` loads each one).

This module sits above the simulator: the aligned form (one column per time step) comes
from a unit-cost simulation.
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from pathlib import Path

from ppbook import limits
from ppbook.checks import clipped
from ppbook.pipeline_schedule import Schedule
from ppbook.validate import unit_steps

COMMUNICATION = ("SEND_F", "RECV_F", "SEND_B", "RECV_B", "UNSHARD", "RESHARD", "REDUCE_GRAD")
"""PyTorch's non-compute action kinds, which :func:`read_csv` drops."""

_COMMUNICATION_RE = re.compile(r"^\d+(" + "|".join(COMMUNICATION) + r")\d*$")


def read_csv(path: str | Path, **kwargs) -> Schedule:
    """Read a schedule in PyTorch's CSV form (either form) from the file at ``path``.

    The file must be a regular file (a FIFO, a device or a folder is refused without
    reading it) of UTF-8 text (a byte-order mark is accepted), within
    :data:`ppbook.limits.CSV_BYTES_PER_ACTION` bytes per allowed action. Errors are one-line
    ValueErrors that name the file. Keyword arguments go to
    :meth:`~ppbook.pipeline_schedule.Schedule.from_strings` (``name`` defaults to the file's stem).
    """
    path = Path(path)
    cut = clipped(str(path), 200)
    most = limits.current().actions * limits.CSV_BYTES_PER_ACTION
    data = limits.read_regular_file(
        str(path),
        "path",
        most,
        "; raise PPBOOK_MAX_ACTIONS or use ppbook.limits.use(actions=...) if memory allows",
    )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{cut} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            "save the CSV as UTF-8"
        ) from None
    kwargs.setdefault("name", path.stem)
    try:
        return read_csv_text(text, **kwargs)
    except ValueError as exc:
        raise ValueError(f"{cut}: {exc}") from None


def read_csv_text(text: str, **kwargs) -> Schedule:
    """Read a schedule in PyTorch's CSV form (either form) from ``text``.

    Empty rows at the end are not ranks. PyTorch's communication and sharding actions
    (:data:`COMMUNICATION`) are dropped, and a note in ``Schedule.notes`` says how many of
    each. Keyword arguments go to :meth:`~ppbook.pipeline_schedule.Schedule.from_strings`.
    """
    most = limits.current().actions * limits.CSV_BYTES_PER_ACTION
    if len(text) > most:
        raise ValueError(
            f"{len(text):,} characters of CSV is beyond the limit of {most:,} "
            f"({limits.CSV_BYTES_PER_ACTION} per allowed action)"
        )
    text = text.removeprefix("\ufeff")
    dropped: Counter[str] = Counter()
    rows: list[list[str]] = []
    reader = csv.reader(io.StringIO(text))
    try:
        for row in reader:
            rows.append([_compute_only(cell, dropped) for cell in row])
    except csv.Error as exc:
        raise ValueError(
            f"line {reader.line_num}: {clipped(str(exc), 200)}; "
            "a cell holds one action such as '0F3'"
        ) from None
    while rows and not any(cell.strip() for cell in rows[-1]):
        rows.pop()  # blank lines at the end are not ranks
    if dropped:
        counts = ", ".join(f"{n} {kind}" for kind, n in sorted(dropped.items()))
        note = (
            f"dropped {sum(dropped.values())} communication and sharding actions of PyTorch's "
            f"CSV ({counts}): ppbook times compute only, with transfers from the cost model"
        )
        kwargs["notes"] = (*kwargs.get("notes", ()), note)
    return Schedule.from_strings(rows, **kwargs)


def write_csv(schedule: Schedule, path: str | Path | None = None, aligned: bool = True) -> str:
    """PyTorch's compute-only CSV form of ``schedule``; written to ``path`` when given.

    With ``aligned`` (the default, as PyTorch's own schedules are written) each column is
    one time step of a unit-cost run, so idle steps are empty cells; otherwise each row
    lists its actions back to back. Returns the text.
    """
    if aligned:
        rows: list[list[str]] = []
        for rank, starts in enumerate(unit_steps(schedule)):
            cells = [""] * (max(starts) + 1 if starts else 0)
            for action, step in zip(schedule.actions[rank], starts, strict=True):
                cells[step] = str(action)
            rows.append(cells)
    else:
        rows = schedule.to_strings()
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    text = buffer.getvalue()
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text


def _compute_only(cell: str, dropped: Counter[str]) -> str:
    """``cell``, or an empty (idle) cell in its place when it is a non-compute action."""
    if match := _COMMUNICATION_RE.match(cell.strip()):
        dropped[match.group(1)] += 1
        return ""
    return cell
