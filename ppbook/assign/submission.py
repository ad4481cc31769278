"""A submission as the grader takes it in (used by :mod:`ppbook.assign.grade`): the notebook
read and checked for shape, its folder copied, the code it holds.

- :func:`read_notebook` refuses with one line a submission that is a symbolic link, not a
  regular ``.ipynb`` file, not JSON, or not shaped as a notebook (cells that are not JSON
  objects, a ``source`` that is neither text nor a list of text, ``metadata`` or
  ``metadata.ppbook`` that is not an object, an assignment name that is not text).
- :func:`copy_submission` copies the notebook's folder without the other notebooks, and
  without any symbolic link, FIFO, socket or device in it: a link could show the kernel a
  file outside the folder (another student's notebook, the solutions), so none is copied,
  and the report notes each one left out.
- :func:`code_cells` and :func:`python_files` give the code the forbidden-call scan reads.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

MAX_COPY_BYTES = 512 * 2**20
"""The largest submission folder the grader copies."""
MAX_FILES = 10_000
"""The most files of a submission's folder the forbidden-call scan reads."""
_SKIPPED = (".ipynb_checkpoints", "__pycache__", ".git")


def refuse_link(path: Path) -> None:
    """ValueError if ``path`` itself is a symbolic link."""
    if path.is_symlink():
        raise ValueError(
            f"{path.name} is a symbolic link, not a notebook: hand in the notebook file itself"
        )


def read_notebook(path: Path) -> dict:
    """The notebook at ``path`` (a regular .ipynb file), checked for shape."""
    refuse_link(path)
    if path.suffix != ".ipynb" or not path.is_file():
        raise ValueError(f"a submission is an .ipynb file, got {str(path)!r}")
    if path.stat().st_size > MAX_COPY_BYTES:
        raise ValueError(f"{path.name} is over {MAX_COPY_BYTES // 2**20} MiB: not a notebook")
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ValueError(f"{path.name} is not a notebook (JSON): {str(exc)[:100]}") from None
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise ValueError(f"{path.name} is not a notebook: it has no list of cells")
    problem = _shape(notebook)
    if problem:
        raise ValueError(f"{path.name} is not a well-formed notebook: {problem}")
    return notebook


def _shape(notebook: dict) -> str | None:
    metadata = notebook.get("metadata", {})
    if not isinstance(metadata, dict):
        return f"its metadata is a {type(metadata).__name__}, not an object"
    ours = metadata.get("ppbook", {})
    if not isinstance(ours, dict):
        return f"its metadata.ppbook is a {type(ours).__name__}, not an object"
    if "assignment" in ours and not (isinstance(ours["assignment"], str) and ours["assignment"]):
        return f"its metadata.ppbook.assignment is {ours['assignment']!r:.40}, not a name"
    for number, cell in enumerate(notebook["cells"], start=1):
        if not isinstance(cell, dict):
            return f"cell {number} is a {type(cell).__name__}, not an object"
        if not isinstance(cell.get("cell_type", "code"), str):
            return f"cell {number}'s cell_type is not text"
        source = cell.get("source", "")
        if not (isinstance(source, str) or _texts(source)):
            return f"cell {number}'s source is a {type(source).__name__}, not text or lines"
    return None


def _texts(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(line, str) for line in value)


def assignment_of(notebook: dict, path: Path) -> str:
    """The assignment a notebook answers: its ``metadata.ppbook.assignment`` (written by
    ``ppbook assign build``), else the file's stem."""
    name = notebook.get("metadata", {}).get("ppbook", {}).get("assignment")
    return name if isinstance(name, str) and name else path.stem


def code_cells(notebook: dict) -> list[tuple[int, str]]:
    """(number from 1, source) of each code cell that is not blank."""
    found = []
    for number, cell in enumerate(notebook["cells"], start=1):
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else source
        if cell.get("cell_type") == "code" and source.strip():
            found.append((number, source))
    return found


def copy_submission(folder: Path, notebook: Path, into: Path) -> list[str]:
    """Copy ``folder`` to ``into``: not the other notebooks, checkpoints, links or special
    files. Returns a note per link left out. A folder that holds other notebooks too is a
    class's folder of submissions: then only the notebook is copied, so that no submission
    sees another's files."""
    links: list[str] = []
    others = [p for p in folder.glob("*.ipynb") if p.name != notebook.name]
    if others:
        into.mkdir(parents=True)
        shutil.copyfile(notebook, into / notebook.name, follow_symlinks=False)
        return []

    def ignore(directory: str, names: list[str]) -> set[str]:
        skipped = {n for n in names if n in _SKIPPED}
        for name in names:
            mode = os.lstat(os.path.join(directory, name)).st_mode
            if stat.S_ISLNK(mode):
                links.append(os.path.relpath(os.path.join(directory, name), folder))
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                skipped.add(name)
        if Path(directory) == folder:
            skipped |= {n for n in names if n.endswith(".ipynb") and n != notebook.name}
        return skipped

    total = 0
    for directory, _, files in os.walk(folder):
        total += sum(os.lstat(os.path.join(directory, f)).st_size for f in files)
        if total > MAX_COPY_BYTES:
            raise ValueError(
                f"{folder} holds over {MAX_COPY_BYTES // 2**20} MiB; grade a folder of "
                "submissions only"
            )
    shutil.copytree(folder, into, symlinks=True, ignore=ignore)
    return [f"{link} is a symbolic link: not copied (hand in files, not links)" for link in links]


def python_files(root: Path) -> dict[str, str]:
    """The text of every regular ``.py`` file below ``root`` (links and special files are
    not followed or opened), by its path relative to ``root``."""
    found: dict[str, str] = {}
    for directory, folders, files in os.walk(root):
        folders[:] = [f for f in folders if not os.path.islink(os.path.join(directory, f))]
        for name in files:
            if len(found) >= MAX_FILES:
                return found
            path = os.path.join(directory, name)
            if name.endswith(".py") and stat.S_ISREG(os.lstat(path).st_mode):
                try:
                    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                except OSError:
                    continue
                with os.fdopen(descriptor, "rb") as file:
                    text = file.read(MAX_COPY_BYTES).decode("utf-8", errors="replace")
                found[os.path.relpath(path, root)] = text
    return found


def own(root: Path, uid: int) -> None:
    """Give ``root`` and everything below it to ``uid``."""
    for directory, dirs, files in os.walk(root):
        os.chown(directory, uid, uid)
        for name in dirs + files:
            os.lchown(os.path.join(directory, name), uid, uid)
