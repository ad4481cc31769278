"""Student copies of the assignments: the instructor's notebooks with every solution region
replaced by a stub (issue 10; ``ppbook assign build``), and nothing else that gives an answer
away (issue 16).

Solution regions are marked as nbgrader marks them (its ``ClearSolutions`` preprocessor,
https://nbgrader.readthedocs.io, "student version"): a line ``### BEGIN SOLUTION`` and a
line ``### END SOLUTION`` (any number of ``#``). In a code cell the region becomes one line,
indented as the marker, ``raise NotImplementedError("write f: what")``: ``f`` is the function
the region lies in and ``what`` the first line of its docstring, so the grader can say which
function is still to do. A region outside any function is refused: assignments ask for
typed functions. In a Markdown (or raw) cell the region becomes ``YOUR ANSWER HERE``.

:mod:`ppbook.assign.clean` says what else is left out: cells tagged ``solution`` or
``instructor`` are dropped, Summary cells become a one-line note, ``assert_right`` self-checks
become ``check``, and only the metadata the notebook needs is kept. Outputs and execution
counts are cleared, the notebook's ``metadata.ppbook.assignment`` names the assignment (so a
renamed submission is still graded against it), and the JSON is written the way nbformat
writes it, so that building twice gives the same bytes. A copy is written to a new file that
then replaces the old one: a symlink at a student copy's path is replaced by a regular file,
and its target is never written; a ``student`` folder that is a symlink is refused.
"""

from __future__ import annotations

import ast
import copy
import json
import os
import re
import tempfile
from pathlib import Path

import nbformat

from ppbook.assign.clean import (
    SUMMARY_NOTE,
    is_instructor_cell,
    is_nbgrader_solution,
    is_summary,
    kept_metadata,
    student_checks,
)

ASSIGNMENTS = Path(__file__).resolve().parents[2] / "notebooks" / "assignments"
"""The instructor versions (``NN_name.ipynb``); student copies go to its ``student/``."""
TEXT_STUB = "YOUR ANSWER HERE"
LINE_LENGTH = 100
"""The project's line length (ruff): a longer stub is split as ruff would split it."""
_BEGIN = re.compile(r"^(\s*)#+\s*BEGIN SOLUTION\s*$")
_END = re.compile(r"^\s*#+\s*END SOLUTION\s*$")


def _regions(lines: list[str], where: str) -> list[tuple[int, int]]:
    """(begin, end) line indexes of each solution region; ValueError if unbalanced."""
    regions, begin = [], None
    for index, line in enumerate(lines):
        if _BEGIN.match(line):
            if begin is not None:
                raise ValueError(f"{where}: BEGIN SOLUTION on line {index + 1} inside a region")
            begin = index
        elif _END.match(line):
            if begin is None:
                raise ValueError(f"{where}: END SOLUTION on line {index + 1} without a BEGIN")
            regions.append((begin, index))
            begin = None
    if begin is not None:
        raise ValueError(f"{where}: BEGIN SOLUTION on line {begin + 1} has no END SOLUTION")
    return regions


def _enclosing_function(tree: ast.AST, line: int) -> ast.FunctionDef | None:
    """The innermost function whose body holds 1-based ``line``."""
    found = None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if node.lineno < line <= (node.end_lineno or node.lineno):
                if found is None or node.lineno > found.lineno:
                    found = node
    return found


def stub_message(function: ast.FunctionDef) -> str:
    """``write f: <first line of f's docstring>`` (``write f`` without a docstring)."""
    doc = ast.get_docstring(function)
    what = doc.strip().splitlines()[0].strip() if doc and doc.strip() else ""
    return f"write {function.name}: {what}" if what else f"write {function.name}"


def _literals(message: str, width: int) -> list[str]:
    """``message`` as string literals (implicitly concatenated) of at most ``width``
    characters each where its words allow, split after spaces."""
    pieces, current = [], ""
    for word in message.split(" "):
        candidate = f"{current} {word}" if current else word
        if current and len(json.dumps(candidate + " ", ensure_ascii=False)) > width:
            pieces.append(current + " ")
            current = word
        else:
            current = candidate
    return [json.dumps(piece, ensure_ascii=False) for piece in [*pieces, current]]


def _stub_lines(indent: str, message: str) -> list[str]:
    """``raise NotImplementedError(message)``, split as ruff formats it when one line would
    pass :data:`LINE_LENGTH`: the message on lines of its own, as adjacent string literals."""
    line = f"{indent}raise NotImplementedError({json.dumps(message, ensure_ascii=False)})"
    if len(line) <= LINE_LENGTH:
        return [line]
    inner = indent + "    "
    literals = _literals(message, LINE_LENGTH - len(inner))
    return [f"{indent}raise NotImplementedError(", *(inner + x for x in literals), f"{indent})"]


