"""``ppbook assign release OUT`` (issue 16): a folder and a zip for students that hold the
student copies and a README, and nothing of the solutions. The solution text is found here
independently of the builder: every line of at least 20 characters between nbgrader's
markers, of a Summary cell or of a tagged hint, that the student's visible text lacks."""

import hashlib
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from ppbook.assign.release import release
from ppbook.cli import main

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "notebooks" / "assignments"
BEGIN = re.compile(r"^\s*#+\s*BEGIN SOLUTION\s*$")
END = re.compile(r"^\s*#+\s*END SOLUTION\s*$")
SUMMARY = re.compile(r"^\s{0,3}#{1,6}\s+summary\s*$", re.IGNORECASE)
TAGS = {"solution", "instructor"}


def hidden_and_visible(notebook: dict) -> tuple[set[str], set[str]]:
    """(lines a student must not see, lines a student sees), each stripped."""
    hidden, visible = set(), set()
    for cell in notebook["cells"]:
        lines = "".join(cell["source"]).split("\n")
        whole = set(cell.get("metadata", {}).get("tags", [])) & TAGS or (
            cell["cell_type"] == "markdown" and SUMMARY.match(lines[0])
        )
        inside = False
        for line in lines:
            if BEGIN.match(line) or END.match(line):
                inside = bool(BEGIN.match(line))
                continue
            (hidden if whole or inside else visible).add(line.strip())
    return hidden, visible


def secrets(folder: Path) -> dict[str, str]:
    """Each line (>= 20 characters) that only the instructor's notebooks in ``folder`` show,
    with the notebook it comes from."""
    found = {}
    for path in sorted(folder.glob("*.ipynb")):
        hidden, visible = hidden_and_visible(json.loads(path.read_text(encoding="utf-8")))
        found |= {line: path.name for line in hidden - visible if len(line) >= 20}
    return found


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def searchable(data: bytes) -> str:
    """A file's text, and for JSON (a notebook) every string in it joined as written."""
    text = data.decode("utf-8", errors="replace")
    try:
        return text + "\n" + "".join(_strings(json.loads(text)))
    except json.JSONDecodeError:
        return text


