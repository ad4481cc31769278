"""The start page (notebooks/00_start.ipynb) links every chapter and assignment, and only
notebooks that exist; `make book` opens it first, with the news prompt off (issue 11). It
links the assignments' student copies, never the instructor versions with the solutions, and
tells instructors where those are and how to release, grade and isolate (issue 16)."""

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
START = NOTEBOOKS / "00_start.ipynb"
ASSIGNMENTS = NOTEBOOKS / "assignments"
LINK = re.compile(r"\]\(([^)\s]+\.ipynb)\)")


def links() -> list[str]:
    cells = json.loads(START.read_text())["cells"]
    text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return LINK.findall(text)


def test_every_link_on_the_start_page_opens_a_notebook():
    assert links(), "the start page links no notebook"
    missing = [link for link in links() if not (NOTEBOOKS / link).is_file()]
    assert not missing, f"the start page links notebooks that do not exist: {missing}"


def test_the_start_page_lists_every_chapter_and_the_student_copy_of_every_assignment():
    chapters = [p for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb") if p != START]
    assignments = [ASSIGNMENTS / "student" / p.name for p in ASSIGNMENTS.glob("*.ipynb")]
    assert assignments, "no instructor notebooks in notebooks/assignments"
    wanted = {p.relative_to(NOTEBOOKS).as_posix() for p in chapters + assignments}
    unlisted = sorted(wanted - set(links()))
    assert not unlisted, f"the start page does not list {unlisted}: add a line for each"


def test_no_link_on_the_start_page_opens_an_instructor_notebook():
    solutions = {p.resolve() for p in ASSIGNMENTS.glob("*.ipynb")}
    opened = [link for link in links() if (NOTEBOOKS / link).resolve() in solutions]
    outside = [link for link in links() if link.startswith("assignments/")]
    outside = [link for link in outside if not link.startswith("assignments/student/")]
    assert not opened and not outside, f"links to instructor versions: {opened + outside}"


def test_the_instructor_paragraph_says_where_the_solutions_are_and_how_to_release_and_grade():
    cells = json.loads(START.read_text())["cells"]
    text = " ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    text = " ".join(text.split())
    for words in (
        "`notebooks/assignments/NN_*.ipynb`",
        "`ppbook assign release OUT`",
        "`ppbook assign grade FOLDER`",
        "`--isolation`",
    ):
        assert words in text, f"the start page does not say {words}"
    modes = re.findall(r"bubblewrap|`unshare`|unprivileged user|`none`", text)
    assert len(set(modes)) == 4, f"the start page names the isolation modes {set(modes)}"


def test_make_book_opens_the_start_page_with_the_news_prompt_off():
    makefile = (ROOT / "Makefile").read_text()
    book = makefile.split("\nbook:", 1)[1].split("\n\n", 1)[0]
    assert "default_url=/lab/tree/$(START)" in book
    assert f"START  := {START.name}" in makefile
    overrides = json.loads((ROOT / "jupyter" / "overrides.json").read_text())
    assert overrides["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"
    assert "share/jupyter/lab/settings/overrides.json" in makefile
