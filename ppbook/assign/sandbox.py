"""The walls around a graded notebook's kernel: which isolation this machine allows and the
command that starts a process inside it.

Four modes, the strongest this machine allows is chosen (:func:`choose`):

- ``bwrap``: bubblewrap (found on ``PATH`` and working): a read-only view of the whole file
  system with only the temporary copy writable, a private ``/dev/shm``, its own PID
  namespace (every process dies with the kernel); as root also an unprivileged user. A
  folder others cannot enter on the way to Python (``/root`` for ``/root/.pyenv``) is
  replaced by an empty one that shows only the interpreter's folders (:func:`passages`).
- ``unshare``: the same walls built with util-linux ``unshare`` (mount and PID namespaces;
  every mount but the copy remounted read-only); as root also an unprivileged user, as
  another user inside a user namespace of its own.
- ``user``: root without namespaces: an unprivileged user of its own (a numeric uid with no
  account), whose only writable places are the copy and the world-writable folders.
- ``none``: process group and resource limits only; files around the submission are NOT
  protected.

Every mode adds resource limits (:class:`Limits`: CPU time, data memory, processes, file
size, open files, no core files) and ``no_new_privs``, set by :func:`enter`, which runs as
``python -m ppbook.assign.sandbox enter ... -- COMMAND`` inside the walls and then
``exec``-s COMMAND. Without a sandbox uid inside namespaces, the kernel keeps no capability
(its bounding set is emptied), so it cannot undo the read-only mounts. Running as root,
the automatic choice never falls back to ``none``: ask for it by name. Ending every process
of a run is :func:`ppbook.assign.processes.kill_everything`. Linux only; standard library.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ppbook.assign.processes import processes_of, user_threads

MODES = ("bwrap", "unshare", "user", "none")
FIRST_UID = 61_000
"""Sandbox uids are searched from here (plus the grader's pid modulo 1000, so that graders
running at once start apart): the first with no account and no process is used."""

_PR_SET_NO_NEW_PRIVS = 38
_PR_CAPBSET_DROP = 24


@dataclass(frozen=True)
class Limits:
    """Resource limits of every process in the sandbox (per process, except ``processes``,
    which counts the sandbox user's processes and threads)."""

    cpu_seconds: int = 600
    memory_bytes: int = 4 * 2**30  # RLIMIT_DATA: heap and private writable mappings
    processes: int = 256
    file_bytes: int = 256 * 2**20
    open_files: int = 1024


@dataclass(frozen=True)
class Sandbox:
    """The isolation in force: ``mode`` (one of :data:`MODES`) and the uid the kernel runs as
    (None: the grader's own; as root inside namespaces then without any capability)."""

    mode: str
    uid: int | None

    def describe(self) -> str:
        """One line for the report."""
        if self.uid is not None:
            user = f"as uid {self.uid} (no account)"
        elif self.mode in ("bwrap", "unshare") and os.geteuid() == 0:
            user = "as root without capabilities (the interpreter is not readable by others)"
        else:
            user = "as the grader's user"
        walls = {
            "bwrap": "bubblewrap: read-only file system except the temporary copy, own PID "
            "namespace",
            "unshare": "unshare: mount and PID namespaces, read-only file system except the "
            "temporary copy",
            "user": "unprivileged user: writable only the temporary copy and world-writable "
            "folders",
            "none": "no file isolation: files around the submission are not protected",
        }[self.mode]
        return f"{walls}; {user}; own process group and resource limits"


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


def _probe(argv: list[str], cwd: Path) -> bool:
    try:
        done = subprocess.run(argv, capture_output=True, timeout=60, check=False, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _needed() -> list[str]:
    """The folders the kernel's interpreter reads: its prefixes, its ``sys.path``, ppbook."""
    import ppbook

    paths = {sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable))}
    paths |= {str(Path(ppbook.__file__).resolve().parents[1])}
    paths |= {p for p in sys.path if p and os.path.isdir(p)}
    return sorted({os.path.realpath(p) for p in paths})


def passages() -> dict[str, list[str]]:
    """For each folder that other users cannot enter (no ``o+x``, such as ``/root`` when
    Python lives in ``/root/.pyenv``) on the way to a folder the kernel needs: the needed
    folders below it. A namespace sandbox hides each such folder behind an empty one and
    shows only those folders in it, read-only, so the sandbox uid can start Python there."""
    found: dict[str, list[str]] = {}
    for path in _needed():
        for ancestor in reversed(Path(path).parents[:-1]):  # outermost first, without "/"
            if not os.stat(ancestor).st_mode & 0o001:
                found.setdefault(str(ancestor), []).append(path)
                break
    return {
        blocker: [p for p in paths if not any(p.startswith(q + "/") for q in paths)]
        for blocker, paths in found.items()
    }


