"""A run recorded to a file with the machine that made it: the GPU demo's output (chapter 9).

``benchmarks/gpu_demo.py`` (``make gpu-demo``) writes one JSON file per run: the mode
(:mod:`ppbook.runtime.devices`), the hardware (GPU names, count, memory), the versions
(torch, CUDA, NCCL, ppbook's git commit), the command, the date, what its checks found,
and every step's measured timeline of every schedule it ran. :func:`load_recordings`
reads them back as :class:`Recording` objects, whose :meth:`~Recording.comparison` sets a
recorded step beside the simulator's prediction under the costs measured in that run
(:func:`ppbook.runtime.measure.compare_steps`), as chapter 3 does for a live run. A run in
shared-GPU mode is simulated with what sharing the GPU and the host-memory path cost, as
the recording itself measures them (:mod:`ppbook.runtime.shared_gpu`, chapter 9).

GPU recordings live in the repository's ``data/gpu_demo/`` (:data:`GPU_DATA`). A file
there that was not recorded on GPUs is refused: the book never shows CPU numbers as GPU
numbers.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from ppbook.pipeline_schedule import Schedule
from ppbook.runtime.measure import Comparison, compare_steps
from ppbook.runtime.result import after_warm_up, typical_step
from ppbook.runtime.shared_gpu import Mechanism, mechanism, shared_gpu_costs
from ppbook.simulate import simulate
from ppbook.timeline import Timeline

FORMAT = "ppbook-gpu-demo/1"
"""The ``format`` field of a recording: what this module writes and reads."""

GPU_DATA = Path(__file__).resolve().parents[1] / "data" / "gpu_demo"
"""Where GPU recordings are kept: ``ppbook/data/gpu_demo/``, shipped with the package (in a
clone ``data/gpu_demo`` links to it, so ``make gpu-demo`` adds its recordings there)."""

GPU_MODES = ("nccl", "shared-gpu")


def timeline_to_dict(timeline: Timeline) -> dict:
    """A measured timeline as plain data (its schedule in PyTorch's notation)."""
    schedule = timeline.schedule
    return {
        "schedule": {
            "name": schedule.name,
            "actions": schedule.to_strings(),
            "stage_to_rank": list(schedule.stage_to_rank),
            "num_microbatches": schedule.num_microbatches,
            "routes": None if schedule.routes is None else [list(r) for r in schedule.routes],
        },
        "time_unit": timeline.time_unit,
        "starts": [list(row) for row in timeline.starts],
        "ends": [list(row) for row in timeline.ends],
    }


def timeline_from_dict(data: dict) -> Timeline:
    """The measured timeline :func:`timeline_to_dict` wrote."""
    spec = data["schedule"]
    schedule = Schedule.from_strings(
        spec["actions"],
        spec["stage_to_rank"],
        spec["num_microbatches"],
        name=spec["name"],
        routes=spec["routes"],
    )
    return Timeline.from_arrays(
        schedule, data["starts"], data["ends"], source="measured", time_unit=data["time_unit"]
    )


@dataclass(frozen=True)
class Recording:
    """One recorded demo: where and how it ran, what its checks found, its timelines.

    ``runs[name]`` holds every step's timeline of schedule ``name`` (the first warms up).
    """

    mode: str
    reason: str
    command: str
    date: str
    hardware: dict
    versions: dict
    checks: dict
    runs: dict[str, list[Timeline]]
    path: str | None = None

    @property
    def on_gpu(self) -> bool:
        """Whether the run used GPUs (a GPU mode, and at least one GPU named)."""
        return self.mode in GPU_MODES and bool(self.hardware.get("gpus"))

    def typical(self, name: str) -> Timeline:
        """The typical step of ``name`` (:func:`~ppbook.runtime.result.typical_step`)."""
        return typical_step(self.runs[name])

    @cached_property
    def mechanism(self) -> Mechanism:
        """What sharing a GPU and the host-memory path cost in this run, measured on every
        schedule's steps after the warm-up (:func:`ppbook.runtime.shared_gpu.mechanism`)."""
        return mechanism([step for steps in self.runs.values() for step in after_warm_up(steps)])

    def comparison(self, name: str, shared: bool | None = None) -> Comparison:
        """The typical step of ``name`` beside its simulation under the measured costs.

        ``shared`` (default: whether the run was in shared-GPU mode): simulate the ranks on
        one GPU, with the copies through host memory occupying them, under
        :meth:`mechanism` (:func:`~ppbook.runtime.shared_gpu.shared_gpu_costs`); False: the
        plain model, every transfer a delay that occupies no rank
        (:func:`~ppbook.runtime.measure.compare_steps`)."""
        if name not in self.runs:
            raise ValueError(f"the recording has no run of {name!r}; it has {', '.join(self.runs)}")
        if not (self.mode == "shared-gpu" if shared is None else shared):
            return compare_steps(self.runs[name])
        steps = self.runs[name]
        measured = typical_step(steps)
        ranks = max(1, measured.num_ranks // max(1, len(self.hardware.get("gpus") or [1])))
        costs = shared_gpu_costs(steps, self.mechanism, ranks_per_device=ranks)
        return Comparison(measured, simulate(measured.schedule, costs), costs)

    def describe(self) -> str:
        """Where, when and how the recording was made, in a few lines."""
        hw, v = self.hardware, self.versions
        gpus = hw.get("gpus") or []
        memory = hw.get("gpu_memory_bytes") or []
        if gpus:
            size = f" ({statistics.median(memory) / 2**30:.0f} GiB each)" if memory else ""
            kinds = ", ".join(sorted(set(gpus)))
            machine = f"{len(gpus)} x {kinds}{size}"
        else:
            machine = f"no GPU, {hw.get('cpu_count', '?')} CPU cores"
        return "\n".join(
            [
                f"recorded {self.date} by: {self.command}",
                f"mode: {self.mode}: {self.reason}",
                f"hardware: {machine}; {hw.get('platform', '')}",
                f"versions: torch {v.get('torch')}, CUDA {v.get('cuda')}, NCCL {v.get('nccl')}, "
                f"Python {v.get('python')}, ppbook commit {v.get('ppbook_commit')}",
                "checks: " + "; ".join(f"{name}: {what}" for name, what in self.checks.items()),
            ]
        )

    def to_dict(self) -> dict:
        """The recording as the plain data of its file."""
        return {
            "format": FORMAT,
            "mode": self.mode,
            "reason": self.reason,
            "command": self.command,
            "date": self.date,
            "hardware": self.hardware,
            "versions": self.versions,
            "checks": self.checks,
            "runs": {name: list(map(timeline_to_dict, steps)) for name, steps in self.runs.items()},
        }


def environment(on_gpu: bool) -> tuple[dict, dict]:
    """``(hardware, versions)`` of this machine. ``on_gpu``: also name the GPUs, their
    memory and NCCL's version (CUDA calls; none otherwise)."""
    import torch
    import torch.distributed as dist

    hardware = {"platform": platform.platform(), "cpu_count": os.cpu_count(), "gpus": []}
    nccl = None
    if on_gpu:
        count = torch.cuda.device_count()
        hardware["gpus"] = [torch.cuda.get_device_name(i) for i in range(count)]
        hardware["gpu_memory_bytes"] = [
            torch.cuda.get_device_properties(i).total_memory for i in range(count)
        ]
        if dist.is_nccl_available():
            found = torch.cuda.nccl.version()  # (2, 21, 5); an int in older torch
            nccl = ".".join(map(str, found)) if isinstance(found, tuple) else str(found)
    versions = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "nccl": nccl,
        "ppbook_commit": git_commit(),
    }
    return hardware, versions


def git_commit() -> str:
    """ppbook's git commit (with ``+changes`` if files differ from it), or "unknown"."""
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if dirty else "")


