"""Start the ranks of a run on this machine, wait for them, and bring back the result.

:func:`launch` (one run) and :func:`launch_many` (several runs in the same processes)
check every argument first (:func:`ppbook.runtime.config.check`), then what the machine
and the launching script allow (:mod:`ppbook.runtime.preflight`), then start ``nproc``
processes with ``multiprocessing``'s ``spawn`` method, each running
:func:`ppbook.runtime.worker.main`. The ranks meet through a file in a fresh temporary
folder, so there is no port to choose and nothing listens beyond loopback.

When a rank fails, every rank stops: the failing rank writes its traceback to the folder
and exits; its peers fail too when their next receive from it breaks or times out; the
launcher gives them a moment, then ends whichever is left (SIGTERM, then SIGKILL), and
raises :class:`PipelineError`. Its headline is the cause: a rank that died without a
report (killed by a signal, or exited) if there is one, since its peers' errors follow
from it, else the rank that reported first, with its traceback. Every line of it is cut
to :data:`MAX_LINE` characters, the traceback to its last :data:`MAX_TRACEBACK` lines; a
rank that died without a report is quoted from the end of its stderr (a C++ abort says
there what it threw).

A run is complete when every rank got through its last message and rank 0 wrote the
results (:func:`ppbook.runtime.worker.main` marks both in the folder). A rank that exits
badly after that, while leaving the process group, does not fail the run: gloo's teardown
can abort a process whose peer closed its connections first, and nothing of the run is
lost by then; a line on stderr says which rank ended badly and how, and a rank still
running :data:`LEAVE` seconds after all the work was done is stopped. What the ranks
print to stderr is passed on to the launcher's stderr when they end, each line marked with
its rank (with ``PPBOOK_VERBOSE=1`` it is left on the terminal, to be read as it comes).

No process and no folder outlives the call, also when it is interrupted: SIGINT, SIGTERM
and SIGHUP to the launching process stop every rank, remove the folder, and raise
:class:`Interrupted` (a ``KeyboardInterrupt``) saying which signal came. The ranks ignore
SIGINT (a terminal's Ctrl-C reaches them too): stopping them is the launcher's work. Only
a launcher killed outright (SIGKILL) leaves its folder; its ranks then exit by themselves.

With ``progress=True`` the launcher prints a line as the processes start and one as each
run finishes (rank 0 marks it with a file in the folder), so a long cell shows it is alive.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.connection import wait
from pathlib import Path

from ppbook.checks import clipped
from ppbook.runtime.config import RunConfig, activation_bytes, check, model_bytes, same_group
from ppbook.runtime.preflight import check_machine, check_main_guard, device_memory
from ppbook.runtime.progress import POLL, Progress
from ppbook.runtime.result import RunResult

GRACE = 2.0
"""Seconds the other ranks get to stop by themselves after one failed."""

LEAVE = 20.0
"""Seconds the ranks get to leave the process group and exit once all their work is done."""

MAX_LINE = 300
"""Characters of one line of a rank's error shown in a :class:`PipelineError`."""

MAX_TRACEBACK = 40
"""Lines of the first failing rank's traceback shown (its last ones, where the error is)."""

LAST_WORDS = 3
"""Lines of stderr quoted from a rank that died without a report (a C++ abort says why
there: ``terminate called after throwing ...``)."""

STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)
"""The signals a user or a scheduler sends to stop a run; each stops it cleanly."""


class PipelineError(RuntimeError):
    """A rank failed; the message holds its error and traceback, and what the others did."""

    def __init__(self, message: str, rank: int | None = None):
        super().__init__(message)
        self.rank = rank


