"""A fresh IPython kernel inside the sandbox, driven cell by cell with a deadline on every
wait (used by :mod:`ppbook.assign.grade`).

The kernel is ``python -m ipykernel_launcher -f CONNECTION`` behind the sandbox's command
(:func:`ppbook.assign.sandbox.command`), started in a process group of its own, with a clean
environment whose home and temporary folder lie in the writable scratch folder; it listens
on 127.0.0.1 only. The grader starts this process itself (no kernelspec, no KernelManager)
so that it holds the process group to kill and decides the whole environment. Outcomes are
read from the IOPub channel through sockets that refuse messages over
:data:`MAX_MESSAGE_BYTES`, and a cell's printed output is not kept, so a submission that
prints without end cannot fill the grader's memory.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ppbook.assign.processes import kill_everything, pid_namespaces_below, start_ticks
from ppbook.assign.sandbox import Limits, Sandbox, command
from ppbook.checks import clipped

MAX_MESSAGE_BYTES = 16 * 2**20
INTERRUPT_GRACE = 2.0
"""Seconds a cell that ran out of time has to stop after an interrupt before the kernel is
killed."""


@dataclass
class Outcome:
    """How one piece of code ran: ``status`` is "ok", "error", "timeout" (interrupted and
    stopped), "stuck" (did not stop: the kernel was killed) or "died" (the kernel ended)."""

    status: str
    error: str = ""  # "ExceptionName: message" of an error


def first_line(source: str) -> str:
    """The first non-blank line of a cell, cut to 60 characters, for messages."""
    for line in source.splitlines():
        if line.strip():
            return clipped(line.strip(), 60)
    return "(empty cell)"


class Kernel:
    """A sandboxed kernel running in ``work`` (the submission's copy, its current folder),
    its home and temporary files in ``scratch``; a context manager that kills everything it
    started on exit."""

    def __init__(self, sandbox: Sandbox, work: Path, scratch: Path, limits: Limits):
        self.sandbox, self.work, self.scratch, self.limits = sandbox, work, scratch, limits
        self.process: subprocess.Popen | None = None
        self.client = None
        self._since = 0
        self._namespaces: frozenset[str] = frozenset()

    def __enter__(self) -> Kernel:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self, timeout: float = 60.0) -> None:
        """Start the kernel and wait (at most ``timeout`` s) until it answers."""
        import zmq
        from jupyter_client import BlockingKernelClient
        from jupyter_client.connect import write_connection_file

        connection = self.scratch / "kernel.json"
        write_connection_file(str(connection), ip="127.0.0.1")
        if self.sandbox.uid is not None:
            os.chown(connection, self.sandbox.uid, self.sandbox.uid)
        home, tmp = self.scratch / "home", self.scratch / "tmp"
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "TMPDIR": str(tmp),
            "IPYTHONDIR": str(home / ".ipython"),
            "MPLCONFIGDIR": str(home / ".matplotlib"),
            "MPLBACKEND": "Agg",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",
            "LANG": "C.UTF-8",
            "OMP_NUM_THREADS": "1",
        }
        argv = [sys.executable, "-m", "ipykernel_launcher", "-f", str(connection)]
        log = open(self.scratch / "kernel.log", "wb")  # noqa: SIM115 (kept by the process)
        self._since = start_ticks()
        self.process = subprocess.Popen(
            command(self.sandbox, self.scratch.parent, self.limits, argv),
            cwd=self.work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        context = zmq.Context()
        context.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
        self.client = BlockingKernelClient(connection_file=str(connection), context=context)
        self.client.load_connection_file()
        self.client.start_channels()
        self._wait_ready(time.monotonic() + timeout)
        self._namespaces = pid_namespaces_below(self.process.pid)

    def _wait_ready(self, deadline: float) -> None:
        """Ask for kernel_info until its status comes back on IOPub: then both the shell and
        the IOPub channel carry messages."""
        while True:
            if not self.alive() or time.monotonic() > deadline:
                tail = (self.scratch / "kernel.log").read_text(errors="replace")[-500:]
                state = "ended" if not self.alive() else "did not answer in time"
                raise RuntimeError(f"the grading kernel {state}: {tail.strip()}")
            msg_id = self.client.kernel_info()
            answered = time.monotonic() + 1.0
            while time.monotonic() < answered:
                try:
                    msg = self.client.get_iopub_msg(timeout=0.2)
                except queue.Empty:
                    continue
                if msg.get("parent_header", {}).get("msg_id") == msg_id:
                    return

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def run(self, code: str, timeout: float) -> Outcome:
        """Execute ``code``; wait at most ``timeout`` s, then interrupt, then kill."""
        if not self.alive():
            return Outcome("died")
        msg_id = self.client.execute(code, store_history=True, allow_stdin=False)
        outcome = self._wait(msg_id, time.monotonic() + timeout)
        if outcome is not None:
            return outcome
        self._interrupt()
        stopped = self._wait(msg_id, time.monotonic() + INTERRUPT_GRACE)
        if stopped is not None and stopped.status != "died":
            stopped.status = "timeout"
            return stopped
        self.close()
        return Outcome("stuck")

    def _interrupt(self) -> None:
        message = self.client.session.msg("interrupt_request", {})
        self.client.control_channel.send(message)

    def _wait(self, msg_id: str, deadline: float) -> Outcome | None:
        """The outcome once the kernel is idle again, or None at the deadline."""
        error = ""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if not self.alive():
                return Outcome("died")
            try:
                msg = self.client.get_iopub_msg(timeout=min(remaining, 0.5))
            except queue.Empty:
                continue
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "error":
                error = f"{content.get('ename', 'Error')}: {content.get('evalue', '')}"
            elif kind == "status" and content.get("execution_state") == "idle":
                return Outcome("error" if error else "ok", error)

    def close(self) -> None:
        """Kill the kernel's group, every process of the sandbox user and every orphan."""
        if self.client is not None:
            self.client.stop_channels()
            self.client.context.destroy(linger=0)
            self.client = None
        if self.process is not None:
            kill_everything(self.process.pid, self.sandbox.uid, self._since, self._namespaces)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            self.process = None
