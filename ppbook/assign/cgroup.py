"""One control group per graded submission: every process it starts shares one memory limit
(swap included) and one limit on the number of processes, and all of them are killed and the
group removed at the end (used by :mod:`ppbook.assign.session`).

Two kinds, whichever the machine allows a root grader to create below its own group:

- cgroup v1: a child of the grader's group in the ``memory`` and ``pids`` hierarchies
  (``memory.limit_in_bytes``, ``memory.memsw.limit_in_bytes`` where swap is accounted,
  ``pids.max``);
- cgroup v2: a child of the grader's group where ``memory`` and ``pids`` are delegated to
  children (``memory.max``, ``memory.swap.max`` = 0, ``pids.max``).

The first process joins by writing its own pid to ``cgroup.procs`` before it ``exec``-s the
sandbox (:meth:`Cgroup.wrap`), so nothing runs outside the group. Where neither works (no
root, no delegation) :func:`kind` is "" and the resource limits per process stay the only
ones. Linux only; standard library.
"""

from __future__ import annotations

import functools
import itertools
import os
import shlex
import signal
import time
from dataclasses import dataclass
from pathlib import Path

_COUNTER = itertools.count()


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(file system type, mount point, options) of each cgroup file system mounted."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fstype, _, options = (right.split() + ["", "", ""])[:3]
        if fstype in ("cgroup", "cgroup2"):
            point = left.split()[4].encode().decode("unicode_escape")
            found.append((fstype, point, set(options.split(","))))
    return found


def _own_paths() -> dict[str, str]:
    """The grader's group in each hierarchy: controller ("" for v2) -> path."""
    paths = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def parents() -> tuple[str, list[Path]]:
    """Where this process may create a submission's group: ("v1", [memory, pids folders]),
    ("v2", [folder]) or ("", []) where neither hierarchy is usable."""
    mounts, own = _mounts(), _own_paths()
    v1 = []
    for controller in ("memory", "pids"):
        point = next((p for t, p, o in mounts if t == "cgroup" and controller in o), None)
        if point is None or controller not in own:
            break
        v1.append(Path(point) / own[controller].lstrip("/"))
    if len(v1) == 2 and all(os.access(p, os.W_OK) for p in v1):
        return "v1", v1
    point = next((p for t, p, _ in mounts if t == "cgroup2"), None)
    if point is not None and "" in own:
        folder = Path(point) / own[""].lstrip("/")
        try:
            delegated = set((folder / "cgroup.subtree_control").read_text().split())
        except OSError:
            delegated = set()
        if {"memory", "pids"} <= delegated and os.access(folder, os.W_OK):
            return "v2", [folder]
    return "", []


@dataclass
class Cgroup:
    """A submission's group: ``kind`` "v1" or "v2" and its folder in each hierarchy."""

    kind: str
    folders: list[Path]

    @classmethod
    def create(cls, memory_bytes: int, processes: int, where=None) -> Cgroup:
        """A new group below ``where`` (default :func:`parents`) with these limits; OSError
        if it cannot be made (the half-made group is removed)."""
        kind, places = where or parents()
        if not kind:
            raise OSError("no cgroup hierarchy with memory and pids is writable here")
        for place in places:
            _remove_stale(place)
        name = f"ppbook-grade-{os.getpid()}-{next(_COUNTER)}"
        group = cls(kind, [place / name for place in places])
        try:
            for folder in group.folders:
                folder.mkdir()
            group._limit(memory_bytes, processes)
        except OSError:
            group.remove()
            raise
        return group

    def _limit(self, memory_bytes: int, processes: int) -> None:
        if self.kind == "v1":
            memory, pids = self.folders
            _write(memory / "memory.limit_in_bytes", memory_bytes)
            if (memory / "memory.memsw.limit_in_bytes").exists():  # swap is accounted
                _write(memory / "memory.memsw.limit_in_bytes", memory_bytes)
            _write(pids / "pids.max", processes)
        else:
            (folder,) = self.folders
            _write(folder / "memory.max", memory_bytes)
            _write(folder / "memory.swap.max", 0)
            _write(folder / "pids.max", processes)

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` started by a shell that first moves itself into the group: every process
        ``argv`` starts is then in it."""
        joins = " && ".join(
            f"echo $$ > {shlex.quote(str(f / 'cgroup.procs'))}" for f in self.folders
        )
        return ["/bin/sh", "-c", f'{joins} && exec "$@"', "ppbook-cgroup", *argv]

    def pids(self) -> set[int]:
        found: set[int] = set()
        for folder in self.folders:
            try:
                found |= {int(p) for p in (folder / "cgroup.procs").read_text().split()}
            except (OSError, ValueError):
                continue
        return found

    def oom_kills(self) -> int:
        """How many processes the group's memory limit killed."""
        name = "memory.oom_control" if self.kind == "v1" else "memory.events"
        try:
            lines = (self.folders[0] / name).read_text().splitlines()
        except OSError:
            return 0
        counts = [line.split() for line in lines]
        return next((int(c[1]) for c in counts if len(c) == 2 and c[0] == "oom_kill"), 0)

    def kill(self, wait: float = 5.0) -> None:
        """SIGKILL every process in the group until none is left (at most ``wait`` s)."""
        deadline = time.monotonic() + wait
        while (pids := self.pids()) and time.monotonic() < deadline:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    continue
            time.sleep(0.02)

    def remove(self) -> None:
        """Kill what is left and remove the group's folders."""
        self.kill()
        for folder in self.folders:
            for _ in range(50):  # a killed process leaves its group a moment later
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def _remove_stale(place: Path) -> None:
    """Remove the empty groups that graders no longer running left (killed before they
    could remove them)."""
    for folder in place.glob("ppbook-grade-*-*"):
        pid = folder.name.split("-")[2]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            try:
                folder.rmdir()
            except OSError:  # processes are still in it, or it is not a group
                continue


def _write(path: Path, value: int) -> None:
    path.write_text(str(value))


@functools.cache
def kind() -> str:
    """ "v1" or "v2" where this process can create a working group (tried once), else ""."""
    try:
        group = Cgroup.create(2**30, 64)
    except OSError:
        return ""
    group.remove()
    return group.kind
