"""What a student copy leaves out besides the solution regions (issue 16,
:mod:`ppbook.assign.clean`): Summary headings found as Markdown writes them, and
``assert_right`` self-checks turned into ``check`` without touching strings or comments."""

import subprocess
import sys
from pathlib import Path

import pytest

from ppbook.assign.clean import is_instructor_cell, is_summary, kept_metadata, student_checks


@pytest.mark.parametrize(
    "text",
    [
        "## Summary\n\nx",
        "# Summary:\nx",
        "### **Summary** ###\nx",
        "Summary\n=======\nx",
        "summary\n---",
    ],
)
def test_a_first_heading_summary_is_found_at_any_level_and_style(text):
    assert is_summary(text)


@pytest.mark.parametrize(
    "text",
    ["## Summary of the costs\nx", "Summary: see above.", "#Summary", "```\n# Summary\n```", ""],
)
def test_other_cells_are_no_summary(text):
    assert not is_summary(text)


def test_a_summary_heading_below_another_is_refused_with_its_line():
    with pytest.raises(ValueError, match="nb cell 4: a Summary heading on line 4 below"):
        is_summary("## 1.1 Why\n\nBecause.\n## Summary\nIt is.", "nb cell 4")


@pytest.mark.parametrize(
    ("source", "wanted"),
    [
        ("from ppbook.exercises import assert_right\n", "from ppbook.exercises import check\n"),
        ("from ppbook.exercises import assert_right, check", "from ppbook.exercises import check"),
        (
            "from ppbook.exercises import Solution, assert_right, hint",
            "from ppbook.exercises import Solution, check, hint",
        ),
        (
            "if True:\n    from ppbook.exercises import (\n"
            "        assert_right,\n        check,\n    )\n",
            "if True:\n    from ppbook.exercises import check\n",
        ),
        (
            "import ppbook.exercises as ex\nex.assert_right('A', f)",
            "import ppbook.exercises as ex\nex.check('A', f)",
        ),
        (
            "assert_right('A1', f)  # assert_right raises\nx = 'assert_right('",
            "check('A1', f)  # assert_right raises\nx = 'assert_right('",
        ),
        ("%time assert_right('A', f)", "%time check('A', f)"),
        ("check('A', f)\n", "check('A', f)\n"),
    ],
    ids=["import", "both", "sorted", "wrapped", "attribute", "strings", "magic", "none"],
)
def test_assert_right_becomes_check(source, wanted):
    assert student_checks(source) == wanted


def _ruff(source: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    path = tmp_path / "cell.py"
    path.write_text(source)
    command = [sys.executable, "-m", "ruff", *args, "--isolated", "--line-length", "100", path]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("count", [2, 12])
def test_a_rewritten_import_is_as_ruff_sorts_and_formats_it(tmp_path, count):
    names = ", ".join(["HINTS", "Solution", *(f"name_{i}" for i in range(count))])
    out = student_checks(f"from ppbook.exercises import {names}, assert_right\n")
    assert "check" in out and "assert_right" not in out
    assert _ruff(out, tmp_path, "check", "--select", "I").returncode == 0, out
    assert _ruff(out, tmp_path, "format", "--check").returncode == 0, out


def test_instructor_tags_and_kept_metadata():
    assert is_instructor_cell({"tags": ["a", "solution"]})
    assert is_instructor_cell({"tags": ["instructor"]})
    assert not is_instructor_cell({"tags": "solution"}) and not is_instructor_cell({})
    metadata = {"kernelspec": {"name": "python3"}, "widgets": {}, "ppbook": {"x": 1}}
    assert kept_metadata(metadata, "01_a") == {
        "kernelspec": {"name": "python3"},
        "ppbook": {"assignment": "01_a"},
    }
