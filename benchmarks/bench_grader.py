"""A class at once: 30 submissions of each assignment graded by ``ppbook assign grade FOLDER``
(issue 16).

Run: ``.venv/bin/python benchmarks/bench_grader.py [STEM ...] [--count 30] [--jobs 2]`` (not
a test; not run in CI). For each assignment (default: all four) it makes, in a temporary
folder, ``count`` submissions: a third right (the instructor version), a third wrong (the
instructor version with a last cell that redefines every function the questions ask for
to return None, and for assignment 3 writes that transport), a third stubs (the student
copy); then grades the folder with ``--jobs`` processes, as a course would, and prints the
wall time, the time per submission and the scores found, against the goal of 10 minutes
per assignment on two cores. Exits 1 if an assignment went over the goal, or if a right
copy scored less than full marks or a wrong one or a stub more than zero.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENTS = ROOT / "notebooks" / "assignments"
GOAL_SECONDS = 600.0
ENTRY = "import sys; from ppbook.cli import main; sys.exit(main(sys.argv[1:]))"


def _wrong_cell(notebook: dict, functions: list[str]) -> dict:
    lines = [f"def {name}(*args, **kwargs):\n    return None\n" for name in functions]
    code = json.dumps(notebook["cells"])
    if "write_transport(" in code:
        lines = [
            "def receive(runner, part):\n    return None\n",
            "def deliver(runner, part, result):\n    return None\n",
            "write_transport(receive, deliver)\n",
        ]
    return {"cell_type": "code", "metadata": {}, "outputs": [], "source": "\n".join(lines)}


def make_class(stem: str, count: int, folder: Path) -> dict[str, str]:
    """Write ``count`` submissions of ``stem`` into ``folder``; their kinds by file name."""
    from ppbook.assign.questions import questions_for

    functions = sorted({q.function for q in questions_for(stem) if not q.module})
    right = json.loads((ASSIGNMENTS / f"{stem}.ipynb").read_text())
    stub = json.loads((ASSIGNMENTS / "student" / f"{stem}.ipynb").read_text())
    wrong = {**right, "cells": [*right["cells"], _wrong_cell(right, functions)]}
    kinds = {}
    for number in range(count):
        kind = ("right", "wrong", "stub")[number % 3]
        name = f"student{number:02d}_{kind}.ipynb"
        content = {"right": right, "wrong": wrong, "stub": stub}[kind]
        content = {
            **content,
            "metadata": {**content.get("metadata", {}), "ppbook": {"assignment": stem}},
        }
        (folder / name).write_text(json.dumps(content))
        kinds[name] = kind
    return kinds


def bench(stem: str, count: int, jobs: int) -> tuple[float, list[str]]:
    """Grade a class of ``stem``; (seconds, problems found)."""
    with tempfile.TemporaryDirectory(prefix="ppbook-bench-") as temporary:
        folder = Path(temporary) / "class"
        folder.mkdir()
        kinds = make_class(stem, count, folder)
        out = Path(temporary) / "scores.csv"
        command = [sys.executable, "-c", ENTRY, "assign", "grade", str(folder)]
        command += ["--csv", str(out), "--jobs", str(jobs)]
        start = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        seconds = time.monotonic() - start
        if done.returncode != 0:
            return seconds, [f"the grader exited {done.returncode}: {done.stderr[-500:]}"]
        problems = []
        for row in csv.DictReader(out.open()):
            kind, score = kinds[row["notebook"]], float(row["score"] or 0)
            full = float(row["max_score"] or 0)
            if (kind == "right" and score < full) or (kind != "right" and score > 0):
                problems.append(f"{row['notebook']}: {score:g}/{full:g} ({row['notes'][:200]})")
        return seconds, problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stems", nargs="*", help="assignments (default: all four)")
    parser.add_argument("--count", type=int, default=30, help="submissions per assignment")
    parser.add_argument("--jobs", type=int, default=2, help="submissions graded at once")
    args = parser.parse_args()
    stems = args.stems or sorted(p.stem for p in ASSIGNMENTS.glob("*.ipynb"))
    failed = False
    for stem in stems:
        seconds, problems = bench(stem, args.count, args.jobs)
        over = seconds > GOAL_SECONDS
        failed |= over or bool(problems)
        print(
            f"{stem}: {args.count} submissions in {seconds:.0f} s with --jobs {args.jobs} "
            f"({seconds / args.count:.1f} s each; goal {GOAL_SECONDS:.0f} s"
            f"{', OVER' if over else ''})",
            flush=True,
        )
        for problem in problems:
            print(f"  unexpected score: {problem}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
