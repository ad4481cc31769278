"""Questions the grader measures itself (``Question.run``) and questions asked on cases drawn
at grading time (``Question.variant``, the report's seed)."""

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from assign_fixtures.fixture_questions import QUESTIONS
from test_assign_trust import FAST, notebook

from ppbook.assign import kernel, sandbox
from ppbook.assign.grade import grade
from ppbook.assign.kernel import Outcome
from ppbook.assign.questions import Question


def _mode(mode: str) -> str:
    try:
        sandbox.choose(mode)
    except ValueError as exc:
        pytest.skip(f"{mode} does not work on this machine: {exc}")
    return mode


def _equals(want):
    def score(data):
        return (1.0, "right") if data == want else (0.0, f"got {data!r}, not {want!r}")

    return score


MEASURED = [
    QUESTIONS[0],
    Question("m1", 1, "", _equals(7), timeout=5, run="ppbook.fake_a"),
    Question("m2", 1, "", _equals(8), timeout=9, run="ppbook.fake_a"),
    Question("m3", 1, "", _equals(0), run="ppbook.fake_b"),
]
RECORDS = {
    "ppbook.fake_a": {"ok": True, "value": 7},
    "ppbook.fake_b": {
        "ok": False,
        "type": "NotImplementedError",
        "message": "write receive: what part needs",
        "function": "receive",
    },
}


@pytest.mark.parametrize("mode", sandbox.MODES)
def test_each_module_is_measured_once_outside_the_kernel_and_scores_its_questions(
    tmp_path, monkeypatch, mode
):
    calls = []

    def measured(walls, work, scratch, limits, argv, timeout):
        """Stands in for the walled process: writes the module's record where asked."""
        calls.append((argv[:3], argv[3], timeout, sorted(p.name for p in Path(work).iterdir())))
        assert not Path(argv[4]).is_relative_to(work)
        Path(argv[4]).write_text(json.dumps(RECORDS[argv[3]]))
        return Outcome("ok")

    monkeypatch.setattr(kernel, "run_walled", measured)
    path = notebook(tmp_path, "open('written.py', 'w').write('X = 1')")
    report = grade(path, isolation=_mode(mode), **{**FAST, "questions": MEASURED})
    assert [(q.name, q.score, q.feedback) for q in report.questions] == [
        ("1", 2, "square is right for -3..3"),
        ("m1", 1, "right"),
        ("m2", 0, "got 7, not 8"),
        ("m3", 0, "receive is still to do: what part needs"),
    ]
    assert [call[:3] for call in calls] == [
        ([sys.executable, "-I", "-m"], "ppbook.fake_a", 9),
        ([sys.executable, "-I", "-m"], "ppbook.fake_b", 60),
    ]
    assert all("written.py" in call[3] for call in calls)  # what the notebook wrote


@pytest.mark.parametrize("mode", sandbox.MODES)
def test_a_measurement_that_fails_reads_as_one_line_in_every_mode(tmp_path, mode):
    question = Question("m", 1, "", _equals(1), timeout=30, run="ppbook.assign.no_such_module")
    report = grade(notebook(tmp_path), isolation=_mode(mode), **{**FAST, "questions": [question]})
    feedback = report.questions[0].feedback
    assert report.score == 0
    assert feedback.startswith("no answer came back from the measurement ppbook.assign.no_such")
    assert "No module named ppbook.assign.no_such_module" in feedback, feedback


def _drawn(rng):
    cases = [rng.randrange(10, 10**6) for _ in range(5)]
    return replace(
        DRAWN,
        collect=f"[square(n) for n in {cases}]",
        score=_equals([n * n for n in cases]),
        variant=None,
    )


DRAWN = Question("1", 1, "[square(n) for n in range(-3, 4)]", _equals([9, 4, 1, 0, 1, 4, 9]))
DRAWN = replace(DRAWN, variant=_drawn)
TABLE = "def square(x):\n    return {-3: 9, -2: 4, -1: 1, 0: 0, 1: 1, 2: 4, 3: 9}[x]"


def test_a_question_with_a_variant_is_asked_on_cases_drawn_from_the_reported_seed(tmp_path):
    path = notebook(tmp_path, TABLE)
    assert DRAWN.score([9, 4, 1, 0, 1, 4, 9])[0] == 1  # the table answers the cases shown
    report = grade(path, **{**FAST, "questions": [DRAWN], "seed": 42})
    assert report.score == 0
    assert report.questions[0].feedback.startswith("square raised KeyError: ")
    right = grade(
        notebook(tmp_path, name="right.ipynb"), **{**FAST, "questions": [DRAWN], "seed": 42}
    )
    assert (right.score, right.seed, right.as_dict()["seed"]) == (1, 42, 42)
    assert "  seed: 42 (grade again with --seed 42)" in right.text().splitlines()
    again = grade(path, **{**FAST, "questions": [DRAWN], "seed": 42})
    assert again.questions[0].feedback == report.questions[0].feedback  # the same cases
    drawn = {grade(path, **{**FAST, "questions": [DRAWN]}).seed for _ in range(2)}
    assert len(drawn) == 2 and None not in drawn  # from os.urandom
