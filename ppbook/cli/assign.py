"""``ppbook assign``: course assignments (issue 10).

- ``ppbook assign build [--check] [--source DIR]``: write the student copies
  (:func:`ppbook.assign.build.build`); ``--check`` writes nothing and exits 1 naming every
  student copy that is not what ``build`` would write.
- ``ppbook assign grade SUBMISSION.ipynb [--json] [--timeout S] [--cell-timeout S] [--seed N]``:
  run the submission in a fresh sandboxed kernel and print a score per question, the total,
  the isolation in force and the seed its cases were drawn from
  (:func:`ppbook.assign.grade.grade`); ``--json`` prints one object. Time limits are more
  than 0 and at most a day; anything else (``inf``, ``nan``, ``-1``) is a one-line error.
- ``ppbook assign grade FOLDER [--csv OUT] [--jobs N]``: grade every notebook in FOLDER, N at
  once (default: the CPUs; :mod:`ppbook.assign.classroom`), and write one CSV of scores
  (default ``scores.csv`` in the current folder; not a folder or a link) and say where. A
  submission that cannot be graded gets 0 and a note; the others are graded.
- ``ppbook assign release OUT [--source DIR]``: a student release, the folder OUT and
  ``OUT.zip`` (the same bytes every time), with nothing of the solutions
  (:mod:`ppbook.assign.release`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ppbook.assign import release
from ppbook.assign.report import clean


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``ppbook assign`` on ``subparsers``."""
    parser = subparsers.add_parser(
        "assign",
        help="course assignments: build student copies, grade submissions",
        description="Build the student copies of the assignments, or grade submissions.",
    )
    sub = parser.add_subparsers(dest="action", required=True, metavar="{build,grade,release}")
    build = sub.add_parser("build", help="write notebooks/assignments/student/ from the solutions")
    build.add_argument("--check", action="store_true", help="write nothing; exit 1 if stale")
    build.add_argument("--source", type=Path, help="the instructor notebooks' folder")
    build.set_defaults(handler=_build)
    grade = sub.add_parser("grade", help="grade a submitted notebook, or every one in a folder")
    grade.add_argument("path", type=Path, help="a submission (.ipynb) or a folder of them")
    grade.add_argument("--json", action="store_true", help="print one JSON object")
    grade.add_argument(
        "--timeout", type=float, default=None, help="seconds for all cells (default 300)"
    )
    grade.add_argument(
        "--cell-timeout", type=float, default=None, help="seconds for one cell (default 120)"
    )
    grade.add_argument(
        "--csv", type=Path, default=Path("scores.csv"), help="a folder's scores (scores.csv)"
    )
    grade.add_argument(
        "--isolation",
        choices=("bwrap", "unshare", "user", "none"),
        help="force a sandbox (default: the strongest that works here; see the report)",
    )
    grade.add_argument(
        "--jobs", type=int, default=None, help="submissions graded at once (default: the CPUs)"
    )
    grade.add_argument(
        "--seed", type=int, default=None, help="draw the questions' cases from this seed"
    )
    grade.set_defaults(handler=_grade)
    release.add_parser(sub)  # ppbook assign release OUT [--source DIR]
    return parser


def _build(args: argparse.Namespace) -> int:
    from ppbook.assign.build import ASSIGNMENTS, build

    source = args.source or ASSIGNMENTS
    changed = build(source, check=args.check)
    if args.check:
        for path in changed:
            print(f"stale student copy: {path} (run `ppbook assign build`)", file=sys.stderr)
        return 1 if changed else 0
    print(
        f"wrote {len(changed)} student cop{'y' if len(changed) == 1 else 'ies'} in {source}/student"
    )
    return 0


MAX_JOBS = 64
"""The most submissions ``--jobs`` grades at once."""


def _limits(args: argparse.Namespace) -> dict:
    """The grading options of ``args``, each checked: ValueError with one line if not."""
    from ppbook.assign.grade import DEFAULT_CELL_TIMEOUT, DEFAULT_TIMEOUT, check_seconds

    timeout = DEFAULT_TIMEOUT if args.timeout is None else args.timeout
    cell = DEFAULT_CELL_TIMEOUT if args.cell_timeout is None else args.cell_timeout
    timeout, cell = check_seconds(timeout, "--timeout"), check_seconds(cell, "--cell-timeout")
    if args.seed is not None and args.seed < 0:
        raise ValueError(f"--seed must be a whole number >= 0, got {args.seed}")
    return {
        "timeout": timeout,
        "cell_timeout": min(cell, timeout),
        "isolation": args.isolation,
        "seed": args.seed,
    }


def _grade(args: argparse.Namespace) -> int:
    from ppbook.assign.grade import grade

    options = _limits(args)
    if args.path.is_dir():
        return _grade_folder(args, options)
    report = grade(args.path, **options)
    print(json.dumps(report.as_dict(), indent=1) if args.json else report.text())
    return 0


def _jobs(args: argparse.Namespace) -> int:
    if args.jobs is None:
        return max(1, min(len(os.sched_getaffinity(0)), MAX_JOBS))
    if not 1 <= args.jobs <= MAX_JOBS:
        raise ValueError(f"--jobs must be a whole number from 1 to {MAX_JOBS}, got {args.jobs}")
    return args.jobs


def _csv_path(out: Path) -> Path:
    """``--csv`` checked before any grading: a file's path whose folder exists."""
    if out.is_symlink():
        raise ValueError(f"--csv {out} is a symbolic link: give the path of a regular file")
    if out.is_dir():
        raise ValueError(
            f"--csv {out} is a folder: give a file's path, such as {out / 'scores.csv'}"
        )
    if out.exists() and not out.is_file():
        raise ValueError(f"--csv {out} is not a regular file: give the path of one")
    if not out.resolve().parent.is_dir():
        raise ValueError(f"--csv {out}: the folder {out.resolve().parent} does not exist")
    return out.resolve()


def _grade_folder(args: argparse.Namespace, options: dict) -> int:
    from ppbook.assign.classroom import grade_all, rows, write_csv

    out, jobs = _csv_path(args.csv), _jobs(args)
    notebooks = sorted(args.path.glob("*.ipynb"))
    if not notebooks:
        raise ValueError(f"no notebooks (*.ipynb) in {args.path}")

    def done(path: Path, result) -> None:
        if isinstance(result, str):
            print(f"{clean(path.name)}: {result}", file=sys.stderr)
        else:
            print(result.text(), flush=True)

    results = grade_all(notebooks, jobs=jobs, done=done, **options)
    write_csv(out, *rows(notebooks, results))
    print(f"wrote the scores of {len(results)} notebooks to {out}")
    return 0
