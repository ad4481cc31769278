"""The GPU demo: every GPU check of chapter 9 in one command, ``make gpu-demo``.

On the GPUs this machine has (:func:`ppbook.runtime.devices.choose_mode`): NCCL with one
rank per GPU when there are two or more, two ranks sharing the GPU (gloo through host
memory) when there is one. In at most :data:`BUDGET` seconds it checks:

1. gradients: every schedule of :data:`ppbook.schedules.SCHEDULES` on two ranks (NCCL with
   two or more GPUs, the shared path with one), float64, two SGD steps: every step's loss,
   every gradient and every parameter equal to one process
   (:func:`ppbook.runtime.reference.assert_matches_reference`), and every rank ran exactly
   its actions, in order;
2. clocks: every rank's clock offset within its error bound, and no action starting before
   an input from another rank was produced, on the aligned clocks
   (:func:`ppbook.runtime.devices.clock_problems`; the alignment goes over a gloo group
   even when NCCL carries the pipeline, :mod:`ppbook.runtime.clock`);
3. all schedules once on every rank of the mode (every GPU with NCCL): a transformer of
   :data:`TIMED_BLOCKS` blocks in bf16 mixed precision (:data:`GPU_TIMED`: 1.5 to 3.5 ms
   per forward of a part on an H200; :data:`CPU_TIMED` on CPU), three steps (the first
   warms up), each step's measured timeline kept.

If every check passes, it writes the timelines with the hardware (GPU names, count,
memory), the versions (torch, CUDA, NCCL, ppbook's git commit), the command and the date to
``data/gpu_demo/`` (:mod:`ppbook.runtime.recording`), where chapter 9 finds them; if one
fails, it writes them to a temporary folder, says what failed and exits with status 1 (a
run that stops, a rank failing or hanging, ends the demo with its error, status 1).

On a machine without a GPU it says so and exits 0, writing nothing. ``--cpu-ok`` runs the
same checks on CPU processes into a temporary folder (tests; never into ``data/gpu_demo/``:
those are CPU numbers, not GPU numbers).

    .venv/bin/python benchmarks/gpu_demo.py            # make gpu-demo
    .venv/bin/python benchmarks/gpu_demo.py --cpu-ok --schedules 1f1b,gpipe
"""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from ppbook.runtime.config import RunConfig, check
from ppbook.runtime.devices import (
    GPU_MARK_SLACK,
    Mode,
    choose_mode,
    clock_problems,
    order_problems,
)
from ppbook.runtime.launch import PipelineError, launch_many
from ppbook.runtime.recording import GPU_DATA, Recording, environment, write_recording
from ppbook.runtime.reference import assert_matches_reference
from ppbook.schedules import SCHEDULES

BUDGET = 300.0
"""Seconds the whole demo may take (the issue's five minutes)."""

GRADIENT_RANKS = 2
TIMEOUT = 60.0  # seconds a rank waits for a message before the run fails


def gradient_configs(mode: Mode, names: list[str]) -> tuple[list[RunConfig], dict[str, str]]:
    """Two-rank float64 runs that collect gradients, and the schedules refused, with why."""
    return checked(
        RunConfig(
            schedule=name,
            nproc=GRADIENT_RANKS,
            num_microbatches=4,
            hidden=16,
            microbatch_size=4,
            steps=2,
            dtype="float64",
            collect_grads=True,
            device=mode.device,
            timeout=TIMEOUT,
            label=f"gradients {name}",
        )
        for name in names
    )


GPU_TIMED = {"hidden": 2048, "num_heads": 16, "seq_len": 512, "microbatch_size": 8}
"""The timed transformer on a GPU: :data:`TIMED_BLOCKS` pre-norm blocks of width 2048, 512
tokens, micro-batches of 8 (4096 tokens). One block's forward is 24 b s h^2 + 4 b s^2 h =
4.3e11 FLOPs, about 0.9 ms on an H200 at 500 TFLOP/s (half its 989 dense bf16 peak; the
H200 ran a GPT layer's forward at 35 to 44 % above that): a part of 2 to 4 blocks takes
1.5 to 3.5 ms per forward, work enough that kernels, not launches, set the times."""
CPU_TIMED = {"hidden": 32, "num_heads": 2, "seq_len": 8, "microbatch_size": 4}
"""The same model, tiny, for ``--cpu-ok`` (CPU numbers, never recorded as GPU numbers)."""
TIMED_BLOCKS = 8


def timed_configs(mode: Mode, names: list[str]) -> tuple[list[RunConfig], dict[str, str]]:
    """bf16 transformer runs (mixed precision: :mod:`ppbook.runtime.precision`) on every
    rank of ``mode``, three steps each, and the schedules refused."""
    sizes = GPU_TIMED if mode.device == "cuda" else CPU_TIMED
    return checked(
        RunConfig(
            schedule=name,
            nproc=mode.nproc,
            num_microbatches=2 * mode.nproc,
            model="transformer",
            num_blocks=TIMED_BLOCKS,
            **sizes,
            dtype="bfloat16",
            steps=3,
            device=mode.device,
            timeout=TIMEOUT,
            label=f"timeline {name}",
        )
        for name in names
    )


