"""Assignment 3: the reader's send and receive step, run by the grader on 2 to 4 processes and
scored by equality with one process (``notebooks/assignments/03_send_receive.ipynb``).

The reader writes ``receive(runner, part)`` and ``deliver(runner, part, result)`` in the
notebook, and :func:`write_transport` writes them to ``my_transport.py`` next to it
(processes cannot start a function defined in a notebook, but they can import a file).
The grader measures that file itself, outside the submission's kernel
(:mod:`ppbook.assign.measure_transport`, named by the questions' ``run``): every run of
:data:`RUNS`, each a tiny float64 training of one or two SGD steps, with the runtime's own
send and receive refused (:mod:`ppbook.assign.guarded_transport`). The notebook's
self-check runs the same module in a subprocess (:func:`measured`).

The scores run in the grader's process and compute the single-process answer themselves
(:func:`ppbook.runtime.reference.reference_run`): 3.1 every step's loss of every run, 3.2
every parameter's gradient of the last step and its value after the optimizer's step. A
number that is not finite (NaN, infinity) is wrong. Each wrong answer is told the run and
the parameter that differ, and by how much. torch is imported only when a function here runs.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import math
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from pathlib import Path

from ppbook.runtime.config import RunConfig


def _run(schedule: str, nproc: int, microbatches: int, steps: int = 1, **more) -> RunConfig:
    return RunConfig(
        schedule=schedule,
        nproc=nproc,
        num_microbatches=microbatches,
        hidden=4,
        microbatch_size=2,
        steps=steps,
        optimizer="sgd",
        lr=0.1,
        dtype="float64",
        collect_grads=True,
        timeout=15.0,
        num_threads=1,
        **more,
    )


RUNS = {
    "1f1b": _run("1f1b", 2, 4),
    "zb-v": _run("zb-v", 2, 4, steps=2),
    "1f1b p=3": _run("1f1b", 3, 5, steps=2),
    "zb-v p=3": _run("zb-v", 3, 6),
    "1f1b p=4 m=3": _run("1f1b", 4, 3),
    "interleaved-1f1b p=4": _run("interleaved-1f1b", 4, 4, num_chunks=2),
}
"""The runs the reader's transport must get right, by name: 1F1B (every message crosses
ranks; on 4 ranks with fewer micro-batches than ranks), ZB-V (its V hands micro-batches
from one stage to the next on the same rank and splits the backward into I and W) and
interleaved 1F1B (the last rank sends on to rank 0), on 2, 3 and 4 ranks, two steps in
some runs (what a transport keeps from one step to the next must not leak into it). A
peer written for two ranks, a message dropped, sent twice, to the wrong stage or with the
wrong identity, or the wrong tensor sent, fails one of them."""

RTOL, ATOL = 1e-9, 1e-11
"""How close to one process a float64 loss, gradient or parameter must come."""

TRANSPORT = "my_transport"
"""The reader's module: ``my_transport.py`` next to the notebook."""

MEASURE = "ppbook.assign.measure_transport"
"""The module the grader runs to measure the transport (``Question.run``)."""

COLLECT = f"__import__('ppbook.assign.transport', fromlist=['_']).measured({TRANSPORT!r})"
"""What the notebook's self-check evaluates for 3.1 and 3.2 (the grader runs :data:`MEASURE`)."""

SELF_CHECK_TIMEOUT = 600.0
"""Seconds the notebook's self-check gives the measurement."""

HEADER = (
    '"""Assignment 3\'s send and receive step, written by its notebook (write_transport)."""'
    "\n\nfrom ppbook.dependencies import needs, sends\n"
)


def groups() -> list[list[str]]:
    """The names of :data:`RUNS` by number of ranks, fewest first: one launch each."""
    by_ranks: dict[int, list[str]] = {}
    for name, config in RUNS.items():
        by_ranks.setdefault(config.nproc, []).append(name)
    return [by_ranks[n] for n in sorted(by_ranks)]


def write_transport(receive: Callable, deliver: Callable, name: str = TRANSPORT) -> Path:
    """Write the source of ``receive`` and ``deliver`` (functions defined in a notebook) to
    ``name``.py in the working directory, the notebook's folder, where the grader finds it.

    The module starts with ``from ppbook.dependencies import needs, sends``; anything else
    the functions use they import in their own bodies.
    """
    for function, wanted in ((receive, "receive"), (deliver, "deliver")):
        if getattr(function, "__name__", None) != wanted:
            raise ValueError(f"write_transport needs your function {wanted}, got {function!r:.60}")
    sources = [textwrap.dedent(inspect.getsource(f)) for f in (receive, deliver)]
    path = Path(f"{name}.py")
    path.write_text(HEADER + "".join(f"\n\n{source.rstrip()}\n" for source in sources))
    importlib.invalidate_caches()  # a file just written is found at once
    return path.resolve()


def measured_question(question):
    """``question`` measured by the grader itself: its ``run`` is :data:`MEASURE`."""
    return replace(question, run=MEASURE)


_CHECKED: dict[str, dict] = {}  # self-checks only: the record of each version of the file


