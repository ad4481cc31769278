"""``ppbook assign release OUT``: what a course hands its students (issue 16).

OUT is a new (or empty) folder, and ``OUT.zip`` beside it holds the same files under
``OUT``'s name: the student copy of every instructor notebook in the source folder, built
afresh by :func:`ppbook.assign.build.student_notebook` (no solution region, no tagged
instructor cell, no Summary, no output, no metadata beyond the kernel's and the assignment's
name), and a ``README.md`` for students (how to install ppbook, run the self-checks and hand
in). Nothing else is needed to work: the notebooks import ppbook, and assignment 3 writes
its ``my_transport.py`` next to its notebook when it runs. No instructor notebook and no
file of the source folder is copied.

The zip is the same bytes every time for the same notebooks, ppbook version and OUT name, so
a course can publish its checksum: entries sorted, each dated 1980-01-01 with mode 0644,
stored without compression (a compressor's output may change with its version).

Only the standard library is imported here until a release is made: registering the
subcommand (:func:`add_parser`) must not slow every ``ppbook`` command.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import zipfile
from pathlib import Path

ZIP_DATE = (1980, 1, 1, 0, 0, 0)
"""Every zip entry's timestamp: the earliest a zip can hold."""

INSTALL = """\
## Install

You need Python 3.11 or newer and ppbook {version}, the package these notebooks import: it
brings sympy, torch, JupyterLab and the self-checks. Install it as your course says, for
example from a copy of the book's repository:

    python3 -m venv .venv
    .venv/bin/pip install PATH/TO/ppbook      # the folder that holds pyproject.toml

Check it with `.venv/bin/python -c "import ppbook; print(ppbook.__version__)"` (it prints
{version}), then open this folder in JupyterLab: `.venv/bin/jupyter lab`.
"""

WORK = """\
## Work and self-check

Open an assignment and read it from the top. Write the bodies of the functions that raise
`NotImplementedError("write ...")`; keep their names and signatures, because the grader
calls them. Each question has a self-check cell, `check("A2.1", one_f_one_b_rows)` for
example: run the whole notebook (**Kernel > Restart Kernel and Run All Cells**), and each
check prints the grader's verdict and points for its question, or what is wrong. The grader
runs your notebook from a fresh kernel and tries cases of its own, so make your functions
right for every input, not only for the cases the self-checks show. Write the code
yourself: an answer that calls the library function an assignment asks you to write scores
nothing.

Assignment 3 writes `my_transport.py` next to its notebook each time it runs, so keep the
notebooks in a folder you can write to, and do not edit that file by hand.
"""

HAND_IN = """\
## Hand in

Hand in the notebook file itself (`.ipynb`), saved, the way your course says. You may
rename it (`alice.ipynb`): the grader finds the assignment in the notebook's metadata, so
do not copy its cells into a new notebook, which loses that metadata. Only the notebook is
graded, and the grader runs it from the top in a fresh kernel: it must run on its own.
"""


def _title(notebook) -> str:
    """The text of the notebook's first heading, or '' without one."""
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    return line.lstrip("#").strip()
    return ""


def readme(titles: dict[str, str]) -> str:
    """The students' README for notebooks ``titles`` (file name: title)."""
    from ppbook import __version__

    lines = ["# Assignments in pipeline parallelism (ppbook)", ""]
    lines += ["This folder holds the assignments of the course, one notebook each:", ""]
    lines += [f"- `{name}`: {title}" if title else f"- `{name}`" for name, title in titles.items()]
    sections = [INSTALL.format(version=__version__), WORK, HAND_IN]
    return "\n".join(lines) + "\n\n" + "\n".join(sections)


def release_files(source: Path) -> dict[str, bytes]:
    """The files of a release built from the instructor notebooks in ``source``, by name."""
    import nbformat

    from ppbook.assign.build import student_text_of

    source = Path(source)
    if not source.is_dir():
        raise ValueError(f"no assignments folder at {source}")
    paths = sorted(source.glob("*.ipynb"))
    if not paths:
        raise ValueError(f"no instructor notebooks (*.ipynb) in {source}")
    files, titles = {}, {}
    for path in paths:
        text = student_text_of(path)
        files[path.name] = text.encode("utf-8")
        titles[path.name] = _title(nbformat.reads(text, as_version=4))
    files["README.md"] = readme(titles).encode()
    return dict(sorted(files.items()))


def _targets(out: Path) -> tuple[Path, Path]:
    """(folder, zip) for ``out``; ValueError unless the folder is new or empty and the zip
    new, neither a symlink."""
    folder = Path(os.path.abspath(out))
    if folder.name in ("", ".", ".."):
        raise ValueError(f"name a new folder for the release, got {str(out)!r}")
    archive = folder.with_name(folder.name + ".zip")
    if folder.is_symlink():
        raise ValueError(f"{folder} is a symlink; name a new folder for the release")
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{folder} is a file; name a new (or empty) folder for the release")
    if folder.is_dir() and any(folder.iterdir()):
        raise ValueError(f"{folder} is not empty; name a new (or empty) folder for the release")
    if archive.exists() or archive.is_symlink():
        raise ValueError(f"{archive} exists; remove it or name another folder for the release")
    return folder, archive


def zip_bytes(folder_name: str, files: dict[str, bytes]) -> bytes:
    """A zip of ``files`` under ``folder_name/``, the same bytes for the same input."""
    import io

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for name in sorted(files):
            entry = zipfile.ZipInfo(f"{folder_name}/{name}", date_time=ZIP_DATE)
            entry.create_system = 3  # Unix, so that the mode below is read
            entry.external_attr = 0o100644 << 16
            archive.writestr(entry, files[name])
    return buffer.getvalue()


def release(out: Path, source: Path | None = None) -> tuple[Path, Path]:
    """Write the release of the instructor notebooks in ``source`` (default: the book's
    ``notebooks/assignments``) to the folder ``out`` and to ``out.zip``; return both."""
    from ppbook.assign.build import ASSIGNMENTS

    folder, archive = _targets(out)
    files = release_files(ASSIGNMENTS if source is None else source)
    data = zip_bytes(folder.name, files)
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        with open(folder / name, "xb") as file:  # x: never through a file or link put there
            file.write(content)
    with open(archive, "xb") as file:
        file.write(data)
    return folder, archive


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``release`` on the subparsers of ``ppbook assign``."""
    parser = subparsers.add_parser(
        "release",
        help="write a student release: a folder OUT and OUT.zip, without solutions",
        description=(
            "Write the student copies of the assignments and a README for students to a new "
            "(or empty) folder OUT and to OUT.zip beside it (the same bytes every time), with "
            "nothing of the solutions."
        ),
    )
    parser.add_argument("out", type=Path, metavar="OUT", help="a new or empty folder")
    parser.add_argument("--source", type=Path, help="the instructor notebooks' folder")
    parser.set_defaults(handler=_release)
    return parser


def _release(args: argparse.Namespace) -> int:
    folder, archive = release(args.out, args.source)
    names = sorted(p.name for p in folder.iterdir())
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    print(f"wrote {json.dumps(names)} to {folder}/ and {archive} (sha256 {digest})")
    return 0
