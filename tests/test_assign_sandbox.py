"""The sandbox's walls, checked with a shell or Python inside each mode this machine has: who
the process is, which capabilities and limits it has, where it may write, what it sees of
the file system and the network, and how the modes are chosen (issue 16)."""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import ppbook
from ppbook.assign import sandbox
from ppbook.assign.sandbox import Limits, Sandbox, command, free_uid
from ppbook.assign.session import run_walled

ROOT = Path(__file__).resolve().parents[1]
LIMITS = Limits(cpu_seconds=77, memory_bytes=3 * 2**30, processes=99, file_bytes=5 * 2**20)
PROBE = "id -u; grep CapEff /proc/self/status; cat /proc/self/limits; pwd"
PROBE += "; touch {work}/mine && echo WROTE-WORK"
ESCAPE = (  # only where the walls should hold: in mode "none" as root they would not
    "; touch {repo}/tests/assign_fixtures/probe 2>/dev/null && echo WROTE-REPO"
    "; touch /probe-root 2>/dev/null && echo WROTE-ROOT; true"
)


def _cases():
    root = os.geteuid() == 0
    cases = []
    for mode in sandbox.MODES:
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


def _folder(uid: int | None) -> Path:
    """A fresh folder the sandbox uid owns (pytest's tmp_path is root's only)."""
    work = Path(tempfile.mkdtemp(prefix="ppbook-walls-"))
    if uid is not None:
        os.chown(work, uid, uid)
    return work


def _run(argv: list[str], chosen: Sandbox, scratch: Path) -> subprocess.CompletedProcess:
    env = sandbox.environment(chosen, scratch)  # as the grader starts it
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd="/", env=env)


@pytest.mark.parametrize(("mode", "with_uid"), _cases())
def test_the_walls_of_each_mode(mode, with_uid):
    if mode in sandbox.NAMESPACES and not shutil.which(mode):
        pytest.skip(f"{mode} is not installed here")
    sandbox_ = Sandbox(mode, free_uid() if with_uid else None)
    work = _folder(sandbox_.uid)
    script = (PROBE + ("" if mode == "none" else ESCAPE)).format(work=work, repo=ROOT)
    try:
        done = _run(command(sandbox_, work, LIMITS, ["/bin/sh", "-c", script]), sandbox_, work)
    finally:
        shutil.rmtree(work)
    out = done.stdout
    assert done.returncode == 0, done.stderr
    assert "WROTE-WORK" in out
    assert str(work) in out.splitlines()  # its current folder: the copy
    assert _limit(out, "Max cpu time") == "77"
    assert _limit(out, "Max data size") == str(3 * 2**30)
    assert _limit(out, "Max file size") == str(5 * 2**20)
    assert _limit(out, "Max core file size") == "0"
    if mode == "none":
        return
    assert out.splitlines()[0] == str(sandbox_.uid if with_uid else 0)
    assert "CapEff:\t0000000000000000" in out
    assert "WROTE-REPO" not in out and "WROTE-ROOT" not in out
    if with_uid:
        assert _limit(out, "Max processes") == "99"


def test_an_unknown_isolation_is_a_one_line_error():
    with pytest.raises(ValueError, match="isolation must be one of bwrap, unshare, user, none"):
        sandbox.choose("docker")


SEES = """
import json, os, sys
paths = {name: os.path.exists(path) for name, path in json.loads(sys.argv[1]).items()}
import ipykernel, ppbook.assign.expressions, torch
paths["ppbook is the installed one"] = ppbook.__file__ == sys.argv[2]
paths["scratch is writable"] = os.access(sys.argv[3], os.W_OK)
print(json.dumps(paths))
"""


@pytest.mark.parametrize("with_uid", [True, False])
@pytest.mark.parametrize("mode", sandbox.NAMESPACES)
def test_a_namespace_sandbox_sees_only_the_interpreter_its_packages_and_its_copy(mode, with_uid):
    if not shutil.which(mode) or (with_uid and os.geteuid() != 0):
        pytest.skip(f"needs {mode} (and root for a sandbox uid)")
    sandbox_ = Sandbox(mode, free_uid() if with_uid else None)
    root = _folder(sandbox_.uid)
    work, scratch, sibling = root / "submission", root / "scratch", root / "other"
    for folder in (work, scratch, sibling):
        folder.mkdir()
        if sandbox_.uid is not None:
            os.chown(folder, sandbox_.uid, sandbox_.uid)
    (sibling / "bob.ipynb").write_text("another submission")
    paths = {
        "solutions": ROOT / "notebooks" / "assignments" / "01_interleaved_bubble.ipynb",
        "tests": ROOT / "tests",
        "notebooks": ROOT / "notebooks",
        "another submission": sibling / "bob.ipynb",
        "home": Path("/home"),
        "root's files": Path("/root/.bashrc"),
        "shadow": Path("/etc/shadow"),
        "passwd": Path("/etc/passwd"),
        "the interpreter": Path(sys.executable),
        "ppbook": Path(ppbook.__file__),
    }
    names = json.dumps({name: str(path) for name, path in paths.items()})
    script = [sys.executable, "-I", "-c", SEES, names, ppbook.__file__, str(scratch)]
    try:
        done = _run(command(sandbox_, work, Limits(), script, scratch=scratch), sandbox_, scratch)
    finally:
        shutil.rmtree(root)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout)
    visible = {"passwd", "the interpreter", "ppbook", "ppbook is the installed one"}
    visible.add("scratch is writable")
    assert seen == {name: name in visible for name in [*paths, *visible - set(paths)]}


