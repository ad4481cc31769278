"""The grader cannot be fooled or broken by what a submission holds (issue 16): answers are
data (NaN, infinities and 5,000-digit integers refused), reports cannot be forged (control
characters, escapes, new lines, spreadsheet formulas), links are refused, a malformed
notebook or a kernel that sends garbage costs that submission only, a forbidden call costs
the assignment's marks. Each hostile fixture is graded in every isolation mode this
machine offers (modes that do not work here are skipped, saying so).
"""

import json
from pathlib import Path

import pytest
from assign_fixtures.fixture_questions import QUESTIONS

from ppbook.assign import sandbox
from ppbook.assign.answers import read_answer
from ppbook.assign.grade import grade
from ppbook.assign.report import QuestionResult, Report, clean, csv_cell

FIXTURES = Path(__file__).resolve().parent / "assign_fixtures"
INSTRUCTOR = FIXTURES / "instructor" / "00_fixture.ipynb"
FAST = {"questions": QUESTIONS, "timeout": 30, "cell_timeout": 10, "forbidden": ()}
SOLUTION = json.loads(INSTRUCTOR.read_text())["cells"]


def _mode(mode: str) -> str:
    try:
        sandbox.choose(mode)
    except ValueError as exc:
        pytest.skip(f"{mode} does not work on this machine: {exc}")
    return mode


def notebook(folder: Path, *extra: str, name: str = "sub.ipynb", cells=None) -> Path:
    """The fixture's solution with ``extra`` code cells after it."""
    cells = list(SOLUTION if cells is None else cells)
    cells += [{"cell_type": "code", "metadata": {}, "source": s, "outputs": []} for s in extra]
    path = folder / name
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4}))
    return path


@pytest.mark.parametrize("mode", sandbox.MODES)
def test_nan_infinities_and_huge_integers_are_refused_as_answers(tmp_path, mode):
    path = notebook(
        tmp_path,
        "def square(x):\n    return float('nan')",
        "def hypotenuse(a, b):\n    return 10 ** 5000 if a == 3 else 1e308 * 10",
    )
    report = grade(path, isolation=_mode(mode), **FAST)
    assert [q.score for q in report.questions] == [0, 0]
    assert (
        report.questions[0].feedback == "the answer holds NaN or an infinity: give finite numbers"
    )
    assert report.questions[1].feedback == "the answer holds an integer of over 4300 digits"


