"""What a student copy leaves out besides the solution regions (issue 16; used by
:func:`ppbook.assign.build.student_notebook`).

- **Instructor cells.** A cell whose metadata ``tags`` hold ``"solution"`` or
  ``"instructor"`` (:data:`INSTRUCTOR_TAGS`) is dropped: that is how an instructor marks a
  hint that gives the answer away, or a note for instructors only. A cell that nbgrader
  marks as a solution cell (metadata ``nbgrader.solution`` true) but that holds no
  ``BEGIN SOLUTION`` region is answered whole, as nbgrader's ClearSolutions does it: the
  builder replaces a Markdown one by ``YOUR ANSWER HERE`` and refuses a code one.
- **Summary cells.** A Markdown cell whose first heading is "Summary" (any level, ATX or
  setext) gives the assignment's answers: it becomes :data:`SUMMARY_NOTE`. A "Summary"
  heading further down a cell is refused: the cell would leak what comes before it.
- **Metadata.** Only what the notebook needs stays: ``kernelspec``, ``language_info`` and
  ``ppbook.assignment`` in the notebook's metadata, nothing in a cell's.
- **Self-checks.** The instructor versions call ``assert_right(...)`` (from
  :mod:`ppbook.exercises`), which fails the notebook on a wrong solution; a student copy
  calls ``check(...)``, which shows the verdict. Every name token ``assert_right`` becomes
  ``check`` (calls, attributes, imports; strings and comments are left alone), and an import
  that then names ``check`` twice names it once, sorted as ruff's isort sorts it.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize

INSTRUCTOR_TAGS = frozenset({"solution", "instructor"})
"""Cell tags that keep a cell out of the student copies."""
SUMMARY_NOTE = "*The summary of this assignment comes with the graded notebook.*"
"""What a Summary cell becomes in a student copy."""
KEPT_METADATA = ("kernelspec", "language_info")
"""The notebook metadata a student copy keeps (besides ``ppbook.assignment``)."""
ASSERTING, CHECKING = "assert_right", "check"
LINE_LENGTH = 100

_ATX = re.compile(r"^ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")


def is_instructor_cell(metadata: dict) -> bool:
    """Whether a cell's metadata tags it for the instructor only."""
    tags = metadata.get("tags") if isinstance(metadata, dict) else None
    return isinstance(tags, list) and any(tag in INSTRUCTOR_TAGS for tag in tags)


def is_nbgrader_solution(metadata: dict) -> bool:
    """Whether nbgrader marks the cell as one the student answers (``nbgrader.solution``)."""
    nbgrader = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    return isinstance(nbgrader, dict) and nbgrader.get("solution") is True


def _headings(text: str) -> list[tuple[int, str]]:
    """(1-based line, text) of each Markdown heading, ATX (``## x``) or setext (``x``
    underlined with ``===`` or ``---``), outside fenced code."""
    lines, found, fenced = text.splitlines(), [], False
    for index, line in enumerate(lines):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        if fenced:
            continue
        atx = _ATX.match(line)
        if atx:
            found.append((index + 1, atx.group(1) or ""))
        elif line.strip() and index + 1 < len(lines) and _SETEXT.match(lines[index + 1]):
            found.append((index + 1, line))
    return found


def _is_summary_title(title: str) -> bool:
    return title.strip().strip("*_ ").rstrip(":").strip().lower() == "summary"


def is_summary(text: str, where: str = "cell") -> bool:
    """Whether a Markdown cell's first heading is "Summary"; ValueError when a later heading
    of the cell is, since dropping the cell would not be what the instructor meant and
    keeping it would give the summary away."""
    headings = _headings(text)
    for line, title in headings[1:]:
        if _is_summary_title(title):
            raise ValueError(
                f"{where}: a Summary heading on line {line} below another heading; "
                "put the Summary in a Markdown cell of its own"
            )
    return bool(headings) and _is_summary_title(headings[0][1])


def kept_metadata(metadata: dict, assignment: str) -> dict:
    """The notebook metadata of a student copy of ``assignment``."""
    kept = {key: metadata[key] for key in KEPT_METADATA if key in metadata}
    return kept | {"ppbook": {"assignment": assignment}}


def _isort_key(name: str) -> tuple:
    """ruff's isort order of imported names: by type (CONSTANTS, Classes, the rest), then
    naturally (``name_2`` before ``name_10``) and without case."""
    kind = 0 if name.isupper() and len(name) > 1 else 1 if name[:1].isupper() else 2
    parts = [int(x) if x.isdigit() else x.lower() for x in re.split(r"(\d+)", name)]
    return kind, parts, name


def _import_text(node: ast.ImportFrom, indent: int) -> str:
    """``node`` with ``assert_right`` named ``check``, each name once, sorted."""
    names = []
    for alias in node.names:
        name = CHECKING if alias.name == ASSERTING else alias.name
        text = f"{name} as {alias.asname}" if alias.asname else name
        if text not in names:
            names.append(text)
    names.sort(key=_isort_key)
    head = f"from {'.' * node.level}{node.module or ''} import "
    line = head + ", ".join(names)
    if indent + len(line) <= LINE_LENGTH:
        return line
    pad = " " * (indent + 4)
    return head + "(\n" + "".join(f"{pad}{n},\n" for n in names) + " " * indent + ")"


def _imports_renamed(source: str) -> str:
    """``source`` with each ``from ... import assert_right`` rewritten by :func:`_import_text`
    (unchanged when it does not parse, e.g. a cell with IPython magics)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    nodes = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and any(a.name == ASSERTING for a in node.names)
    ]
    lines = source.splitlines(keepends=True)
    for node in sorted(nodes, key=lambda n: (n.lineno, n.col_offset), reverse=True):
        first, last = lines[node.lineno - 1], lines[node.end_lineno - 1]
        before = first.encode()[: node.col_offset].decode()
        after = last.encode()[node.end_col_offset :].decode()
        replaced = before + _import_text(node, len(before)) + after
        lines[node.lineno - 1 : node.end_lineno] = [replaced]
    return "".join(lines)


def student_checks(source: str) -> str:
    """A code cell's source with its ``assert_right`` self-checks turned into ``check``."""
    if ASSERTING not in source:
        return source
    source = _imports_renamed(source)
    lines = source.splitlines(keepends=True)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):  # not Python as a whole: rename the words
        return re.sub(rf"\b{ASSERTING}\b", CHECKING, source)
    names = [t for t in tokens if t.type == tokenize.NAME and t.string == ASSERTING]
    for token in reversed(names):
        row, col = token.start
        line = lines[row - 1]
        lines[row - 1] = line[:col] + CHECKING + line[col + len(ASSERTING) :]
    return "".join(lines)
