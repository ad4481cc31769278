"""The walls around a graded notebook's kernel: which isolation this machine allows and the
command that starts a process inside it.

Four modes, the strongest this machine allows is chosen (:func:`choose`):

- ``bwrap``: bubblewrap (found on ``PATH`` and working) builds a view of the file system with
  only the interpreter, its packages, the ppbook package, system libraries and the copy
  (:mod:`ppbook.assign.view`); its own PID, IPC and network namespaces (loopback only); as
  root also an unprivileged user.
- ``unshare``: the same view and namespaces built with util-linux ``unshare`` and the entry
  step (:mod:`ppbook.assign.walls`), which mounts the view and brings the loopback up.
- ``user``: root without namespaces: an unprivileged user of its own (a numeric uid with no
  account). It still reads whatever is world-readable (the system, the repository and its
  notebooks where they are world-readable, other folders that are not closed to others) and
  writes only its copy (a folder of its own, ``0700``, that other sandbox uids cannot read)
  and world-writable folders; it shares the grader's network.
- ``none``: resource limits only; files around the submission and the network are NOT
  protected.

Every mode adds resource limits per process (:class:`Limits`: CPU time, data memory,
processes, file size, open files, no core files) and ``no_new_privs``, set by the entry step
``python -I -m ppbook.assign.sandbox enter ... -- COMMAND``, which runs isolated from the copy
(``-I``, started in ``/``) and ``chdir``-s into the copy only just before it ``exec``-s
COMMAND. Per submission (:mod:`ppbook.assign.session`): a cgroup where the machine allows
(:mod:`ppbook.assign.cgroup`) for memory with swap and the number of processes, and a disk
limit (a ``tmpfs`` of a set size for the copy and ``/tmp`` in the namespace modes, the size of
the folders watched in the others). Without a sandbox uid inside namespaces, the kernel keeps
no capability (its bounding set is emptied). Running as root, the automatic choice never
falls back to ``none``: ask for it by name. Linux only; standard library.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ppbook.assign import cgroup
from ppbook.assign.processes import processes_of, user_threads
from ppbook.assign.view import bwrap_arguments, folder_bytes, mounts, python_folders

MODES = ("bwrap", "unshare", "user", "none")
NAMESPACES = ("bwrap", "unshare")
"""The modes that build a view of the file system and a network namespace of their own."""
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
FIRST_UID = 61_000
"""Sandbox uids are searched from here (plus the grader's pid modulo 1000, so that graders
running at once start apart): the first with no account and no process is used."""


@dataclass(frozen=True)
class Limits:
    """Resource limits. Per process (the second wall): ``cpu_seconds``, ``memory_bytes``
    (RLIMIT_DATA: heap and private writable mappings), ``processes`` (RLIMIT_NPROC: the
    sandbox user's processes and threads), ``file_bytes``, ``open_files``. Per submission
    (every process it starts together): ``total_memory_bytes`` (swap included) and
    ``total_processes`` in its cgroup, ``disk_bytes`` that it may write (copy, ``/tmp``,
    scratch)."""

    cpu_seconds: int = 600
    memory_bytes: int = 4 * 2**30
    processes: int = 256
    file_bytes: int = 256 * 2**20
    open_files: int = 1024
    total_memory_bytes: int = 6 * 2**30
    total_processes: int = 512
    disk_bytes: int = 512 * 2**20


@dataclass(frozen=True)
class Sandbox:
    """The isolation in force: ``mode`` (one of :data:`MODES`), the uid the kernel runs as
    (None: the grader's own; as root inside namespaces then without any capability) and the
    cgroup kind each submission gets ("v1", "v2" or "": none, :func:`ppbook.assign.cgroup.
    kind`)."""

    mode: str
    uid: int | None
    cgroup: str = ""

    def describe(self) -> str:
        """One line for the report: the walls, the user, the limits in force."""
        if self.uid is not None:
            user = f"as uid {self.uid} (no account)"
        elif self.mode in NAMESPACES and os.geteuid() == 0:
            user = "as root without capabilities"
        else:
            user = "as the grader's user"
        view = "sees only the interpreter, its packages and its copy; own PID and network "
        view += "namespaces (loopback only)"
        walls = {
            "bwrap": f"bubblewrap: {view}",
            "unshare": f"unshare: {view}",
            "user": "unprivileged user: reads what is world-readable, writes only its copy and "
            "world-writable folders, shares the network",
            "none": "no isolation: files around the submission and the network are not protected",
        }[self.mode]
        if self.cgroup:
            group = f"cgroup {self.cgroup} per submission (memory with swap, processes)"
        else:
            group = "no cgroup here: memory and processes limited per process only"
        disk = "tmpfs of a set size" if self.mode in NAMESPACES else "disk use watched"
        return f"{walls}; {user}; {group}; {disk}; resource limits per process"


def free_uid() -> int:
    """A uid with no account and no process, from :data:`FIRST_UID` up."""
    import pwd

    uid = FIRST_UID + os.getpid() % 1000  # graders running at once start apart
    while True:
        try:
            pwd.getpwuid(uid)
        except KeyError:
            if not processes_of(uid):
                return uid
        uid += 1


GRADING = "PPBOOK_GRADING"
"""Set to "1" in every sandboxed process: a self-check whose question the grader measures
itself (``Question.run``) defers to it instead of measuring twice."""


def environment(sandbox: Sandbox, scratch: Path) -> dict[str, str]:
    """The whole environment of a process in the sandbox: home and temporary files in the
    private ``/tmp`` (namespace modes) or in ``scratch`` (the others); ``PATH`` the
    interpreter's folder and the system's (namespace modes) or the grader's own."""
    path = os.environ.get("PATH", "/usr/bin:/bin")
    if sandbox.mode in NAMESPACES:  # what the view holds, not the grader's own folders
        home = tmp = Path("/tmp")
        path = f"{os.path.dirname(sys.executable)}:{SYSTEM_PATH}"
    else:
        home, tmp = scratch / "home", scratch / "tmp"
    return {
        "PATH": path,
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "IPYTHONDIR": str(home / ".ipython"),
        "MPLCONFIGDIR": str(home / ".matplotlib"),
        "MPLBACKEND": "Agg",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        GRADING: "1",
    }


def command(
    sandbox: Sandbox, work: Path, limits: Limits, argv: list[str], *, scratch: Path | None = None
) -> list[str]:
    """The command line that runs ``argv`` inside ``sandbox`` in the copy ``work`` (its
    current folder), writable only ``work`` and ``scratch``. Start it in ``/``: its entry step
    changes into the copy only after the walls are up."""
    enter = [sys.executable, "-I", "-m", "ppbook.assign.sandbox", "enter"]
    enter += ["--cpu", str(limits.cpu_seconds), "--memory", str(limits.memory_bytes)]
    processes = limits.processes
    if sandbox.uid is None:  # RLIMIT_NPROC also counts what the user already runs
        processes += user_threads(os.geteuid())
    enter += ["--processes", str(processes), "--file-size", str(limits.file_bytes)]
    enter += ["--open-files", str(limits.open_files), "--chdir", str(work)]
    if sandbox.uid is not None:
        enter += ["--uid", str(sandbox.uid)]
    elif sandbox.mode in NAMESPACES:  # root, or root of a user namespace
        enter += ["--drop-capabilities"]
    prefix: list[str] = []
    if sandbox.mode in NAMESPACES:
        copy_bytes = folder_bytes(work) + limits.disk_bytes
        steps = mounts(work, scratch, copy_bytes, limits.disk_bytes)
        enter += ["--fill", str(work)]
    if sandbox.mode == "bwrap":
        prefix = [shutil.which("bwrap") or "bwrap", "--die-with-parent", "--unshare-pid"]
        prefix += ["--unshare-ipc", "--unshare-net", "--unshare-uts", "--chdir", "/"]
        if os.geteuid() != 0:
            prefix += ["--unshare-user"]
        prefix += [*bwrap_arguments(steps), "--"]
    elif sandbox.mode == "unshare":
        prefix = ["unshare", "--mount", "--pid", "--net", "--ipc", "--uts", "--fork"]
        prefix += ["--kill-child"]
        if os.geteuid() != 0:
            prefix += ["--user", "--map-root-user"]
        enter += ["--loopback", "--view", json.dumps([step.__dict__ for step in steps])]
    return [*prefix, *enter, "--", *argv]


def _works(mode: str, with_uid: bool) -> str:
    """ "" when a kernel's interpreter starts in ``mode`` (as a sandbox uid or not), else why
    not, in one line."""
    for tool in ("bwrap", "unshare"):
        if mode == tool and not shutil.which(tool):
            return f"{tool} is not installed"
    folder = Path(tempfile.mkdtemp(prefix="ppbook-probe-"))
    try:
        sandbox = Sandbox(mode, free_uid() if with_uid else None)
        if sandbox.uid is not None:
            os.chown(folder, sandbox.uid, sandbox.uid)
        probe = [sys.executable, "-I", "-c", "import ipykernel, ppbook.assign"]
        argv = command(sandbox, folder, Limits(), probe)
        try:
            done = subprocess.run(argv, capture_output=True, timeout=60, check=False, cwd="/")
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"its probe did not run: {error}"
        if done.returncode == 0:
            return ""
        said = done.stderr.decode(errors="replace").strip().splitlines()
        return f"its probe failed: {said[-1][:200] if said else f'exit {done.returncode}'}"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def unreachable() -> str:
    """The first folder that other users cannot enter (no ``o+x``) on the way to a folder the
    interpreter needs (``/root`` for ``/root/.pyenv``), or "": where the ``user`` mode's
    uid cannot start Python."""
    for path in python_folders():
        for ancestor in reversed(Path(path).parents[:-1]):  # outermost first, without "/"
            if not os.stat(ancestor).st_mode & 0o001:
                return str(ancestor)
    return ""


@functools.cache
def _available(force: str | None, root: bool) -> tuple[str, bool]:
    candidates = [force] if force else [m for m in MODES if not (root and m == "none")]
    why = ""
    for mode in candidates:
        if mode == "user" and not root:
            continue
        for with_uid in (True, False) if root and mode != "none" else (False,):
            if mode == "user" and not with_uid:
                continue
            why = _works(mode, with_uid)
            if not why:
                return mode, with_uid
    if force == "user" and root and (blocked := unreachable()):
        raise ValueError(
            f"isolation 'user' does not work here: the sandbox uid cannot enter {blocked} on "
            "the way to the interpreter; use a Python that other users can read, or another "
            f"of {MODES}"
        )
    if force:
        raise ValueError(f"isolation {force!r} does not work here ({why}); try another of {MODES}")
    raise ValueError(
        "no isolation works here for a grader running as root: install bubblewrap, allow "
        "namespaces (unshare), or use a Python that other users can read; or choose "
        "--isolation none knowing that the submission may then change any file"
    )


def choose(force: str | None = None) -> Sandbox:
    """The strongest isolation that starts a kernel here (found once per process); ``force``:
    that mode, ValueError if it does not work here."""
    if force is not None and force not in MODES:
        raise ValueError(f"isolation must be one of {', '.join(MODES)}, got {force!r}")
    mode, with_uid = _available(force, os.geteuid() == 0)
    return Sandbox(mode, free_uid() if with_uid else None, cgroup.kind())


def forget() -> None:
    """Forget which modes work here (:func:`choose` probes again), e.g. after the tools on
    ``PATH`` changed."""
    _available.cache_clear()


if __name__ == "__main__":
    if sys.argv[1:2] != ["enter"]:
        sys.exit("usage: python -I -m ppbook.assign.sandbox enter [limits] -- COMMAND")
    from ppbook.assign.walls import enter

    enter(sys.argv[2:])