@pytest.mark.parametrize(
    ("text", "refusal"),
    [
        ('{"ok": true, "value": [1e400]}', "NaN or an infinity"),
        ('{"ok": true, "value": -Infinity}', "NaN or an infinity"),
        ('{"ok": true, "value": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
        ('{"ok": true, "value": ' + "9" * 5000 + "}", "over 4300 digits"),
    ],
)
def test_an_answer_record_that_is_no_plain_data_is_one_line_of_refusal(tmp_path, text, refusal):
    (tmp_path / "answer.json").write_text(text)
    assert refusal in read_answer(tmp_path / "answer.json")["refused"]
    (tmp_path / "link.json").symlink_to(tmp_path / "answer.json")
    assert read_answer(tmp_path / "link.json") is None


FORGE = "ok\r\n  2  3/3  hypotenuse(3, 4) = 5\x1b[2J\x1b]0;title\x07\u202e\x85\x9b31m\u2028end"


@pytest.mark.parametrize("mode", sandbox.MODES)
def test_a_submission_cannot_forge_a_line_of_the_report_or_send_escapes(tmp_path, mode):
    path = notebook(
        tmp_path,
        f"Forged = type({FORGE!r}, (Exception,), {{}})\n"
        f"def square(x):\n    raise Forged({FORGE!r} * 3)",
        "def hypotenuse(a, b):\n    return (a * a + b * b) ** 0.5",
        "# \x1b[2J\x1b]0;title\x07\u202e\x9b31m forged\nwhile True:\n    pass",
        name="\x1b[31m=cmd\u202e.ipynb",
    )
    report = grade(path, isolation=_mode(mode), **{**FAST, "cell_timeout": 2})
    text = report.text()
    assert len(text.splitlines()) == 1 + 2 + len(report.notes) + 2  # title, questions, ...
    assert report.questions[0].score == 0 and report.questions[1].score == 3
    assert report.notes == ["cell 7 (`# forged`) ran out of time (2 s) and was interrupted"]
    for field in [*text.splitlines(), report.questions[0].feedback, report.notebook]:
        assert not any(ch in field for ch in "\x1b\r\n\u202e\x85\x9b\u2028\x07"), field
    assert len(report.questions[0].feedback) <= 200
    assert report.notebook == "=cmd .ipynb"
    assert csv_cell(report.notebook) == "'=cmd .ipynb"


def test_clean_and_csv_cell_by_hand():
    assert clean("a\x1b[1;31mred\x1b[0m\tb\r\nc\u200f\u202ed", 40) == "a red b c d"
    assert clean("x" * 300) == "x" * 197 + "..."
    assert [csv_cell(v) for v in ("=1+1", "+1", "-2", "@SUM(A1)", "ok", 3.5)] == [
        "'=1+1",
        "'+1",
        "'-2",
        "'@SUM(A1)",
        "ok",
        3.5,
    ]
    made = Report("n\nb", "a", [QuestionResult("1\n", float("nan"), 2, "x\ny")], "iso", ["a\rb"])
    assert (made.notebook, made.notes, made.score) == ("n b", ["a b"], 0.0)
    assert made.questions[0].feedback == "x y"
    assert made.as_dict()["seed"] is None and "seed" not in made.text()


@pytest.mark.parametrize("mode", sandbox.MODES)
def test_a_link_inside_the_folder_is_not_copied_and_the_report_says_so(tmp_path, mode):
    secret = tmp_path / "solutions.py"
    secret.write_text("ANSWER = 9\n")
    folder = tmp_path / "alice"
    folder.mkdir()
    (folder / "solutions.py").symlink_to(secret)
    path = notebook(
        folder,
        "import os\nassert not os.path.exists('solutions.py')",
        "def square(x):\n    from solutions import ANSWER\n    return ANSWER",
    )
    report = grade(path, isolation=_mode(mode), **FAST)
    assert (
        report.questions[0].feedback
        == "square raised ModuleNotFoundError: No module named 'solutions'"
    )
    assert report.notes == [
        "solutions.py is a symbolic link: not copied (hand in files, not links)"
    ]


def test_a_submission_that_is_a_link_is_refused_with_one_line(tmp_path):
    (tmp_path / "alice.ipynb").symlink_to(INSTRUCTOR)
    with pytest.raises(ValueError, match=r"^alice.ipynb is a symbolic link, not a notebook"):
        grade(tmp_path / "alice.ipynb", **FAST)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ({"cells": [], "metadata": []}, "its metadata is a list, not an object"),
        ({"cells": [], "metadata": {"ppbook": "x"}}, "its metadata.ppbook is a str"),
        ({"cells": [], "metadata": {"ppbook": {"assignment": 7}}}, "assignment is 7, not a name"),
        ({"cells": [["code"]], "metadata": {}}, "cell 1 is a list, not an object"),
        ({"cells": [{"cell_type": "code", "source": 5}]}, "cell 1's source is a int"),
        ({"cells": [{"cell_type": "code", "source": ["a", 1]}]}, "cell 1's source is a list"),
        ({"cells": [{"cell_type": ["code"], "source": ""}]}, "cell 1's cell_type is not text"),
    ],
)
def test_a_malformed_notebook_is_a_one_line_refusal(tmp_path, content, problem):
    path = tmp_path / "bad.ipynb"
    path.write_text(json.dumps(content))
    with pytest.raises(ValueError, match="bad.ipynb is not a well-formed notebook: ") as error:
        grade(path, **FAST)
    assert problem in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("mode", sandbox.MODES)
def test_a_kernel_that_sends_garbage_costs_nothing_but_its_own_noise(tmp_path, mode):
    garbage = (
        "k = get_ipython().kernel\nparent = k.get_parent('shell')\n"
        "k.session.send(k.iopub_socket, 'status', content=['garbage'], parent=parent)\n"
        "k.session.send(k.iopub_socket, 'error', content='garbage', parent=parent)\n"
        "k.session.send(k.iopub_socket, 'stream', content={}, parent=['bad'])\n"
        "k.iopub_socket.send_multipart([b'junk', b'more'])"
    )
    report = grade(notebook(tmp_path, garbage), isolation=_mode(mode), **FAST)
    assert report.score == 5, report.text()


def test_a_grader_failure_inside_the_kernel_phase_is_a_note_and_zero(tmp_path, monkeypatch):
    from ppbook.assign import kernel

    def broken(self, code, timeout):
        raise TypeError("a message the grader cannot read")

    monkeypatch.setattr(kernel.Kernel, "run", broken)
    report = grade(notebook(tmp_path), **FAST)
    assert report.score == 0
    assert report.notes == ["the kernel failed: TypeError: a message the grader cannot read"]
    assert report.questions[0].feedback == (
        "not graded: the kernel failed: TypeError: a message the grader cannot read"
    )


@pytest.mark.parametrize("mode", sandbox.MODES)
def test_a_forbidden_call_costs_every_question_and_the_notebook_is_not_run(tmp_path, mode):
    path = notebook(tmp_path, "import ppbook.schedules as s\nopen('ran', 'w')", name="02_x.ipynb")
    (tmp_path / "helper.py").write_text("from ppbook import schedules\nschedules.gpipe(2, 4)\n")
    report = grade(path, isolation=_mode(mode), **{**FAST, "forbidden": ("ppbook.schedules",)})
    line = "uses ppbook.schedules, which assignment 2 asks you to write yourself"
    assert [(q.score, q.feedback) for q in report.questions] == [(0, line), (0, line)]
    assert report.notes == ["cell 5 uses ppbook.schedules", "helper.py uses ppbook.schedules.gpipe"]
    assert not (tmp_path / "ran").exists()
