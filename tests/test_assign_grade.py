"""``ppbook assign grade``: a fresh sandboxed kernel per submission, one line of feedback per
question that says what to do next, JSON and CSV reports, and the isolation in force."""

import csv
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from assign_fixtures.fixture_questions import QUESTIONS

import ppbook.assign.questions
from ppbook.assign import sandbox
from ppbook.assign.grade import explain, grade
from ppbook.cli import main

FIXTURES = Path(__file__).resolve().parent / "assign_fixtures"
INSTRUCTOR = FIXTURES / "instructor" / "00_fixture.ipynb"
STUDENT = FIXTURES / "instructor" / "student" / "00_fixture.ipynb"
FAST = {"questions": QUESTIONS, "timeout": 30, "cell_timeout": 10}


def _uid_free(isolation: str) -> str:
    """The isolation line without its sandbox uid, which differs between graders at once."""
    return re.sub(r"uid \d+", "uid N", isolation)


def test_the_instructor_version_scores_full_marks():
    report = grade(INSTRUCTOR, **FAST)
    assert (report.score, report.max_score) == (5, 5)
    assert [q.feedback for q in report.questions] == [
        "square is right for -3..3",
        "hypotenuse(3, 4) = 5",
    ]
    assert _uid_free(report.isolation) == _uid_free(sandbox.choose().describe())


def test_the_student_copy_scores_zero_with_one_line_per_question_naming_the_stub():
    report = grade(STUDENT, **FAST)
    assert report.score == 0
    assert [q.feedback for q in report.questions] == [
        "square is still to do: Return x squared.",
        "hypotenuse is still to do: Return the hypotenuse of a right triangle.",
    ]


def test_wrong_answers_get_the_questions_feedback_and_an_exception_one_line():
    report = grade(FIXTURES / "submissions" / "wrong.ipynb", **FAST)
    assert report.score == 0
    assert [q.feedback for q in report.questions] == [
        "square(-3) should be 9, got -6",
        "hypotenuse raised ValueError: legs must be positive",
    ]


def test_a_cell_that_runs_out_of_time_is_named_by_its_first_line_and_the_rest_still_runs():
    report = grade(FIXTURES / "submissions" / "slow.ipynb", questions=QUESTIONS, cell_timeout=2)
    assert report.notes == ["cell 2 (`while True:`) ran out of time (2 s) and was interrupted"]
    assert [q.score for q in report.questions] == [2, 0]  # square was defined after the loop
    assert report.questions[1].feedback == "hypotenuse ran out of time (5 s)"


@pytest.mark.parametrize("mode", sandbox.MODES)
def test_every_isolation_that_works_here_grades_the_same(mode):
    try:
        chosen = sandbox.choose(mode)
    except ValueError:
        pytest.skip(f"{mode} does not work on this machine")
    report = grade(INSTRUCTOR, isolation=mode, **FAST)
    assert report.score == 5
    assert _uid_free(report.isolation) == _uid_free(chosen.describe())


@pytest.mark.parametrize(
    ("record", "line"),
    [
        (
            {"type": "NotImplementedError", "message": "write f: do it", "function": "f"},
            "f is still to do: do it",
        ),
        (
            {"type": "NotImplementedError", "message": "write f", "function": "g"},
            "f is still to do",
        ),
        ({"type": "NotImplementedError", "message": "", "function": "g"}, "g is still to do"),
        (
            {"type": "KeyError", "message": "'x'\n  more", "function": "h"},
            "h raised KeyError: 'x' more",
        ),
        (
            {"type": "NameError", "message": "name 'f' is not defined", "function": None},
            "NameError: name 'f' is not defined",
        ),
    ],
)
def test_an_exception_becomes_one_line(record, line):
    assert explain(record) == line


def _cli_questions(monkeypatch):
    monkeypatch.setattr(ppbook.assign.questions, "questions_for", lambda name: QUESTIONS)


def test_json_output_has_the_agreed_keys(monkeypatch, capsys):
    _cli_questions(monkeypatch)
    assert main(["assign", "grade", str(STUDENT), "--json", "--timeout", "30"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"score", "max_score", "questions", "isolation"} <= set(out)
    assert (out["score"], out["max_score"]) == (0, 5)
    assert set(out["questions"][0]) == {"name", "score", "max_score", "feedback"}


def test_a_folder_is_graded_into_one_csv_and_the_command_says_where(tmp_path, monkeypatch, capsys):
    _cli_questions(monkeypatch)
    shutil.copy(INSTRUCTOR, tmp_path / "ada.ipynb")
    shutil.copy(STUDENT, tmp_path / "bob.ipynb")
    monkeypatch.chdir(tmp_path)
    assert main(["assign", "grade", str(tmp_path), "--timeout", "30"]) == 0
    out = tmp_path / "scores.csv"
    assert f"to {out}" in capsys.readouterr().out
    rows = {row["notebook"]: row for row in csv.DictReader(out.open())}
    assert (rows["ada.ipynb"]["score"], rows["bob.ipynb"]["score"]) == ("5.0", "0.0")
    assert rows["bob.ipynb"]["1 feedback"] == "square is still to do: Return x squared."


def test_a_file_that_is_not_a_notebook_is_a_one_line_error(tmp_path, capsys):
    (tmp_path / "essay.ipynb").write_text("not json")
    assert main(["assign", "grade", str(tmp_path / "essay.ipynb")]) == 2
    assert "essay.ipynb is not a notebook" in capsys.readouterr().err
    with pytest.raises(ValueError, match="an .ipynb file"):
        grade(tmp_path / "essay.txt")


def test_a_fifo_beside_the_submission_does_not_block_the_copy(tmp_path):
    shutil.copy(INSTRUCTOR, tmp_path / "ada.ipynb")
    os.mkfifo(tmp_path / "pipe")
    assert grade(tmp_path / "ada.ipynb", **FAST).score == 5