def command(sandbox: Sandbox, work: Path, limits: Limits, argv: list[str]) -> list[str]:
    """The command line that runs ``argv`` inside ``sandbox``, writable only ``work``."""
    enter = [sys.executable, "-m", "ppbook.assign.sandbox", "enter"]
    enter += ["--cpu", str(limits.cpu_seconds), "--memory", str(limits.memory_bytes)]
    processes = limits.processes
    if sandbox.uid is None:  # RLIMIT_NPROC also counts what the user already runs
        processes += user_threads(os.geteuid())
    enter += ["--processes", str(processes), "--file-size", str(limits.file_bytes)]
    enter += ["--open-files", str(limits.open_files)]
    if sandbox.uid is not None:
        enter += ["--uid", str(sandbox.uid)]
    elif sandbox.mode in ("bwrap", "unshare"):  # root, or root of a user namespace
        enter += ["--drop-capabilities"]
    prefix: list[str] = []
    if sandbox.mode == "bwrap":
        prefix = [shutil.which("bwrap") or "bwrap", "--die-with-parent", "--unshare-pid"]
        prefix += ["--unshare-ipc", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        for blocker, shown in passages().items() if sandbox.uid is not None else ():
            prefix += ["--perms", "0755", "--tmpfs", blocker]
            for path in shown:  # the folders between, enterable (bwrap makes them 0700)
                between = [p for p in Path(path).parents if p.is_relative_to(blocker)][::-1]
                for folder in between[1:]:
                    prefix += ["--perms", "0755", "--dir", str(folder)]
                prefix += ["--ro-bind", path, path]
        prefix += ["--tmpfs", "/dev/shm", "--bind", str(work), str(work)]
        if os.geteuid() != 0:
            prefix += ["--unshare-user"]
        prefix += ["--"]
    elif sandbox.mode == "unshare":
        prefix = ["unshare", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc"]
        if os.geteuid() != 0:
            prefix += ["--user", "--map-root-user"]
        enter += ["--writable", str(work)]
        if sandbox.uid is not None:
            enter += ["--passages", json.dumps(passages())]
    return [*prefix, *enter, "--", *argv]


def _works(mode: str, with_uid: bool) -> bool:
    """Whether a kernel's interpreter starts in ``mode`` (as a sandbox uid or not)."""
    folder = Path(tempfile.mkdtemp(prefix="ppbook-probe-"))
    try:
        sandbox = Sandbox(mode, free_uid() if with_uid else None)
        if sandbox.uid is not None:
            os.chown(folder, sandbox.uid, sandbox.uid)
        probe = [sys.executable, "-c", "import ipykernel, ppbook.assign"]
        return _probe(command(sandbox, folder, Limits(), probe), cwd=folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@functools.cache
def _available(force: str | None, root: bool) -> tuple[str, bool]:
    candidates = [force] if force else [m for m in MODES if not (root and m == "none")]
    for mode in candidates:
        if mode == "user" and not root:
            continue
        for with_uid in (True, False) if root and mode != "none" else (False,):
            if mode == "user" and not with_uid:
                continue
            if _works(mode, with_uid):
                return mode, with_uid
    if force:
        raise ValueError(f"isolation {force!r} does not work here; try another of {MODES}")
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
    return Sandbox(mode, free_uid() if with_uid else None)


def _read_only_except(writable: str, passages: dict[str, list[str]]) -> None:
    """Inside a fresh mount namespace: every mount read-only except ``writable``, a private
    ``/dev/shm``, each of the :func:`passages` blockers hidden behind an empty folder that
    shows only its needed folders."""

    def mount(*args: str) -> None:
        subprocess.run(["mount", *args], check=True, capture_output=True, timeout=10)

    mount("--make-rprivate", "/")
    mount("--bind", writable, writable)
    stage = Path(writable) / ".ppbook-stage"
    shown = [path for paths in passages.values() for path in paths]
    for index, path in enumerate(shown):  # keep a handle on each before it is hidden
        (stage / str(index)).mkdir(parents=True)
        mount("--bind", path, str(stage / str(index)))
    for blocker in passages:
        mount("-t", "tmpfs", "-o", "mode=755", "tmpfs", blocker)
    for index, path in enumerate(shown):
        Path(path).mkdir(parents=True, exist_ok=True)
        mount("--move", str(stage / str(index)), path)
    if shown:
        shutil.rmtree(stage)
    points = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        point = line.split()[1].encode().decode("unicode_escape")
        if point == writable or point == "/proc" or point.startswith("/proc/"):
            continue
        points.append(point)
    for point in points:
        mount("-o", "remount,bind,ro", point)
    mount("-t", "tmpfs", "-o", "size=64m,mode=1777", "tmpfs", "/dev/shm")


def enter(argv: list[str] | None = None) -> None:
    """Inside the walls: read-only mounts (``--writable``), resource limits, the sandbox user
    (``--uid``), ``no_new_privs``; then exec the command after ``--``."""
    parser = argparse.ArgumentParser(prog="python -m ppbook.assign.sandbox enter")
    parser.add_argument("--cpu", type=int, required=True)
    parser.add_argument("--memory", type=int, required=True)
    parser.add_argument("--processes", type=int, required=True)
    parser.add_argument("--file-size", type=int, required=True)
    parser.add_argument("--open-files", type=int, required=True)
    parser.add_argument("--uid", type=int)
    parser.add_argument("--writable")
    parser.add_argument("--passages", type=json.loads, default={})
    parser.add_argument("--drop-capabilities", action="store_true")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command_line = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.writable:
        _read_only_except(args.writable, args.passages)
    processes = args.processes
    for which, value, hard in (
        (resource.RLIMIT_CPU, args.cpu, args.cpu + 5),
        (resource.RLIMIT_DATA, args.memory, args.memory),
        (resource.RLIMIT_NPROC, processes, processes),
        (resource.RLIMIT_FSIZE, args.file_size, args.file_size),
        (resource.RLIMIT_NOFILE, args.open_files, args.open_files),
        (resource.RLIMIT_CORE, 0, 0),
    ):
        resource.setrlimit(which, (value, hard))
    if args.uid is not None:
        os.setgroups([])
        os.setgid(args.uid)
        os.setuid(args.uid)
    libc = ctypes.CDLL(None, use_errno=True)
    if args.drop_capabilities:  # exec then grants root no capability at all
        last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
        for capability in range(last + 1):
            libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    os.execvp(command_line[0], command_line)


if __name__ == "__main__":
    if sys.argv[1:2] != ["enter"]:
        sys.exit("usage: python -m ppbook.assign.sandbox enter [limits] -- COMMAND")
    enter(sys.argv[2:])
