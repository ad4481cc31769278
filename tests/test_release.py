"""The release a course pins: one version everywhere (package, pyproject, CITATION.cff,
CHANGELOG, `ppbook --version`), and ppbook.written_for saying when a notebook was written
for another one."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import ppbook

ROOT = Path(__file__).resolve().parents[1]


def test_one_version_everywhere():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    cff = re.search(r'^version: "([^"]+)"', (ROOT / "CITATION.cff").read_text(), re.M).group(1)
    newest = re.search(r"^## (\d+\.\d+\.\d+) - ", (ROOT / "CHANGELOG.md").read_text(), re.M)
    cli = subprocess.run(
        [str(Path(sys.executable).with_name("ppbook")), "--version"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert project == cff == newest.group(1) == ppbook.__version__
    assert cli == f"ppbook {project}"


def test_the_changelog_has_a_section_for_every_version_with_a_date():
    text = (ROOT / "CHANGELOG.md").read_text()
    versions = re.findall(r"^## (\d+\.\d+\.\d+) - (\d{4}-\d{2}-\d{2})$", text, re.M)
    assert [v for v, _ in versions][:2] == [ppbook.__version__, "0.1.0"]
    assert [d for _, d in versions] == sorted((d for _, d in versions), reverse=True)


def test_written_for_is_silent_for_this_version_and_says_which_otherwise(capsys):
    assert ppbook.written_for(ppbook.__version__) is None
    assert capsys.readouterr().out == ""
    line = ppbook.written_for("0.1.0")
    out = capsys.readouterr().out.strip()
    assert line == out and "0.1.0" in line and ppbook.__version__ in line
    assert "v0.1.0" in line and "\n" not in line
    for bad in ("", "  ", None, 2):
        with pytest.raises(ValueError, match="written_for needs a version string"):
            ppbook.written_for(bad)


def test_every_notebook_states_the_version_it_was_written_for():
    import nbformat

    books = sorted((ROOT / "notebooks").glob("*.ipynb"))
    books += sorted((ROOT / "notebooks" / "assignments").glob("*.ipynb"))
    assert books
    for path in books:
        cells = nbformat.read(path, as_version=4).cells
        first = next(c for c in cells if c.cell_type == "code")
        assert f'ppbook.written_for("{ppbook.__version__}")' in first.source, path.name
