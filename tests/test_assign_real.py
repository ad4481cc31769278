"""The real assignments end to end (``notebooks/assignments/``): every instructor version
scores full marks and every unchanged student copy scores zero with one line per question
that names the function still to do."""

from pathlib import Path

import pytest

from ppbook.assign.grade import grade

ASSIGNMENTS = Path(__file__).resolve().parents[1] / "notebooks" / "assignments"
INSTRUCTOR = sorted(ASSIGNMENTS.glob("*.ipynb"))
STUDENT = sorted((ASSIGNMENTS / "student").glob("*.ipynb"))

pytestmark = pytest.mark.skipif(not INSTRUCTOR, reason="no assignments yet")


@pytest.mark.parametrize("path", INSTRUCTOR, ids=lambda p: p.stem)
def test_the_instructor_version_scores_full_marks(path):
    report = grade(path)
    assert report.questions, f"{path.name} has no questions"
    assert report.score == report.max_score, report.text()


@pytest.mark.parametrize("path", STUDENT, ids=lambda p: p.stem)
def test_the_student_copy_scores_zero_with_one_helpful_line_per_question(path):
    report = grade(path)
    assert report.questions, f"{path.name} has no questions"
    assert report.score == 0, report.text()
    for question in report.questions:
        assert "\n" not in question.feedback
        assert "is still to do" in question.feedback, report.text()


def test_every_assignment_has_its_student_copy():
    assert [p.name for p in STUDENT] == [p.name for p in INSTRUCTOR]
