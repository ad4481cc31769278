"""The sandbox's entry step: ``python -I -m ppbook.assign.sandbox enter [options] -- COMMAND``.

It runs before anything of the submission: isolated from the copy (``-I``: neither the
current folder nor ``PYTHON*`` variables on ``sys.path``; started in ``/``), as root where the
grader is root. In the ``unshare`` mode it builds the view (:mod:`ppbook.assign.view`) in its
fresh mount namespace and makes it the root; in both namespace modes it fills the copy's
``tmpfs`` from the read-only stage and removes the stage, brings the loopback up (``unshare``;
bubblewrap does it itself). Then, in every mode: resource limits, the sandbox uid (or no
capability at all), ``no_new_privs``, and only then ``chdir`` into the copy and ``exec``
COMMAND. Linux only; standard library.
"""

from __future__ import annotations

import argparse
import ctypes
import fcntl
import json
import os
import resource
import shutil
import socket
import stat
import struct
from pathlib import Path

from ppbook.assign.view import DEVICES, STAGE, Mount

_libc = ctypes.CDLL(None, use_errno=True)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 32, 4096, 8192, 16384, 1 << 18
_MNT_DETACH = 2
_PR_SET_NO_NEW_PRIVS, _PR_CAPBSET_DROP = 38, 24
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = ""):
    def encode(text: str | None) -> bytes | None:
        return text.encode() if text else None

    flags_ = ctypes.c_ulong(flags)
    if _libc.mount(encode(source), target.encode(), encode(fstype), flags_, encode(data)) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"mount {target}: {os.strerror(error)}")


def _place(path: str, folder: bool) -> None:
    """Make ``path`` (a folder, or an empty file to bind a file onto) and its parents."""
    os.makedirs(path if folder else os.path.dirname(path), mode=0o755, exist_ok=True)
    if not folder and not os.path.exists(path):
        Path(path).touch()


def build_root(steps: list[Mount], mountpoint: str) -> None:
    """In a fresh mount namespace: perform ``steps`` on a ``tmpfs`` at ``mountpoint`` and make
    it the root (``/``), read-only. Every source is opened before anything is mounted, so a
    step that hides a folder does not hide what later steps bind from it."""
    sources = {s.source for s in steps if s.kind in ("ro", "rw")}
    sources |= {f"/dev/{name}" for name in DEVICES}
    handles = {
        s: os.open(s, os.O_PATH | os.O_CLOEXEC) for s in sorted(sources) if os.path.exists(s)
    }
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", mountpoint, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m")
    root = mountpoint.rstrip("/")
    for step in steps:
        target = root + step.target
        if step.kind in ("ro", "rw"):
            if step.source not in handles:
                continue
            _bind(f"/proc/self/fd/{handles[step.source]}", target, step.kind == "ro")
        elif step.kind == "symlink":
            _place(os.path.dirname(target), True)
            os.symlink(step.source, target)
        elif step.kind == "tmpfs":
            _place(target, True)
            options = f"mode={step.mode:o},size={max(step.size, 4096)}"
            _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, options)
        elif step.kind == "dev":
            _place(target, True)
            _mount("tmpfs", target, "tmpfs", MS_NOSUID, "mode=0755,size=1m")
            for name in DEVICES:
                if f"/dev/{name}" in handles:
                    _bind(f"/proc/self/fd/{handles[f'/dev/{name}']}", f"{target}/{name}", False)
            for name, link in (
                ("fd", "/proc/self/fd"),
                ("stdin", "/proc/self/fd/0"),
                ("stdout", "/proc/self/fd/1"),
                ("stderr", "/proc/self/fd/2"),
            ):
                os.symlink(link, f"{target}/{name}")
        elif step.kind == "proc":
            _place(target, True)
            _mount("proc", target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.chdir(root)
    _mount(root, "/", None, MS_MOVE)
    os.chroot(".")
    os.chdir("/")
    _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    for handle in handles.values():
        os.close(handle)


def _bind(source: str, target: str, read_only: bool) -> None:
    _place(target, stat.S_ISDIR(os.stat(source).st_mode))
    _mount(source, target, None, MS_BIND)
    if read_only:  # keep the flags the original mount locks (nosuid, nodev, noexec)
        flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV
        if os.statvfs(target).f_flag & os.ST_NOEXEC:
            flags |= MS_NOEXEC
        _mount(None, target, None, flags)


def fill(copy: str, uid: int | None) -> None:
    """Copy the stage into the copy's ``tmpfs`` (links as links, no special files), give it
    to ``uid`` and remove the stage from view where allowed."""
    for entry in os.scandir(STAGE):
        source, target = entry.path, os.path.join(copy, entry.name)
        if entry.is_symlink():
            os.symlink(os.readlink(source), target)
        elif entry.is_dir():
            shutil.copytree(source, target, symlinks=True, ignore=_special)
        elif entry.is_file():
            shutil.copy2(source, target)
    if uid is not None:
        for directory, dirs, files in os.walk(copy):
            os.chown(directory, uid, uid)
            for name in dirs + files:
                os.lchown(os.path.join(directory, name), uid, uid)
    _libc.umount2(STAGE.encode(), _MNT_DETACH)  # without CAP_SYS_ADMIN it stays in view


def _special(directory: str, names: list[str]) -> set[str]:
    def odd(name: str) -> bool:
        mode = os.lstat(os.path.join(directory, name)).st_mode
        return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode))

    return {name for name in names if odd(name)}


def loopback_up() -> None:
    """Bring ``lo`` up in this network namespace (SIOCSIFFLAGS), as ``ip link set lo up``."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | _IFF_UP))


def enter(argv: list[str] | None = None) -> None:
    """Parse the entry step's options, put up the walls, then exec the command after ``--``."""
    parser = argparse.ArgumentParser(prog="python -I -m ppbook.assign.sandbox enter")
    for name in ("--cpu", "--memory", "--processes", "--file-size", "--open-files"):
        parser.add_argument(name, type=int, required=True)
    parser.add_argument("--uid", type=int)
    parser.add_argument("--view", type=json.loads, help="the unshare mode's steps (JSON)")
    parser.add_argument("--fill", help="the copy's tmpfs to fill from the stage")
    parser.add_argument("--loopback", action="store_true")
    parser.add_argument("--drop-capabilities", action="store_true")
    parser.add_argument("--chdir", required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command_line = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.view is not None:
        build_root([Mount(**step) for step in args.view], args.fill or args.chdir)
    if args.fill:
        fill(args.fill, args.uid)
    if args.loopback:
        loopback_up()
    for which, value, hard in (
        (resource.RLIMIT_CPU, args.cpu, args.cpu + 5),
        (resource.RLIMIT_DATA, args.memory, args.memory),
        (resource.RLIMIT_NPROC, args.processes, args.processes),
        (resource.RLIMIT_FSIZE, args.file_size, args.file_size),
        (resource.RLIMIT_NOFILE, args.open_files, args.open_files),
        (resource.RLIMIT_CORE, 0, 0),
    ):
        resource.setrlimit(which, (value, hard))
    if args.uid is not None:
        os.setgroups([])
        os.setgid(args.uid)
        os.setuid(args.uid)
    if args.drop_capabilities:  # exec then grants root no capability at all
        last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
        for capability in range(last + 1):
            _libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0)
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    os.chdir(args.chdir)
    os.execvp(command_line[0], command_line)