def student_code(source: str, where: str = "cell") -> str:
    """A code cell's source with each solution region replaced by its stub."""
    lines = source.splitlines()
    regions = _regions(lines, where)
    if not regions:
        return source
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ValueError(f"{where}: the instructor's code does not parse: {exc}") from None
    out, start = [], 0
    for begin, end in regions:
        function = _enclosing_function(tree, begin + 1)
        if function is None:
            raise ValueError(
                f"{where}: the solution region on line {begin + 1} is not inside a function; "
                "put solutions inside the functions the student writes"
            )
        indent = _BEGIN.match(lines[begin]).group(1)
        out += lines[start:begin]
        out += _stub_lines(indent, stub_message(function))
        start = end + 1
    out += lines[start:]
    result = "\n".join(out)
    return result + "\n" if source.endswith("\n") else result


def student_text(source: str, where: str = "cell") -> str:
    """A Markdown cell's source with each solution region replaced by ``YOUR ANSWER HERE``."""
    lines = source.splitlines()
    out, start = [], 0
    for begin, end in _regions(lines, where):
        out += [*lines[start:begin], TEXT_STUB]
        start = end + 1
    out += lines[start:]
    return "\n".join(out) if out != lines else source


def _answered_whole(cell: nbformat.NotebookNode, where: str) -> bool:
    """Whether nbgrader marks ``cell`` as a solution cell without a region (ClearSolutions
    then clears the whole cell); ValueError for such a code cell, whose stub would name no
    function."""
    if not is_nbgrader_solution(cell.metadata) or _regions(cell.source.splitlines(), where):
        return False
    if cell.cell_type == "code":
        raise ValueError(
            f"{where}: an nbgrader solution cell without a BEGIN SOLUTION region; "
            "mark the solution inside the function the student writes"
        )
    return True


def student_cell(cell: nbformat.NotebookNode, where: str) -> nbformat.NotebookNode | None:
    """The student's version of an instructor's ``cell`` (a copy), or None to leave it out."""
    if is_instructor_cell(cell.metadata):
        return None
    cell = copy.deepcopy(cell)
    if _answered_whole(cell, where):
        cell.source = TEXT_STUB
    elif cell.cell_type == "code":
        cell.source = student_checks(student_code(cell.source, where))
        cell.outputs = []
        cell.execution_count = None
    else:
        cell.source = student_text(cell.source, where)
        if cell.cell_type == "markdown" and is_summary(cell.source, where):
            cell.source = SUMMARY_NOTE
    cell.metadata = nbformat.NotebookNode()
    return cell


def student_notebook(instructor: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    """The student copy of ``instructor`` (assignment ``name``)."""
    notebook = copy.copy(instructor)
    cells = [student_cell(c, f"{name} cell {n}") for n, c in enumerate(instructor.cells, 1)]
    notebook.cells = [cell for cell in cells if cell is not None]
    notebook.metadata = nbformat.from_dict(kept_metadata(instructor.metadata, name))
    return notebook


def student_text_of(path: Path) -> str:
    """The bytes (as text) that ``build`` writes for the instructor notebook at ``path``."""
    instructor = nbformat.read(path, as_version=4)
    text = nbformat.writes(student_notebook(instructor, path.stem))
    return text if text.endswith("\n") else text + "\n"


def replace_file(path: Path, text: str) -> None:
    """Write ``text`` to a new file beside ``path`` and move it over ``path``: a symlink at
    ``path`` is replaced, never written through; ValueError if ``path`` is a folder."""
    if path.is_dir() and not path.is_symlink():
        raise ValueError(f"{path} is a folder; remove it so that build can write the copy there")
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _student_folder(source: Path) -> Path:
    """``source/student``; ValueError if it is a symlink or not a folder."""
    target = source / "student"
    if target.is_symlink():
        raise ValueError(
            f"{target} is a symlink; build writes the student copies into a real folder only: "
            "remove the link"
        )
    if target.exists() and not target.is_dir():
        raise ValueError(f"{target} is not a folder; remove it so that build can make one")
    return target


def _current(path: Path, text: str) -> bool:
    """Whether ``path`` is a regular file (not a symlink) holding ``text``."""
    if path.is_symlink() or not path.is_file():
        return False
    return path.read_bytes() == text.encode("utf-8")


def build(source: Path = ASSIGNMENTS, *, check: bool = False) -> list[Path]:
    """Write ``source/student/NAME.ipynb`` for every ``source/*.ipynb``; return the student
    copies that changed (with ``check``: that differ, are missing, are symlinks or have no
    instructor version; nothing is written)."""
    source = Path(source)
    if not source.is_dir():
        raise ValueError(f"no assignments folder at {source}")
    target = _student_folder(source)
    stale = []
    wanted = {}
    for path in sorted(source.glob("*.ipynb")):
        wanted[path.name] = student_text_of(path)
    for name, text in wanted.items():
        out = target / name
        if not _current(out, text):
            stale.append(out)
            if not check:
                target.mkdir(exist_ok=True)
                replace_file(out, text)
    if check and target.is_dir():
        stale += [p for p in sorted(target.glob("*.ipynb")) if p.name not in wanted]
    return stale