def released(folder: Path, archive: Path) -> dict[str, bytes]:
    """Every file of the release, the folder's and the zip's, by a name saying where."""
    files = {f"{p.relative_to(folder)}": p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    with zipfile.ZipFile(archive) as zipped:
        files |= {f"zip:{name}": zipped.read(name) for name in zipped.namelist()}
    return files


def leaks(files: dict[str, bytes], needles) -> list[str]:
    return [
        f"{needle!r} in {name}"
        for name, data in files.items()
        for needle in needles
        if needle in searchable(data)
    ]


def test_a_release_of_the_real_assignments_holds_no_solution_text(tmp_path):
    folder, archive = release(tmp_path / "release", REAL)
    files = released(folder, archive)
    assert sorted(n for n in files if not n.startswith("zip:")) == sorted(
        [p.name for p in REAL.glob("*.ipynb")] + ["README.md"]
    )
    hidden = secrets(REAL)
    instructor = {p.name: p.read_bytes() for p in REAL.glob("*.ipynb")}
    # every instructor notebook has secrets, and the search finds each where it is
    assert {hidden[line] for line in hidden} == set(instructor)
    assert all(any(line in searchable(d) for d in instructor.values()) for line in hidden)
    assert not leaks(files, hidden)
    names = [str(REAL), "notebooks/assignments/", "BEGIN SOLUTION", "END SOLUTION"]
    assert not leaks(files, names)
    assert not set(instructor.values()) & set(files.values())


def test_each_released_notebook_has_no_outputs_and_only_the_metadata_it_needs(tmp_path):
    folder, _ = release(tmp_path / "release", REAL)
    for path in sorted(folder.glob("*.ipynb")):
        notebook = json.loads(path.read_text())
        assert set(notebook["metadata"]) <= {"kernelspec", "language_info", "ppbook"}
        assert notebook["metadata"]["ppbook"] == {"assignment": path.stem}
        for cell in notebook["cells"]:
            assert cell["metadata"] == {}
            assert cell.get("outputs", []) == [] and cell.get("execution_count") is None


def _hinted_source(folder: Path) -> Path:
    folder.mkdir()
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    cells = [
        md("# 09 Hinted\nWrite the warm-up of rank r: how many forwards come first?"),
        md(
            "Hint: the warm-up of rank r is min(p - 1 - r, m) forwards.",
            metadata={"tags": ["solution"]},
        ),
        code(
            'def warmup(p, r, m):\n    """Forwards before rank r\'s first backward."""\n'
            "    ### BEGIN SOLUTION\n    return min(p - 1 - r, m)  # the rank's depth\n"
            "    ### END SOLUTION"
        ),
        md("Instructor: students often forget the m < p case.", metadata={"tags": ["instructor"]}),
    ]
    notebook = nbformat.v4.new_notebook(cells=cells)
    for index, cell in enumerate(notebook.cells):
        cell.id = f"c{index}"
    nbformat.write(notebook, folder / "09_hinted.ipynb")
    return folder


def test_a_hint_tagged_solution_and_an_instructor_note_are_not_released(tmp_path):
    source = _hinted_source(tmp_path / "source")
    hidden = secrets(source)
    assert set(hidden) == {
        "Hint: the warm-up of rank r is min(p - 1 - r, m) forwards.",
        "return min(p - 1 - r, m)  # the rank's depth",
        "Instructor: students often forget the m < p case.",
    }
    files = released(*release(tmp_path / "out", source))
    assert not leaks(files, hidden)
    assert not leaks(files, ["min(p - 1 - r, m)"])
    notebook = searchable(files["09_hinted.ipynb"])
    assert "how many forwards come first?" in notebook and "write warmup" in notebook


def test_the_zip_is_the_same_bytes_every_time_sorted_and_dated_1980(tmp_path):
    first = release(tmp_path / "a" / "release", REAL)[1].read_bytes()
    folder, archive = release(tmp_path / "b" / "release", REAL)
    assert archive.read_bytes() == first
    with zipfile.ZipFile(archive) as zipped:
        entries = zipped.infolist()
        names = [entry.filename for entry in entries]
        assert names == sorted(names) and all(n.startswith("release/") for n in names)
        assert {entry.date_time for entry in entries} == {(1980, 1, 1, 0, 0, 0)}
        for entry in entries:
            assert zipped.read(entry) == (folder / entry.filename.split("/", 1)[1]).read_bytes()


def test_the_readme_says_how_to_install_self_check_and_hand_in(tmp_path):
    from ppbook import __version__

    folder, _ = release(tmp_path / "release", REAL)
    text = (folder / "README.md").read_text()
    for path in REAL.glob("*.ipynb"):
        assert f"`{path.name}`" in text
    assert f"ppbook {__version__}" in text and "pip install" in text
    assert "## Work and self-check" in text and "## Hand in" in text


def test_the_command_writes_into_an_empty_folder_and_prints_the_checksum(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["assign", "release", str(tmp_path / "empty"), "--source", str(REAL)]) == 0
    out = capsys.readouterr().out
    digest = hashlib.sha256((tmp_path / "empty.zip").read_bytes()).hexdigest()
    assert f"sha256 {digest}" in out and "README.md" in out


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda out: (out.mkdir(), (out / "old.txt").write_text("x")), "is not empty"),
        (lambda out: out.write_text("a file"), "is a file"),
        (lambda out: out.with_name("out.zip").write_text("old"), "out.zip exists"),
        (lambda out: out.symlink_to(out.parent / "real", target_is_directory=True), "symlink"),
    ],
    ids=["not-empty", "a-file", "zip-exists", "symlink"],
)
def test_a_bad_out_is_a_one_line_error_and_nothing_is_written(tmp_path, capsys, make, message):
    (tmp_path / "real").mkdir()
    out = tmp_path / "out"
    make(out)
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    assert main(["assign", "release", str(out), "--source", str(REAL)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


def test_a_missing_source_is_a_one_line_error(tmp_path, capsys):
    assert main(["assign", "release", str(tmp_path / "out"), "--source", str(tmp_path / "no")]) == 2
    err = capsys.readouterr().err.strip()
    assert "no assignments folder" in err and "\n" not in err
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.zip").exists()


def test_the_released_notebooks_pass_the_projects_lint_and_format(tmp_path):
    folder, _ = release(tmp_path / "release", REAL)
    rules = ["--isolated", "--line-length", "100", "--target-version", "py311"]
    lint = [
        "check",
        *rules,
        "--select",
        "E,F,W,I,B,UP",
        "--ignore",
        "F401",
    ]  # as the student/ folder
    for command in (lint, ["format", "--check", *rules]):
        done = subprocess.run(
            [sys.executable, "-m", "ruff", *command, str(folder)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
