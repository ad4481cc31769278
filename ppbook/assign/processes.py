"""The processes of a grading run: finding them (by uid, as orphans the grader adopted) and
killing every one of them (used by :mod:`ppbook.assign.sandbox` and
:mod:`ppbook.assign.kernel`). Linux ``/proc`` only; standard library only.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from pathlib import Path

_PR_SET_CHILD_SUBREAPER = 36


def processes_of(uid: int) -> list[int]:
    """The pids of every process owned by ``uid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid == uid:
                found.append(int(entry.name))
        except OSError:  # the process ended while we looked
            continue
    return found


def user_threads(uid: int) -> int:
    """How many threads ``uid`` runs (what RLIMIT_NPROC counts)."""
    total = 0
    for pid in processes_of(uid):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        total += int(status.split("Threads:")[1].split()[0])
    return total


def become_subreaper() -> None:
    """Make orphans of the grader's descendants (a double-forked daemon) its children, so that
    :func:`kill_everything` finds them."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _children_since(start_ticks: int) -> list[int]:
    me = str(os.getpid())
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me and int(fields[19]) >= start_ticks:  # ppid, starttime
            found.append(int(entry.name))
    return found


def start_ticks() -> int:
    """Now, in the clock ticks since boot that ``/proc/PID/stat`` gives a process's start."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK"))


def _namespace(pid: int | str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def pid_namespaces_below(pid: int) -> frozenset[str]:
    """The PID namespaces (``/proc/PID/ns/pid`` links) of ``pid``'s children that are not the
    grader's own: the sandbox's, where bubblewrap or unshare made one."""
    mine, found = _namespace("self"), set()
    for entry in Path("/proc").iterdir():
        try:
            ppid = (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
        except (OSError, IndexError):
            continue
        if ppid == str(pid):
            namespace = _namespace(entry.name)
            if namespace is not None and namespace != mine:
                found.add(namespace)
    return frozenset(found)


def _in_namespaces(namespaces: frozenset[str]) -> list[int]:
    if not namespaces:
        return []
    return [
        int(e.name)
        for e in Path("/proc").iterdir()
        if e.name.isdigit() and _namespace(e.name) in namespaces
    ]


def kill_everything(
    group: int,
    uid: int | None,
    since_ticks: int,
    namespaces: frozenset[str] = frozenset(),
    wait: float = 5.0,
) -> None:
    """SIGKILL the process group ``group``, every process of ``uid`` (if given), every process
    in the PID ``namespaces`` and every child of the grader started since ``since_ticks``,
    until none is left alive (at most ``wait`` s)."""
    deadline = time.monotonic() + wait
    while True:
        targets = _children_since(since_ticks) + _in_namespaces(namespaces)
        if uid is not None:
            targets += processes_of(uid)
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for pid in targets:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
        _reap(since_ticks)
        alive = [p for p in targets if Path(f"/proc/{p}").exists() and not _zombie(p)]
        if not alive or time.monotonic() > deadline:
            _reap(since_ticks)
            return
        time.sleep(0.05)


def _reap(since_ticks: int) -> None:
    """Collect the exit status of the grader's ended children started since ``since_ticks``
    (orphans it adopted as a subreaper), so no zombie is left."""
    for pid in _children_since(since_ticks):
        if _zombie(pid):
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                continue


def _zombie(pid: int) -> bool:
    try:
        return (Path(f"/proc/{pid}") / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
