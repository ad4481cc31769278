"""Hostile submissions cannot break the grader: each is graded to zero in bounded time, with
no file outside its temporary copy changed and no process of it left behind (issue 10).

Each fixture in ``assign_fixtures/hostile/`` keeps the student's stubs and adds one hostile
cell: an infinite loop that swallows interrupts, a raise, ``sys.exit``, ``os._exit``, child
processes (a sleeper and a double-forked ``setsid`` daemon with an empty environment), file
vandalism (deleting and rewriting canaries in the submission's own folder, in another
submission's folder and in the repository, rewriting ppbook's source), a fork bomb, a huge
allocation and a flood of output. Limits are short here so the file runs in under a minute.
"""

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from assign_fixtures.fixture_questions import QUESTIONS

import ppbook.assign
from ppbook.assign import sandbox
from ppbook.assign.grade import grade
from ppbook.assign.sandbox import Limits

FIXTURES = Path(__file__).resolve().parent / "assign_fixtures"
HOSTILE = sorted((FIXTURES / "hostile").glob("*.ipynb"))
REPO_CANARY = FIXTURES / "canary.txt"
LIMITS = Limits(cpu_seconds=30, memory_bytes=2**30, processes=32)
BOUND = 25.0  # seconds: start + 2 s cell + 2 s interrupt grace + questions + clean-up
PROTECTING = ("bwrap", "unshare", "user")  # the modes that protect files


def _works(mode: str) -> bool:
    try:
        sandbox.choose(mode)
    except ValueError:
        return False
    return True


def _digest(paths) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths if p.is_file()}


def _guarded(tmp_path: Path) -> list[Path]:
    """The files a hostile submission might reach: canaries and the grader's own sources
    (only the grader's: the assignments' modules beside it may be edited while tests run)."""
    package = Path(ppbook.assign.__file__).parent
    grader = ("__init__.py", "build.py", "grade.py", "kernel.py", "sandbox.py")
    return [
        tmp_path / "alice" / "canary.txt",
        tmp_path / "bob" / "bob.ipynb",
        REPO_CANARY,
        *(package / name for name in grader),
        *sorted(FIXTURES.rglob("*.ipynb")),
    ]


def _left_behind() -> list[str]:
    """Processes of a grading run still alive: a kernel's environment names its temporary
    folder (``ppbook-grade-``), and the daemon fixture sleeps 1000 or 1001 s."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if state != "Z" and (b"ppbook-grade-" in environ or "sleep 100" in command):
            found.append(f"{entry.name}: {command[:80]}")
    return found


def _submit(fixture: Path, tmp_path: Path) -> Path:
    alice, bob = tmp_path / "alice", tmp_path / "bob"
    alice.mkdir()
    bob.mkdir()
    (alice / "canary.txt").write_text("alice's data")
    (bob / "bob.ipynb").write_text("bob's submission")
    text = fixture.read_text()
    for name, path in (
        ("CANARY_ORIGINAL", alice / "canary.txt"),
        ("CANARY_OUTSIDE", bob / "bob.ipynb"),
        ("CANARY_REPO", REPO_CANARY),
    ):
        text = text.replace(name, str(path))
    submission = alice / fixture.name
    submission.write_text(text)
    return submission


def _grade_hostile(fixture: Path, tmp_path: Path, isolation: str | None = None):
    submission = _submit(fixture, tmp_path)
    before = _digest(_guarded(tmp_path))
    start = time.monotonic()
    report = grade(
        submission,
        questions=QUESTIONS,
        timeout=6,
        cell_timeout=2,
        isolation=isolation,
        limits=LIMITS,
    )
    elapsed = time.monotonic() - start
    assert report.score == 0, report.text()
    assert elapsed < BOUND, f"{fixture.stem} took {elapsed:.1f} s"
    assert _digest(_guarded(tmp_path)) == before
    assert _left_behind() == []
    return report


@pytest.mark.parametrize("fixture", HOSTILE, ids=lambda p: p.stem)
def test_a_hostile_submission_is_graded_to_zero_leaving_nothing_behind(fixture, tmp_path):
    if fixture.stem == "files" and sandbox.choose().mode == "none":
        pytest.skip("no file isolation here (not root, no namespaces): it would vandalise")
    report = _grade_hostile(fixture, tmp_path)
    assert all("\n" not in q.feedback for q in report.questions)


@pytest.mark.parametrize("mode", PROTECTING)
def test_every_protecting_isolation_keeps_the_files_around_safe(mode, tmp_path):
    if not _works(mode) or mode == sandbox.choose().mode:
        pytest.skip(f"{mode} does not work here or is the default (tested above)")
    _grade_hostile(FIXTURES / "hostile" / "files.ipynb", tmp_path, mode)


@pytest.mark.parametrize("mode", sandbox.MODES)
def test_no_isolation_leaves_a_process_behind(mode, tmp_path):
    """Without a PID namespace the double-forked daemon escapes the kernel's group: it is
    found as the sandbox uid's process or as an orphan the grader adopted."""
    if not _works(mode) or mode == sandbox.choose().mode:
        pytest.skip(f"{mode} does not work here or is the default (tested above)")
    _grade_hostile(FIXTURES / "hostile" / "processes.ipynb", tmp_path, mode)


def test_the_fixture_notebooks_are_never_run_as_tests_outside_the_sandbox():
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        + ["--nbval", str(FIXTURES)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "no tests collected" in done.stdout, done.stdout[-500:]
