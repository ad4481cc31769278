"""How a run ends: the command line's output, and every rank stopping when one fails.

A rank that raises, hangs or dies makes the whole run stop within 30 s with the first
failing rank's error and traceback, a non-zero exit status, and no process left behind.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from ppbook.runtime import launch as launch_module
from ppbook.runtime.config import Fault, RunConfig
from ppbook.runtime.launch import PipelineError, launch
from ppbook.runtime.reference import assert_matches_reference

LIMIT = 30.0  # seconds within which a failed run must have stopped


def processes_with(marker: str) -> list[int]:
    """Pids of the processes whose environment holds ``marker`` (our command's children)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if marker.encode() in (proc / "environ").read_bytes():
                found.append(int(proc.name))
        except OSError:  # ended while we looked, or not ours
            continue
    return found


def run_command(*args: str, timeout: float = 120.0) -> tuple[subprocess.CompletedProcess, float]:
    """``python -m ppbook.cli.run ARGS`` with a marker in its environment; checks that
    no process carrying the marker is left once it has ended."""
    marker = f"PPBOOK_TEST_MARK={uuid.uuid4().hex}"
    env = dict(os.environ, PPBOOK_TEST_MARK=marker.split("=")[1])
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "ppbook.cli.run", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    elapsed = time.monotonic() - start
    deadline = time.monotonic() + 5.0  # the resource tracker ends just after its parent
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not processes_with(marker), "processes of the run outlived it"
    return done, elapsed


@pytest.mark.timeout(120)
def test_a_rank_that_raises_stops_the_run():
    done, elapsed = run_command(
        "--nproc", "2", "--schedule", "1f1b", "--microbatches", "4", "--steps", "1",
        "--fault", "raise@1:2", "--timeout", "10",
    )  # fmt: skip
    assert done.returncode == 1
    assert elapsed < LIMIT
    assert "rank 1 failed: RuntimeError: injected fault: rank 1 at its action 2" in done.stderr
    assert "Traceback (most recent call last)" in done.stderr
    assert 'in inject\n    raise RuntimeError(f"injected fault' in done.stderr


@pytest.mark.timeout(120)
def test_a_rank_that_hangs_is_a_timeout_error():
    start = time.monotonic()
    with pytest.raises(PipelineError) as caught:
        launch(RunConfig(num_microbatches=4, fault=Fault("hang", 1, 2), timeout=2.0))
    assert time.monotonic() - start < LIMIT
    message = str(caught.value)
    assert caught.value.rank == 0
    assert "rank 0 failed: CommError" in message and "within the 2 s timeout" in message
    assert "rank 1 was stopped" in message
    assert not _our_spawned_children()


@pytest.mark.timeout(120)
def test_a_rank_that_dies_stops_the_run():
    start = time.monotonic()
    with pytest.raises(PipelineError) as caught:
        launch(RunConfig(num_microbatches=4, fault=Fault("exit", 1, 2), timeout=10.0))
    assert time.monotonic() - start < LIMIT
    # The rank that died is the headline, whatever its peers said after it.
    assert str(caught.value).startswith("rank 1 exited with status 3 and no report")
    assert caught.value.rank == 1
    assert not _our_spawned_children()


@pytest.mark.timeout(120)
def test_a_rank_that_aborts_is_quoted_from_its_stderr():
    """A C++ library that cannot raise prints why and aborts: the error quotes that line."""
    with pytest.raises(PipelineError) as caught:
        launch(RunConfig(num_microbatches=4, fault=Fault("abort", 1, 2), timeout=10.0))
    first = str(caught.value).splitlines()[0]
    assert first.startswith("rank 1 was killed by signal 6 (SIGABRT); the end of its stderr: ")
    assert "injected fault: rank 1 at its action 2 (" in first and first.endswith(") aborts")
    assert not _our_spawned_children()


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("fault", "said"),
    [
        (
            Fault("abort", 1, "end"),
            "rank 1 ended badly after its work was done (killed by signal 6 (SIGABRT))",
        ),
        (
            Fault("raise", 0, "end"),
            "rank 0 ended badly after its work was done (RuntimeError: "
            "injected fault: rank 0 at the end, leaving the process group raises)",
        ),
        (
            Fault("hang", 1, "end"),
            "rank 1 ended badly after its work was done (it did not exit "
            "within 1 s and was stopped)",
        ),
    ],
    ids=["abort", "raise", "hang"],
)
def test_a_rank_that_fails_after_its_work_leaves_the_run_complete(fault, said, capfd, monkeypatch):
    """Once every rank is through its last message and rank 0 has the results, a rank that
    then ends badly (gloo's teardown can abort one whose peer left first) loses nothing: the
    run returns what one process computes, and a line on stderr says what happened."""
    monkeypatch.setattr(launch_module, "LEAVE", 1.0)
    config = RunConfig(num_microbatches=4, dtype="float64", collect_grads=True, timeout=10.0)
    assert_matches_reference(launch(replace(config, fault=fault)))
    err = capfd.readouterr().err
    assert f"ppbook: {said}; the results are complete\n" in err
    if fault.kind == "abort":  # what the rank printed comes back, marked with its rank
        assert "[rank 1] injected fault: rank 1 at the end, leaving the process group aborts" in err
    assert not _our_spawned_children()


def _our_spawned_children() -> list[int]:
    """Rank processes (multiprocessing spawn) still running under this test process."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            status = (proc / "status").read_text()
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = next(line for line in status.splitlines() if line.startswith("PPid:")).split()[1]
        if int(ppid) == os.getpid() and b"spawn_main" in cmdline:
            found.append(int(proc.name))
    return found


@pytest.mark.timeout(120)
def test_command_prints_json_and_compares():
    done, _ = run_command(
        "--nproc", "2", "--schedule", "gpipe", "--microbatches", "4", "--steps", "2",
        "--hidden", "16", "--json", "--compare", "--check", "--dtype", "float64",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["source"] == "measured" and out["schedule"] == "gpipe"
    assert len(out["steps"]) == 2 and out["matches_single_process"] is True
    comparison = out["comparison"]
    for side in ("measured", "simulated"):
        assert set(comparison[side]) == {"makespan", "bubble_fraction", "bubble_ratio"}


@pytest.mark.timeout(120)
@pytest.mark.skipif(shutil.which("torchrun") is None and not Path(sys.executable).with_name(
    "torchrun").exists(), reason="torchrun not installed")  # fmt: skip
def test_under_torchrun_each_process_is_a_rank():
    torchrun = Path(sys.executable).with_name("torchrun")
    done = subprocess.run(
        [str(torchrun), "--standalone", "--nproc-per-node", "2", "-m", "ppbook.cli.run",
         "--schedule", "1f1b", "--microbatches", "4", "--steps", "1", "--hidden", "16",
         "--json", "--check", "--dtype", "float64", "--timeout", "20"],
        capture_output=True, text=True, timeout=100,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)  # rank 0 alone prints
    assert out["num_ranks"] == 2 and out["matches_single_process"] is True
