"""Assignment 3 measured by the grader itself: ``python -I -m ppbook.assign.measure_transport
ANSWER_PATH``, started in the submission's folder (questions 3.1 and 3.2, ``Question.run``).

A fresh process, outside the submission's kernel: nothing the kernel stored reaches it. It
finds the reader's ``my_transport.py`` in its current folder (written there by the
notebook's ``write_transport`` cell; a folder without one gets a record that names that
cell), launches every run of :data:`ppbook.assign.transport.RUNS` (2 to 4 ranks, one launch
per number of ranks) with :mod:`ppbook.assign.guarded_transport` as the transport, which
imports the reader's file by its absolute path in every rank and refuses the runtime's own
send and receive, and writes one JSON record to ANSWER_PATH::

    {"ok": true, "value": {run: {"losses": [...], "grads": {...}, "params": {...}}}}
    {"ok": false, "type": "KeyError", "message": "...", "function": "receive" or null}

The reader's file is never imported in this process, only compiled (a syntax error is
named at once): it runs in the ranks. The first launch that fails ends the measurement;
its record names the rank's error, the reader's function it came from, and the runs of
that launch. The notebook's self-check runs this same module in a subprocess
(:func:`ppbook.assign.transport.measured`), so it gives the grader's verdict.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from ppbook.assign.transport import RUNS, TRANSPORT, groups

GUARDED = "ppbook.assign.guarded_transport"
DEADLINE = 150.0
"""Seconds the whole measurement may take (about 20 on two idle cores): a transport that
loops for ever is stopped, its ranks with it, and named."""
FILE = "PPBOOK_TRANSPORT_FILE"
"""The environment variable that names the reader's file, by its absolute path, to the ranks."""
WRITTEN_BY = "run the notebook's cell write_transport(receive, deliver), which writes it"


def _failed(kind: str, message: str, function: str | None = None) -> dict:
    return {"ok": False, "type": kind, "message": message[:300], "function": function}


def measure(folder: Path) -> dict:
    """The record (module docstring) of the reader's transport in ``folder``."""
    path = folder.resolve() / f"{TRANSPORT}.py"
    if path.is_symlink() or not path.is_file():
        return _failed("FileNotFoundError", f"no {path.name} beside the notebook: {WRITTEN_BY}")
    try:
        compile(path.read_bytes(), str(path), "exec")
    except (SyntaxError, ValueError) as error:
        line = getattr(error, "lineno", None)
        where = f" (line {line})" if line else ""
        return _failed("SyntaxError", f"{path.name}{where}: {getattr(error, 'msg', error)}")
    os.environ[FILE] = str(path)  # the ranks import this very file
    if str(path.parent) not in sys.path:
        sys.path.append(str(path.parent))  # the ranks get this sys.path (spawn)
    from ppbook.runtime.launch import PipelineError, launch_many

    value = {}
    for names in groups():
        configs = [RUNS[name] for name in names]
        try:
            results = launch_many([_with_transport(config) for config in configs])
        except (PipelineError, ValueError) as error:
            return _explained(error, names, path)
        for name, result in zip(names, results, strict=True):
            value[name] = {
                "losses": list(result.losses),
                "grads": {k: g.tolist() for k, g in sorted((result.grads or {}).items())},
                "params": {k: t.tolist() for k, t in sorted((result.params or {}).items())},
            }
    return {"ok": True, "value": value}


def _with_transport(config):
    return replace(config, transport=GUARDED)


_HEADLINE = re.compile(r"^rank (\d+) failed: (\w+): ?(.*)$")


def _explained(error: Exception, names: list[str], path: Path) -> dict:
    """The record of a launch that failed: the rank's error type and message, the reader's
    function it was raised in (the last frame in their file), and the runs."""
    text = str(error)
    lines = text.splitlines() or [""]
    frames = re.findall(rf'File "{re.escape(str(path))}", line \d+, in (\w+)', text)
    function = frames[-1] if frames else None
    runs = f"the runs on {RUNS[names[0]].nproc} ranks: {', '.join(names)}"
    found = _HEADLINE.match(lines[0])
    if found is None:  # a rank died without a report, or the run was refused
        return _failed(type(error).__name__, f"{lines[0]} ({runs})", function)
    rank, kind, message = found.groups()
    if kind == "NotImplementedError":
        return _failed(kind, message, function)  # "write receive: ...": work still to do
    if "timed out" in message.lower() or "timeout" in message.lower():
        message = (
            "a rank waited for a message that never came: one sent to the wrong rank or "
            f"with the wrong identity, or never sent ({message[:100]})"
        )
    return _failed(kind, f"{message} (rank {rank}; {runs})", function)


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Raise TimeoutError in this block after ``seconds`` (the launcher then stops the ranks)."""

    def time_up(signum, frame):
        raise TimeoutError

    previous = signal.signal(signal.SIGALRM, time_up)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def main(argv: list[str] | None = None) -> int:
    """``python -I -m ppbook.assign.measure_transport ANSWER_PATH``: measure the transport
    in the current folder and write the record to ANSWER_PATH."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(
            "usage: python -I -m ppbook.assign.measure_transport ANSWER_PATH "
            "(run in the folder that holds my_transport.py)",
            file=sys.stderr,
        )
        return 2
    answer = Path(args[0])
    try:
        with _deadline(DEADLINE):
            record = measure(Path.cwd())
    except TimeoutError:
        record = _failed(
            "TimeoutError",
            f"the runs took longer than {DEADLINE:g} s: a receive or deliver that never returns?",
        )
    partial = answer.with_name(answer.name + ".partial")
    partial.write_text(json.dumps(record))
    partial.replace(answer)  # whole or not at all
    return 0


if __name__ == "__main__":
    sys.exit(main())
