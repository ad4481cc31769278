"""What must hold on this machine before a run starts its processes.

:func:`check_main_guard`: ranks are started with ``multiprocessing``'s ``spawn`` method,
which imports the launching script again in every rank. A script that launches a run at
its top level, outside ``if __name__ == "__main__":``, would launch again inside each
rank; Python then fails with "can only join a started process" or a long note about
bootstrapping. Such a script is refused up front with the fix.

:func:`check_machine`: every rank is a process with its own Python and torch (about
:data:`RANK_MEMORY` bytes), and builds the whole model before it keeps its own parts
(counted twice: the model and the copies and gradients of its parts, before activations).
Ranks that outnumber the CPU cores wait for a core. A run that could not fit in the
memory available, or that puts more than :data:`MAX_RANKS_PER_CORE` ranks on each core,
is refused with the number that would do.

Only the standard library is imported.
"""

from __future__ import annotations

import ast
import multiprocessing
import os
import sys
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


def check_machine(nproc: int, model_bytes: int = 0) -> None:
    """Refuse ``nproc`` local ranks, each building a model of ``model_bytes`` bytes of
    parameters, beyond what this machine's cores and memory allow."""
    cores = available_cores()
    if nproc > MAX_RANKS_PER_CORE * cores:
        raise ValueError(
            f"{nproc} ranks are too many for the {cores} CPU core{'s' if cores > 1 else ''} "
            f"here: at most {MAX_RANKS_PER_CORE * cores} ({MAX_RANKS_PER_CORE} per core) start, "
            f"and at most {cores} measure without waiting for a core"
        )
    memory = available_memory()
    per_rank = RANK_MEMORY + 2 * model_bytes
    if memory is not None and nproc * per_rank > memory:
        fit = memory // per_rank
        advice = (
            f"at most {fit} rank{'s' if fit != 1 else ''} fit; use fewer ranks or a smaller model"
            if fit
            else "not one rank fits; use a smaller model"
        )
        raise ValueError(
            f"{nproc} ranks need about {nproc * per_rank / 2**30:.1f} GiB "
            f"({per_rank / 2**20:.0f} MiB each, {2 * model_bytes / 2**20:.0f} MiB of it for the "
            f"model), but {memory / 2**30:.1f} GiB is available: {advice}"
        )
