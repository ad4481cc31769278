"""``ppbook assign build``: student copies with nbgrader's solution regions replaced by stubs
that name the function still to do, outputs cleared, the same bytes every build; and (issue
16) without Summary cells, tagged hints, ``assert_right`` or metadata, never written through a
symlink."""

import ast
import json
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from ppbook.assign.build import build, student_code, student_text
from ppbook.assign.clean import SUMMARY_NOTE
from ppbook.cli import main

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "assign_fixtures" / "instructor"
REAL = ROOT / "notebooks" / "assignments"


def test_a_code_region_becomes_a_stub_naming_the_function_and_its_docstring():
    source = (
        "def f(x):\n"
        '    """Return twice x."""\n'
        "    y = 1\n"
        "    ### BEGIN SOLUTION\n"
        "    return 2 * x\n"
        "    ### END SOLUTION\n"
        "\n"
        "print(f)\n"
    )
    assert student_code(source) == (
        "def f(x):\n"
        '    """Return twice x."""\n'
        "    y = 1\n"
        '    raise NotImplementedError("write f: Return twice x.")\n'
        "\n"
        "print(f)\n"
    )


def test_a_region_in_a_nested_function_names_the_innermost_one():
    source = (
        "def outer():\n"
        "    def inner():\n"
        "        # BEGIN SOLUTION\n"
        "        return 1\n"
        "        # END SOLUTION\n"
        "    return inner\n"
    )
    assert '        raise NotImplementedError("write inner")' in student_code(source)


def test_a_long_stub_is_split_into_adjacent_literals_within_the_line_length():
    doc = "Return " + "a very long description " * 8
    source = f'def g():\n    """{doc}"""\n    ### BEGIN SOLUTION\n    pass\n    ### END SOLUTION'
    lines = student_code(source).splitlines()
    assert lines[2] == "    raise NotImplementedError("
    assert lines[-1] == "    )"
    literals = lines[3:-1]
    assert len(literals) == 3 and all(len(line) <= 100 for line in literals)
    assert "".join(ast.literal_eval(line.strip()) for line in literals) == f"write g: {doc.strip()}"


def test_a_markdown_region_becomes_your_answer_here():
    text = "Why?\n### BEGIN SOLUTION\nBecause.\n### END SOLUTION\nThe end."
    assert student_text(text) == "Why?\nYOUR ANSWER HERE\nThe end."


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def f():\n    ### BEGIN SOLUTION\n    pass\n", "has no END SOLUTION"),
        ("def f():\n    pass\n    ### END SOLUTION\n", "without a BEGIN"),
        ("### BEGIN SOLUTION\nx = 1\n### END SOLUTION\n", "not inside a function"),
    ],
)
def test_bad_markers_are_refused_with_the_line(source, message):
    with pytest.raises(ValueError, match=message):
        student_code(source, "nb cell 2")


def _instructor_with_outputs(folder: Path) -> Path:
    notebook = nbformat.read(FIXTURES / "00_fixture.ipynb", as_version=4)
    cell = notebook.cells[1]
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="9\n")]
    cell.execution_count = 3
    path = folder / "00_fixture.ipynb"
    nbformat.write(notebook, path)
    return path


def test_build_writes_student_copies_without_outputs_or_solutions(tmp_path):
    _instructor_with_outputs(tmp_path)
    assert build(tmp_path) == [tmp_path / "student" / "00_fixture.ipynb"]
    student = json.loads((tmp_path / "student" / "00_fixture.ipynb").read_text())
    code = [c for c in student["cells"] if c["cell_type"] == "code"]
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in code)
    text = "".join("".join(c["source"]) for c in student["cells"])
    assert "return x * x" not in text and "BEGIN SOLUTION" not in text
    assert 'raise NotImplementedError("write square: Return x squared.")' in text
    assert "YOUR ANSWER HERE" in text
    assert student["metadata"]["ppbook"]["assignment"] == "00_fixture"


def test_building_twice_gives_the_same_bytes_and_check_passes(tmp_path):
    _instructor_with_outputs(tmp_path)
    build(tmp_path)
    first = (tmp_path / "student" / "00_fixture.ipynb").read_bytes()
    assert build(tmp_path) == []
    assert (tmp_path / "student" / "00_fixture.ipynb").read_bytes() == first
    assert build(tmp_path, check=True) == []


