"""The ``ppbook`` command: ``ppbook simulate ...`` and ``ppbook run ...``.

Each subcommand lives with its layer: :mod:`ppbook.cli_simulate` (standard library and
matplotlib for ``--png``) and :mod:`ppbook.runtime.cli` (torch, imported only when
``run`` is asked for).
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``ppbook`` console script; returns the exit status."""
    from ppbook import cli_simulate
    from ppbook.runtime import cli as run_cli

    parser = argparse.ArgumentParser(
        prog="ppbook",
        description="Pipeline-parallel schedules: simulate them, or run them on real processes.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{simulate,run}")
    cli_simulate.add_parser(sub)
    run_cli.add_parser(sub)
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except ValueError as exc:  # bad input: say what was wrong, no traceback
        print(f"ppbook {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
