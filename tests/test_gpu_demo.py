"""The GPU demo on a machine without a GPU (chapter 9, ``benchmarks/gpu_demo.py``).

No GPU is needed: ``torch.cuda`` is mocked where a test asks what a machine with GPUs would
do. The mode (:mod:`ppbook.runtime.devices`) against hand-written answers and against the
runtime's own choice (:func:`ppbook.runtime.context.pick_device`, the code path that puts
two ranks on one GPU with gloo through host memory); the clock checks on hand-made
timelines; recordings written and read back, with a test fixture that names itself as one
(written to a temporary folder, never to ``data/``); and the script's two CPU paths.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import matplotlib.pyplot as plt
import pytest
import torch

from ppbook.costs import Costs
from ppbook.runtime import context, recording
from ppbook.runtime.config import check
from ppbook.runtime.devices import (
    choose_mode,
    clock_problems,
    dependency_violations,
    mode_for,
    order_problems,
)
from ppbook.runtime.launch import PipelineError
from ppbook.runtime.recording import (
    Recording,
    environment,
    load_recordings,
    read_recording,
    write_recording,
)
from ppbook.schedules import gpipe, one_f_one_b
from ppbook.simulate import simulate
from ppbook.timeline import Timeline
from ppbook.views.comparison import plot_comparison

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_GPU = "TEST FIXTURE, not a GPU"


def fake_cuda(monkeypatch, count: int, nccl: bool = True) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    monkeypatch.setattr(torch.distributed, "is_nccl_available", lambda: nccl)


@pytest.mark.parametrize(
    ("count", "nccl", "name", "nproc", "backend", "devices"),
    [
        (0, False, "cpu", 2, "gloo", ("cpu", "cpu")),
        (1, True, "shared-gpu", 2, "gloo", ("cuda:0", "cuda:0")),
        (1, False, "shared-gpu", 2, "gloo", ("cuda:0", "cuda:0")),
        (2, True, "nccl", 2, "nccl", ("cuda:0", "cuda:1")),
        (4, True, "nccl", 4, "nccl", ("cuda:0", "cuda:1", "cuda:2", "cuda:3")),
        (2, False, "cpu", 2, "gloo", ("cpu", "cpu")),
    ],
)
def test_choose_mode_reads_the_machine(monkeypatch, count, nccl, name, nproc, backend, devices):
    fake_cuda(monkeypatch, count, nccl)
    mode = choose_mode()
    assert (mode.name, mode.nproc, mode.backend, mode.rank_devices) == (
        name,
        nproc,
        backend,
        devices,
    )
    assert mode.device == ("cpu" if name == "cpu" else "cuda")
    words = {"cpu": "not GPU numbers", "shared-gpu": "host memory", "nccl": "one per GPU"}
    assert words[name] in mode.reason
    if count >= 2 and not nccl:
        assert "without NCCL" in mode.reason


def test_four_ranks_on_two_gpus_share_them_round_robin():
    mode = mode_for(2, nproc=4)
    assert mode.name == "shared-gpu" and mode.backend == "gloo"
    assert mode.rank_devices == ("cuda:0", "cuda:1", "cuda:0", "cuda:1")


@pytest.mark.parametrize("num_gpus", [1, 2, 3])
@pytest.mark.parametrize("nproc", [2, 3, 4])
def test_the_runtime_places_ranks_as_the_mode_says(monkeypatch, num_gpus, nproc):
    """pick_device, which each rank runs, on CPU with torch.cuda mocked: the shared path
    (gloo, messages in host memory) exactly when ranks outnumber GPUs."""
    fake_cuda(monkeypatch, num_gpus)
    mode = mode_for(num_gpus, nproc=nproc)
    for rank in range(nproc):
        device, backend, via_cpu = context.pick_device("cuda", rank, nproc)
        assert str(device) == mode.rank_devices[rank]
        assert backend == mode.backend
        assert via_cpu == (mode.name == "shared-gpu") == (nproc > num_gpus)
        ctx = context.Context(rank, nproc, device, backend, via_cpu, 10.0)
        expected = torch.device("cpu") if via_cpu else device  # where messages live
        assert ctx.comm_device == expected


def test_a_cpu_run_makes_no_cuda_call(monkeypatch):
    def refuse():
        raise AssertionError("a CPU run asked CUDA")

    monkeypatch.setattr(torch.cuda, "device_count", refuse)
    assert context.pick_device("cpu", 0, 2) == (torch.device("cpu"), "gloo", False)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_gpus": -1}, "num_gpus >= 0"),
        ({"num_gpus": 2, "nproc": 1}, "nproc >= 2"),
        ({"num_gpus": 2, "nccl": False, "nproc": 2}, "need NCCL"),
    ],
)
def test_mode_for_refuses_bad_machines(kwargs, message):
    with pytest.raises(ValueError, match=message):
        mode_for(**kwargs)


def hand_timeline(consumer_start: float) -> Timeline:
    """GPipe p = 2, m = 1 with F = 1, B = 2 by hand: rank 1's forward starts at
    ``consumer_start`` (1.0 when it waits for rank 0's forward, which ends at 1.0)."""
    starts = [[0.0, 5.0], [consumer_start, 3.0]]
    ends = [[1.0, 7.0], [consumer_start + 1, 5.0]]
    return Timeline.from_arrays(gpipe(2, 1), starts, ends, source="measured")


def test_dependency_violations_name_an_action_that_starts_before_its_input():
    assert dependency_violations(hand_timeline(1.0), tolerance=0.0) == []
    found = dependency_violations(hand_timeline(0.5), tolerance=0.1)
    assert found == ["rank 1's 1F0 starts 0.5 s before rank 0's 0F0 ends"]
    assert dependency_violations(hand_timeline(0.5), tolerance=0.6) == []


def test_clock_problems_hold_each_offset_to_its_bound():
    good = SimpleNamespace(clock_offsets=[0.0, 2e-5], clock_errors=[0.0, 3e-5], timelines=[])
    assert clock_problems(good) == []
    bad = SimpleNamespace(
        clock_offsets=[0.0, 4e-5], clock_errors=[0.0, 3e-5], timelines=[hand_timeline(0.5)]
    )
    problems = clock_problems(bad)
    assert problems[0].startswith("rank 1's clock offset 4e-05 s exceeds its error bound")
    assert problems[1] == "step 0: rank 1's 1F0 starts 0.5 s before rank 0's 0F0 ends"


def as_measured(timeline: Timeline) -> Timeline:
    return Timeline.from_arrays(
        timeline.schedule, timeline.starts, timeline.ends, source="measured"
    )


def fixture_recording(mode: str = "shared-gpu", gpus=(FIXTURE_GPU,)) -> Recording:
    """A TEST FIXTURE: simulated timelines dressed as a recording; no GPU made them."""
    costs = Costs(F=1e-3, B=2e-3)
    steps = [as_measured(simulate(one_f_one_b(2, 4), costs)) for _ in range(3)]
    return Recording(
        mode=mode,
        reason="test fixture: no GPU ran this",
        command="tests/test_gpu_demo.py (test fixture)",
        date="2026-01-01T00:00:00Z",
        hardware={"gpus": list(gpus), "gpu_memory_bytes": [2**30] * len(gpus), "cpu_count": 2},
        versions={"torch": "fixture", "cuda": "fixture", "nccl": "fixture"},
        checks={"gradients": "fixture"},
        runs={"1f1b": steps},
    )


def test_a_recording_is_read_back_and_compared_with_its_simulation(tmp_path):
    fixture = fixture_recording()
    path = write_recording(fixture, tmp_path)
    (loaded,) = load_recordings(tmp_path)
    assert loaded.path == str(path) and loaded.on_gpu
    assert loaded.runs["1f1b"][0].starts == fixture.runs["1f1b"][0].starts
    assert loaded.runs["1f1b"][0].schedule == one_f_one_b(2, 4)
    text = loaded.describe()
    assert f"1 x {FIXTURE_GPU} (1 GiB each)" in text and "test fixture" in text
    # The "measured" steps were simulated with F = 1 ms, B = 2 ms and no transfer time, so
    # the simulation under the measured costs gives them back: 1F1B's (m+p-1)(F+B) = 15 ms.
    comparison = loaded.comparison("1f1b")
    assert comparison.costs.F == pytest.approx([1e-3, 1e-3])
    assert comparison.costs.transfer == 0
    assert comparison.simulated.makespan == pytest.approx(15e-3)
    assert comparison.measured.makespan == pytest.approx(15e-3)
    # The figure chapter 9 draws for a recording: what ran it, and the costs it simulated.
    figure = plot_comparison(comparison, f"1 x {FIXTURE_GPU}")
    top, bottom = (ax.get_title() for ax in figure.axes[:2])
    assert top.startswith(f"measured on 1 x {FIXTURE_GPU}\n")
    assert bottom.startswith("simulated under the measured costs (ms, per stage): F 1, 1; B 2, 2;")
    assert figure.axes[1].get_xlabel() == "time (s)"  # one time axis, at the bottom
    plt.close(figure)


def test_recordings_without_a_gpu_are_refused_where_gpu_ones_are_kept(tmp_path, monkeypatch):
    assert load_recordings(tmp_path / "missing") == []
    monkeypatch.setattr(recording, "GPU_DATA", tmp_path / "gpu_demo")
    with pytest.raises(ValueError, match="holds GPU recordings only"):
        write_recording(fixture_recording(mode="cpu", gpus=()), tmp_path / "gpu_demo")
    assert not (tmp_path / "gpu_demo").exists()
    write_recording(fixture_recording(mode="cpu", gpus=()), tmp_path / "elsewhere")
    with pytest.raises(ValueError, match="without a GPU"):
        load_recordings(tmp_path / "elsewhere")
    (tmp_path / "broken.json").write_text("{}")
    with pytest.raises(ValueError, match="broken.json is not a ppbook GPU demo recording"):
        read_recording(tmp_path / "broken.json")


def test_the_environment_of_a_cpu_run_names_no_gpu():
    hardware, versions = environment(on_gpu=False)
    assert hardware["gpus"] == [] and versions["nccl"] is None
    assert versions["torch"] == torch.__version__
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert versions["ppbook_commit"].startswith(head.stdout.strip())


def test_the_environment_of_a_gpu_run_names_each_gpu_and_nccl(monkeypatch):
    """The GPU branch, on CPU: torch.cuda mocked as two 80 GiB test-fixture GPUs."""
    fake_cuda(monkeypatch, 2)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: f"{FIXTURE_GPU} {i}")
    props = SimpleNamespace(total_memory=80 * 2**30)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props)
    monkeypatch.setattr(torch.cuda.nccl, "version", lambda: (2, 21, 5))
    hardware, versions = environment(on_gpu=True)
    assert hardware["gpus"] == [f"{FIXTURE_GPU} 0", f"{FIXTURE_GPU} 1"]
    assert hardware["gpu_memory_bytes"] == [80 * 2**30] * 2
    assert versions["nccl"] == "2.21.5"


