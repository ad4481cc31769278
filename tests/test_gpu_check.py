"""``benchmarks/gpu_check.py``, the one script a session with a GPU runs, on a machine
without one: it says so and writes nothing; with torch.cuda and its parts mocked (a TEST
FIXTURE, no GPU), it writes provenance, the parts' results and a summary to its folder."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ppbook.runtime.devices import mode_for

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_without_a_gpu_it_says_so_and_writes_nothing(tmp_path):
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(out)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "No GPU on this machine: nothing was run and nothing written."
    assert not out.exists() and list(tmp_path.iterdir()) == []


def load_script():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_with_a_gpu_everything_lands_in_one_folder_with_provenance(monkeypatch, tmp_path):
    script = load_script()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr("ppbook.runtime.devices.choose_mode", lambda: mode_for(1))
    fixture = ({"gpus": ["TEST FIXTURE, not a GPU"]}, {"torch": "fixture", "nccl": "fixture"})
    monkeypatch.setattr("ppbook.runtime.recording.environment", lambda on_gpu: fixture)
    monkeypatch.setattr(script, "driver_version", lambda: "fixture")
    commands = []

    def part(command, seconds, log):
        commands.append(command[1:])
        log.write_text("fixture")
        rows = '{"hidden": 2048}\nnot json\n{"hidden": 4096}\n'
        return {"status": 0, "seconds": 0.0, "cublas_context_warning": False, "stdout": rows}

    monkeypatch.setattr(script, "run_part", part)
    ranks = [{"rank": 0, "measured_over_predicted": 1.0}]
    monkeypatch.setattr(script, "measure_memory", lambda nproc: {"ranks": ranks, "nproc": nproc})
    out = tmp_path / "out"
    assert script.main([str(out)]) == 0
    assert commands == [
        ["benchmarks/gpu_demo.py", "--out", str(out / "gpu_demo")],
        ["benchmarks/measure_layer.py"],
    ]
    provenance = json.loads((out / "provenance.json").read_text())
    assert provenance["mode"] == "shared-gpu" and provenance["versions"]["driver"] == "fixture"
    assert provenance["command"] == f"PYTHONPATH=. python benchmarks/gpu_check.py {out}"
    assert provenance["date"].endswith("Z")
    assert (out / "layer_times.jsonl").read_text().splitlines() == [
        '{"hidden": 2048}',
        '{"hidden": 4096}',
    ]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["layer_times"]["rows"] == 2 and summary["memory"]["ranks"] == ranks
    assert json.loads((out / "memory.json").read_text())["nproc"] == 2


def test_a_part_that_fails_is_recorded_and_the_script_says_so(monkeypatch, tmp_path, capsys):
    script = load_script()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr("ppbook.runtime.devices.choose_mode", lambda: mode_for(1))
    monkeypatch.setattr("ppbook.runtime.recording.environment", lambda on_gpu: ({}, {}))
    monkeypatch.setattr(script, "driver_version", lambda: None)
    monkeypatch.setattr(
        script,
        "run_part",
        lambda command, seconds, log: {"status": 1, "stdout": "", "cublas_context_warning": True},
    )

    def broken(nproc):
        raise RuntimeError("CUDA out of memory (test fixture)")

    monkeypatch.setattr(script, "measure_memory", broken)
    assert script.main([str(tmp_path)]) == 1
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["memory"]["status"].startswith("failed: RuntimeError: CUDA out of memory")
    assert "failed: ['gpu_demo', 'layer_times', 'memory']" in capsys.readouterr().out


def test_a_part_is_run_with_the_repository_on_its_path_and_its_warning_found(tmp_path):
    script = load_script()
    code = "import ppbook, sys; print(ppbook.__file__); print('no current CUDA context', file=sys.stderr)"  # noqa: E501
    got = script.run_part([sys.executable, "-c", code], 60, tmp_path / "log")
    assert got["status"] == 0 and got["cublas_context_warning"]
    assert got["stdout"].strip() == str(ROOT / "ppbook" / "__init__.py")
    sleep = [sys.executable, "-c", "import time; time.sleep(5)"]
    slow = script.run_part(sleep, 0.5, tmp_path / "l")
    assert slow["status"] == "timed out after 0 s"  # 0.5 s, as :.0f shows it
