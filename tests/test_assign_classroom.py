"""``ppbook assign grade`` for a class: bad options are one-line errors, a folder is graded in
parallel into one CSV written for everyone, whatever goes wrong with one submission."""

import csv
import json
import os
import shutil
import time
from pathlib import Path

import pytest
from assign_fixtures.fixture_questions import QUESTIONS
from test_assign_trust import INSTRUCTOR, notebook

import ppbook.assign.grade
import ppbook.assign.questions
from ppbook.cli import main

STUDENT = INSTRUCTOR.parent / "student" / "00_fixture.ipynb"


@pytest.fixture
def fixture_questions(monkeypatch):
    monkeypatch.setattr(ppbook.assign.questions, "questions_for", lambda name: QUESTIONS)


@pytest.mark.parametrize("option", ["--timeout", "--cell-timeout"])
@pytest.mark.parametrize("value", ["inf", "nan", "-1", "0", "1e400", "-inf", "90000"])
def test_a_time_limit_out_of_range_is_a_one_line_error(option, value, capsys):
    assert main(["assign", "grade", str(INSTRUCTOR), f"{option}={value}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"{option} must be a number of seconds more than 0 and at most 86400" in err


def test_bad_csv_jobs_and_seed_are_one_line_errors(tmp_path, capsys):
    (tmp_path / "link.csv").symlink_to(tmp_path / "elsewhere.csv")
    folder = tmp_path / "class"
    folder.mkdir()
    for args, message in [
        (["--csv", str(tmp_path)], "is a folder: give a file's path, such as"),
        (["--csv", str(tmp_path / "link.csv")], "is a symbolic link"),
        (["--csv", str(tmp_path / "no" / "x.csv")], "does not exist"),
        (["--jobs", "0"], "--jobs must be a whole number from 1 to 64, got 0"),
        (["--seed", "-3"], "--seed must be a whole number >= 0, got -3"),
    ]:
        assert main(["assign", "grade", str(folder), *args]) == 2, args
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    assert not (tmp_path / "elsewhere.csv").exists()


def test_the_seed_option_reaches_the_json_report(fixture_questions, capsys):
    assert main(["assign", "grade", str(STUDENT), "--json", "--seed", "7"]) == 0
    assert json.loads(capsys.readouterr().out)["seed"] == 7


def _class(folder: Path) -> None:
    folder.mkdir()
    shutil.copy(INSTRUCTOR, folder / "ada.ipynb")
    shutil.copy(STUDENT, folder / "bob.ipynb")
    (folder / "carl.ipynb").symlink_to(INSTRUCTOR)
    (folder / "dan.ipynb").write_text(json.dumps({"cells": [["code"]], "metadata": {}}))
    (folder / "eve.ipynb").write_text("not json")
    shutil.copy(INSTRUCTOR, folder / "=HYPERLINK(1).ipynb")
    notebook(folder, name="fay.ipynb")  # the grader fails on it (below)
    notebook(folder, name="gus.ipynb")  # its grading process dies (below)


def test_a_folder_is_graded_in_parallel_and_every_submission_gets_its_row(
    tmp_path, monkeypatch, fixture_questions, capsys
):
    _class(tmp_path / "class")
    spans = tmp_path / "spans"
    spans.mkdir()
    real = ppbook.assign.grade.grade

    def recorded(path, **options):
        start = time.monotonic()
        if Path(path).name == "fay.ipynb":
            raise RuntimeError("a bug in the grader")
        if Path(path).name == "gus.ipynb":
            os._exit(3)
        try:
            return real(path, **options)
        finally:
            uid = options["sandbox"].uid
            (spans / Path(path).name).write_text(json.dumps([start, time.monotonic(), uid]))

    monkeypatch.setattr(ppbook.assign.grade, "grade", recorded)
    out = tmp_path / "scores.csv"
    argv = ["assign", "grade", str(tmp_path / "class"), "--csv", str(out), "--jobs", "2"]
    assert main([*argv, "--timeout", "30"]) == 0
    assert f"wrote the scores of 8 notebooks to {out}" in capsys.readouterr().out
    rows = {row["notebook"]: row for row in csv.DictReader(out.open())}
    assert sorted(rows) == sorted(
        ["'=HYPERLINK(1).ipynb", *(f"{n}.ipynb" for n in "ada bob carl dan eve fay gus".split())]
    )
    assert {n: rows[n]["score"] for n in ("ada.ipynb", "bob.ipynb", "'=HYPERLINK(1).ipynb")} == {
        "ada.ipynb": "5.0",
        "bob.ipynb": "0.0",
        "'=HYPERLINK(1).ipynb": "5.0",
    }
    notes = {name: rows[name]["notes"] for name in rows}
    assert notes["carl.ipynb"].startswith("not graded: carl.ipynb is a symbolic link")
    assert "dan.ipynb is not a well-formed notebook: cell 1 is a list" in notes["dan.ipynb"]
    assert "eve.ipynb is not a notebook (JSON)" in notes["eve.ipynb"]
    assert notes["fay.ipynb"] == "not graded: the grader failed: RuntimeError: a bug in the grader"
    assert notes["gus.ipynb"] == "not graded: the grading process ended (exit status 3)"
    assert all(rows[n]["score"] == "0" for n in ("carl.ipynb", "fay.ipynb", "gus.ipynb"))
    assert rows["ada.ipynb"]["seed"].isdigit() and rows["bob.ipynb"]["1"] == "0.0"
    spans = [json.loads(p.read_text()) for p in spans.iterdir()]
    at_once = max(sum(s[0] <= t[0] < s[1] for s in spans) for t in spans)
    assert at_once == 2  # two graded at once, never more
    for a in spans:
        for b in spans:
            if a is not b and a[0] <= b[0] < a[1] and a[2] is not None:
                assert a[2] != b[2]  # each its own uid