def measured(transport: str = TRANSPORT) -> dict:
    """The notebook's self-check of 3.1 and 3.2: run :data:`MEASURE` on the current folder
    in a fresh process, as the grader does, and give its data; its error is raised (a
    ``NotImplementedError`` for a stub). The grader does not call this: it runs the module
    itself. Both self-checks of one version of the file share one measurement."""
    if transport != TRANSPORT:
        raise ValueError(f"the grader measures {TRANSPORT}.py, not {transport!r}")
    path = Path.cwd() / f"{TRANSPORT}.py"
    key = f"{path}:{hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ''}"
    if key not in _CHECKED:
        _CHECKED[key] = _measure_here()
    record = _CHECKED[key]
    if record.get("ok"):
        return record["value"]
    raise _raised(record)


def _raised(record: dict) -> Exception:
    """The error a failed measurement's record names, to raise in the self-check: a
    ``NotImplementedError`` for a stub, else an error of the rank's type (a RuntimeError)
    whose message says in which of the reader's functions it was raised."""
    kind, message = str(record.get("type", "")), str(record.get("message", ""))
    if kind == "NotImplementedError":
        return NotImplementedError(message)
    function = record.get("function")
    text = f"in {function}: {message}" if function else message
    named = kind if kind.isidentifier() and kind != "RuntimeError" else None
    return (
        type(named, (RuntimeError,), {"__module__": __name__})(text)
        if named
        else (RuntimeError(text))
    )


def _measure_here() -> dict:
    with tempfile.TemporaryDirectory(prefix="ppbook-check-") as folder:
        answer = Path(folder) / "answer.json"
        command = [sys.executable, "-I", "-m", MEASURE, str(answer)]
        try:
            done = subprocess.run(
                command,
                cwd=os.getcwd(),
                capture_output=True,
                text=True,
                timeout=SELF_CHECK_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"the measurement ran past {SELF_CHECK_TIMEOUT:g} s") from None
        if not answer.is_file():
            said = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"the measurement ended without a record: {said}")
        return json.loads(answer.read_text())


def _run_data(data: object, name: str) -> dict:
    if not isinstance(data, dict) or not isinstance(data.get(name), dict):
        raise ValueError(f"the measurement gave no result for the run {name}")
    return data[name]


@cache
def _reference(name: str):
    """Losses, gradients and parameters of run ``name`` in one process (computed once)."""
    from ppbook.runtime.reference import reference_run

    return reference_run(RUNS[name])


def _close(got: float, want: float) -> bool:
    """Within tolerance; never for NaN or an infinity."""
    return math.isfinite(got) and abs(got - want) <= RTOL * abs(want) + ATOL


def score_loss(data: object) -> tuple[float, str]:
    """3.1: the forward: every step's loss of every run equals the single-process loss."""
    for name, config in RUNS.items():
        try:
            losses = _run_data(data, name).get("losses")
        except ValueError as error:
            return 0.0, str(error)
        want = _reference(name).losses
        if not isinstance(losses, list) or len(losses) != len(want):
            return 0.0, f"{name}: {config.steps} losses expected (one per step), got {losses!r:.40}"
        for step, (loss, expected) in enumerate(zip(losses, want, strict=True), start=1):
            if type(loss) is not float or not _close(loss, expected):
                return 0.0, (
                    f"{name}, step {step}: the pipeline's loss is {loss!r:.30}, one process "
                    f"gives {expected:.12g}: the activations do not reach the next stage as "
                    "they left the last"
                )
    return 1.0, f"right: every loss of all {len(RUNS)} runs (2 to 4 ranks) equals one process's"


def score_gradients(data: object) -> tuple[float, str]:
    """3.2: the backward: every parameter's gradient, and its value after the optimizer's
    step, equals the single-process one."""
    for name in RUNS:
        try:
            run = _run_data(data, name)
        except ValueError as error:
            return 0.0, str(error)
        reference = _reference(name)
        for what, given, expected in (
            ("gradient", run.get("grads"), reference.grads),
            ("value after the step", run.get("params"), reference.params),
        ):
            wrong = _tensors_differ(given, expected, what)
            if wrong:
                return 0.0, f"{name}: {wrong}"
    return 1.0, (
        f"right: every gradient and every parameter after the step equals one process's, in "
        f"all {len(RUNS)} runs"
    )


def _tensors_differ(given: object, expected: dict, what: str) -> str:
    """What is wrong with ``given`` (name -> nested lists) against ``expected`` (name ->
    tensor), or "" when every one is within tolerance."""
    import torch

    if not isinstance(given, dict):
        return f"no {what} of the parameters came back"
    for key, want in expected.items():
        if key not in given:
            return f"the parameter {key} got no {what}"
        try:
            got = torch.tensor(given[key], dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError):
            return f"the {what} of {key} is not a tensor's list of numbers"
        if got.shape != want.shape:
            return f"the {what} of {key} has shape {tuple(got.shape)}, not {tuple(want.shape)}"
        if not torch.isfinite(got).all():
            return f"the {what} of {key} holds NaN or an infinity"
        error = (got - want).abs().max().item()
        largest = want.abs().max().item()
        if not error <= RTOL * largest + ATOL:
            return (
                f"the {what} of {key} is off by up to {error:.3g} (largest absolute error; "
                f"its largest entry is {largest:.3g})"
            )
    return ""
