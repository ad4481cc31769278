"""A class at once: a folder of submissions graded in parallel into one CSV (``ppbook assign
grade FOLDER``; issue 16).

:func:`grade_all` grades each notebook in a process of its own, forked from the grader, at
most ``jobs`` at once, each with its own sandbox uid when the sandbox uses one (so that
clearing one submission's processes never touches another's). Whatever goes wrong with one
submission (a link, a notebook that is not one, a kernel that misbehaves, even a grading
process that dies or runs past :func:`guard_seconds`) becomes that submission's note and a
score of 0; the others are graded, and the CSV is always written.

:func:`write_csv` writes one row per submission (notebook, assignment, total, points and
feedback per question, the seed, notes) with the csv module, every text cell cleaned
(:func:`ppbook.assign.report.clean`) and made safe for spreadsheets
(:func:`ppbook.assign.report.csv_cell`), through a descriptor that does not follow a link.
"""

from __future__ import annotations

import csv
import io
import multiprocessing
import os
import pwd
import signal
import time
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import wait
from pathlib import Path

from ppbook.assign.processes import processes_of
from ppbook.assign.report import Report, clean, csv_cell
from ppbook.assign.sandbox import Sandbox, choose

GUARD_SECONDS = 900.0
"""Seconds a grading process may run beyond its notebook's time limit before it is killed."""


def guard_seconds(options: dict) -> float:
    """The most one submission's grading process may run."""
    return float(options.get("timeout", 300.0)) + GUARD_SECONDS


def free_uids(first: int, count: int) -> list[int]:
    """``count`` uids from ``first`` up that have no account and no process."""
    found, uid = [], first
    while len(found) < count:
        try:
            pwd.getpwuid(uid)
        except KeyError:
            if not processes_of(uid):
                found.append(uid)
        uid += 1
    return found


def _child(connection, path: Path, sandbox: Sandbox, options: dict) -> None:
    from ppbook.assign.grade import grade

    try:
        message = ("report", grade(path, sandbox=sandbox, **options))
    except ValueError as exc:
        message = ("error", clean(f"not graded: {exc}"))
    except Exception as exc:  # noqa: BLE001 (anything else: this submission's note)
        message = ("error", clean(f"not graded: the grader failed: {type(exc).__name__}: {exc}"))
    connection.send(message)
    connection.close()


def grade_all(
    paths: list[Path],
    *,
    jobs: int,
    done: Callable[[Path, Report | str], None] | None = None,
    **options,
) -> list[Report | str]:
    """Grade ``paths`` (keyword ``options`` as :func:`ppbook.assign.grade.grade` takes them),
    ``jobs`` at once; per path its report, or a note saying why it was not graded. ``done``
    is called as each finishes."""
    base = choose(options.pop("isolation", None))  # once: every process inherits the choice
    uids = free_uids(base.uid, jobs) if base.uid is not None else [None] * jobs
    context = multiprocessing.get_context("fork")
    pending = deque(enumerate(paths))
    running: dict = {}  # reader -> (index, process, uid, started)
    results: list[Report | str | None] = [None] * len(paths)
    while pending or running:
        while pending and len(running) < jobs:
            index, path = pending.popleft()
            uid = _spare(uids, running) if base.uid is not None else None
            reader, writer = context.Pipe(duplex=False)
            process = context.Process(
                target=_child, args=(writer, path, Sandbox(base.mode, uid), options)
            )
            process.start()
            writer.close()
            running[reader] = (index, process, uid, time.monotonic())
        ready = wait([*running, *(entry[1].sentinel for entry in running.values())], timeout=1)
        for reader in list(running):
            index, process, uid, started = running[reader]
            overdue = time.monotonic() - started > guard_seconds(options)
            if reader not in ready and process.sentinel not in ready and not overdue:
                continue
            results[index] = _finish(reader, process, uid, overdue, options)
            del running[reader]
            if done is not None:
                done(paths[index], results[index])
    return results


def _spare(uids: list, running: dict) -> int:
    taken = {entry[2] for entry in running.values()}
    return next(uid for uid in uids if uid not in taken)


def _finish(reader, process, uid, overdue: bool, options: dict) -> Report | str:
    message = None
    if reader.poll():
        try:
            message = reader.recv()
        except (EOFError, OSError):
            message = None
    if message is None and overdue:
        _stop(process, uid)
        message = ("error", f"not graded: grading ran over {guard_seconds(options):g} s")
    process.join(timeout=10)
    reader.close()
    if message is None:
        return f"not graded: the grading process ended (exit status {process.exitcode})"
    return message[1]


def _stop(process, uid: int | None) -> None:
    """Kill a grading process that ran too long, and its sandbox uid's processes."""
    process.kill()
    for _ in range(50):
        left = processes_of(uid) if uid is not None else []
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
        if not left:
            return
        time.sleep(0.1)


def rows(paths: list[Path], results: list[Report | str]) -> tuple[list[str], list[dict]]:
    """The CSV's columns and one row per submission."""
    names: list[str] = []
    table = []
    for path, result in zip(paths, results, strict=True):
        if isinstance(result, str):
            table.append({"notebook": path.name, "score": 0, "notes": result})
            continue
        row = {"notebook": result.notebook, "assignment": result.assignment}
        row |= {"score": result.score, "max_score": result.max_score, "seed": result.seed}
        for q in result.questions:
            row[q.name], row[f"{q.name} feedback"] = q.score, q.feedback
            names += [q.name] if q.name not in names else []
        row["notes"] = " | ".join(result.notes)
        table.append(row)
    columns = ["notebook", "assignment", "score", "max_score"]
    columns += [c for n in names for c in (n, f"{n} feedback")] + ["seed", "notes"]
    return columns, table


def write_csv(out: Path, columns: list[str], table: list[dict]) -> None:
    """Write the table to ``out`` (not through a link), every text cell safe."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, restval="", extrasaction="ignore")
    writer.writeheader()
    for row in table:
        writer.writerow(
            {key: csv_cell(clean(v, 400) if isinstance(v, str) else v) for key, v in row.items()}
        )
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
    with os.fdopen(os.open(out, flags, 0o644), "w", encoding="utf-8", newline="") as file:
        file.write(buffer.getvalue())
