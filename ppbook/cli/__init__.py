"""The ``ppbook`` command: ``ppbook simulate ...`` and ``ppbook run ...``.

Each subcommand lives with its layer: :mod:`ppbook.cli.simulate` (standard library and
matplotlib for ``--png``) and :mod:`ppbook.cli.run` (torch, imported only when
``run`` is asked for).
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``ppbook`` console script; returns the exit status."""
    from ppbook.cli import run as run_command
    from ppbook.cli import simulate as simulate_command

    parser = argparse.ArgumentParser(
        prog="ppbook",
        description="Pipeline-parallel schedules: simulate them, or run them on real processes.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{simulate,run}")
    simulate_command.add_parser(sub)
    run_command.add_parser(sub)
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except ValueError as exc:  # bad input: say what was wrong, no traceback
        print(f"ppbook {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