@pytest.mark.parametrize("mode", sandbox.MODES)
def test_a_walled_process_reaches_the_loopback_only_inside_its_own_namespace(mode, tmp_path):
    """The grader's server on 127.0.0.1 is out of reach in the namespace modes (the control:
    reachable in the others), while a server of the process's own answers it (lo is up)."""
    chosen = _choose(mode)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    code = (
        "import socket\n"
        "own = socket.create_server(('127.0.0.1', 0))\n"
        "socket.create_connection(own.getsockname(), timeout=5).close()\n"
        f"socket.create_connection(('127.0.0.1', {port}), timeout=5).close()\n"
    )
    work, scratch = _walled_folders(chosen)
    try:
        outcome = run_walled(
            chosen, work, scratch, Limits(), [sys.executable, "-I", "-c", code], 60
        )
    finally:
        listener.close()
        shutil.rmtree(work.parent)
    if mode in sandbox.NAMESPACES:
        assert outcome.status == "error" and "ConnectionRefusedError" in outcome.error
    else:
        assert outcome.status == "ok", outcome.error


def _choose(mode: str) -> Sandbox:
    try:
        return sandbox.choose(mode)
    except ValueError as exc:
        pytest.skip(str(exc))


def _walled_folders(chosen: Sandbox) -> tuple[Path, Path]:
    root = _folder(chosen.uid)
    work, scratch = root / "submission", root / "scratch"
    for folder in (work, scratch):
        folder.mkdir()
        if chosen.uid is not None:
            os.chown(folder, chosen.uid, chosen.uid)
    return work, scratch


def test_the_modes_this_machine_offers_are_the_ones_tested():
    """On a root Linux machine with util-linux, ``unshare`` and ``none`` work, and ``user``
    does unless the interpreter lies in a folder other users cannot enter (it says which)."""
    if os.geteuid() != 0 or not sys.platform.startswith("linux") or not shutil.which("unshare"):
        pytest.skip("needs root on Linux with util-linux unshare")
    working = {mode for mode in sandbox.MODES if _works(mode)}
    assert {"unshare", "none"} <= working
    if sandbox.unreachable():
        with pytest.raises(ValueError, match=f"cannot enter {sandbox.unreachable()}"):
            sandbox.choose("user")
    else:
        assert "user" in working
    assert ("bwrap" in working) == bool(shutil.which("bwrap"))


def _works(mode: str) -> bool:
    try:
        sandbox.choose(mode)
    except ValueError:
        return False
    return True


def _without(tool: str, which):
    return lambda name: None if name == tool else which(name)


def test_without_bubblewrap_the_choice_falls_back_to_unshare(monkeypatch):
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and util-linux unshare")
    real = shutil.which
    monkeypatch.setattr(
        sandbox.shutil, "which", lambda name: None if name == "bwrap" else real(name)
    )
    sandbox.forget()
    try:
        chosen = sandbox.choose()
        with pytest.raises(ValueError, match="isolation 'bwrap' does not work here"):
            sandbox.choose("bwrap")
    finally:
        monkeypatch.undo()
        sandbox.forget()
    assert chosen.mode == "unshare"
    assert chosen.describe().startswith("unshare: sees only the interpreter")


FIXTURES = ROOT / "tests" / "assign_fixtures"
GRADED = {  # the fixture's notebooks and what every mode must give them
    FIXTURES / "instructor" / "00_fixture.ipynb": (
        5,
        ["square is right for -3..3", "hypotenuse(3, 4) = 5"],
    ),
    FIXTURES / "instructor" / "student" / "00_fixture.ipynb": (
        0,
        [
            "square is still to do: Return x squared.",
            "hypotenuse is still to do: Return the hypotenuse of a right triangle.",
        ],
    ),
    FIXTURES / "submissions" / "wrong.ipynb": (
        0,
        ["square(-3) should be 9, got -6", "hypotenuse raised ValueError: legs must be positive"],
    ),
}


@pytest.mark.parametrize("mode", sandbox.MODES)
def test_every_mode_gives_the_same_scores_and_feedback(mode):
    from assign_fixtures.fixture_questions import QUESTIONS

    from ppbook.assign.grade import grade

    chosen = _choose(mode)
    for notebook, (score, feedback) in GRADED.items():
        report = grade(notebook, questions=QUESTIONS, isolation=mode, timeout=30, cell_timeout=10)
        assert (report.score, [q.feedback for q in report.questions]) == (score, feedback)
        uid = re.compile(r"uid \d+")  # graders running at once take different uids
        assert uid.sub("uid N", report.isolation) == uid.sub("uid N", chosen.describe())