class Interrupted(KeyboardInterrupt):
    """The launching process got ``signum``; every rank was stopped and the folder removed."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}")


def launch(config: RunConfig, *, progress: bool = False) -> RunResult:
    """Run ``config`` on ``config.nproc`` local processes; return the measured result.

    ``progress``: print a line when the processes start and one when the run finishes.
    """
    return launch_many([config], progress=progress)[0]


def launch_many(configs: Sequence[RunConfig], *, progress: bool = False) -> list[RunResult]:
    """Run several configs, one after another, in one set of processes (same ``nproc``).

    ``progress``: print a line when the processes start (``starting 2 processes for 5
    runs``) and one as each run finishes (``run 1 of 5 finished: 1f1b``): no times, so a
    notebook's output is the same on every machine.
    """
    if not configs:
        raise ValueError("launch_many needs at least one RunConfig")
    check_main_guard()
    jobs = [(config, check(config)) for config in configs]
    same_group(configs)
    nproc = configs[0].nproc
    check_machine(
        nproc,
        max(model_bytes(config, schedule) for config, schedule in jobs),
        max(activation_bytes(config, schedule) for config, schedule in jobs),
        **device_memory(configs[0]),
    )
    spawn = multiprocessing.get_context("spawn")
    from ppbook.runtime import worker

    signals = _Signals()
    with signals.caught(), tempfile.TemporaryDirectory(prefix="ppbook-run-") as folder:
        names = [schedule.name for _, schedule in jobs]
        report = Progress(Path(folder), names, nproc) if progress else None
        processes = [
            spawn.Process(
                target=worker.main,
                args=(rank, nproc, jobs, folder),
                name=f"ppbook-rank-{rank}",
                daemon=True,
            )
            for rank in range(nproc)
        ]
        ended: list[int] = []  # ranks in the order they were seen to end
        try:
            with signals.armed():  # a signal here stops the run at once
                if report is not None:
                    report.start()
                for process in processes:
                    with _sigint_ignored():  # inherited: Ctrl-C is the launcher's to handle
                        process.start()
                _wait(processes, ended, report, lambda: _all_finished(Path(folder), nproc))
        finally:
            stopped = _stop(processes)  # ranks the launcher ended
            _pass_on_stderr(Path(folder), nproc)
        if not _all_finished(Path(folder), nproc):
            raise _failure(processes, Path(folder), ended, stopped)
        _note_bad_endings(processes, Path(folder), stopped)
        if report is not None:
            report()  # runs that finished since the last look
        return pickle.loads((Path(folder) / "results.pkl").read_bytes())


def _all_finished(folder: Path, nproc: int) -> bool:
    """Whether every rank got through its last message (``finished-<rank>``) and rank 0
    wrote the results. Then the run is complete even if a rank ends badly afterwards,
    while leaving the process group (gloo's teardown can abort a process whose peer left
    first)."""
    return (folder / "results.pkl").exists() and all(
        (folder / f"finished-{rank}").exists() for rank in range(nproc)
    )


def _note_bad_endings(processes: list, folder: Path, stopped: set[int]) -> None:
    """One line on stderr for each rank of a complete run that did not end cleanly."""
    reports = _reports(folder)
    for rank, process in enumerate(processes):
        code = process.exitcode
        if code == 0:
            continue
        if rank in reports:
            how = _first_line(reports[rank])
        elif rank in stopped:
            how = f"it did not exit within {LEAVE:g} s and was stopped"
        elif code < 0:
            how = f"killed by signal {-code} ({_signal_name(-code)})"
        else:
            how = f"exit status {code}"
        line = f"ppbook: rank {rank} ended badly after its work was done ({how}); "
        line = clip(line + "the results are complete") + "\n"
        os.write(2, line.encode(errors="replace"))


def _pass_on_stderr(folder: Path, nproc: int) -> None:
    """Write what each rank printed to stderr (``stderr-<rank>.log``) to this process's
    stderr, each line with its rank in front, where the rank's own stderr would have gone."""
    for rank in range(nproc):
        lines = _stderr_lines(folder, rank)
        if lines:
            text = "".join(f"[rank {rank}] {line}\n" for line in lines)
            os.write(2, text.encode(errors="replace"))


def _stderr_lines(folder: Path, rank: int) -> list[str]:
    path = folder / f"stderr-{rank}.log"
    if not path.exists():
        return []
    return path.read_text(errors="replace").splitlines()


