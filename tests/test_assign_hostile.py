"""Hostile submissions cannot break the grader: each is graded to zero in bounded time, with
no file outside its temporary copy changed and no process of it left behind (issues 10, 16).

Each fixture in ``assign_fixtures/hostile/`` keeps the student's stubs and adds one hostile
cell. :data:`BASIC` ones (an infinite loop that swallows interrupts, a raise, ``sys.exit``,
``os._exit``, a fork bomb, a huge allocation, a flood of output) and :data:`WALLS` ones run
in every isolating mode this machine has (those that read, connect, or that a cgroup or a
disk limit stops, also in ``none``, the control), each with what that mode must hold
(:data:`EXPECTED`): file vandalism, child processes and a double-forked daemon, a
``ppbook/`` package handed in beside the notebook, reading the instructor solutions and
another submission, connecting to a server the test runs on 127.0.0.1, three processes
that together exceed the submission's memory, filling the copy's disk, and malformed kernel
messages. A fixture that reports what it saw does so through ``square``'s feedback. Limits
are short so the file runs in about a minute.
"""

import hashlib
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from assign_fixtures.fixture_questions import QUESTIONS

import ppbook.assign
from ppbook.assign import sandbox
from ppbook.assign.grade import grade
from ppbook.assign.sandbox import Limits

FIXTURES = Path(__file__).resolve().parent / "assign_fixtures"
REPO = FIXTURES.parents[1]
HOSTILE = FIXTURES / "hostile"
REPO_CANARY = FIXTURES / "canary.txt"
SOLUTIONS = REPO / "notebooks" / "assignments" / "01_interleaved_bubble.ipynb"
DISK = 32 * 2**20
LIMITS = Limits(
    cpu_seconds=30,
    memory_bytes=2**30,
    processes=32,
    total_memory_bytes=512 * 2**20,
    total_processes=128,
    disk_bytes=DISK,
)
EACH_BYTES = 200 * 2**20  # three of them: over the 512 MiB together, each under 1 GiB
BOUND = 25.0  # seconds: start + 2 s cell + 2 s interrupt grace + questions + clean-up
BASIC = ("loop", "raise", "exit", "os_exit", "fork_bomb", "memory", "output")
WALLS = ("files", "processes", "shadow", "read_solutions", "network", "memory_together")
WALLS += ("disk_fill", "malformed_messages")
ISOLATING = ("bwrap", "unshare", "user")
EXPECTED = {  # what each mode holds against the fixtures that read and connect
    "bwrap": {"solutions": "FileNotFoundError", "bob": "FileNotFoundError", "net": False},
    "unshare": {"solutions": "FileNotFoundError", "bob": "FileNotFoundError", "net": False},
    # world-readable files stay readable to the sandbox uid; tmp_path is root's only
    "user": {"solutions": "READ", "bob": "PermissionError", "net": True},
    "none": {"solutions": "READ", "bob": "READ", "net": True},  # the control: no walls
}


def _mode(mode: str) -> sandbox.Sandbox:
    try:
        return sandbox.choose(mode)
    except ValueError as exc:
        pytest.skip(str(exc))


def _digest(paths) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths if p.is_file()}


def _guarded(tmp_path: Path) -> list[Path]:
    """The files a hostile submission might reach: canaries and the grader's walls (only
    those: the assignments' modules beside them may be edited while tests run)."""
    package = Path(ppbook.assign.__file__).parent
    walls = ("__init__.py", "sandbox.py", "kernel.py", "session.py", "walls.py", "view.py")
    return [
        tmp_path / "alice" / "canary.txt",
        tmp_path / "bob" / "bob.ipynb",
        REPO_CANARY,
        *(package / name for name in (*walls, "cgroup.py", "launch.py")),
        *sorted(FIXTURES.rglob("*.ipynb")),
    ]


