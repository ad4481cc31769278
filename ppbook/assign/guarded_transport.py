"""The transport module the grader's ranks load in assignment 3 (``RunConfig(transport=
"ppbook.assign.guarded_transport")``): the reader's ``receive`` and ``deliver`` from their
``my_transport.py``, with the runtime's own send and receive refused.

:mod:`ppbook.assign.measure_transport` names the reader's file by its absolute path in the
environment (:data:`FILE`), so every rank imports that very file whatever its current folder,
``sys.path`` or sandbox; the file's folder goes at the end of ``sys.path`` for what the file
itself imports from beside it (the installed packages come first, so the file cannot shadow
them).

Before the reader's file is imported, the runtime's own path to its default transport is
closed: :meth:`~ppbook.runtime.execute.StepRunner.receive` and ``deliver``, and the helpers
that do their work (``_take``, ``_put``), raise :class:`Refused` on this rank. Nothing of
the runtime calls them while a transport module is in use, so only a reader's code can: a
``StepRunner.receive(runner, part)`` in ``receive``, or the same reached through
``type(runner)``, a reloaded module or a copy of its code, which still goes through
``_take``. A runner of another class than the guarded one is refused too.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from pathlib import Path

from ppbook.assign.measure_transport import FILE
from ppbook.runtime.execute import StepRunner

REFUSED = ("receive", "deliver", "_take", "_put")
"""StepRunner's own transport: what the reader is asked to write, refused here."""

WRITE_IT = (
    "write it yourself with runner.messenger (send, recv) and runner.local, "
    "as the notebook describes"
)


class Refused(RuntimeError):
    """The reader's code used the runtime's own send and receive."""


def _refuse(name: str):
    def refused(*args, **kwargs):
        raise Refused(
            f"assignment 3 refuses the runtime's own StepRunner.{name}, which your transport "
            f"called: {WRITE_IT}"
        )

    refused.__name__ = refused.__qualname__ = name
    return refused


def _guard() -> type:
    for name in REFUSED:
        setattr(StepRunner, name, _refuse(name))
    return StepRunner


def _load(path: str | None) -> types.ModuleType:
    """The reader's module, imported from ``path`` (see the module's docstring)."""
    if not path or not Path(path).is_absolute():
        raise RuntimeError(
            "ppbook.assign.guarded_transport serves the grader's measuring run only "
            "(python -m ppbook.assign.measure_transport), which names the transport file"
        )
    folder = str(Path(path).parent)
    if folder not in sys.path:
        sys.path.append(folder)  # after the installed packages: it cannot shadow them
    name = Path(path).stem
    sys.dont_write_bytecode = True  # no __pycache__ left beside the reader's file
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    for wanted in ("receive", "deliver"):
        if not callable(getattr(module, wanted, None)):
            raise AttributeError(
                f"{Path(path).name} has no function {wanted}: run the notebook's cell "
                "write_transport(receive, deliver), which writes both"
            )
    return module


GUARDED = _guard()
READER = _load(os.environ.get(FILE))


def _check(runner) -> None:
    if type(runner) is not GUARDED:
        raise Refused(
            f"the runner is a {type(runner).__name__}, not the runtime's StepRunner: "
            "assignment 3 runs your transport in the runtime's own runner"
        )


def receive(runner, part):
    """The reader's receive, on the guarded runner."""
    _check(runner)
    return READER.receive(runner, part)


def deliver(runner, part, result):
    """The reader's deliver, on the guarded runner."""
    _check(runner)
    return READER.deliver(runner, part, result)
