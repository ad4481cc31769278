"""What must hold on this machine before a run starts its processes.

:func:`check_main_guard`: ranks are started with ``multiprocessing``'s ``spawn`` method,
which imports the launching script again in every rank. A script that launches a run at
its top level, outside ``if __name__ == "__main__":``, would launch again inside each
rank; Python then fails with "can only join a started process" or a long note about
bootstrapping. Such a script is refused up front with the fix.

:func:`check_machine`: every rank is a process with its own Python and torch (about
:data:`RANK_MEMORY` bytes), and builds the whole model before it keeps its own parts
(counted twice: the model and the copies and gradients of its parts), and holds the step's
data and its activations (:func:`ppbook.runtime.config.activation_bytes`). Ranks that
outnumber the CPU cores wait for a core. A run that could not fit in the memory available
(on a GPU run, also in each GPU's memory: :func:`device_memory`), or that puts more than
:data:`MAX_RANKS_PER_CORE` ranks on each core, is refused with the numbers.

Only the standard library is imported (torch only by :func:`device_memory`, for CUDA).
"""

from __future__ import annotations

import ast
import multiprocessing
import os
import sys
from decimal import Decimal
from pathlib import Path

RANK_MEMORY = 400 * 2**20
"""Bytes one rank needs before its model: Python, torch and gloo (about 220 MiB for torch)."""

MAX_RANKS_PER_CORE = 8
"""Most ranks per CPU core; beyond it a run measures mostly the wait for a core."""

GUARD_HINT = (
    'put the code that launches the run under if __name__ == "__main__": '
    "(every rank imports the script again, as multiprocessing's spawn method does)"
)


def check_main_guard() -> None:
    """Refuse to launch from the top level of a script, outside its ``__main__`` guard.

    Raises ValueError in the launching script (found by reading its source at the line
    that is running), and RuntimeError in a rank that imports such a script again.
    """
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise RuntimeError(
            f"a rank imported the launching script, which launched again: {GUARD_HINT}"
        )
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    spec = getattr(main, "__spec__", None)
    if path is None or (spec is not None and spec.name.split(".")[-1] == "__main__"):
        return  # spawn runs no script again: an interactive session, or ``python -m package``
    frame = sys._getframe(1)
    while frame is not None and not (
        frame.f_code.co_name == "<module>" and frame.f_globals is main.__dict__
    ):
        frame = frame.f_back
    if frame is None or os.path.realpath(frame.f_code.co_filename) != os.path.realpath(path):
        return  # the script has finished running, or a cell's code runs in its namespace
    if not runs_unguarded(Path(path), frame.f_lineno):
        return
    raise ValueError(
        f"{path}, line {frame.f_lineno}, launches a run when the script is imported: {GUARD_HINT}"
    )


def runs_unguarded(path: Path, line: int) -> bool:
    """Whether ``line`` of the script at ``path`` lies outside every
    ``if __name__ == "__main__":`` block (False when the script cannot be read)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return False
    return not any(
        node.body[0].lineno <= line <= node.body[-1].end_lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and _is_main_test(node.test)
    )


def _is_main_test(test: ast.expr) -> bool:
    """Whether ``test`` is ``__name__ == "__main__"`` (either way round)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    if not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s.id for s in sides if isinstance(s, ast.Name)]
    values = [s.value for s in sides if isinstance(s, ast.Constant)]
    return names == ["__name__"] and values == ["__main__"]


def available_cores() -> int:
    """CPU cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def available_memory() -> int | None:
    """Bytes of memory available to new processes (``MemAvailable``), None off Linux."""
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return None


def gib(count: int) -> str:
    """``count`` bytes in GiB for a message, exact for any size (no float overflow)."""
    value = Decimal(count) / Decimal(2**30)
    return f"{value:.1f}" if value < 10**6 else f"{value:.3e}"


def device_memory(config) -> dict:
    """For a CUDA run (``config.device == "cuda"``): the smallest GPU's memory in bytes
    (``device_memory``) and how many ranks share a GPU (``ranks_per_device``: rank r runs
    on GPU r % GPUs, :func:`ppbook.runtime.context.pick_device`); ``{}`` on the CPU. The
    keyword arguments of :func:`check_machine`."""
    if config.device != "cuda":
        return {}
    import torch

    count = torch.cuda.device_count()
    if count < 1:
        return {}
    smallest = min(torch.cuda.get_device_properties(i).total_memory for i in range(count))
    return {"device_memory": smallest, "ranks_per_device": -(-config.nproc // count)}


def check_machine(
    nproc: int,
    model_bytes: int = 0,
    activation_bytes: int = 0,
    device_memory: int | None = None,
    ranks_per_device: int = 1,
) -> None:
    """Refuse ``nproc`` local ranks, each building a model of ``model_bytes`` bytes of
    parameters and holding ``activation_bytes`` bytes of data and activations, beyond what
    this machine's cores and memory allow; with ``device_memory`` (bytes of each GPU),
    also ``ranks_per_device`` ranks' activations and share of the model beyond a GPU's."""
    cores = available_cores()
    if nproc > MAX_RANKS_PER_CORE * cores:
        raise ValueError(
            f"{nproc} ranks are too many for the {cores} CPU core{'s' if cores > 1 else ''} "
            f"here: at most {MAX_RANKS_PER_CORE * cores} ({MAX_RANKS_PER_CORE} per core) start, "
            f"and at most {cores} measure without waiting for a core"
        )
    if device_memory is not None:
        on_device = ranks_per_device * (activation_bytes + -(-2 * model_bytes // nproc))
        if on_device > device_memory:
            raise ValueError(
                f"each GPU would hold about {gib(on_device)} GiB ({ranks_per_device} "
                f"rank{'s' if ranks_per_device != 1 else ''}: data and activations "
                f"{gib(activation_bytes)} GiB each, and its share of the model), but a GPU "
                f"has {gib(device_memory)} GiB: use a smaller --microbatch-size, fewer "
                "micro-batches or a smaller model"
            )
    memory = available_memory()
    per_rank = RANK_MEMORY + 2 * model_bytes + activation_bytes
    if device_memory is not None:
        per_rank -= activation_bytes  # the activations live on the GPU
    if memory is not None and nproc * per_rank > memory:
        fit = memory // per_rank
        smaller = (
            "a smaller --microbatch-size or fewer micro-batches"
            if device_memory is None and activation_bytes > 2 * model_bytes
            else "a smaller model"
        )
        advice = (
            f"at most {fit} rank{'s' if fit != 1 else ''} fit; use fewer ranks or {smaller}"
            if fit
            else f"not one rank fits; use {smaller}"
        )
        held = (
            ""
            if device_memory is not None
            else f"{gib(activation_bytes)} GiB data and activations, "
        )
        raise ValueError(
            f"{nproc} ranks need about {gib(nproc * per_rank)} GiB "
            f"({gib(per_rank)} GiB each: {held}{gib(2 * model_bytes)} GiB for the model), "
            f"but {gib(memory)} GiB is available: {advice}"
        )