def _left_behind() -> list[str]:
    """Processes of this test's grading runs still alive: descendants of this process (the
    grader adopts orphans), other than zombies. Other graders on the machine are not ours."""
    parents, states, commands = {}, {}, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            commands[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        states[int(entry.name)], parents[int(entry.name)] = fields[0], int(fields[1])

    def ours(pid: int) -> bool:
        while pid > 1:
            pid = parents.get(pid, 0)
            if pid == os.getpid():
                return True
        return False

    return [
        f"{pid}: {commands[pid][:80].decode(errors='replace')}"
        for pid in states
        if states[pid] != "Z" and ours(pid)
    ]


def _submit(fixture: str, tmp_path: Path, port: int = 9) -> Path:
    alice, bob = tmp_path / "alice", tmp_path / "bob"
    alice.mkdir()
    bob.mkdir()
    (alice / "canary.txt").write_text("alice's data")
    (bob / "bob.ipynb").write_text("bob's submission")
    places = {
        "CANARY_ORIGINAL": str(alice / "canary.txt"),
        "CANARY_OUTSIDE": str(bob / "bob.ipynb"),
        "CANARY_REPO": str(REPO_CANARY),
        "SOLUTIONS": str(SOLUTIONS),
        "SERVER_PORT": str(port),
        "EACH_BYTES": str(EACH_BYTES),
        "ESCAPE_MARKER": str(tmp_path / "escaped"),
    }

    def placed(text: str) -> str:
        for name, value in places.items():
            text = text.replace(name, value)
        return text

    if fixture == "shadow":  # the package handed in beside the notebook
        for source in (HOSTILE / "shadow_package").rglob("*.py"):
            target = alice / source.relative_to(HOSTILE / "shadow_package")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(placed(source.read_text()))
    submission = alice / f"{fixture}.ipynb"
    submission.write_text(placed((HOSTILE / f"{fixture}.ipynb").read_text()))
    return submission


def _grade(submission: Path, isolation: str | None = None, limits: Limits = LIMITS):
    tmp_path = submission.parents[1]
    before = _digest(_guarded(tmp_path))
    start = time.monotonic()
    report = grade(
        submission,
        questions=QUESTIONS,
        timeout=8,
        cell_timeout=3,
        isolation=isolation,
        limits=limits,
    )
    elapsed = time.monotonic() - start
    assert elapsed < BOUND, f"{submission.stem} took {elapsed:.1f} s"
    assert _digest(_guarded(tmp_path)) == before
    assert _left_behind() == []
    assert all("\n" not in q.feedback for q in report.questions)
    return report


@pytest.mark.parametrize("mode", ISOLATING)
@pytest.mark.parametrize("fixture", BASIC)
def test_a_hostile_submission_is_graded_to_zero_leaving_nothing_behind(fixture, mode, tmp_path):
    _mode(mode)
    report = _grade(_submit(fixture, tmp_path), mode)
    assert report.score == 0, report.text()


def test_every_fixture_runs_in_one_of_the_lists():
    assert {p.stem for p in HOSTILE.glob("*.ipynb")} == set(BASIC) | set(WALLS)


@pytest.fixture
def server():
    """A TCP server on 127.0.0.1 that counts the connections it accepts."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted = []

    def serve():
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            accepted.append(connection)
            connection.close()

    threading.Thread(target=serve, daemon=True).start()
    yield listener.getsockname()[1], accepted
    listener.close()


def _square_got(report) -> str:
    """What ``square(-3)`` gave, from its feedback ("square(-3) should be 9, got X")."""
    return report.questions[0].feedback.split(", got ", 1)[1]


@pytest.mark.parametrize(
    ("fixture", "mode"),
    [
        (fixture, mode)
        for fixture in ("files", "processes", "malformed_messages")
        for mode in sandbox.MODES
        if (fixture, mode) != ("files", "none")  # none protects no file: it would vandalise
    ],
)
def test_the_files_around_processes_and_the_grader_hold_in_every_isolating_mode(
    fixture, mode, tmp_path
):
    """``none`` too, for what needs no walls: no process left behind, noise ignored."""
    _mode(mode)
    report = _grade(_submit(fixture, tmp_path), mode)
    assert report.score == 0, report.text()
    if fixture == "malformed_messages":  # noise: the cell ran on, the questions are graded
        assert _square_got(report) == "'SENT'"
        assert report.questions[1].feedback == (
            "hypotenuse is still to do: Return the hypotenuse of a right triangle."
        )
        assert report.notes == []


@pytest.mark.parametrize("mode", sandbox.MODES)
def test_a_package_handed_in_beside_the_notebook_is_never_imported(mode, tmp_path):
    """The control imports it as the old entry step did (from the copy's folder): it writes
    its marker. Graded, in every mode, neither the entry step (root) nor the kernel does."""
    _mode(mode)
    submission = _submit("shadow", tmp_path)
    marker = tmp_path / "escaped"
    control = {**os.environ, "PPBOOK_FIXTURE_CONTROL": "1", "PYTHONPATH": ""}
    subprocess.run(
        [sys.executable, "-c", "import ppbook.assign.sandbox"],
        cwd=submission.parent,
        env=control,
        check=True,
        timeout=60,
    )
    assert marker.read_text() == "written by uid 0"
    marker.unlink()
    report = _grade(submission, mode)
    assert not marker.exists()
    assert _square_got(report) == repr(str(Path(sandbox.__file__)))


@pytest.mark.parametrize("mode", sandbox.MODES)
def test_the_solutions_and_other_submissions_are_out_of_reach(mode, tmp_path):
    _mode(mode)
    report = _grade(_submit("read_solutions", tmp_path), mode)
    expected = EXPECTED[mode]
    seen = {"solutions": expected["solutions"], "bob": expected["bob"]}
    assert _square_got(report) == repr(seen)


@pytest.mark.parametrize("mode", sandbox.MODES)
def test_the_kernel_cannot_reach_a_server_on_the_loopback(mode, tmp_path, server):
    _mode(mode)
    port, accepted = server
    report = _grade(_submit("network", tmp_path, port), mode)
    if EXPECTED[mode]["net"]:  # the control: without a namespace it connects
        assert _square_got(report) == "'CONNECTED'"
        assert accepted
    else:
        assert _square_got(report) == "'ConnectionRefusedError'"
        assert not accepted


@pytest.mark.parametrize("mode", sandbox.MODES)
def test_processes_over_the_memory_of_the_submission_together_are_stopped(mode, tmp_path):
    chosen = _mode(mode)
    if not chosen.cgroup:
        pytest.skip("no cgroup here: memory is limited per process only")
    report = _grade(_submit("memory_together", tmp_path), mode)
    assert report.score == 0, report.text()


def test_the_memory_fixture_holds_its_memory_under_a_larger_limit(tmp_path):
    """The control: with room for the three processes, they hold and square is defined."""
    report = _grade(_submit("memory_together", tmp_path), limits=Limits(memory_bytes=2**30))
    assert report.questions[0].score == 2, report.text()


@pytest.mark.parametrize("mode", sandbox.MODES)
def test_filling_the_disk_stops_at_the_submissions_limit(mode, tmp_path):
    chosen = _mode(mode)
    report = _grade(_submit("disk_fill", tmp_path), mode)
    assert report.score == 0, report.text()
    if chosen.mode in sandbox.NAMESPACES:  # the copy's tmpfs is full: OSError at the limit
        written, stopped = eval(_square_got(report))  # a list of an int and a str
        assert stopped == "OSError" and DISK // 2**20 - 2 <= written <= DISK // 2**20
    else:  # the grader saw the folder grow over the limit and stopped the kernel
        assert "the kernel ended" in report.text(), report.text()


def test_the_fixture_notebooks_are_never_run_as_tests_outside_the_sandbox():
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        + ["--nbval", str(FIXTURES)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "no tests collected" in done.stdout, done.stdout[-500:]
