"""Progress of a launch: a line when the processes start and one per finished run (chapter 3).

A launch of several runs (:func:`ppbook.runtime.launch.launch_many` with
``progress=True``) can take half a minute on two cores, most of it starting processes and
importing torch. Rank 0 marks each finished run ``k`` with an empty file ``done-<k>`` in
the launch's folder (:func:`ppbook.runtime.worker.main`); the launcher looks every
:data:`POLL` seconds and prints a line for each new one. The lines hold no times, so a
notebook's output reads the same on every machine.
"""

from __future__ import annotations

from pathlib import Path

POLL = 0.2
"""Seconds between looks for finished runs."""


class Progress:
    """Prints ``starting 2 processes for 5 runs``, then ``run k of 5 finished: <schedule>``
    for each run rank 0 has marked finished in ``folder``, in order."""

    def __init__(self, folder: Path, names: list[str], nproc: int):
        self.folder, self.names, self.nproc = folder, names, nproc
        self.shown = 0  # runs reported so far; they finish in order

    def start(self) -> None:
        """The first line: how many processes, for how many runs."""
        runs = "1 run" if len(self.names) == 1 else f"{len(self.names)} runs"
        print(f"starting {self.nproc} processes for {runs}", flush=True)

    def __call__(self) -> None:
        """A line for each run finished since the last call."""
        total = len(self.names)
        while self.shown < total and (self.folder / f"done-{self.shown}").exists():
            self.shown += 1
            print(f"run {self.shown} of {total} finished: {self.names[self.shown - 1]}", flush=True)
