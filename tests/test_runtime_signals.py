"""Stopping a real ``ppbook run`` from outside: signals, a killed rank, an unguarded script.

Each test starts the command (or a script) as a subprocess with its own temporary folder
(``TMPDIR``) and a marker in its environment, so that it can check afterwards that the
run's folder is gone and that no process of the run survived.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from test_runtime_failures import processes_with

HANG = ["--nproc", "2", "--schedule", "1f1b", "--microbatches", "4", "--steps", "1",
        "--hidden", "8", "--fault", "hang@1:2", "--timeout", "40"]  # fmt: skip
"""A run that stays running: rank 1 hangs at its third action, rank 0 waits up to 40 s."""


class Command:
    """``python -m ppbook.cli.run ARGS`` in a session of its own, its stderr read by lines."""

    def __init__(self, tmp: Path, *args: str, verbose: bool = False):
        self.marker = uuid.uuid4().hex
        self.tmp = tmp
        env = dict(os.environ, TMPDIR=str(tmp), PPBOOK_TEST_MARK=self.marker)
        if verbose:
            env["PPBOOK_VERBOSE"] = "1"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ppbook.cli.run", *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,  # a process group of its own, as a terminal's job is
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stderr:
            self.lines.put(line)

    def wait_for_line(self, text: str, timeout: float = 60.0) -> None:
        """Wait until a line of stderr contains ``text``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                assert self.process.poll() is None, "".join(self.seen)
                continue
            self.seen.append(line)
            if text in line:
                return
        raise AssertionError(f"no line with {text!r} within {timeout} s: {''.join(self.seen)}")

    def wait_for_ranks(self, met: bool = True, timeout: float = 60.0) -> None:
        """Wait until both rank processes exist and, if ``met``, have met in the run's
        folder (both past starting)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            folders = list(self.tmp.glob("ppbook-run-*"))
            if len(self.ranks()) == 2 and not met:
                return
            if folders and (folders[0] / "rendezvous").exists() and len(self.ranks()) == 2:
                time.sleep(1.0)
                return
            assert self.process.poll() is None, self.process.stderr.read()
            time.sleep(0.1)
        raise AssertionError("the ranks did not start")

    def ranks(self) -> list[int]:
        """Pids of the rank processes, rank 0 first (they are started in order)."""
        found = []
        for pid in processes_with(self.marker):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                start = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
            except (OSError, IndexError, ValueError):
                continue
            if b"spawn_main" in cmdline:
                found.append((start, pid))
        return [pid for _, pid in sorted(found)]

    def finish(self, timeout: float = 40.0) -> tuple[int, str]:
        """The exit status and the rest of stderr; check that nothing of the run is left."""
        code = self.process.wait(timeout=timeout)
        time.sleep(0.2)
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        deadline = time.monotonic() + 5.0  # the resource tracker ends just after its parent
        while processes_with(self.marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not processes_with(self.marker), "processes of the run outlived it"
        assert not list(self.tmp.glob("ppbook-run-*")), "the run's folder was left behind"
        return code, "".join(self.seen)

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)


@pytest.fixture
def command(tmp_path):
    started: list[Command] = []

    def start(*args: str, verbose: bool = False) -> Command:
        started.append(Command(tmp_path, *args, verbose=verbose))
        return started[-1]

    yield start
    for each in started:  # a failed test leaves nothing running
        each.kill()


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("signum", "to_group", "met"),
    [
        (signal.SIGINT, True, True),
        (signal.SIGINT, True, False),
        (signal.SIGTERM, False, True),
        (signal.SIGHUP, False, True),
    ],
    ids=["ctrl-c", "ctrl-c-while-ranks-start", "sigterm", "sighup"],
)
def test_a_signal_stops_the_run_and_leaves_nothing(command, signum, to_group, met):
    run = command(*HANG)
    run.wait_for_ranks(met)
    if to_group:  # Ctrl-C in a terminal reaches every process of the job
        os.killpg(run.process.pid, signum)
    else:  # a scheduler signals the process it started
        run.process.send_signal(signum)
    code, err = run.finish()
    assert code == 128 + signum
    name = signal.Signals(signum).name
    assert err.strip().splitlines()[-1] == (
        f"ppbook run: stopped by {name}; every rank ended, nothing left"
    )
    assert "Traceback" not in err and "KeyboardInterrupt" not in err


@pytest.mark.timeout(120)
def test_a_rank_killed_by_a_signal_heads_the_error(command):
    run = command(*HANG, verbose=True)
    run.wait_for_line("[rank 1] send gradient for 0B0")  # rank 1 is at its hanging action
    rank0, rank1 = run.ranks()
    os.kill(rank1, signal.SIGKILL)
    code, err = run.finish()
    assert code == 1
    assert "ppbook run: rank 1 was killed by signal 9 (SIGKILL)\n" in err, err
    assert "rank 0 then failed" in err  # its receive from rank 1 broke


@pytest.mark.timeout(120)
def test_a_script_without_a_main_guard_is_told_to_add_one(tmp_path):
    imports = (
        "from ppbook.runtime.config import RunConfig\nfrom ppbook.runtime.launch import launch\n"
    )
    run = "result = launch(RunConfig(num_microbatches=2, hidden=8, timeout=30))\n"
    script = tmp_path / "unguarded.py"
    script.write_text(imports + run + "print('loss', result.loss)\n")
    start = time.monotonic()
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=100, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 1
    assert time.monotonic() - start < 30  # refused before any rank started
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"ValueError: {script}, line 3, launches a run when the script is")
    assert 'if __name__ == "__main__":' in last
    assert "can only join" not in done.stderr

    guarded = tmp_path / "guarded.py"
    guarded.write_text(
        imports + "if __name__ == '__main__':\n    " + run + "    print('loss', result.loss)\n"
    )
    done = subprocess.run([sys.executable, str(guarded)], capture_output=True, text=True,
                          timeout=100, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("loss ")