class _Signals:
    """:data:`STOP_SIGNALS` during a launch: stop at once while the ranks run, never
    in the middle of the clean-up.

    Inside :meth:`caught`, the first signal raises :class:`Interrupted` if it comes while
    :meth:`armed` (starting and waiting for the ranks); otherwise it is kept, and raised
    when :meth:`caught` ends, after the clean-up. Off the main thread, where no signal
    arrives, both are no-ops.
    """

    def __init__(self) -> None:
        self.received: list[int] = []
        self.raised = False
        self.is_armed = False

    def _handler(self, signum: int, frame) -> None:
        self.received.append(signum)
        if self.is_armed and not self.raised:
            self.is_armed, self.raised = False, True
            raise Interrupted(signum)

    @contextmanager
    def caught(self) -> Iterator[None]:
        """Handle the signals in this block; raise a kept one when it ends."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {signum: signal.signal(signum, self._handler) for signum in STOP_SIGNALS}
        try:
            yield
        finally:
            for signum, old in previous.items():
                signal.signal(signum, old)
            if self.received and not self.raised:
                raise Interrupted(self.received[0])

    @contextmanager
    def armed(self) -> Iterator[None]:
        """A signal in this block, or one kept before it, raises :class:`Interrupted` at once."""
        if self.received and not self.raised:
            self.raised = True
            raise Interrupted(self.received[0])
        self.is_armed = True
        try:
            yield
        finally:
            self.is_armed = False


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Ignore SIGINT while a process starts: it keeps ignoring it (``exec`` keeps ``SIG_IGN``).

    A terminal's Ctrl-C reaches every process of the job. The ranks leave it to the
    launcher, which stops them, so that none prints a ``KeyboardInterrupt`` traceback (also
    while it is still importing torch). A Ctrl-C in the milliseconds a start takes is lost.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def _wait(
    processes: list,
    ended: list[int],
    report: Progress | None,
    finished: Callable[[], bool],
) -> None:
    """Return when every process has ended, :data:`GRACE` seconds after the first one
    fails, or :data:`LEAVE` seconds after ``finished()`` says every rank has done its work
    (a rank stuck while leaving cannot hold the launcher). Note in ``ended`` the ranks in
    the order they ended. With ``report``, call it every
    :data:`~ppbook.runtime.progress.POLL` seconds."""

    def note() -> list:
        for rank, process in enumerate(processes):
            if process.exitcode is not None and rank not in ended:
                ended.append(rank)
        return [p for p in processes if p.exitcode is None]

    running = list(processes)
    while running:
        wait([p.sentinel for p in running], timeout=POLL)
        if report is not None:
            report()
        running = note()
        failed = any(p.exitcode not in (None, 0) for p in processes)
        if failed or (running and finished()):
            deadline = time.monotonic() + (GRACE if failed else LEAVE)
            while running and time.monotonic() < deadline:
                wait([p.sentinel for p in running], timeout=deadline - time.monotonic())
                running = note()
            return


def _stop(processes: list) -> set[int]:
    """End every started process still running: SIGTERM, then SIGKILL. Returns their ranks."""
    started = [(rank, p) for rank, p in enumerate(processes) if p.pid is not None]
    stopped = set()
    for rank, process in started:
        if process.is_alive():
            stopped.add(rank)
            process.terminate()
    for _, process in started:
        process.join(timeout=GRACE)
        if process.is_alive():
            process.kill()
            process.join()
    return stopped


def clip(text: str) -> str:
    """``text`` cut to :data:`MAX_LINE` characters, with ``...`` where it was cut."""
    return clipped(text, MAX_LINE)


def _reports(folder: Path) -> dict[int, dict]:
    """The error reports the ranks wrote (``error-<rank>.json``), by rank."""
    reports = [json.loads(path.read_text()) for path in folder.glob("error-*.json")]
    return {report["rank"]: report for report in reports}


def _first_line(report: dict) -> str:
    """``type: message`` of a rank's report, its message's first line only."""
    lines = report["message"].splitlines()
    return f"{report['type']}: {lines[0] if lines else ''}"


def _failure(processes: list, folder: Path, ended: list[int], stopped: set[int]) -> PipelineError:
    """The error to show: the cause first (see the module's docstring), then the others."""
    reports = _reports(folder)
    silent, others = {}, []  # silent: ranks that died unreported, and not by our hand
    for rank, process in enumerate(processes):
        code = process.exitcode
        if rank in reports or code in (0, None):
            continue
        if rank in stopped:
            others.append(f"rank {rank} was stopped (signal {-code})" if code < 0 else
                          f"rank {rank} exited with status {code} when stopped")  # fmt: skip
        elif code < 0:
            silent[rank] = f"rank {rank} was killed by signal {-code} ({_signal_name(-code)})"
        else:
            silent[rank] = f"rank {rank} exited with status {code} and no report"
        if rank in silent and (said := _stderr_lines(folder, rank)[-LAST_WORDS:]):
            said = " | ".join(line.strip() for line in said)
            silent[rank] = clip(f"{silent[rank]}; the end of its stderr: {said}")
    by_time = sorted(reports.values(), key=lambda r: r["time"])
    if silent:  # a rank that died without a word is the cause; its peers' errors follow from it
        order = sorted(silent, key=lambda r: ended.index(r) if r in ended else len(ended))
        rank = order[0]
        lines = [
            silent[rank],
            *(clip(f"rank {r['rank']} then failed: {_first_line(r)}") for r in by_time),
            *(silent[r] for r in order[1:]),
            *others,
        ]
        return PipelineError("\n".join(lines), rank=rank)
    if not reports:
        return PipelineError("the run failed: " + "; ".join(others))
    first = by_time[0]
    traceback = [clip(line) for line in first["traceback"].rstrip().splitlines()]
    if len(traceback) > MAX_TRACEBACK:
        cut = len(traceback) - MAX_TRACEBACK
        traceback = [f"({cut} lines of the traceback left out)", *traceback[-MAX_TRACEBACK:]]
    lines = [
        clip(f"rank {first['rank']} failed: {_first_line(first)}"),
        "",
        f"traceback of rank {first['rank']}:",
        *traceback,
        "",
        *(clip(f"rank {r['rank']} then failed too: {_first_line(r)}") for r in by_time[1:]),
        *others,
    ]
    return PipelineError("\n".join(lines).rstrip(), rank=first["rank"])


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return "unknown signal"
