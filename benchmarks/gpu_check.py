"""Every GPU measurement the book wants, in one command, for a session that has a GPU.

    PYTHONPATH=. python benchmarks/gpu_check.py OUT

Runs with the GPU machine's own PyTorch and packages (nothing installed; such a machine
may reach no package registry), in under :data:`BUDGET` seconds, and writes everything to
the folder ``OUT``:

1. ``gpu_demo/``, ``gpu_demo.log``: ``benchmarks/gpu_demo.py --out OUT/gpu_demo``: the
   float64 gradient checks, the clocks, and every schedule timed on the bf16 transformer
   (:data:`gpu_demo.GPU_TIMED`); the log says whether any rank printed PyTorch's "no
   current CUDA context" warning (``cublas_context_warning`` in ``summary.json``);
2. ``layer_times.jsonl``, ``layer_times.log``: ``benchmarks/measure_layer.py``, one bf16
   GPT layer timed at the four sizes of ``data/h200_gpt_layer_times.jsonl``;
3. ``memory.json``: a bf16 transformer trained with Adam on every rank of the mode, each
   rank's ``torch.cuda.max_memory_allocated`` against
   :func:`ppbook.cost_model.memory_bytes.peak_memory`'s
   prediction for the same shape, schedule and micro-batch (its static bytes assume
   mixed-precision Adam at 16 bytes a parameter; the runtime keeps 2 bf16 + 4 fp32 master
   + 4 fp32 gradient sum + 8 Adam, and a bf16 gradient for a moment: 20);
4. ``provenance.json``: GPUs, driver, torch, CUDA, NCCL, Python, ppbook's git commit, the
   command and the date; ``summary.json``: what each part gave, and its status.

On a machine without a GPU it says so and exits 0, writing nothing (not even ``OUT``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BUDGET = 480.0
"""Seconds for everything (eight minutes); each part gets its share below."""
DEMO_SECONDS = 300.0
LAYER_SECONDS = 100.0
MEMORY_SECONDS = 60.0
WARNING = "no current CUDA context"

MEMORY_RUN = {
    "schedule": "1f1b",
    "num_microbatches": 4,
    "model": "transformer",
    "num_blocks": 8,
    "hidden": 2048,
    "num_heads": 16,
    "seq_len": 512,
    "microbatch_size": 4,
    "steps": 2,
    "optimizer": "adam",
    "dtype": "bfloat16",
}
"""The run whose memory is measured (the demo's model, Adam as the prediction assumes)."""


def driver_version() -> str | None:
    """The NVIDIA driver's version, from nvidia-smi (None without it)."""
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout else None


def run_part(command: list[str], seconds: float, log: Path) -> dict:
    """Run ``command`` from the repository root with ``PYTHONPATH=.``; keep its output."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("MAKELEVEL", None)
    started = time.monotonic()
    try:
        done = subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=seconds
        )
        status, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        status = f"timed out after {seconds:.0f} s"
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
    log.write_text(f"$ {shlex.join(command)}\n{out}\n--- stderr ---\n{err}")
    return {
        "command": shlex.join(command),
        "status": status,
        "seconds": round(time.monotonic() - started, 1),
        "cublas_context_warning": WARNING in out + err,
        "stdout": out,
    }


def memory_rank(rank: int, world_size: int, folder: str, config) -> None:
    """One rank of the memory run: its peak of allocated GPU memory, to ``folder``."""
    import torch

    from ppbook.runtime.config import check
    from ppbook.runtime.context import init_distributed
    from ppbook.runtime.worker import run_job

    ctx = init_distributed(
        rank, world_size, device="cuda", timeout=60.0, rendezvous=Path(folder) / "rendezvous"
    )
    torch.cuda.reset_peak_memory_stats(ctx.device)
    run_job(ctx, config, check(config))
    torch.cuda.synchronize(ctx.device)
    peak = torch.cuda.max_memory_allocated(ctx.device)
    (Path(folder) / f"memory-{rank}.json").write_text(json.dumps({"rank": rank, "peak": peak}))
    ctx.close()


def measure_memory(nproc: int) -> dict:
    """Each rank's ``max_memory_allocated`` and
    :func:`ppbook.cost_model.memory_bytes.peak_memory`'s."""
    import torch.multiprocessing as mp

    from ppbook.cost_model.memory_bytes import ModelShape, Parallel, peak_memory
    from ppbook.runtime.config import RunConfig, check
    from ppbook.simulate import simulate

    config = RunConfig(nproc=nproc, device="cuda", timeout=60.0, **MEMORY_RUN)
    schedule = check(config)
    folder = tempfile.mkdtemp(prefix="ppbook-gpu-check-memory-")
    mp.start_processes(
        memory_rank, args=(nproc, folder, config), nprocs=nproc, start_method="spawn"
    )
    measured = [
        json.loads((Path(folder) / f"memory-{r}.json").read_text())["peak"] for r in range(nproc)
    ]
    shape = ModelShape(
        layers=config.num_blocks,
        hidden=config.hidden,
        heads=config.num_heads,
        vocab=1,  # the runtime's model has no embedding: one word, a rounding error
        seq_len=config.seq_len,
        position_embeddings=False,
    )
    parallel = Parallel(microbatch_size=config.microbatch_size)
    predicted = peak_memory(simulate(schedule), shape, parallel)
    return {
        "run": MEMORY_RUN | {"nproc": nproc},
        "ranks": [
            {
                "rank": r,
                "measured_max_memory_allocated": measured[r],
                "predicted": predicted[r].as_dict(),
                "measured_over_predicted": measured[r] / predicted[r].total,
                "runtime_static_bytes": 20 * predicted[r].parameter_count,
            }
            for r in range(nproc)
        ],
        "note": "prediction: ppbook.cost_model.memory_bytes.peak_memory "
        "(16 B a parameter, Korthikanti's "
        "activations with dropout masks); the runtime: 20 B a parameter with Adam, "
        "attention written out, no dropout",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="folder for everything this writes (created)")
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("No GPU on this machine: nothing was run and nothing written.")
        return 0
    from ppbook.runtime.devices import choose_mode
    from ppbook.runtime.recording import environment

    started = time.monotonic()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    mode = choose_mode()
    hardware, versions = environment(on_gpu=True)
    command = "PYTHONPATH=. python " + shlex.join(
        sys.argv if argv is None else ["benchmarks/gpu_check.py", *argv]
    )
    provenance = {
        "command": command,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "mode": mode.name,
        "hardware": hardware,
        "versions": versions | {"driver": driver_version()},
    }
    (out / "provenance.json").write_text(json.dumps(provenance, indent=1))
    print(f"mode {mode}; writing to {out}", flush=True)
    summary: dict = {}
    python = sys.executable
    demo = [python, "benchmarks/gpu_demo.py", "--out", str(out / "gpu_demo")]
    summary["gpu_demo"] = run_part(demo, DEMO_SECONDS, out / "gpu_demo.log")
    print(f"gpu demo: {summary['gpu_demo']['status']}", flush=True)
    measure = [python, "benchmarks/measure_layer.py"]
    layers = run_part(measure, LAYER_SECONDS, out / "layer_times.log")
    rows = [line for line in layers.pop("stdout").splitlines() if line.startswith("{")]
    (out / "layer_times.jsonl").write_text("".join(f"{row}\n" for row in rows))
    summary["layer_times"] = layers | {"rows": len(rows)}
    print(f"layer timings: {layers['status']}, {len(rows)} rows", flush=True)
    summary["gpu_demo"].pop("stdout")
    left = BUDGET - (time.monotonic() - started)
    if left < MEMORY_SECONDS:
        summary["memory"] = {"status": f"skipped: {left:.0f} s of the budget left"}
    else:
        try:
            memory = measure_memory(mode.nproc)
            (out / "memory.json").write_text(json.dumps(memory, indent=1))
            summary["memory"] = {"status": 0, "ranks": memory["ranks"]}
        except Exception as exc:  # recorded, so the other parts are not lost
            summary["memory"] = {"status": f"failed: {type(exc).__name__}: {exc}"}
    print(f"memory: {summary['memory']['status']}", flush=True)
    summary["seconds"] = round(time.monotonic() - started, 1)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    failed = [name for name, part in summary.items() if isinstance(part, dict) and part["status"]]
    print(f"done in {summary['seconds']} s; " + (f"failed: {failed}" if failed else "all ran"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