def checked(configs: Iterable[RunConfig]) -> tuple[list[RunConfig], dict[str, str]]:
    """The configs :func:`~ppbook.runtime.config.check` accepts, and the schedules it
    refuses, with why."""
    accepted, refused = [], {}
    for config in configs:
        try:
            check(config)
        except ValueError as exc:
            refused[config.schedule] = str(exc)
            continue
        accepted.append(config)
    return accepted, refused


def run(mode: Mode, names: list[str]) -> tuple[dict, dict, list[str]]:
    """Launch every run; return the timelines by schedule, the checks and the failures."""
    grads, grads_refused = gradient_configs(mode, names)
    timed, timed_refused = timed_configs(mode, names)
    if mode.nproc == GRADIENT_RANKS:  # one set of processes for everything
        results = launch_many(grads + timed, progress=True)
    else:
        results = launch_many(grads, progress=True) + launch_many(timed, progress=True)
    failures = [
        f"{name}: refused at p = {GRADIENT_RANKS}: {why}" for name, why in grads_refused.items()
    ]
    for config, result in zip(grads, results[: len(grads)], strict=True):
        try:
            assert_matches_reference(result)
        except AssertionError as exc:
            failures.append(f"{config.label}: {str(exc).splitlines()[0]}")
    slack = GPU_MARK_SLACK if mode.device == "cuda" else 1e-6
    worst = 0.0
    for config, result in zip(grads + timed, results, strict=True):
        problems = order_problems(result) + clock_problems(result, slack)
        failures += [f"{config.label}: {problem}" for problem in problems]
        worst = max(worst, *map(abs, result.clock_offsets))
    timelines = {
        config.schedule: result.timelines
        for config, result in zip(timed, results[len(grads) :], strict=True)
    }
    ranks = f"{mode.nproc} ranks" + (f" ({mode.backend})" if mode.device == "cuda" else "")
    checks = {
        "gradients": f"{len(grads)} schedules on {GRADIENT_RANKS} ranks equal to one process "
        "(float64)",
        "clocks": f"largest |offset| {worst * 1e6:.1f} us, each within its bound; "
        f"no action before its input in {sum(len(r.timelines) for r in results)} steps",
        "schedules": f"{', '.join(timelines)} on {ranks}"
        + (f"; refused: {', '.join(timed_refused)}" if timed_refused else ""),
    }
    return timelines, checks, failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cpu-ok",
        action="store_true",
        help="without a GPU, run on CPU processes into a temporary folder",
    )
    parser.add_argument(
        "--out",
        help="folder for the recording (default: data/gpu_demo/ on GPUs, else a temporary one)",
    )
    parser.add_argument(
        "--schedules",
        default=",".join(SCHEDULES),
        help="comma-separated schedule names (default: all)",
    )
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.schedules.split(",") if name.strip()]
    unknown = [name for name in names if name not in SCHEDULES]
    if unknown or not names:
        parser.error(f"unknown schedules {unknown}; choose from {', '.join(SCHEDULES)}")

    mode = choose_mode()
    print(f"mode {mode}")
    on_gpu = mode.device == "cuda"
    if not on_gpu and not args.cpu_ok:
        print(
            "No GPU on this machine: nothing was run and nothing written. The GPU checks "
            "need a GPU; --cpu-ok runs them on CPU processes into a temporary folder."
        )
        return 0
    if not on_gpu:
        print("CPU processes: the numbers below are CPU numbers, not GPU numbers.")
    started = time.monotonic()
    try:
        timelines, checks, failures = run(mode, names)
    except PipelineError as exc:  # a rank failed or hung: the error names it
        print(f"FAILED: a run stopped, nothing written.\n{exc}")
        return 1
    elapsed = time.monotonic() - started
    checks["time"] = f"{elapsed:.0f} s (budget {BUDGET:.0f} s)"
    if elapsed > BUDGET:
        failures.append(f"the demo took {elapsed:.0f} s, over its budget of {BUDGET:.0f} s")
    hardware, versions = environment(on_gpu)
    command = "python " + shlex.join(
        sys.argv if argv is None else ["benchmarks/gpu_demo.py", *argv]
    )
    if os.environ.get("MAKELEVEL"):
        command = f"make gpu-demo ({command})"
    recording = Recording(
        mode=mode.name,
        reason=mode.reason,
        command=command,
        date=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        hardware=hardware,
        versions=versions,
        checks=checks,
        runs=timelines,
    )
    for name, what in checks.items():
        print(f"{name}: {what}")
    if failures:
        folder = tempfile.mkdtemp(prefix="ppbook-gpu-demo-failed-")
        print(f"FAILED ({len(failures)}):", *failures, sep="\n  ")
        print(f"recording kept out of data/: {write_recording(recording, folder)}")
        return 1
    if args.out is not None:
        folder = Path(args.out)
    else:
        folder = GPU_DATA if on_gpu else Path(tempfile.mkdtemp(prefix="ppbook-gpu-demo-cpu-"))
    path = write_recording(recording, folder)
    print(f"every check passed; recording written to {path}")
    if on_gpu and folder.resolve() == GPU_DATA.resolve():
        print("commit it (git add data/gpu_demo/) so that chapter 9 shows it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
