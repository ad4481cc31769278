"""The sandbox's walls, checked with a shell inside each mode this machine has: who the
process is, which capabilities and limits it has, where it may write."""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from ppbook.assign.sandbox import Limits, Sandbox, command, free_uid, passages

ROOT = Path(__file__).resolve().parents[1]
LIMITS = Limits(cpu_seconds=77, memory_bytes=3 * 2**30, processes=99, file_bytes=5 * 2**20)
PROBE = "id -u; grep CapEff /proc/self/status; cat /proc/self/limits"
PROBE += "; touch {work}/mine && echo WROTE-WORK"
ESCAPE = (  # only where the walls should hold: in mode "none" as root they would not
    "; touch {repo}/tests/assign_fixtures/probe 2>/dev/null && echo WROTE-REPO"
    "; touch /probe-root 2>/dev/null && echo WROTE-ROOT; true"
)


def _cases():
    root = os.geteuid() == 0
    cases = []
    for mode, tool in (("bwrap", "bwrap"), ("unshare", "unshare"), ("user", None), ("none", None)):
        if tool and not shutil.which(tool):
            continue
        if mode == "user" and not root:
            continue
        for with_uid in (True, False) if root and mode != "none" else (False,):
            if mode == "user" and not with_uid:
                continue
            cases.append((mode, with_uid))
    return cases


def _limit(text: str, name: str) -> str:
    line = next(line for line in text.splitlines() if line.startswith(name))
    return line[len(name) :].split()[0]


@pytest.mark.parametrize(("mode", "with_uid"), _cases())
def test_the_walls_of_each_mode(mode, with_uid):
    sandbox = Sandbox(mode, free_uid() if with_uid else None)
    work = Path(tempfile.mkdtemp(prefix="ppbook-walls-"))  # pytest's tmp_path is root's only
    if sandbox.uid is not None:
        os.chown(work, sandbox.uid, sandbox.uid)
    script = (PROBE + ("" if mode == "none" else ESCAPE)).format(work=work, repo=ROOT)
    argv = command(sandbox, work, LIMITS, ["/bin/sh", "-c", script])
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=work)
    finally:
        shutil.rmtree(work)
    out = done.stdout
    if done.returncode != 0 and mode in ("bwrap", "unshare"):
        pytest.skip(f"{mode} does not work here: {done.stderr.strip()[-200:]}")
    assert done.returncode == 0, done.stderr
    assert "WROTE-WORK" in out
    assert _limit(out, "Max cpu time") == "77"
    assert _limit(out, "Max data size") == str(3 * 2**30)
    assert _limit(out, "Max file size") == str(5 * 2**20)
    assert _limit(out, "Max core file size") == "0"
    if mode == "none":
        return
    assert out.splitlines()[0] == str(sandbox.uid if with_uid else 0)
    assert "CapEff:\t0000000000000000" in out
    assert "WROTE-REPO" not in out and "WROTE-ROOT" not in out
    if with_uid:
        assert _limit(out, "Max processes") == "99"


def test_an_unknown_isolation_is_a_one_line_error():
    from ppbook.assign.sandbox import choose

    with pytest.raises(ValueError, match="isolation must be one of bwrap, unshare, user, none"):
        choose("docker")


@pytest.mark.parametrize("mode", ["bwrap", "unshare"])
def test_a_folder_others_cannot_enter_shows_the_sandbox_only_the_interpreter(mode):
    """Python under ``/root/.pyenv`` (``/root`` is 0700): the sandbox uid sees an empty
    ``/root`` but for the path to the interpreter, so it starts Python and reads nothing else."""
    hidden = passages()
    if os.geteuid() != 0 or not hidden or (mode == "bwrap" and not shutil.which("bwrap")):
        pytest.skip("needs root, a folder others cannot enter on the way to Python, and the tool")
    blocker, shown = next(iter(hidden.items()))
    sandbox = Sandbox(mode, free_uid())
    work = Path(tempfile.mkdtemp(prefix="ppbook-walls-"))
    os.chown(work, sandbox.uid, sandbox.uid)
    argv = command(sandbox, work, LIMITS, ["/bin/ls", "-A", blocker])
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=work)
    finally:
        shutil.rmtree(work)
    if done.returncode != 0 and "Permission denied" not in done.stderr:
        pytest.skip(f"{mode} does not work here: {done.stderr.strip()[-200:]}")
    expected = {Path(path).relative_to(blocker).parts[0] for path in shown}
    assert set(done.stdout.split()) == expected
