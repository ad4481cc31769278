"""One submission's processes inside the walls (issue 16): ``run_walled``'s outcomes, the
limits per submission (a cgroup for memory and processes, a size for the disk), and a
kernel that sends malformed messages costing nothing but noise."""

import os
import queue
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest

from ppbook.assign import cgroup, sandbox
from ppbook.assign.kernel import Kernel, run_walled
from ppbook.assign.processes import become_subreaper
from ppbook.assign.sandbox import Limits

SHORT = Limits(cpu_seconds=30, memory_bytes=2**30, processes=64)


def _choose(mode: str) -> sandbox.Sandbox:
    try:
        return sandbox.choose(mode)
    except ValueError as exc:
        pytest.skip(str(exc))


@pytest.fixture
def folders():
    """A fresh copy (with one file) and scratch folder, given to the sandbox uid once known."""
    root = Path(tempfile.mkdtemp(prefix="ppbook-walled-"))
    work, scratch = root / "submission", root / "scratch"
    for folder in (work, scratch / "tmp", scratch / "home"):
        folder.mkdir(parents=True)
    (work / "answer.py").write_text("VALUE = 7\n")

    def give(chosen):
        if chosen.uid is not None:
            for directory, dirs, files in os.walk(root):
                os.chown(directory, chosen.uid, chosen.uid)
                for name in dirs + files:
                    os.lchown(os.path.join(directory, name), chosen.uid, chosen.uid)
        return work, scratch

    become_subreaper()
    yield give
    shutil.rmtree(root)


def _python(code: str) -> list[str]:
    return [sys.executable, "-I", "-c", code]


@pytest.mark.parametrize("mode", sandbox.MODES)
def test_run_walled_runs_in_the_copy_and_says_how_it_ended(mode, folders):
    chosen = _choose(mode)
    work, scratch = folders(chosen)
    out = scratch / "tmp" / "out"
    here = "import os, sys; sys.path.insert(0, ''); import answer; "
    here += f"open({str(out)!r}, 'w').write(os.getcwd() + ' ' + str(answer.VALUE))"
    assert run_walled(chosen, work, scratch, SHORT, _python(here), 60).status == "ok"
    assert out.read_text() == f"{work} 7"
    lines = "import sys\nfor n in range(50): print('line', n)\nprint('x' * 5000); sys.exit(3)"
    failed = run_walled(chosen, work, scratch, SHORT, _python(lines), 60)
    assert failed.status == "error"
    assert failed.error.startswith("...") and len(failed.error) == 1000  # the last of it
    assert "line 49" not in failed.error and failed.error.endswith("x" * 100)
    raised = run_walled(chosen, work, scratch, SHORT, _python("raise ValueError('bad')"), 60)
    assert raised.status == "error" and raised.error.endswith("ValueError: bad")


@pytest.mark.parametrize("mode", sandbox.MODES)
def test_run_walled_stops_at_its_timeout_and_leaves_no_process(mode, folders):
    chosen = _choose(mode)
    work, scratch = folders(chosen)
    code = "import os, subprocess, time\nsubprocess.Popen(['sleep', '1002'])\n"
    code += "if os.fork() == 0:\n    os.setsid(); time.sleep(1003)\ntime.sleep(1004)"
    start = time.monotonic()
    outcome = run_walled(chosen, work, scratch, SHORT, _python(code), 2)
    assert outcome.status == "timeout" and time.monotonic() - start < 10
    left = [p for p in Path("/proc").glob("[0-9]*") if _sleeping_100x(p)]
    assert left == []


def _sleeping_100x(process: Path) -> bool:
    try:
        command = (process / "cmdline").read_bytes()
    except OSError:
        return False
    return any(f"{n}".encode() in command for n in (1002, 1003, 1004)) and b"sleep" in command


