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


def _markdown() -> list[str]:
    cells = json.loads(START.read_text())["cells"]
    return [" ".join("".join(c["source"]).split()) for c in cells if c["cell_type"] == "markdown"]


def test_the_start_page_links_the_history_page_and_the_closing_chapter():
    for page in ("history.ipynb", "11_which_schedule.ipynb"):
        assert page in links(), f"the start page does not link {page}"
        assert (NOTEBOOKS / page).is_file()


def test_the_way_in_says_who_it_is_for_and_what_to_know_first():
    text = " ".join(_markdown())
    for heading in ("## Who this book is for", "## Prerequisites", "## Instructor guide"):
        assert heading in text, f"the start page lacks '{heading}'"
    for reader in ("Students", "Instructors", "Engineers sizing"):
        assert f"**{reader}" in text, f"the start page does not address {reader}"
    for prerequisite in ("Python", "PyTorch basics", "Backpropagation", "algebra"):
        assert prerequisite in text, f"the prerequisites do not name {prerequisite}"


def test_why_pipelines_comes_before_the_first_schedule_and_computes_with_the_package():
    cells = json.loads(START.read_text())["cells"]
    sources = ["".join(c["source"]) for c in cells]
    why = next(k for k, s in enumerate(sources) if s.startswith("## Why pipeline parallelism"))
    first_chapter = next(k for k, s in enumerate(sources) if "(01_bubble.ipynb)" in s)
    assert why < first_chapter, "'Why pipeline parallelism' must come before the chapters"
    code = "\n".join(s for s, c in zip(sources, cells, strict=True) if c["cell_type"] == "code")
    for name in ("static_bytes", "part_parameters", "tensor_bytes_per_layer", "nominal_links"):
        assert name in code, f"the memory and communication argument does not use {name}"
    assert code.count("assert ") >= 3, "the argument's claims are asserted in code"


def test_the_course_map_gives_every_week_its_chapters_and_hours():
    cells = json.loads(START.read_text())["cells"]
    table = next(
        "".join(c["source"])
        for c in cells
        if "".join(c["source"]).startswith("## A course in 10-12 weeks")
    )
    header = next(line for line in table.splitlines() if line.startswith("| week |"))
    names = [cell.strip() for cell in header.strip("|").split("|")]
    rows = [
        dict(zip(names, (cell.strip() for cell in line.strip("|").split("|")), strict=True))
        for line in table.splitlines()
        if re.match(r"\| \d+ \|", line)
    ]
    assert [int(r["week"]) for r in rows] == list(range(1, len(rows) + 1))
    assert 10 <= len(rows) <= 12, f"a 10-12 week course, got {len(rows)} weeks"
    read = " ".join(r["read"] for r in rows)
    for chapter in range(12):
        assert re.search(rf"ch\. {chapter}\b", read), f"the course map skips chapter {chapter}"
    assert "history" in read
    for assignment in ("A1", "A2", "A3", "A4"):
        plan = " ".join(r["assignment (h)"] for r in rows)
        assert f"{assignment} out" in plan and f"{assignment} due" in plan, assignment
    for row in rows[:10]:  # the ten weeks every course has: hours for reading and exercises
        hours = float(row["reading (h)"]) + float(row["exercises (h)"])
        assert 2 <= hours <= 10, f"week {row['week']}: {hours} h"
        assert row["core sections"], f"week {row['week']} names no core section"