def write_recording(recording: Recording, folder: str | Path) -> Path:
    """Write ``recording`` to a new JSON file in ``folder``; return its path.

    GPU recordings only in :data:`GPU_DATA`: a CPU one there is refused.
    """
    folder = Path(folder)
    if not recording.on_gpu and folder.resolve() == GPU_DATA.resolve():
        raise ValueError(
            f"{GPU_DATA} holds GPU recordings only; this one ran in mode {recording.mode!r}: "
            "write it to another folder"
        )
    folder.mkdir(parents=True, exist_ok=True)
    stamp = recording.date.replace(":", "").replace("-", "")[:15]
    path = folder / f"{stamp}-{recording.mode}.json"
    path.write_text(json.dumps(recording.to_dict(), indent=1) + "\n")
    return path


def read_recording(path: str | Path) -> Recording:
    """The recording in the JSON file ``path``; a ValueError names the file if it is not one."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
        if data.get("format") != FORMAT:
            raise ValueError(f"format {data.get('format')!r}, expected {FORMAT!r}")
        runs = {
            name: [timeline_from_dict(step) for step in steps]
            for name, steps in data["runs"].items()
        }
        fields = ("mode", "reason", "command", "date", "hardware", "versions", "checks")
        return Recording(**{k: data[k] for k in fields}, runs=runs, path=str(path))
    except (KeyError, TypeError, AttributeError, json.JSONDecodeError, ValueError) as exc:
        raise ValueError(f"{path} is not a ppbook GPU demo recording: {exc}") from None


def load_recordings(folder: str | Path = GPU_DATA) -> list[Recording]:
    """Every GPU recording (``*.json``) in ``folder``, oldest first; [] if there is none.

    A file recorded without GPUs is refused with a ValueError naming it.
    """
    found = []
    for path in sorted(Path(folder).glob("*.json")):
        recording = read_recording(path)
        if not recording.on_gpu:
            raise ValueError(
                f"{path} was recorded in mode {recording.mode!r} without a GPU; "
                f"{Path(folder).name}/ holds GPU recordings only: move it elsewhere"
            )
        found.append(recording)
    return sorted(found, key=lambda r: r.date)


def __getattr__(name: str):
    """The old home of :func:`ppbook.views.comparison.plot_comparison`, kept for imports;
    loaded on first use, so this module imports no plotting."""
    if name == "plot_comparison":
        from ppbook.views.comparison import plot_comparison

        return plot_comparison
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