@pytest.mark.parametrize("mode", sandbox.MODES)
def test_a_process_killed_by_a_signal_died(mode, folders):
    """Except as ``unshare``'s pid 1 (the command itself), which ignores a signal it sends
    itself: it runs on."""
    chosen = _choose(mode)
    work, scratch = folders(chosen)
    code = _python("import os, signal, sys; os.kill(os.getpid(), signal.SIGKILL); sys.exit(5)")
    outcome = run_walled(chosen, work, scratch, SHORT, code, 60)
    if mode == "unshare":
        assert (outcome.status, outcome.error) == ("error", "exit status 5")
    else:
        assert (outcome.status, outcome.error) == ("died", "killed by SIGKILL")


def test_the_grader_copies_into_a_folder_closed_to_other_users(tmp_path):
    """Where the copy lies in the grader's own view (modes user and none), its folder is
    ``0700``: another sandbox uid cannot read this submission."""
    from assign_fixtures.fixture_questions import Question

    from ppbook.assign.grade import grade

    seen = []
    collect = "oct(__import__('os').stat('..').st_mode & 0o777)"
    question = Question("1", 1, collect, lambda data: (seen.append(data) or 0, "seen"))
    shutil.copy(Path(__file__).parent / "assign_fixtures" / "submissions" / "wrong.ipynb", tmp_path)
    grade(tmp_path / "wrong.ipynb", questions=[question], isolation="none", timeout=30)
    assert seen == ["0o700"]


MEMORY = """
import os, time
children = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        block = bytearray({each})
        for i in range(0, len(block), 4096):
            block[i] = 1
        time.sleep(1)
        os._exit(0)
    children.append(pid)
codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]
assert codes == [0, 0, 0], codes
"""


@pytest.mark.parametrize("mode", sandbox.MODES)
def test_processes_over_the_memory_of_the_submission_together_are_stopped(mode, folders):
    """Three processes of 150 MiB: each under the 1 GiB per process, together over 300 MiB.
    The control: under a total of 1 GiB they all hold."""
    chosen = _choose(mode)
    if not chosen.cgroup:
        pytest.skip("no cgroup here: memory is limited per process only")
    work, scratch = folders(chosen)
    code = _python(MEMORY.format(each=150 * 2**20))
    roomy = run_walled(chosen, work, scratch, Limits(total_memory_bytes=2**30), code, 60)
    assert roomy.status == "ok", roomy.error
    tight = Limits(memory_bytes=2**30, total_memory_bytes=300 * 2**20)
    stopped = run_walled(chosen, work, scratch, tight, code, 60)
    assert stopped.status == "died"
    assert stopped.error == "stopped: its processes went over their memory limit (300 MiB together)"


FORKS = """
import os, time
count = 0
try:
    for _ in range(200):
        if os.fork() == 0:
            time.sleep(5)
            os._exit(0)
        count += 1
except OSError:
    pass
raise SystemExit(f"forked {count}")
"""


def test_the_submissions_processes_are_counted_together():
    """As root (mode none), RLIMIT_NPROC does not hold: the cgroup stops the submission at
    its own total (the control: with room, all 200 forks succeed)."""
    chosen = _choose("none")
    if not chosen.cgroup:
        pytest.skip("no cgroup here: processes are limited per user only")
    root = Path(tempfile.mkdtemp(prefix="ppbook-walled-"))
    try:
        counts = [
            run_walled(chosen, root, root, Limits(total_processes=n), _python(FORKS), 60)
            for n in (40, 512)
        ]
    finally:
        shutil.rmtree(root)
    assert [c.status for c in counts] == ["error", "error"]
    assert 30 <= int(counts[0].error.split()[-1]) < 40
    assert counts[1].error == "forked 200"


FILL = """
written = 0
try:
    for n in range(200):
        with open(f"fill-{n}", "wb") as file:
            file.write(b"x" * 2**20)
        written += 1
except OSError as exc:
    raise SystemExit(f"stopped after {written} MiB: {type(exc).__name__}")
"""