def run_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_demo.py"), *args],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "MAKELEVEL"},  # as if run by hand
    )


needs_no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")


@needs_no_gpu
def test_without_a_gpu_the_script_says_so_and_writes_nothing():
    before = sorted((ROOT / "data").rglob("*"))
    done = run_script()
    assert done.returncode == 0, done.stderr
    assert "No GPU on this machine: nothing was run and nothing written" in done.stdout
    assert sorted((ROOT / "data").rglob("*")) == before


@needs_no_gpu
@pytest.mark.timeout(240)
def test_the_script_runs_its_checks_on_cpu_processes_when_asked(tmp_path):
    done = run_script("--cpu-ok", "--schedules", "1f1b,zb-v", "--out", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "CPU numbers, not GPU numbers" in done.stdout
    assert "gradients: 2 schedules on 2 ranks equal to one process" in done.stdout
    (path,) = tmp_path.glob("*.json")
    recorded = read_recording(path)
    assert recorded.mode == "cpu" and not recorded.on_gpu
    assert recorded.hardware["gpus"] == []
    assert set(recorded.runs) == {"1f1b", "zb-v"}
    assert [len(steps) for steps in recorded.runs.values()] == [3, 3]
    assert recorded.command == "python " + str(ROOT / "benchmarks" / "gpu_demo.py") + (
        f" --cpu-ok --schedules 1f1b,zb-v --out {tmp_path}"
    )


def load_script():
    spec = importlib.util.spec_from_file_location("gpu_demo", ROOT / "benchmarks" / "gpu_demo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_gpu_demo(monkeypatch, tmp_path, failures: list[str]):
    """The script with its runs and machine replaced by a TEST FIXTURE: one GPU (shared
    mode), runs that return the fixture's timelines and ``failures``, data/gpu_demo/ in
    ``tmp_path``. No process starts and no GPU is asked."""
    script = load_script()
    fixture = fixture_recording()
    monkeypatch.setattr(script, "choose_mode", lambda: mode_for(1))
    monkeypatch.setattr(
        script, "run", lambda mode, names: (fixture.runs, {"gradients": "fixture"}, failures)
    )
    monkeypatch.setattr(script, "environment", lambda on_gpu: (fixture.hardware, fixture.versions))
    for module in (script, recording):
        monkeypatch.setattr(module, "GPU_DATA", tmp_path / "gpu_demo")
    monkeypatch.setattr(script.tempfile, "mkdtemp", lambda prefix: str(tmp_path / prefix))
    monkeypatch.delenv("MAKELEVEL", raising=False)  # as if run by hand, also under make test
    return script


def test_on_a_gpu_the_script_writes_its_recording_to_data(monkeypatch, tmp_path, capsys):
    script = fake_gpu_demo(monkeypatch, tmp_path, failures=[])
    assert script.main([]) == 0
    (loaded,) = load_recordings(tmp_path / "gpu_demo")
    assert loaded.mode == "shared-gpu" and loaded.hardware["gpus"] == [FIXTURE_GPU]
    assert loaded.command.endswith("benchmarks/gpu_demo.py") and "time" in loaded.checks
    assert "commit it (git add data/gpu_demo/)" in capsys.readouterr().out


def test_a_failed_check_keeps_the_recording_out_of_data(monkeypatch, tmp_path, capsys):
    script = fake_gpu_demo(monkeypatch, tmp_path, failures=["gradients zb-v: differ"])
    assert script.main([]) == 1
    assert not (tmp_path / "gpu_demo").exists()
    out = capsys.readouterr().out
    assert "FAILED (1):" in out and "gradients zb-v: differ" in out
    assert "recording kept out of data/" in out
    assert len(list((tmp_path / "ppbook-gpu-demo-failed-").glob("*.json"))) == 1


def test_a_run_that_stops_ends_the_demo_with_its_error(monkeypatch, tmp_path, capsys):
    script = fake_gpu_demo(monkeypatch, tmp_path, failures=[])

    def stopped(mode, names):
        raise PipelineError("rank 1 failed: RuntimeError: NCCL error (test fixture)", rank=1)

    monkeypatch.setattr(script, "run", stopped)
    assert script.main([]) == 1
    out = capsys.readouterr().out
    assert "FAILED: a run stopped, nothing written." in out and "rank 1 failed" in out
    assert not (tmp_path / "gpu_demo").exists()


def test_order_problems_name_the_step_and_rank_that_ran_another_order():
    schedule = gpipe(2, 2)
    rows = [[str(part) for step in row for part in step.parts] for row in schedule.actions]
    ran = SimpleNamespace(schedule=schedule, executed=[rows, [rows[0], rows[1][::-1]]])
    assert order_problems(ran) == ["step 1: rank 1 ran other actions than its row of the schedule"]
    assert order_problems(SimpleNamespace(schedule=schedule, executed=[rows])) == []


def test_the_timed_runs_are_a_bf16_transformer_that_gives_the_gpu_real_work(monkeypatch):
    """On a (mocked) GPU: the transformer in bf16; each part's forward at least 1 ms of an
    H200 at 500 TFLOP/s (about half its dense bf16 peak), counted here from the shapes:
    2 FLOPs per multiply-add, per token 2 x 12 h^2 (q, k, v, projection, the 4h MLP) and
    per sample 4 s^2 h (scores and weights times values). On CPU: tiny, same model."""
    fake_cuda(monkeypatch, 1)
    script = load_script()
    names = ["1f1b", "interleaved-1f1b", "zb-v", "dualpipev"]
    configs, refused = script.timed_configs(mode_for(1), names)
    assert refused == {} and len(configs) == len(names)
    for config in configs:
        assert (config.model, config.dtype, config.device) == ("transformer", "bfloat16", "cuda")
        h, s, b = config.hidden, config.seq_len, config.microbatch_size
        per_block = 2 * b * s * 12 * h * h + 4 * b * s * s * h
        parts = len(check(config).route(0))
        assert per_block * config.num_blocks / parts >= 1e-3 * 500e12
    small, _ = script.timed_configs(mode_for(0), ["1f1b"])
    assert (small[0].model, small[0].dtype, small[0].device) == ("transformer", "bfloat16", "cpu")
    assert small[0].hidden <= 64
