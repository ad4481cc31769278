"""One submission's processes inside the walls: started with a cgroup of their own, watched
for the disk they fill, their output kept to its last lines, and every one of them killed at
the end (:class:`Walled`); :func:`run_walled` runs one process that way (used by
:mod:`ppbook.assign.kernel` and by the grader for the questions it measures itself).
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ppbook.assign import cgroup
from ppbook.assign.processes import kill_everything, pid_namespaces_below, start_ticks
from ppbook.assign.sandbox import NAMESPACES, Limits, Sandbox, command, environment
from ppbook.assign.view import folder_bytes

TAIL_BYTES = 4096
"""The most output of a walled process the grader keeps (its last bytes)."""
DISK_CHECK_SECONDS = 0.25
"""How often the size of the folders a submission writes to the grader's disk is checked."""


@dataclass
class Outcome:
    """How one piece of code ran: ``status`` is "ok", "error" (an exception, or a non-zero
    exit), "timeout" (ran out of time and was stopped), "stuck" (a cell that did not stop
    after an interrupt: the kernel was killed) or "died" (the kernel or process ended, was
    killed by a signal or went over a per-submission limit: ``error`` says which)."""

    status: str
    error: str = ""


class _Tail(threading.Thread):
    """Reads a pipe to its end, keeping only its last :data:`TAIL_BYTES`."""

    def __init__(self, stream):
        super().__init__(daemon=True)
        self.stream, self.data = stream, b""

    def run(self) -> None:
        while chunk := self.stream.read1(65536):
            self.data = (self.data + chunk)[-TAIL_BYTES:]
        self.stream.close()

    def lines(self, count: int = 8, limit: int = 1000) -> str:
        text = self.data.decode("utf-8", errors="replace")
        text = "".join(c if c.isprintable() or c == "\n" else "?" for c in text)
        last = "\n".join(line.rstrip() for line in text.strip().splitlines()[-count:])
        return last if len(last) <= limit else "..." + last[-(limit - 3) :]


class Walled:
    """The processes of one submission: :meth:`start` the first (once; all others descend
    from it), :meth:`over_limit` says whether they went over a per-submission limit,
    :meth:`close` kills them all and removes the cgroup. A context manager."""

    def __init__(self, sandbox: Sandbox, work: Path, scratch: Path, limits: Limits):
        self.sandbox, self.work, self.scratch, self.limits = sandbox, work, scratch, limits
        self.process: subprocess.Popen | None = None
        self.group: cgroup.Cgroup | None = None
        self.tail: _Tail | None = None
        self._since = start_ticks()
        self._namespaces: frozenset[str] = frozenset()
        watched = [scratch] if sandbox.mode in NAMESPACES else [work, scratch]
        self._watched = [folder for folder in watched if folder.is_dir()]
        self._disk_start = sum(folder_bytes(f) for f in self._watched)
        self._disk_checked = 0.0

    def __enter__(self) -> Walled:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self, argv: list[str]) -> subprocess.Popen:
        """Start ``argv`` in the walls, in the copy, its output kept by :attr:`tail`."""
        if self.process is not None:
            raise RuntimeError("a Walled starts one process; make another for the next")
        line = command(self.sandbox, self.work, self.limits, argv, scratch=self.scratch)
        if self.sandbox.cgroup and self.group is None:
            self.group = cgroup.Cgroup.create(
                self.limits.total_memory_bytes, self.limits.total_processes
            )
        if self.group is not None:
            line = self.group.wrap(line)
        self.process = subprocess.Popen(
            line,
            cwd="/",
            env=environment(self.sandbox, self.scratch),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.tail = _Tail(self.process.stdout)
        self.tail.start()
        return self.process

    def watch_namespaces(self) -> None:
        """Note the PID namespace the process made, so :meth:`close` can empty it."""
        if self.process is not None:
            self._namespaces |= pid_namespaces_below(self.process.pid)

    def over_limit(self) -> str:
        """Why the submission must be stopped ("" if it need not): it went over its memory
        (the cgroup killed a process) or wrote more than its disk allowance."""
        if self.group is not None and self.group.oom_kills():
            limit = self.limits.total_memory_bytes / 2**20
            return f"its processes went over their memory limit ({limit:.0f} MiB together)"
        now = time.monotonic()
        if now - self._disk_checked < DISK_CHECK_SECONDS:
            return ""
        self._disk_checked = now
        written = sum(folder_bytes(f) for f in self._watched) - self._disk_start
        if written > self.limits.disk_bytes:
            return f"it wrote over its disk limit ({self.limits.disk_bytes / 2**20:.0f} MiB)"
        return ""

    def output(self) -> str:
        """The last lines of what the process printed."""
        return self.tail.lines() if self.tail is not None else ""

    def close(self) -> None:
        """Kill every process of the submission and remove its cgroup."""
        if self.process is not None:
            uid = self.sandbox.uid
            kill_everything(self.process.pid, uid, self._since, self._namespaces)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if self.group is not None:
            self.group.remove()
            self.group = None
        if self.tail is not None:
            self.tail.join(timeout=2)


def run_walled(
    sandbox: Sandbox,
    work: Path,
    scratch: Path,
    limits: Limits,
    argv: list[str],
    timeout: float,
) -> Outcome:
    """Run ``argv`` (e.g. ``[sys.executable, "-I", "-m", MODULE, ANSWER]``) inside the same
    walls and environment as the kernel, its current folder the copy ``work``, at most
    ``timeout`` s; everything it started is killed at the end. "ok": exit 0; "error": another
    exit (``error``: its last lines of output); "timeout"; "died": killed by a signal or
    stopped at a per-submission limit. Whatever it must hand back, it writes under
    ``scratch``: in the namespace modes the copy is a ``tmpfs`` that ends with it."""
    with Walled(sandbox, work, scratch, limits) as walled:
        process = walled.start(argv)
        deadline = time.monotonic() + timeout
        while True:
            try:
                code = process.wait(timeout=0.1)
                break
            except subprocess.TimeoutExpired:
                walled.watch_namespaces()
            why = walled.over_limit()
            if why or time.monotonic() > deadline:
                walled.close()
                if why:
                    return Outcome("died", f"stopped: {why}")
                return Outcome("timeout", f"ran out of time ({timeout:g} s)")
        why = walled.over_limit()
        walled.close()
        output = walled.output()
    if why:
        return Outcome("died", f"stopped: {why}")
    if code == 0:
        return Outcome("ok")
    died = -code if code < 0 else code - 128 if sandbox.mode == "bwrap" and code > 128 else 0
    if died:  # bubblewrap reports a signal N as exit 128 + N, as a shell does
        name = signal.Signals(died).name if died in signal.valid_signals() else f"signal {died}"
        return Outcome("died", f"killed by {name}" + (f": {output}" if output else ""))
    return Outcome("error", output or f"exit status {code}")
