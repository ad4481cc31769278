"""``ppbook assign build``: student copies with nbgrader's solution regions replaced by stubs
that name the function still to do, outputs cleared, the same bytes every build."""

import ast
import json
import shutil
from pathlib import Path

import nbformat
import pytest

from ppbook.assign.build import build, student_code, student_text
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
