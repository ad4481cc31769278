"""The site's CLI reference, written from ppbook's own argument parsers so it cannot drift.

:func:`ppbook_parser` builds the ``ppbook`` parser as :func:`ppbook.cli.main` does (every
subcommand's ``add_parser``), and :func:`reference` walks argparse's parser objects:
each command and sub-subcommand (``ppbook assign build``), its usage line, description and
every argument with its value, default and help, the help's ``%(default)s`` filled in as
``--help`` fills it. ``python site/cli_reference.py OUT.md`` writes the page.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from pathlib import Path

from ppbook import __version__
from ppbook.cli import COMMANDS

MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>$|#{}~])")


def ppbook_parser() -> argparse.ArgumentParser:
    """The ``ppbook`` parser with every subcommand, as ``ppbook --help`` builds it."""
    parser = argparse.ArgumentParser(
        prog="ppbook",
        description="Pipeline-parallel schedules: simulate them, or run them on real processes.",
    )
    parser.add_argument("--version", action="version", version=f"ppbook {__version__}")
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="{" + ",".join(COMMANDS) + "}"
    )
    for name in COMMANDS:
        importlib.import_module(f"ppbook.cli.{name}").add_parser(sub)
    return parser


def escape(text: str) -> str:
    """``text`` shown literally in MyST Markdown (no emphasis, no math, no table cell break)."""
    return MARKDOWN_SPECIAL.sub(r"\\\1", " ".join(text.split()))


def expanded_help(action: argparse.Action, prog: str) -> str:
    """An argument's help with ``%(default)s`` and friends filled in, as ``--help`` shows it."""
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    params = dict(vars(action), prog=prog)
    for name, value in list(params.items()):
        if value is argparse.SUPPRESS:
            del params[name]
        elif hasattr(value, "__name__"):
            params[name] = value.__name__
    if params.get("choices") is not None:
        params["choices"] = ", ".join(str(c) for c in params["choices"])
    return action.help % params


def subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices.items())
    return []


def argument_rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
            continue
        if action.help == argparse.SUPPRESS:
            continue
        if action.option_strings:
            names = ", ".join(action.option_strings)
            takes = action.nargs != 0
            value = (action.metavar or action.dest.upper()) if takes else ""
        else:
            names = action.metavar or action.dest
            value = ""
        if action.choices is not None and not isinstance(action.choices, dict):
            value = "{" + ",".join(str(c) for c in action.choices) + "}"
        if isinstance(value, tuple):
            value = " ".join(value)
        default = action.default
        shown_default = (
            "" if default in (None, False, argparse.SUPPRESS) or action.nargs == 0 else str(default)
        )
        help_text = expanded_help(action, parser.prog)
        if action.required and action.option_strings:
            help_text = "(required) " + help_text
        cells = [
            f"`{names}`",
            f"`{value}`" if value else "",
            escape(shown_default),
            escape(help_text),
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def section(parser: argparse.ArgumentParser, level: int) -> list[str]:
    lines = [f"{'#' * level} `{parser.prog}`", ""]
    if parser.description:
        lines += [escape(parser.description), ""]
    usage = parser.format_usage().strip().removeprefix("usage: ")
    lines += ["```text", usage, "```", ""]
    rows = argument_rows(parser)
    if rows:
        lines += [
            "```{table}",
            ":class: ppbook-cli-arguments",
            "",
            "| argument | value | default | what it does |",
            "|---|---|---|---|",
            *rows,
            "```",
            "",
        ]
    if parser.epilog:  # a table or list laid out by hand: kept as --help prints it
        lines += ["```text", parser.epilog.strip("\n"), "```", ""]
    for _, child in subcommands(parser):
        lines += section(child, min(level + 1, 4))
    return lines


def reference() -> str:
    parser = ppbook_parser()
    lines = [
        "# Command-line reference",
        "",
        "Written from the `ppbook` command's own argument parsers when the site is built "
        "(`site/cli_reference.py`), so it says what `ppbook <command> --help` says. "
        "Bad input ends a command with one line, `ppbook <command>: error: ...`, and exit "
        "status 2.",
        "",
    ]
    lines += ["## `ppbook`", "", escape(parser.description or ""), ""]
    lines += ["```text", parser.format_usage().strip().removeprefix("usage: "), "```", ""]
    for _, child in subcommands(parser):
        lines += section(child, 2)
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python site/cli_reference.py OUT.md", file=sys.stderr)
        return 2
    Path(argv[0]).write_text(reference())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