def test_check_names_a_stale_missing_or_orphan_copy_and_writes_nothing(tmp_path, capsys):
    shutil.copy(FIXTURES / "00_fixture.ipynb", tmp_path)
    assert main(["assign", "build", "--check", "--source", str(tmp_path)]) == 1
    assert "00_fixture.ipynb" in capsys.readouterr().err
    assert not (tmp_path / "student").exists()
    assert main(["assign", "build", "--source", str(tmp_path)]) == 0
    assert main(["assign", "build", "--check", "--source", str(tmp_path)]) == 0
    stale = tmp_path / "student" / "00_fixture.ipynb"
    stale.write_text(stale.read_text().replace("squared", "cubed"))
    (tmp_path / "student" / "99_gone.ipynb").write_text("{}")
    assert main(["assign", "build", "--check", "--source", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "00_fixture.ipynb" in err and "99_gone.ipynb" in err


def test_build_of_a_missing_folder_is_a_one_line_error(tmp_path, capsys):
    assert main(["assign", "build", "--source", str(tmp_path / "nowhere")]) == 2
    assert "no assignments folder" in capsys.readouterr().err


FOLDERS = [FIXTURES] + ([REAL] if list(REAL.glob("*.ipynb")) else [])


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.parent.name + "/" + p.name)
def test_the_committed_student_copies_are_what_build_writes(folder):
    assert build(folder, check=True) == [], "run `ppbook assign build` and commit the copies"


# Issue 16: nothing in a student copy gives an answer away, and build never writes through
# a symlink.

SUMMARY = re.compile(r"^\s{0,3}#{1,6}\s+summary\s*$", re.IGNORECASE)


def _summaries(notebook: dict) -> list[str]:
    """The Markdown cells of ``notebook`` whose first line is a "Summary" heading."""
    return [
        "".join(c["source"])
        for c in notebook["cells"]
        if c["cell_type"] == "markdown" and SUMMARY.match("".join(c["source"]).split("\n")[0])
    ]


def _student_text(folder: Path, name: str) -> str:
    cells = json.loads((folder / "student" / name).read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells)


def test_the_summary_of_each_real_assignment_is_absent_from_its_student_copy(tmp_path):
    for path in REAL.glob("*.ipynb"):
        shutil.copy(path, tmp_path)
    build(tmp_path)
    found = 0
    for path in sorted(REAL.glob("*.ipynb")):
        instructor = json.loads(path.read_text())
        student = _student_text(tmp_path, path.name)
        for summary in _summaries(instructor):
            found += 1
            body = [line.strip() for line in summary.split("\n")[1:] if len(line.strip()) >= 20]
            assert body and not [line for line in body if line in student], path.name
        assert not _summaries(json.loads((tmp_path / "student" / path.name).read_text()))
        assert "## Summary" not in student
    assert found >= len(list(REAL.glob("*.ipynb"))), "an assignment without its Summary cell"


def _notebook(folder: Path, cells: list, name: str = "00_tagged.ipynb", **metadata) -> Path:
    notebook = nbformat.v4.new_notebook(cells=cells, metadata=metadata)
    for index, cell in enumerate(notebook.cells):
        cell.id = f"cell-{index}"
    nbformat.write(notebook, folder / name)
    return folder / name


def test_cells_tagged_solution_or_instructor_are_left_out_and_the_rest_kept(tmp_path):
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    _notebook(
        tmp_path,
        [
            md("# Tagged\nWrite `square`."),
            md("Hint: just return x times x, i.e. x * x.", metadata={"tags": ["solution"]}),
            code("EXPECTED_SQUARES = [0, 1, 4, 9]", metadata={"tags": ["x", "instructor"]}),
            md("Explain why.", metadata={"nbgrader": {"solution": True, "grade": True}}),
            md("Because squares are never negative.", metadata={"nbgrader": {"solution": True}}),
            md("## Summary\n\nSquaring multiplies a number by itself."),
        ],
    )
    build(tmp_path)
    text = _student_text(tmp_path, "00_tagged.ipynb")
    assert "x times x" not in text and "EXPECTED_SQUARES" not in text
    assert "never negative" not in text and "multiplies a number by itself" not in text
    assert "Write `square`." in text and "Explain why." not in text
    cells = json.loads((tmp_path / "student" / "00_tagged.ipynb").read_text())["cells"]
    assert [c["id"] for c in cells] == ["cell-0", "cell-3", "cell-4", "cell-5"]
    assert ["".join(c["source"]) for c in cells[1:3]] == ["YOUR ANSWER HERE"] * 2
    assert "".join(cells[3]["source"]) == SUMMARY_NOTE


def test_an_nbgrader_code_solution_cell_without_a_region_is_refused(tmp_path, capsys):
    cell = nbformat.v4.new_code_cell("x = 4", metadata={"nbgrader": {"solution": True}})
    _notebook(tmp_path, [cell])
    assert main(["assign", "build", "--source", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "00_tagged cell 1" in err and "BEGIN SOLUTION" in err and "\n" not in err


def test_assert_right_becomes_check_and_the_copy_is_byte_stable(tmp_path):
    cells = [
        nbformat.v4.new_code_cell("from ppbook.exercises import assert_right, solution"),
        nbformat.v4.new_code_cell(
            'def f():\n    """Return one."""\n    ### BEGIN SOLUTION\n    return 1\n'
            '    ### END SOLUTION\n\n\nassert_right("A0.1", f)  # assert_right fails here'
        ),
    ]
    _notebook(tmp_path, cells)
    build(tmp_path)
    copy = tmp_path / "student" / "00_tagged.ipynb"
    first = copy.read_bytes()
    code = [c.source for c in nbformat.read(copy, as_version=4).cells]
    assert code[0] == "from ppbook.exercises import check, solution"
    assert code[1].endswith('\ncheck("A0.1", f)  # assert_right fails here')
    assert build(tmp_path) == [] and copy.read_bytes() == first


def test_the_real_student_copies_call_check_where_the_instructor_versions_assert(tmp_path):
    for path in REAL.glob("*.ipynb"):
        shutil.copy(path, tmp_path)
    build(tmp_path)
    for path in sorted(REAL.glob("*.ipynb")):
        instructor = nbformat.read(path, as_version=4).cells
        student = nbformat.read(tmp_path / "student" / path.name, as_version=4).cells
        calls = re.compile(r"^(?:assert_right|check)\(", re.MULTILINE)
        asked = sum(len(calls.findall(c.source)) for c in instructor if c.cell_type == "code")
        code = "\n".join(c.source for c in student if c.cell_type == "code")
        assert "assert_right" not in code, path.name
        assert len(re.findall(r"^check\(", code, re.MULTILINE)) == asked, path.name


def test_only_the_metadata_a_notebook_needs_is_kept(tmp_path):
    cell = nbformat.v4.new_code_cell(
        "print(1)", metadata={"collapsed": True, "tags": ["keep"], "nbgrader": {"points": 3}}
    )
    cell.outputs = [
        nbformat.v4.new_output("execute_result", {"text/plain": "1"}, execution_count=4)
    ]
    kernel = {"name": "python3", "display_name": "Python 3", "language": "python"}
    extra = {"widgets": {"state": "the answer"}, "ppbook": {"assignment": "x", "key": "4.1"}}
    _notebook(tmp_path, [cell], kernelspec=kernel, language_info={"name": "python"}, **extra)
    build(tmp_path)
    student = json.loads((tmp_path / "student" / "00_tagged.ipynb").read_text())
    assert student["metadata"] == {
        "kernelspec": kernel,
        "language_info": {"name": "python"},
        "ppbook": {"assignment": "00_tagged"},
    }
    assert student["cells"][0]["metadata"] == {} and student["cells"][0]["outputs"] == []


def test_build_replaces_a_symlinked_student_copy_and_leaves_its_target_alone(tmp_path):
    source, outside = tmp_path / "source", tmp_path / "outside.ipynb"
    source.mkdir()
    shutil.copy(FIXTURES / "00_fixture.ipynb", source)
    outside.write_text("the instructor's own file")
    (source / "student").mkdir()
    (source / "student" / "00_fixture.ipynb").symlink_to(outside)
    assert build(source, check=True) == [source / "student" / "00_fixture.ipynb"]
    assert build(source) == [source / "student" / "00_fixture.ipynb"]
    assert outside.read_text() == "the instructor's own file"
    copy = source / "student" / "00_fixture.ipynb"
    assert not copy.is_symlink() and "write square" in copy.read_text()
    assert oct(copy.stat().st_mode & 0o777) == "0o644"
    assert sorted(p.name for p in (source / "student").iterdir()) == ["00_fixture.ipynb"]


def test_a_symlinked_student_folder_is_a_one_line_error_and_nothing_is_written(tmp_path, capsys):
    source, elsewhere = tmp_path / "source", tmp_path / "elsewhere"
    source.mkdir()
    elsewhere.mkdir()
    shutil.copy(FIXTURES / "00_fixture.ipynb", source)
    (source / "student").symlink_to(elsewhere, target_is_directory=True)
    assert main(["assign", "build", "--source", str(source)]) == 2
    err = capsys.readouterr().err.strip()
    assert "is a symlink" in err and "\n" not in err
    assert list(elsewhere.iterdir()) == []


def test_a_summary_heading_below_another_heading_is_refused(tmp_path):
    _notebook(tmp_path, [nbformat.v4.new_markdown_cell("## 1.1 Why\n\n## Summary\n\nBecause.")])
    with pytest.raises(ValueError, match=r"00_tagged cell 1: a Summary heading on line 3"):
        build(tmp_path)
