"""Assignment 3: the reader's send and receive step, run on two processes and scored by
gradient equality with one process (``notebooks/assignments/03_send_receive.ipynb``).

The reader writes ``receive(runner, part)`` and ``deliver(runner, part, result)`` in the
notebook, and :func:`write_transport` writes them to a module file next to it;
``RunConfig(transport=...)`` has every rank's :class:`~ppbook.runtime.execute.StepRunner`
use them (processes cannot start a function defined in a notebook, but they can import a
file). :func:`pipeline_gradients` runs in the
submission's kernel: it launches :data:`RUNS` with that module and returns the losses and
gradients as plain data. The scores run in the grader's process: they compute the
single-process answer themselves (:func:`ppbook.runtime.reference.reference_step`) and
name the parameter whose gradient differs, and by how much.

Two tiny float64 runs of two ranks: 1F1B (every message crosses ranks) and ZB-V (its V
hands the turn from stage 1 to stage 2 on one rank, and splits the backward into I and W).
torch is imported only when a function here runs.
"""

from __future__ import annotations

import importlib.util
import inspect
import textwrap
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from pathlib import Path

from ppbook.runtime.config import RunConfig, check_transport

RUNS = {
    name: RunConfig(
        schedule=name,
        nproc=2,
        num_microbatches=4,
        hidden=8,
        microbatch_size=2,
        dtype="float64",
        collect_grads=True,
        timeout=20.0,
        num_threads=1,
    )
    for name in ("1f1b", "zb-v")
}
"""The runs the reader's transport must get right, by schedule."""

RTOL, ATOL = 1e-9, 1e-11
"""How close to one process a float64 gradient must come."""


TRANSPORT = "my_transport"
"""The module the grader's runs import: ``my_transport.py`` next to the notebook."""

HEADER = (
    '"""Assignment 3\'s send and receive step, written by its notebook (write_transport)."""'
    "\n\nfrom ppbook.dependencies import needs, sends\n"
)


def write_transport(receive: Callable, deliver: Callable, name: str = TRANSPORT) -> Path:
    """Write the source of ``receive`` and ``deliver`` (functions defined in a notebook) to
    ``name``.py in the working directory, the notebook's folder, where the ranks import it.

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


_DONE: dict[tuple[str, bytes], dict | Exception] = {}  # (module, source) -> data or error


def pipeline_gradients(transport: str) -> dict:
    """Run :data:`RUNS` with the transport module ``transport``; per run its loss and every
    parameter's gradient as nested lists. A rank's ``NotImplementedError`` comes back as
    one, so that an unfinished stub reads as work still to do.

    The runs of one version of the module's file are launched once: both questions (and
    both self-checks) collect the same data, or the same error.
    """
    key = (transport, Path(check_transport(transport).origin).read_bytes())
    if key not in _DONE:
        try:
            _DONE[key] = _launched(transport)
        except (NotImplementedError, RuntimeError) as error:  # a failed run fails again
            _DONE[key] = error
    if isinstance(_DONE[key], BaseException):
        raise _DONE[key]
    return _DONE[key]


def _launched(transport: str) -> dict:
    from ppbook.runtime.launch import PipelineError, launch_many

    configs = [replace(config, transport=transport) for config in RUNS.values()]
    try:
        results = launch_many(configs)
    except PipelineError as error:
        first = str(error).splitlines()[0]
        _, found, rest = first.partition("NotImplementedError: ")
        if found:
            raise NotImplementedError(rest) from None
        raise
    return {
        name: {
            "loss": result.losses[0],
            "grads": {key: grad.tolist() for key, grad in sorted(result.grads.items())},
        }
        for name, result in zip(RUNS, results, strict=True)
    }


def _run_data(data: object, name: str) -> dict:
    if not isinstance(data, dict) or not isinstance(data.get(name), dict):
        raise ValueError(f"pipeline_gradients gave no result for the {name} run")
    return data[name]


@cache
def _reference(name: str):
    """The loss and gradients of run ``name`` in one process (computed once)."""
    from ppbook.runtime.reference import reference_step

    return reference_step(RUNS[name])


def score_loss(data: object) -> tuple[float, str]:
    """3.1: the forward: every run's loss equals the single-process loss."""
    for name in RUNS:
        try:
            loss = _run_data(data, name).get("loss")
        except ValueError as error:
            return 0.0, str(error)
        want, _ = _reference(name)
        if type(loss) is not float or abs(loss - want) > RTOL * abs(want) + ATOL:
            return 0.0, (
                f"{name}: the pipeline's loss is {loss!r:.30}, one process gives {want:.12g}: "
                "the activations do not reach the next stage as they left the last"
            )
    return 1.0, "right: the loss of both runs equals the single-process loss"


def score_gradients(data: object) -> tuple[float, str]:
    """3.2: the backward: every parameter's gradient equals the single-process one."""
    import torch

    for name in RUNS:
        try:
            grads = _run_data(data, name).get("grads")
        except ValueError as error:
            return 0.0, str(error)
        if not isinstance(grads, dict):
            return 0.0, f"{name}: no gradients came back"
        _, want = _reference(name)
        for key, expected in want.items():
            if key not in grads:
                return 0.0, f"{name}: the parameter {key} got no gradient"
            try:
                got = torch.tensor(grads[key], dtype=torch.float64)
            except (TypeError, ValueError, RuntimeError):
                return 0.0, f"{name}: the gradient of {key} is not a tensor's list of numbers"
            if got.shape != expected.shape:
                return 0.0, (
                    f"{name}: the gradient of {key} has shape {tuple(got.shape)}, "
                    f"the parameter {tuple(expected.shape)}"
                )
            error = (got - expected).abs().max().item()
            if not error <= RTOL * expected.abs().max().item() + ATOL:
                return 0.0, (
                    f"{name}: the gradient of {key} is off by up to {error:.3g} (largest "
                    f"absolute error; its largest entry is {expected.abs().max().item():.3g})"
                )
    return 1.0, "right: every parameter's gradient equals the single-process one, in both runs"