@pytest.mark.parametrize("mode", sandbox.MODES)
def test_what_a_submission_writes_is_limited(mode, folders):
    chosen = _choose(mode)
    work, scratch = folders(chosen)
    limits = Limits(disk_bytes=16 * 2**20)
    outcome = run_walled(chosen, work, scratch, limits, _python(FILL), 60)
    if mode in sandbox.NAMESPACES:  # a tmpfs of the copy's size and 16 MiB: full
        assert outcome.status == "error"
        assert outcome.error in {f"stopped after {n} MiB: OSError" for n in (15, 16)}
        assert list(work.iterdir()) == [work / "answer.py"]  # the tmpfs is gone with it
    else:  # the grader watches the folder grow and stops it
        assert (outcome.status, outcome.error) == (
            "died",
            "stopped: it wrote over its disk limit (16 MiB)",
        )


def test_a_version_2_cgroup_gets_its_limits_and_goes_away(tmp_path):
    """cgroup v2's files, written into a folder standing for a delegated group; the empty
    group of a grader no longer running is removed, a busy one kept."""
    stale, busy = tmp_path / "ppbook-grade-999999999-0", tmp_path / "ppbook-grade-999999999-1"
    stale.mkdir()
    busy.mkdir()
    (busy / "cgroup.procs").write_text("1")
    group = cgroup.Cgroup.create(3 * 2**30, 77, where=("v2", [tmp_path]))
    assert not stale.exists() and busy.exists()
    (folder,) = group.folders
    assert folder.parent == tmp_path and folder.name.startswith("ppbook-grade-")
    assert (folder / "memory.max").read_text() == str(3 * 2**30)
    assert (folder / "memory.swap.max").read_text() == "0"
    assert (folder / "pids.max").read_text() == "77"
    assert group.wrap(["python"])[-2:] == ["ppbook-cgroup", "python"]
    assert f"echo $$ > {folder / 'cgroup.procs'}" in group.wrap(["python"])[2]
    for name in ("memory.max", "memory.swap.max", "pids.max"):
        (folder / name).unlink()  # a real group's files go with it
    group.remove()
    assert not folder.exists()


def test_where_no_hierarchy_is_writable_there_is_no_cgroup():
    with pytest.raises(OSError, match="no cgroup hierarchy"):
        cgroup.Cgroup.create(2**30, 64, where=("", []))


class _Process:
    def poll(self):
        return None


class _Walled:
    process = _Process()

    def over_limit(self) -> str:
        return ""


class _Client:
    """Hands out IOPub messages, raising where a message cannot be read."""

    def __init__(self, messages):
        self.messages = list(messages)

    def get_iopub_msg(self, timeout):
        if not self.messages:
            raise queue.Empty
        message = self.messages.pop(0)
        if isinstance(message, Exception):
            raise message
        return message


def _kernel(messages) -> Kernel:
    kernel = Kernel(sandbox.Sandbox("none", None), Path("/"), Path("/"), Limits())
    kernel.walled, kernel.client = _Walled(), _Client(messages)
    return kernel


MINE = {"msg_id": "m"}


def test_malformed_kernel_messages_are_noise():
    messages = [
        UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
        ValueError("Invalid Signature"),
        {"parent_header": [], "msg_type": "status"},
        {"parent_header": MINE, "msg_type": "error"},  # no content
        {"parent_header": MINE, "header": {"msg_type": "error"}, "content": {"evalue": 3}},
        {"parent_header": MINE, "msg_type": "stream", "content": [1, 2]},
        "not a message",
        {"parent_header": MINE, "msg_type": "status", "content": {"execution_state": "idle"}},
    ]
    outcome = _kernel(messages)._wait("m", time.monotonic() + 5)
    assert (outcome.status, outcome.error) == ("error", "Error: ")


def test_a_kernel_that_only_sends_noise_runs_out_of_time():
    kernel = _kernel([ValueError("bad")] * 50 + [{"parent_header": "m"}] * 50)
    assert kernel._wait("m", time.monotonic() + 1) is None
