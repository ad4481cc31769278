"""``ppbook run`` refuses bad input before any process starts, in one bounded line.

No process is started here: ``launch`` is replaced by a stub that fails the test if the
command gets that far. tests/test_runtime_signals.py stops and kills real runs.
"""

from __future__ import annotations

import ast
import json
import os
import re
import signal
import subprocess
import sys
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch

import ppbook.runtime.launch as launch_module
from ppbook.cli import run as run_cli
from ppbook.costs import Costs
from ppbook.runtime import preflight
from ppbook.runtime.config import (
    RunConfig,
    activation_bytes,
    check,
    input_shape,
    model_bytes,
    saved_per_block,
)
from ppbook.runtime.launch import PipelineError, _failure
from ppbook.runtime.models import build_blocks, step_data
from ppbook.schedules import one_f_one_b
from ppbook.simulate import simulate
from ppbook.views.text import needed_width


@pytest.fixture
def no_launch(monkeypatch):
    """Make starting a run fail the test: every refusal must come before it."""

    def started(*args, **kwargs):
        raise AssertionError("ppbook run started processes for an argument it should refuse")

    monkeypatch.setattr(launch_module, "launch", started)
    monkeypatch.setattr(launch_module, "launch_many", started)


SMALL = ["--nproc", "2", "--microbatches", "2", "--steps", "1", "--hidden", "8"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--trace", "missing/dir/t.json"], "the folder 'missing/dir' does not exist"),
        (["--width", "0"], "ppbook run needs --width >= 1, got 0"),
        (["--timeout", "1e15"], r"timeout \(seconds\) <= 604800 \(a week\), got 1e\+15"),
        (["--timeout", "nan"], "a finite number > 0"),
        (["--model", "transformer", "--hidden", "33"], "multiple of num_heads .2.*use 32 or 34"),
        (["--model", "transformer", "--hidden", "8", "--heads", "3"], "use 6 or 9"),
        (["--fault", "x" * 100_000], "cannot read fault 'xxx"),
        (["--microbatches", "1000000"], "beyond the limit of"),  # ppbook.limits
        (["--lr", "-1"], "the run needs lr to be a finite number >= 0, got -1.0"),
    ],
)
def test_bad_arguments_are_refused_before_any_process_starts(no_launch, capsys, args, message):
    assert run_cli.main([*SMALL, *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ppbook run: error: ") and err.count("\n") == 1, err[:300]
    assert len(err) <= run_cli.MAX_MESSAGE + 40
    assert re.search(message, err), err


def test_a_trace_path_that_is_a_folder_is_refused(no_launch, capsys, tmp_path):
    assert run_cli.main([*SMALL, "--trace", str(tmp_path)]) == 2
    assert "is a folder; give a file name" in capsys.readouterr().err


def test_every_message_is_cut_to_a_bounded_line(no_launch, capsys):
    assert run_cli.main([*SMALL, "--schedule", "y" * 100_000]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) <= run_cli.MAX_MESSAGE + 40
    assert "unknown schedule" in err


def test_too_many_ranks_for_the_cores_are_refused(no_launch, capsys, monkeypatch):
    monkeypatch.setattr(preflight, "available_cores", lambda: 2)
    assert run_cli.main(["--nproc", "64", "--microbatches", "64", "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert "64 ranks are too many for the 2 CPU cores here: at most 16 (8 per core)" in err
    assert "at most 2 measure without waiting" in err


def test_too_many_ranks_for_the_memory_are_refused(no_launch, capsys, monkeypatch):
    monkeypatch.setattr(preflight, "available_cores", lambda: 64)
    monkeypatch.setattr(preflight, "available_memory", lambda: 2**30)  # 1 GiB: two ranks
    assert run_cli.main(["--nproc", "4", "--microbatches", "4", "--steps", "1"]) == 2
    assert "at most 2 ranks fit" in capsys.readouterr().err


def test_a_model_too_big_for_the_memory_is_refused(no_launch, capsys, monkeypatch):
    monkeypatch.setattr(preflight, "available_memory", lambda: 8 * 2**30)
    assert run_cli.main([*SMALL, "--hidden", "20000"]) == 2  # 2 blocks of 3.2e9 parameters
    err = capsys.readouterr().err
    assert "for the model), but 8.0 GiB is available: not one rank fits" in err


@pytest.mark.parametrize("model", ["mlp", "transformer"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_model_bytes_counts_the_parameters_torch_makes(model, dtype):
    config = RunConfig(model=model, hidden=12, num_blocks=3, dtype=dtype)
    blocks = build_blocks(config, 2)
    counted = sum(p.numel() * p.element_size() for b in blocks for p in b.parameters())
    assert model_bytes(config, check(config)) == counted


# ----- activations and data: counted as PyTorch saves and allocates them --------------------


def _saved_bytes(block, sample) -> int:
    """Bytes of the distinct storages autograd saves in ``block``'s forward, parameters
    left out: what the block holds for its backward."""
    params = {p.untyped_storage().data_ptr() for p in block.parameters()}
    saved = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in params:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        block(sample)
    return sum(saved.values())


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize(
    ("model", "hidden", "heads", "seq_len", "batch"),
    [("mlp", 16, 2, 8, 3), ("mlp", 40, 2, 8, 5), ("transformer", 16, 2, 5, 3),
     ("transformer", 32, 4, 7, 2), ("transformer", 8, 1, 3, 5)],
)  # fmt: skip
def test_saved_per_block_is_what_autograd_saves(model, hidden, heads, seq_len, batch, dtype):
    config = RunConfig(model=model, hidden=hidden, num_heads=heads, seq_len=seq_len,
                       microbatch_size=batch, dtype=dtype)  # fmt: skip
    block = build_blocks(config, 1)[0]
    shape = (batch, *input_shape(config))
    sample = torch.randn(shape, dtype=getattr(torch, dtype), requires_grad=True)
    assert saved_per_block(config) == _saved_bytes(block, sample)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_activation_bytes_counts_the_step_data_torch_makes(dtype):
    config = RunConfig(hidden=8, microbatch_size=5, num_microbatches=4, dtype=dtype)
    schedule = check(config)
    blocks = build_blocks(config, 2)
    inputs, targets, _ = step_data(config, blocks)
    data = sum(t.nbytes for t in [*inputs, *targets])
    peak = max(simulate(schedule).metrics()["peak_activations_full_stage"])  # 2 for 1F1B, p=2
    held = peak * (saved_per_block(config) + 2 * 5 * 8 * config_element(config))
    assert activation_bytes(config, schedule) == data + held
    bigger = RunConfig(hidden=8, microbatch_size=50, num_microbatches=4, dtype=dtype)
    assert activation_bytes(bigger, schedule) == 10 * activation_bytes(config, schedule)


def config_element(config) -> int:
    return torch.tensor([], dtype=getattr(torch, config.dtype)).element_size()


def test_activations_beyond_the_memory_are_refused(no_launch, capsys, monkeypatch):
    monkeypatch.setattr(preflight, "available_memory", lambda: 4 * 2**30)
    big = ["--microbatch-size", "400000"]  # 2 * 8 * 400,000 * 256 * 4 B = 6.1 GiB of data
    assert run_cli.main([*SMALL, "--hidden", "256", "--microbatches", "8", *big]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "GiB data and activations" in err
    assert "not one rank fits; use a smaller --microbatch-size or fewer micro-batches" in err


def test_activations_beyond_a_gpus_memory_are_refused():
    preflight.check_machine(2, 0, 2**30, device_memory=2**31, ranks_per_device=2)
    with pytest.raises(ValueError, match=r"each GPU would hold about 2\.0 GiB \(2 ranks"):
        preflight.check_machine(2, 0, 2**30 + 1, device_memory=2**31, ranks_per_device=2)


def test_memory_messages_survive_counts_beyond_a_float():
    assert preflight.gib(3 * 2**30) == "3.0"
    assert preflight.gib(10**400) == "9.313e+390"
    with pytest.raises(ValueError, match=r"9\.313e\+390 GiB data and activations"):
        preflight.check_machine(1, 0, 10**400)


def test_more_ranks_than_cores_run_with_a_note(capsys, monkeypatch):
    monkeypatch.setattr(preflight, "available_cores", lambda: 1)

    def stub(config):
        raise PipelineError("stub: the run would start here")

    monkeypatch.setattr(launch_module, "launch", stub)
    assert run_cli.main(SMALL) == 1
    err = capsys.readouterr().err
    assert "note: 2 ranks share 1 CPU cores" in err and "stub: the run would start" in err


# ----- the configuration's numbers follow ppbook.checks -------------------------------------


def test_run_config_takes_numbers_as_the_package_does():
    check(RunConfig(nproc=np.int64(2), timeout=Decimal("1.5"), hidden=np.int32(8)))
    check(RunConfig(timeout=Fraction(1, 2)))
    for bad, message in [
        (RunConfig(timeout=True), "timeout"),
        (RunConfig(timeout="5"), "timeout"),
        (RunConfig(timeout=float("inf")), "finite"),
        (RunConfig(nproc=2.0), "nproc to be an integer"),
        (RunConfig(seed=-1), "seed >= 0"),
        (RunConfig(seed=2**64 - 1), "seed <= 18446744073709551614"),
        (RunConfig(lr=100.5), "lr <= 100"),
        (RunConfig(steps=10_001), "steps <= 10,000"),
        (RunConfig(num_threads=2**31), "num_threads <= 1,024"),
        (RunConfig(model="transformer", hidden=10, num_heads=4), "use 8 or 12"),
    ]:
        with pytest.raises(ValueError, match=message):
            check(bad)


# ----- dependencies flow one way: config imports no other runtime module ---------------------


def test_config_imports_no_other_runtime_module():
    source = Path("ppbook/runtime/config.py").read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
    assert not {m for m in imported if m.startswith("ppbook.runtime")}, imported
    code = "import sys, ppbook.runtime.config; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ----- the failure message: the cause first, every line bounded -----------------------------


class Ended:
    """A stand-in for a rank's process after the run: only its exit code matters here."""

    def __init__(self, exitcode: int):
        self.exitcode = exitcode


def write_report(folder: Path, rank: int, message: str, when: float) -> None:
    report = {"rank": rank, "time": when, "type": "CommError", "message": message,
              "traceback": "Traceback (most recent call last):\n" + "  line\n" * 500
              + f"CommError: {message}\n"}  # fmt: skip
    (folder / f"error-{rank}.json").write_text(json.dumps(report))


def test_a_rank_killed_by_a_signal_heads_the_message(tmp_path):
    write_report(tmp_path, 0, "Connection closed by peer [127.0.0.1]:1234", 1.0)
    error = _failure([Ended(1), Ended(-9)], tmp_path, ended=[1, 0], stopped=set())
    lines = str(error).splitlines()
    assert lines[0] == "rank 1 was killed by signal 9 (SIGKILL)"
    assert lines[1].startswith("rank 0 then failed: CommError: Connection closed by peer")
    assert error.rank == 1


def test_a_rank_the_launcher_stopped_is_not_the_cause(tmp_path):
    write_report(tmp_path, 1, "boom", 1.0)
    error = _failure([Ended(-15), Ended(1)], tmp_path, ended=[1, 0], stopped={0})
    assert str(error).startswith("rank 1 failed: CommError: boom")
    assert "rank 0 was stopped (signal 15)" in str(error)


def test_a_huge_error_is_cut(tmp_path):
    write_report(tmp_path, 0, "z" * 10_000_000, 1.0)
    write_report(tmp_path, 1, "w" * 10_000_000, 2.0)
    message = str(_failure([Ended(1), Ended(1)], tmp_path, ended=[0, 1], stopped=set()))
    lines = message.splitlines()
    assert all(len(line) <= launch_module.MAX_LINE for line in lines)
    assert len(lines) < launch_module.MAX_TRACEBACK + 10
    assert "lines of the traceback left out" in message


# ----- a script must guard its launch --------------------------------------------------------


def test_guard_detection_reads_the_script(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("import x\nlaunch()\nif __name__ == '__main__':\n    launch()\n    y = 1\n")
    assert preflight.runs_unguarded(script, 2)
    assert not preflight.runs_unguarded(script, 4) and not preflight.runs_unguarded(script, 5)
    script.write_text('if "__main__" == __name__:\n    launch()\n')
    assert not preflight.runs_unguarded(script, 2)
    assert not preflight.runs_unguarded(tmp_path / "absent.py", 1)


# ----- a width too narrow for the measured actions does not lose the run ---------------------


def test_a_width_too_narrow_for_the_run_draws_what_it_needs(capsys):
    timeline = simulate(one_f_one_b(2, 4), Costs(F=1.0, B=2.0))
    needed = needed_width(timeline)
    drawn = run_cli._drawn(timeline, 3)
    assert f"--width 3 drops short actions; {needed} columns drawn" in capsys.readouterr().err
    assert len(drawn.splitlines()[0]) == len("rank 0 |") + needed + 1


# ----- signals: at once while the ranks run, after the clean-up otherwise --------------------


def test_a_signal_during_the_clean_up_waits_for_it_to_finish():
    signals, before = launch_module._Signals(), signal.getsignal(signal.SIGTERM)
    steps = []
    with pytest.raises(launch_module.Interrupted) as caught:
        with signals.caught():
            os.kill(os.getpid(), signal.SIGTERM)  # while cleaning up: kept
            steps.append("cleaned up")
    assert steps == ["cleaned up"] and caught.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before  # the handlers are restored


def test_a_signal_while_the_ranks_run_stops_at_once():
    signals = launch_module._Signals()
    steps = []
    with pytest.raises(launch_module.Interrupted) as caught:
        with signals.caught():
            try:
                with signals.armed():
                    os.kill(os.getpid(), signal.SIGHUP)
                    steps.append("went on running")
            finally:
                os.kill(os.getpid(), signal.SIGINT)  # a second signal: the clean-up goes on
                steps.append("cleaned up")
    assert steps == ["cleaned up"] and caught.value.signum == signal.SIGHUP
