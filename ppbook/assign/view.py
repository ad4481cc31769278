"""What a namespace sandbox shows of the file system: the interpreter, its packages, the
ppbook package, system libraries, a few files of ``/etc``, a minimal ``/dev``, ``/proc``,
private ``/tmp`` and ``/dev/shm``, the submission's copy and the scratch folder. Nothing else:
not the repository around the package (its notebooks, the instructor solutions, the tests),
not ``/root`` or ``/home``, not other submissions (used by :mod:`ppbook.assign.sandbox`).

A view is a list of :class:`Mount` steps, which bubblewrap performs from its arguments
(:func:`bwrap_arguments`) and the ``unshare`` mode's entry step performs itself
(:mod:`ppbook.assign.walls`). Both start from an empty ``tmpfs`` as the root.

The copy is a ``tmpfs`` of a set size at the copy's path, filled from a read-only view of
the grader's copy (:data:`STAGE`) by the entry step, which then removes that view: what the
submission writes there cannot exceed the size. Standard library only.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC = (
    "passwd", "group", "hosts", "hostname", "nsswitch.conf", "host.conf", "gai.conf",
    "resolv.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone",
    "ssl", "ca-certificates", "alternatives", "fonts", "mime.types", "os-release",
    "protocols", "services",
)  # fmt: skip
"""The files of ``/etc`` that Python, torch and gloo read (names, users, hosts, libraries,
certificates, time zone); not ``shadow``, ``ssh`` or anything else."""
STAGE = "/run/ppbook-submission"
"""Where the entry step finds the grader's copy (read-only) to fill the copy's ``tmpfs``."""
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")


@dataclass(frozen=True)
class Mount:
    """One step of a view: ``kind`` is "ro" or "rw" (bind ``source`` at ``target``),
    "symlink" (``source`` is the link's text), "tmpfs" (``size`` bytes, ``mode``), "dev",
    "proc"."""

    kind: str
    target: str
    source: str = ""
    size: int = 0
    mode: int = 0o755


@functools.cache
def python_folders() -> tuple[str, ...]:
    """The folders the kernel's interpreter reads, without one inside another: its prefixes,
    the ``sys.path`` of a fresh isolated interpreter (``-I``: no current folder, no
    ``PYTHONPATH``), the ppbook package's own folder and, for an editable install, the
    ``data`` folder beside it (read by :mod:`ppbook.links`), never the repository around."""
    code = "import json, sys, ppbook; print(json.dumps([sys.path, list(ppbook.__path__)]))"
    done = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, cwd="/", timeout=60
    )
    if done.returncode != 0:
        raise RuntimeError(f"cannot list the interpreter's folders: {done.stderr.strip()[-300:]}")
    path, package = json.loads(done.stdout)
    found = {sys.prefix, sys.base_prefix, os.path.dirname(sys.executable), *path, *package}
    found = {os.path.realpath(p) for p in found if p and os.path.isdir(p)} | {
        p for p in found if p and os.path.isdir(p)
    }
    for folder in package:
        data = Path(folder).resolve().parent / "data"
        if data.is_dir() and not any(Path(folder).resolve().is_relative_to(p) for p in path if p):
            found.add(str(data))
    return _outermost(found)


def _outermost(paths) -> tuple[str, ...]:
    paths = sorted(set(paths))
    return tuple(
        p for p in paths if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in paths)
    )


def mounts(work: Path, scratch: Path | None, copy_bytes: int, tmp_bytes: int) -> list[Mount]:
    """The view: read-only system and Python folders, ``/dev``, ``/proc``, ``/tmp`` and
    ``/dev/shm`` of ``tmp_bytes`` each, the copy ``work`` as a ``tmpfs`` of ``copy_bytes``
    (filled from :data:`STAGE`), ``scratch`` writable. Parents come before children, and the
    private ``/tmp`` before everything: an interpreter or a checkout that lives below ``/tmp``
    (a CI clone, a virtual environment in ``/tmp``) is then shown on top of it, not hidden."""
    steps: list[Mount] = [
        Mount("dev", "/dev"),
        Mount("tmpfs", "/dev/shm", size=tmp_bytes, mode=0o1777),
        Mount("proc", "/proc"),
        Mount("tmpfs", "/tmp", size=tmp_bytes, mode=0o1777),
    ]
    for folder in SYSTEM:
        if os.path.islink(folder):
            steps.append(Mount("symlink", folder, os.readlink(folder)))
        elif os.path.isdir(folder):
            steps.append(Mount("ro", folder, folder))
    for name in ETC:
        path = os.path.join("/etc", name)
        if os.path.exists(path):
            steps.append(Mount("ro", path, os.path.realpath(path)))
    for folder in python_folders():
        if not any(folder == s or folder.startswith(s + "/") for s in SYSTEM):
            steps.append(Mount("ro", folder, os.path.realpath(folder)))
    steps += [
        Mount("ro", STAGE, str(work)),
        Mount("tmpfs", str(work), size=copy_bytes, mode=0o755),
    ]
    if scratch is not None:
        steps.append(Mount("rw", str(scratch), str(scratch)))
    return steps


def bwrap_arguments(steps: list[Mount]) -> list[str]:
    """bubblewrap's arguments that build the view ``steps``, its root read-only."""
    arguments: list[str] = []
    made = {"/"}
    for step in steps:
        for folder in reversed(Path(step.target).parents):  # bubblewrap would make them 0700
            if str(folder) not in made:
                arguments += ["--perms", "0755", "--dir", str(folder)]
                made.add(str(folder))
        made.add(step.target)
        if step.kind in ("ro", "rw"):
            arguments += [f"--{step.kind}-bind" if step.kind == "ro" else "--bind"]
            arguments += [step.source, step.target]
        elif step.kind == "symlink":
            arguments += ["--symlink", step.source, step.target]
        elif step.kind == "tmpfs":
            arguments += ["--perms", f"{step.mode:o}", "--size", str(step.size)]
            arguments += ["--tmpfs", step.target]
        else:  # dev, proc
            arguments += [f"--{step.kind}", step.target]
    return [*arguments, "--remount-ro", "/"]


def folder_bytes(folder: Path) -> int:
    """The bytes the files below ``folder`` take on disk (without following links), with a
    block for each entry so that many empty files count too."""
    total = 0
    for directory, dirs, files in os.walk(folder):
        for name in dirs + files:
            try:
                total += os.lstat(os.path.join(directory, name)).st_blocks * 512 + 512
            except OSError:
                continue
    return total
