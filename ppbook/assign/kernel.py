"""A fresh IPython kernel inside the sandbox, driven cell by cell with a deadline on every
wait (used by :mod:`ppbook.assign.grade`).

The kernel is ``python -I -m ppbook.assign.launch -f CONNECTION`` (:mod:`ppbook.assign.launch`)
behind the sandbox's command, started by :class:`ppbook.assign.session.Walled` (process group,
cgroup, clean environment, output kept to its last lines). It talks to the grader over IPC
sockets in the scratch folder (``transport="ipc"``), which both see: the kernel has its own
network namespace where the machine allows, so a TCP port on 127.0.0.1 would not reach it.
The grader starts this process itself (no kernelspec, no KernelManager) so that it holds
every process to kill and decides the whole environment. Outcomes are read from the IOPub
channel through sockets that refuse messages over :data:`MAX_MESSAGE_BYTES`, and a cell's
printed output is not kept, so a submission that prints without end cannot fill the
grader's memory. A message that cannot be read, or lacks what a message must hold, is noise:
it never raises here. :func:`run_walled` runs one process in the same walls.
"""

from __future__ import annotations

import os
import queue
import sys
import time
from pathlib import Path

from ppbook.assign.sandbox import Limits, Sandbox
from ppbook.assign.session import Outcome, Walled, run_walled
from ppbook.checks import clipped

__all__ = ["Kernel", "Outcome", "first_line", "run_walled"]

MAX_MESSAGE_BYTES = 16 * 2**20
INTERRUPT_GRACE = 2.0
"""Seconds a cell that ran out of time has to stop after an interrupt before the kernel is
killed."""


def first_line(source: str) -> str:
    """The first non-blank line of a cell, cut to 60 characters, for messages."""
    for line in source.splitlines():
        if line.strip():
            return clipped(line.strip(), 60)
    return "(empty cell)"


def _header(msg: object, key: str) -> dict:
    """``msg[key]`` if it is a dict, else an empty one (a malformed message)."""
    value = msg.get(key) if isinstance(msg, dict) else None
    return value if isinstance(value, dict) else {}


class Kernel:
    """A sandboxed kernel running in ``work`` (the submission's copy, its current folder),
    talking through ``scratch``; a context manager that kills everything it started on
    exit."""

    def __init__(self, sandbox: Sandbox, work: Path, scratch: Path, limits: Limits):
        self.sandbox, self.work, self.scratch, self.limits = sandbox, work, scratch, limits
        self.walled: Walled | None = None
        self.client = None

    def __enter__(self) -> Kernel:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def process(self):
        return self.walled.process if self.walled is not None else None

    def start(self, timeout: float = 60.0) -> None:
        """Start the kernel and wait (at most ``timeout`` s) until it answers."""
        import zmq
        from jupyter_client import BlockingKernelClient
        from jupyter_client.connect import write_connection_file

        connection = self.scratch / "kernel.json"
        sockets = self.scratch / "kernel-ipc"
        write_connection_file(str(connection), ip=str(sockets), transport="ipc")
        if self.sandbox.uid is not None:
            os.chown(connection, self.sandbox.uid, self.sandbox.uid)
        argv = [sys.executable, "-I", "-m", "ppbook.assign.launch", "-f", str(connection)]
        self.walled = Walled(self.sandbox, self.work, self.scratch, self.limits)
        self.walled.start(argv)
        context = zmq.Context()
        context.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
        self.client = BlockingKernelClient(connection_file=str(connection), context=context)
        self.client.load_connection_file()
        self.client.start_channels()
        self._wait_ready(time.monotonic() + timeout)
        self.walled.watch_namespaces()

    def _message(self, timeout: float) -> dict | None:
        """The next IOPub message; None if none came; {} for one that cannot be read."""
        try:
            msg = self.client.get_iopub_msg(timeout=timeout)
        except queue.Empty:
            return None
        except Exception:  # malformed: bad frames, signature, JSON or UTF-8
            return {}
        return msg if isinstance(msg, dict) else {}

    def _wait_ready(self, deadline: float) -> None:
        """Ask for kernel_info until its status comes back on IOPub: then both the shell and
        the IOPub channel carry messages."""
        while True:
            if not self.alive() or time.monotonic() > deadline:
                tail = self.walled.output()[-500:] if self.walled else ""
                state = "ended" if not self.alive() else "did not answer in time"
                raise RuntimeError(f"the grading kernel {state}: {tail.strip()}")
            msg_id = self.client.kernel_info()
            answered = time.monotonic() + 1.0
            while time.monotonic() < answered:
                msg = self._message(0.2)
                if msg and _header(msg, "parent_header").get("msg_id") == msg_id:
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
        if stopped is not None:  # it stopped, or ended (died)
            if stopped.status != "died":
                stopped.status = "timeout"
            return stopped
        self.close()
        return Outcome("stuck")

    def _interrupt(self) -> None:
        message = self.client.session.msg("interrupt_request", {})
        self.client.control_channel.send(message)

    def _wait(self, msg_id: str, deadline: float) -> Outcome | None:
        """The outcome once the kernel is idle again, or None at the deadline. The kernel
        ending, or its submission going over a limit (which ends it), is "died"."""
        error = ""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            why = self.walled.over_limit()
            if why:
                self.close()
                return Outcome("died", f"stopped: {why}")
            if not self.alive():
                return Outcome("died", self.walled.over_limit())
            msg = self._message(min(remaining, 0.25))
            if not msg or _header(msg, "parent_header").get("msg_id") != msg_id:
                continue
            kind = _header(msg, "header").get("msg_type", msg.get("msg_type"))
            content = _header(msg, "content")
            if kind == "error":
                name, value = content.get("ename"), content.get("evalue")
                name = name if isinstance(name, str) and name else "Error"
                error = clipped(f"{name}: {value if isinstance(value, str) else ''}", 1000)
            elif kind == "status" and content.get("execution_state") == "idle":
                return Outcome("error" if error else "ok", error)

    def close(self) -> None:
        """Kill the kernel, every process of its submission, and remove its cgroup."""
        if self.client is not None:
            self.client.stop_channels()
            self.client.context.destroy(linger=0)
            self.client = None
        if self.walled is not None:
            self.walled.close()
