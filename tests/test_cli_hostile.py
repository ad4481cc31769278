"""Hostile input to ``ppbook simulate`` and ``ppbook run`` (issue 18, item 6): each case ends
in a one-line refusal (exit status 2, ``ppbook <cmd>: error: ...``), quickly and in bounded
memory, and ``--json`` prints valid JSON or nothing (never NaN or Infinity).

Every case runs the command in a subprocess under ``RLIMIT_AS`` (:data:`MEMORY`) and a
timeout, so that a regression (a timeline drawn 10**9 columns wide, ``/dev/zero`` read to
the end, a FIFO waited on) fails here instead of eating the machine.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

MEMORY = 2 * 2**30
"""Address space of each command (bytes): torch and its ranks fit in it, a runaway does not."""
QUICK = 30
"""Seconds a refusal made before anything runs may take (imports on a busy machine)."""
RUN = 180
"""Seconds a case that starts ranks may take (two processes importing torch, a few steps)."""

CLI = "import sys; from ppbook.cli import main; sys.exit(main())"
HUGE = "1" + "0" * 400  # 10**400
SMALL_RUN = ["--nproc", "2", "--microbatches", "2", "--steps", "1", "--hidden", "8"]


def _bounded() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def ppbook(*argv: str, timeout: float = QUICK, cwd: Path | None = None):
    """Run ``ppbook argv`` in a bounded subprocess; return (status, stdout, stderr)."""
    done = subprocess.run(
        [sys.executable, "-c", CLI, *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=_bounded,
        cwd=cwd,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    return done.returncode, done.stdout, done.stderr


def _no_constant(name: str):
    raise AssertionError(f"JSON holds {name}, which is not JSON")


def assert_refused(result, command: str, *fragments: str) -> str:
    """Exit status 2, nothing on stdout, one line on stderr naming the command and each
    of ``fragments``; returns that line."""
    status, out, err = result
    assert status == 2, (status, out[-500:], err[-2000:])
    assert out == "", out[-500:]
    assert err.count("\n") == 1 and err.startswith(f"ppbook {command}: error: "), err[-2000:]
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, err
    return err


def assert_json_or_nothing(out: str) -> None:
    """``out`` is empty or one JSON value without NaN or Infinity."""
    if out.strip():
        json.loads(out, parse_constant=_no_constant)


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


@pytest.fixture
def csv_file(tmp_path):
    path = tmp_path / "ok.csv"
    path.write_text("0F0,0F1,0B0,0B1\n", encoding="utf-8")
    return path


# ----- ppbook simulate: the text timeline is bounded before it is drawn ----------------------

ONE_F_ONE_B = ["--schedule", "1f1b", "--stages", "4", "--microbatches", "8"]


def test_simulate_a_huge_width_is_refused_before_drawing():
    err = assert_refused(ppbook("simulate", *ONE_F_ONE_B, "--width", "1000000000"), "simulate")
    assert "--width 100,000 or fewer" in err


def test_simulate_a_width_too_wide_for_the_ranks_is_refused():
    argv = ["--schedule", "gpipe", "--stages", "4000", "--microbatches", "1"]
    err = assert_refused(ppbook("simulate", *argv, "--width", "99999"), "simulate")
    assert "--width 2,500 or fewer columns for 4,000 ranks" in err


def test_simulate_tiny_costs_leave_the_timeline_out_instead_of_drawing_it():
    status, out, err = ppbook("simulate", *ONE_F_ONE_B, "--costs", "F=1e-9,B=1")
    assert status == 0 and err == ""
    assert "text timeline left out" in out and "see --png or --trace" in out
    assert "makespan" in out  # the metrics are still printed
    err = assert_refused(
        ppbook("simulate", *ONE_F_ONE_B, "--costs", "F=1e-9,B=1", "--width", "50"), "simulate"
    )
    assert "--width 50 would drop actions" in err


def test_simulate_a_denormal_cost_does_not_overflow_the_width():
    status, out, err = ppbook("simulate", *ONE_F_ONE_B, "--costs", "F=5e-324,B=1e300")
    assert status == 0 and "text timeline left out" in out, err[-2000:]


# ----- ppbook simulate and run: --from-csv reads regular files only, and not too much -------


@pytest.mark.parametrize("command", ["simulate", "run"])
def test_from_csv_on_a_device_is_refused(command):
    err = assert_refused(ppbook(command, "--from-csv", "/dev/zero"), command)
    assert "/dev/zero (--from-csv): it is a character device; give a regular file" in err


@pytest.mark.parametrize("command", ["simulate", "run"])
def test_from_csv_on_a_fifo_is_refused_without_waiting(command, fifo):
    err = assert_refused(ppbook(command, "--from-csv", str(fifo), timeout=QUICK), command)
    assert "it is a FIFO (named pipe); give a regular file" in err


def test_from_csv_on_a_folder_is_refused(tmp_path):
    err = assert_refused(ppbook("simulate", "--from-csv", str(tmp_path)), "simulate")
    assert "it is a folder; give a regular file" in err


def test_from_csv_reads_at_most_the_limit(tmp_path):
    sparse = tmp_path / "huge.csv"
    with sparse.open("wb") as f:
        f.truncate(8 * 2**30)  # 8 GiB of holes: reading it whole would break RLIMIT_AS
    err = assert_refused(ppbook("simulate", "--from-csv", str(sparse)), "simulate")
    assert "longer than the limit of 128,000,000 bytes" in err and "--max-actions" in err


# ----- output paths: a FIFO waits for a reader, /dev/full fails on write ---------------------


@pytest.mark.parametrize("flag", ["--csv", "--trace"])
def test_simulate_output_to_a_fifo_is_refused(flag, fifo, csv_file):
    err = assert_refused(
        ppbook("simulate", "--from-csv", str(csv_file), flag, str(fifo)), "simulate"
    )
    assert f"({flag}): it is a FIFO" in err


def test_run_trace_to_a_fifo_is_refused_before_the_run(fifo):
    err = assert_refused(ppbook("run", *SMALL_RUN, "--trace", str(fifo)), "run")
    assert "(--trace): it is a FIFO" in err


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
def test_run_trace_that_cannot_be_written_is_one_line():
    status, out, err = ppbook("run", *SMALL_RUN, "--json", "--trace", "/dev/full", timeout=RUN)
    assert status == 2, err[-2000:]
    assert_json_or_nothing(out)
    lines = err.splitlines()
    assert lines == ["ppbook run: error: cannot write --trace '/dev/full': No space left on device"]


# ----- ppbook run: numbers out of range, a run that diverges ---------------------------------


def test_run_a_huge_learning_rate_is_refused():
    err = assert_refused(ppbook("run", *SMALL_RUN, "--lr", "1e30", "--json"), "run")
    assert "lr <= 100" in err and "1e+30" in err


def test_run_a_loss_that_is_not_finite_fails_the_run_without_nan_in_json():
    argv = ["--model", "transformer", "--hidden", "16", "--steps", "4", "--lr", "100"]
    status, out, err = ppbook("run", "--nproc", "2", "--microbatches", "2", *argv, "--json",
                              timeout=RUN)  # fmt: skip
    assert status == 1, (status, out[-500:], err[-2000:])
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("ppbook run: the run diverged: the loss")
    assert "use a smaller --lr than 100" in err


@pytest.mark.parametrize("seed", [str(2**64), HUGE])
def test_run_a_seed_beyond_torchs_range_is_refused(seed):
    err = assert_refused(ppbook("run", *SMALL_RUN, "--seed", seed), "run")
    assert "seed <= 18446744073709551614" in err


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--microbatch-size", "1000000000"], "use a smaller --microbatch-size"),
        (["--microbatch-size", HUGE], "GiB data and activations"),
        (["--hidden", HUGE], "GiB for the model"),
        (["--width", "1000000000"], "--width 100,000 or fewer"),
        (["--steps", "1000000000000"], "steps <= 10,000"),
        (["--threads", "1000000000000"], "num_threads <= 1,024"),
    ],
)
def test_run_sizes_beyond_the_machine_are_refused_before_the_ranks_start(argv, fragment):
    # A flag given twice: the last one counts.
    assert_refused(ppbook("run", *SMALL_RUN, *argv, "--json"), "run", fragment)
