"""The ``ppbook`` command: ``ppbook simulate ...``, ``ppbook run ...``, ``ppbook size ...`` and
``ppbook assign ...``.

Each subcommand lives with its layer: :mod:`ppbook.cli.simulate` (standard library and
matplotlib for ``--png``), :mod:`ppbook.cli.run` (torch, imported only when
``run`` is asked for), :mod:`ppbook.cli.size` (the sizing search) and
:mod:`ppbook.cli.assign` (course assignments: student copies and the grader). Bad input (a
ValueError) is printed as a short message, cut to :data:`MAX_ERROR_LINES` lines and
:data:`ppbook.limits.MAX_MESSAGE` characters, with exit status 2. Files named on the
command line are checked here for every command: :func:`read_csv_argument` reads a regular
file only, up to a bounded size; :func:`check_output_file` refuses a folder, a FIFO or a
missing folder before anything runs.
"""

from __future__ import annotations

import argparse
import importlib
import os
import stat
import sys

from ppbook import __version__
from ppbook.limits import MAX_PATH_SHOWN as PATH_SHOWN
from ppbook.limits import capped, file_kind, read_regular_file

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


def read_csv_argument(path: str, routes: str | None = None, hint: str = ""):
    """The schedule in PyTorch's CSV form in the file ``--from-csv PATH``, read as
    :func:`ppbook.pytorch_csv.read_csv` reads it, but from a regular file only and no more
    than :data:`ppbook.limits.CSV_BYTES_PER_ACTION` bytes per allowed action
    (:func:`read_regular_file`)."""
    from pathlib import Path

    from ppbook import limits
    from ppbook.pytorch_csv import read_csv_text

    most = limits.current().actions * limits.CSV_BYTES_PER_ACTION
    per_action = f" ({limits.CSV_BYTES_PER_ACTION} bytes per allowed action){hint}"
    data = read_regular_file(path, "--from-csv", most, per_action)
    shown = capped(path, PATH_SHOWN)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{shown} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            "save the CSV as UTF-8"
        ) from None
    try:
        return read_csv_text(text, name=Path(path).stem, routes=routes)
    except ValueError as exc:
        raise ValueError(f"{shown}: {exc}") from None


def check_output_file(path: str, flag: str) -> None:
    """Refuse an output path that cannot take a file: a folder, a missing folder, a FIFO or
    a socket (writing to one waits for a reader). A device such as ``/dev/null`` is
    accepted; a write that fails later (``/dev/full``) is reported by the command."""
    shown = capped(path, PATH_SHOWN)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        folder = os.path.dirname(path) or "."
        if not os.path.isdir(folder):
            raise ValueError(
                f"cannot write {shown} ({flag}): folder {capped(folder, PATH_SHOWN)} does not "
                "exist; create it first"
            ) from None
        return
    except OSError as exc:  # a file used as a folder, a name too long, a loop of links
        raise ValueError(f"cannot write {shown} ({flag}): {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        raise ValueError(f"cannot write {shown} ({flag}): it is {file_kind(mode)}; give a file")


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
