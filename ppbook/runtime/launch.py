"""Start the ranks of a run on this machine, wait for them, and bring back the result.

:func:`launch` (one run) and :func:`launch_many` (several runs in the same processes)
check every argument first (:func:`ppbook.runtime.config.check`), then start ``nproc``
processes with ``multiprocessing``'s ``spawn`` method, each running
:func:`ppbook.runtime.worker.main`. The ranks meet through a file in a fresh temporary
folder, so there is no port to choose and nothing listens beyond loopback.

When a rank fails, every rank stops: the failing rank writes its traceback to the folder
and exits; its peers fail too when their next receive from it breaks or times out; the
launcher gives them a moment, then ends whichever is left (SIGTERM, then SIGKILL), and
raises :class:`PipelineError` with the traceback of the rank that failed first. No
process outlives the call, also when it is interrupted.
"""

from __future__ import annotations

import json
import multiprocessing
import pickle
import tempfile
from collections.abc import Sequence
from multiprocessing.connection import wait
from pathlib import Path

from ppbook.runtime.config import RunConfig, check, same_group
from ppbook.runtime.result import RunResult

GRACE = 2.0
"""Seconds the other ranks get to stop by themselves after one failed."""


class PipelineError(RuntimeError):
    """A rank failed; the message holds its error and traceback, and what the others did."""

    def __init__(self, message: str, rank: int | None = None):
        super().__init__(message)
        self.rank = rank


def launch(config: RunConfig) -> RunResult:
    """Run ``config`` on ``config.nproc`` local processes; return the measured result."""
    return launch_many([config])[0]


def launch_many(configs: Sequence[RunConfig]) -> list[RunResult]:
    """Run several configs, one after another, in one set of processes (same ``nproc``)."""
    if not configs:
        raise ValueError("launch_many needs at least one RunConfig")
    jobs = [(config, check(config)) for config in configs]
    same_group(configs)
    nproc = configs[0].nproc
    spawn = multiprocessing.get_context("spawn")
    from ppbook.runtime import worker

    with tempfile.TemporaryDirectory(prefix="ppbook-run-") as folder:
        processes = [
            spawn.Process(
                target=worker.main,
                args=(rank, nproc, jobs, folder),
                name=f"ppbook-rank-{rank}",
                daemon=True,
            )
            for rank in range(nproc)
        ]
        try:
            for process in processes:
                process.start()
            _wait(processes)
        finally:
            _stop(processes)
        failed = [p for p in processes if p.exitcode != 0]
        if failed:
            raise _failure(processes, Path(folder))
        return pickle.loads((Path(folder) / "results.pkl").read_bytes())


def _wait(processes: list) -> None:
    """Return when every process has ended, or soon after the first one fails."""
    running = list(processes)
    while running:
        wait([p.sentinel for p in running])
        running = [p for p in running if p.exitcode is None]
        if any(p.exitcode not in (None, 0) for p in processes):
            wait([p.sentinel for p in running], timeout=GRACE)
            return


def _stop(processes: list) -> None:
    """End every process still running: SIGTERM, then SIGKILL."""
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=GRACE)
        if process.is_alive():
            process.kill()
            process.join()


def _failure(processes: list, folder: Path) -> PipelineError:
    """The error to show: the first rank to fail, with its traceback, then the others."""
    reports = {}
    for path in folder.glob("error-*.json"):
        report = json.loads(path.read_text())
        reports[report["rank"]] = report
    others, died = [], []
    for rank, process in enumerate(processes):
        if rank in reports:
            continue
        if process.exitcode is not None and process.exitcode < 0:
            others.append(f"rank {rank} was stopped (signal {-process.exitcode})")
        elif process.exitcode not in (0, None):
            died.append(rank)
            others.append(f"rank {rank} exited with status {process.exitcode} and no report")
    if not reports and not died:
        return PipelineError("the run failed: " + "; ".join(others))
    if died:  # a rank that died without a word is the cause; its peers' errors follow from it
        rank = died[0]
        peers = [
            f"rank {r['rank']} then failed: {r['type']}: {r['message'].splitlines()[0]}"
            for r in sorted(reports.values(), key=lambda r: r["time"])
        ]
        lines = [
            f"rank {rank} exited with status {processes[rank].exitcode} and no report",
            *peers,
            *(o for o in others if not o.startswith(f"rank {rank} ")),
        ]
        return PipelineError("\n".join(lines), rank=rank)
    first = min(reports.values(), key=lambda r: r["time"])
    later = [
        f"rank {r['rank']} then failed too: {r['type']}: {r['message'].splitlines()[0]}"
        for r in sorted(reports.values(), key=lambda r: r["time"])
        if r is not first
    ]
    lines = [
        f"rank {first['rank']} failed: {first['type']}: {first['message']}",
        "",
        f"traceback of rank {first['rank']}:",
        first["traceback"].rstrip(),
        "",
        *later,
        *others,
    ]
    return PipelineError("\n".join(lines).rstrip(), rank=first["rank"])
