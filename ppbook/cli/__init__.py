"""The ``ppbook`` command: ``ppbook simulate ...``, ``ppbook run ...``, ``ppbook size ...`` and
``ppbook assign ...``.

Each subcommand lives with its layer: :mod:`ppbook.cli.simulate` (standard library and
matplotlib for ``--png``), :mod:`ppbook.cli.run` (torch, imported only when
``run`` is asked for), :mod:`ppbook.cli.size` (the sizing search) and
:mod:`ppbook.cli.assign` (course assignments: student copies and the grader). Bad input (a
ValueError) is printed as a short message, cut to :data:`MAX_ERROR_LINES` lines and
:data:`ppbook.limits.MAX_MESSAGE` characters, with exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ppbook import __version__

from ppbook.limits import capped

MAX_ERROR_LINES = 12
"""Lines of an error message printed (a deadlock report names one stuck rank a line)."""


def short_error(message: str) -> str:
    """``message`` cut to :data:`MAX_ERROR_LINES` lines and :data:`ppbook.limits.MAX_MESSAGE`
    characters, saying how much was left out."""
    lines = message.splitlines() or [""]
    if len(lines) > MAX_ERROR_LINES:
        left = len(lines) - (MAX_ERROR_LINES - 1)
        lines = [*lines[: MAX_ERROR_LINES - 1], f"... ({left:,} more lines left out)"]
    return capped("\n".join(lines))


COMMANDS = ("simulate", "run", "size", "layer", "assign")
"""The subcommands, each the module of that name in this package."""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``ppbook`` console script; returns the exit status.

    Only the subcommand asked for is imported (``ppbook simulate`` does not load the
    sizing search or the grader); without one, or with an unknown one, all are, so that
    the help and the error list every command.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    chosen = argv[:1] if argv[:1] and argv[0] in COMMANDS else list(COMMANDS)
    if argv[:1] == ["--version"]:
        chosen = []  # the version needs no subcommand loaded
    parser = argparse.ArgumentParser(
        prog="ppbook",
        description="Pipeline-parallel schedules: simulate them, or run them on real processes.",
    )
    parser.add_argument("--version", action="version", version=f"ppbook {__version__}")
    listed = "{" + ",".join(COMMANDS) + "}"
    sub = parser.add_subparsers(dest="command", required=True, metavar=listed)
    for name in chosen:
        importlib.import_module(f"ppbook.cli.{name}").add_parser(sub)
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except ValueError as exc:  # bad input: say what was wrong, no traceback
        print(f"ppbook {args.command}: error: {short_error(str(exc))}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
