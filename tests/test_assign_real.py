"""The real assignments end to end (``notebooks/assignments/``), in every isolation mode this
machine offers: every instructor version scores full marks and every unchanged student copy
scores zero with one line per question that names the function still to do. A mode that does
not work here is skipped with the sandbox's own reason (bubblewrap missing, say)."""

from functools import cache
from pathlib import Path

import pytest

from ppbook.assign import sandbox
from ppbook.assign.grade import grade

ASSIGNMENTS = Path(__file__).resolve().parents[1] / "notebooks" / "assignments"
INSTRUCTOR = sorted(ASSIGNMENTS.glob("*.ipynb"))
STUDENT = sorted((ASSIGNMENTS / "student").glob("*.ipynb"))


@cache
def _why_not(mode: str) -> str | None:
    """None when ``mode`` works here, else the sandbox's one line saying why not."""
    try:
        sandbox.choose(mode)
    except ValueError as error:
        return str(error)
    return None


def _graded(path: Path, mode: str):
    why = _why_not(mode)
    if why is not None:
        pytest.skip(f"isolation {mode} does not work here: {why}")
    report = grade(path, isolation=mode)
    assert report.questions, f"{path.name} has no questions"
    return report


@pytest.mark.parametrize("mode", sandbox.MODES)
@pytest.mark.parametrize("path", INSTRUCTOR, ids=lambda p: p.stem)
def test_the_instructor_version_scores_full_marks(path, mode):
    report = _graded(path, mode)
    assert report.score == report.max_score, report.text()


@pytest.mark.parametrize("mode", sandbox.MODES)
@pytest.mark.parametrize("path", STUDENT, ids=lambda p: p.stem)
def test_the_student_copy_scores_zero_with_one_helpful_line_per_question(path, mode):
    report = _graded(path, mode)
    assert report.score == 0, report.text()
    for question in report.questions:
        assert "\n" not in question.feedback
        assert "is still to do" in question.feedback, report.text()


def test_every_assignment_has_its_student_copy():
    assert len(INSTRUCTOR) == 4
    assert [p.name for p in STUDENT] == [p.name for p in INSTRUCTOR]


def test_a_root_linux_machine_offers_at_least_two_isolating_modes():
    """As root on Linux, unshare or bubblewrap and the unprivileged-user mode are what CI and
    an instructor's server have; none of them working would leave only 'none'."""
    working = [mode for mode in sandbox.MODES if _why_not(mode) is None]
    assert "none" in working
    assert len([m for m in working if m != "none"]) >= 1, working
