"""``ppbook assign``: course assignments (issue 10).

- ``ppbook assign build [--check] [--source DIR]``: write the student copies
  (:func:`ppbook.assign.build.build`); ``--check`` writes nothing and exits 1 naming every
  student copy that is not what ``build`` would write.
- ``ppbook assign grade SUBMISSION.ipynb [--json] [--timeout S] [--cell-timeout S]``: run the
  submission in a fresh sandboxed kernel and print a score per question, the total and the
  isolation in force (:func:`ppbook.assign.grade.grade`); ``--json`` prints one object.
- ``ppbook assign grade FOLDER [--csv OUT]``: grade every notebook in FOLDER and write one CSV
  of scores (default ``scores.csv`` in the current folder) and say where.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``ppbook assign`` on ``subparsers``."""
    parser = subparsers.add_parser(
        "assign",
        help="course assignments: build student copies, grade submissions",
        description="Build the student copies of the assignments, or grade submissions.",
    )
    sub = parser.add_subparsers(dest="action", required=True, metavar="{build,grade}")
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
    grade.set_defaults(handler=_grade)
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


def _limits(args: argparse.Namespace) -> dict:
    from ppbook.assign.grade import DEFAULT_CELL_TIMEOUT, DEFAULT_TIMEOUT

    timeout = DEFAULT_TIMEOUT if args.timeout is None else args.timeout
    cell = DEFAULT_CELL_TIMEOUT if args.cell_timeout is None else args.cell_timeout
    return {"timeout": timeout, "cell_timeout": min(cell, timeout), "isolation": args.isolation}


def _grade(args: argparse.Namespace) -> int:
    from ppbook.assign.grade import grade

    if args.path.is_dir():
        return _grade_folder(args)
    report = grade(args.path, **_limits(args))
    print(json.dumps(report.as_dict(), indent=1) if args.json else report.text())
    return 0


def _grade_folder(args: argparse.Namespace) -> int:
    from ppbook.assign.grade import grade

    notebooks = sorted(args.path.glob("*.ipynb"))
    if not notebooks:
        raise ValueError(f"no notebooks (*.ipynb) in {args.path}")
    rows, names = [], []
    for path in notebooks:
        try:
            report = grade(path, **_limits(args))
        except ValueError as exc:  # one bad notebook does not stop the others
            rows.append({"notebook": path.name, "score": 0, "max_score": "", "notes": str(exc)})
            print(f"{path.name}: not graded: {exc}", file=sys.stderr)
            continue
        row = {"notebook": path.name, "assignment": report.assignment, "score": report.score}
        row |= {"max_score": report.max_score, "notes": " | ".join(report.notes)}
        for q in report.questions:
            row[q.name] = q.score
            row[f"{q.name} feedback"] = q.feedback
            if q.name not in names:
                names.append(q.name)
        rows.append(row)
        print(report.text())
    columns = ["notebook", "assignment", "score", "max_score"]
    columns += [c for n in names for c in (n, f"{n} feedback")] + ["notes"]
    out = args.csv.resolve()
    with out.open("w", newline="", encoding="utf-8") as file:
        writer = csv.DictWriter(file, fieldnames=columns, restval="")
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote the scores of {len(rows)} notebooks to {out}")
    return 0
