"""The site's sources: every chapter executed once (cached), made static, written for Sphinx.

``python site/prepare.py`` (``make site`` runs it through site/build.py) executes each
committed notebook of ``notebooks/`` (the start page and the chapters; no outputs are
stored in git) in a fresh kernel with nbclient, from ``notebooks/`` as the reader runs it,
and stops with a one-line error naming the notebook and cell if any cell raises. An executed
notebook is kept in ``_build/executed/`` with a key: the sha256 of the notebook, of every
file of the ``ppbook`` package and of the Python version. A later build (or the browser
test) whose key matches reuses it instead of executing again.

The executed copy is then made static for a page without a kernel and written to
``_build/site-src/``:

- each matplotlib figure becomes an ``<img>`` with alt text made from its titles and axis
  labels (a ``text/plain`` formatter registered in the kernel for the run, its cell removed);
- each ppbook widget becomes its first state (site/widget_pictures.py): its controls drawn
  disabled with their values, its picture (the PNG the widget holds) and its readout, under
  a line saying how to run the page live; the widget state is then dropped, so no widget
  script is needed;
- links to ``../REFERENCES.md`` go to the site's references page; the start page keeps its
  chapter map and links to the assignments' student copies (as downloads); its guide for
  instructors is left out, a line saying where it is (the site is for readers and students);
- a line under each title offers the committed notebook as a download.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import shutil
import sys
import time
from pathlib import Path

from widget_pictures import Widgets, png_tag

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
BUILD = ROOT / "_build"
EXECUTED = BUILD / "executed"
SOURCE = BUILD / "site-src"
STUDENT = NOTEBOOKS / "assignments" / "student"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
TIMEOUT = 600  # s per cell, as the notebook test allows
INSTRUCTORS = "**For instructors.**"
"""A paragraph of the start page that starts so is for instructors, not on the site."""
INSTRUCTOR_HEADING = re.compile(r"^#+ .*\binstructor", re.IGNORECASE)
"""A start-page cell whose heading matches is the instructors' guide, not on the site."""
INSTRUCTORS_ELSEWHERE = (
    "*Instructors*: the guide to the assignments' solutions, hand-out and grading is in the "
    "book's repository (the start page notebook, `notebooks/00_start.ipynb`), not on this site."
)
RUN_LIVE = (
    "To run this page yourself: clone the book's repository, then run `make book` in it "
    "(it installs ppbook into `.venv` and opens JupyterLab; this page is `notebooks/{name}`)."
)
PICTURES = (
    "The explorers on this page are pictures of their first state; their sliders move in "
    "the notebook."
)

# Run in the kernel before the first cell (and that cell removed afterwards): before each
# cell, a figure's text/plain is made a description of it, the alt text of its picture. (A
# cell that itself changes the inline backend's figure formats and shows a figure keeps
# matplotlib's own text for it: the change drops every figure formatter until the next cell.)
ALT_HOOK = r"""
def _ppbook_site_alt(fig, p, cycle):
    parts = []
    if getattr(fig, "_suptitle", None) is not None and fig._suptitle.get_text():
        parts.append(fig._suptitle.get_text())
    for ax in fig.axes:
        bits = [t for t in (ax.get_title("left"), ax.get_title(), ax.get_title("right")) if t]
        if ax.get_xlabel():
            bits.append("x: " + ax.get_xlabel())
        if ax.get_ylabel():
            bits.append("y: " + ax.get_ylabel())
        if bits:
            parts.append(", ".join(bits))
    p.text("Figure: " + "; ".join(parts) if parts else "Figure")


def _ppbook_site_alt_register(*args):
    # before every cell: turning on matplotlib's inline backend drops every Figure formatter
    formatters = get_ipython().display_formatter.formatters["text/plain"]
    formatters.for_type_by_name("matplotlib.figure", "Figure", _ppbook_site_alt)


# registered before the inline backend's own post_execute (which shows the figures)
get_ipython().events.register("pre_run_cell", _ppbook_site_alt_register)
get_ipython().events.register("post_execute", _ppbook_site_alt_register)
get_ipython().run_line_magic("matplotlib", "inline")  # the reader's backend, on now: not mid-cell
_ppbook_site_alt_register()
"""


def pages() -> list[Path]:
    """The start page and the chapters: the notebooks directly in notebooks/ (not the
    assignments, which live in notebooks/assignments/), numbered ones first."""
    found = [p for p in NOTEBOOKS.glob("*.ipynb") if p.is_file()]
    return sorted(found, key=lambda p: (not p.name[:2].isdigit(), p.name))


def package_digest() -> str:
    """sha256 over the ppbook package's files (code and data) and the Python version."""
    digest = hashlib.sha256(sys.version.encode())
    for path in sorted((ROOT / "ppbook").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(path.relative_to(ROOT).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


class NotebookError(Exception):
    """A notebook's cell raised while the site executed it: the one line to print."""


def execute(path: Path, key: str) -> dict:
    """The executed notebook, from the cache when its key matches, else run now."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    EXECUTED.mkdir(parents=True, exist_ok=True)
    cached, cached_key = EXECUTED / path.name, EXECUTED / (path.name + ".key")
    if cached.exists() and cached_key.exists() and cached_key.read_text() == key:
        print(f"site: {path.name}: executed copy reused (_build/executed/)", flush=True)
        return json.loads(cached.read_text())
    notebook = nbformat.read(path, as_version=4)
    notebook.cells.insert(0, nbformat.v4.new_code_cell(ALT_HOOK))
    start = time.monotonic()
    client = NotebookClient(
        notebook,
        timeout=TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOKS)}},
    )
    try:
        client.execute()
    except CellExecutionError as error:
        plain = re.sub(r"\x1b\[[0-9;]*m", "", str(error))  # the traceback's colours
        lines = [line for line in plain.splitlines() if line.strip()]
        raise NotebookError(
            f"site: error: {path.relative_to(ROOT)} raised in a cell ({lines[-1][:200]}); "
            "fix the notebook (or ppbook) so that it runs from a fresh kernel"
        ) from None
    del notebook.cells[0]
    print(f"site: {path.name}: executed in {time.monotonic() - start:.0f} s", flush=True)
    nbformat.write(notebook, cached)
    cached_key.write_text(key)
    return json.loads(cached.read_text())


def static_outputs(cell: dict, widgets: Widgets, name: str) -> list[dict]:
    """A code cell's outputs as a page without a kernel shows them."""
    outputs = []
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        if WIDGET_VIEW in data:
            note = PICTURES + " " + RUN_LIVE.format(name=name)
            outputs.append(widgets.static(data[WIDGET_VIEW], note))
        elif "image/png" in data:
            width = output.get("metadata", {}).get("image/png", {}).get("width")
            alt = "".join(data.get("text/plain", "Figure"))
            outputs.append(
                {
                    "output_type": "display_data",
                    "metadata": {},
                    "data": {"text/html": png_tag(data["image/png"], width, alt)},
                }
            )
        else:
            outputs.append(output)
    return outputs


def site_markdown(source: str, name: str) -> str:
    source = source.replace("](../REFERENCES.md", "](references.md")
    if name.startswith("00_"):
        paragraphs = source.split("\n\n")
        source = "\n\n".join(p for p in paragraphs if not p.lstrip().startswith(INSTRUCTORS))
        source = re.sub(
            r"\[([^\]]+)\]\(assignments/student/([^)]+)\)",
            r"{download}`\1 <downloads/assignments/student/\2>`",
            source,
        )
    return source


def header(name: str, live: bool) -> dict:
    lines = [
        f"{{download}}`Download this notebook <downloads/{name}>` (`{name}`, without outputs)."
    ]
    if live:
        lines.append(PICTURES)
    lines.append(RUN_LIVE.format(name=name))
    return {
        "cell_type": "markdown",
        "id": "ppbook-site-header",
        "metadata": {},
        "source": "\n".join(f"{line}\n" for line in lines).rstrip("\n"),
    }


def without_instructor_guide(cells: list[dict]) -> list[dict]:
    """The start page's cells less its instructors' guide, which a line points to."""
    kept, dropped = [], False
    for cell in cells:
        source = "".join(cell["source"]).lstrip()
        if cell["cell_type"] == "markdown" and INSTRUCTOR_HEADING.match(source):
            if not dropped:
                kept.append({**cell, "source": INSTRUCTORS_ELSEWHERE})
            dropped = True
            continue
        kept.append(cell)
    return kept


def make_static(notebook: dict, name: str) -> dict:
    notebook = copy.deepcopy(notebook)
    if name.startswith("00_"):
        notebook["cells"] = without_instructor_guide(notebook["cells"])
    widgets = Widgets(notebook["metadata"])
    live = False
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown":
            cell["source"] = site_markdown("".join(cell["source"]), name)
        elif cell["cell_type"] == "code":
            live = live or any(WIDGET_VIEW in o.get("data", {}) for o in cell.get("outputs", []))
            cell["outputs"] = static_outputs(cell, widgets, name)
    notebook["metadata"].pop("widgets", None)
    titled = notebook["cells"] and "".join(notebook["cells"][0]["source"]).lstrip().startswith("# ")
    notebook["cells"].insert(1 if titled else 0, header(name, live))
    return notebook


def main() -> int:
    start = time.monotonic()
    key_base = package_digest()
    if SOURCE.exists():
        shutil.rmtree(SOURCE)
    downloads = SOURCE / "downloads"
    (downloads / "assignments").mkdir(parents=True)
    shutil.copytree(
        STUDENT,
        downloads / "assignments" / "student",
        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "*.py", "__pycache__"),
    )
    failed = []
    for path in pages():
        key = hashlib.sha256(key_base.encode() + path.read_bytes()).hexdigest()
        try:
            executed = execute(path, key)
        except NotebookError as error:  # the others still run (and are cached) first
            failed.append(str(error))
            continue
        static = make_static(executed, path.name)
        (SOURCE / path.name).write_text(json.dumps(static, indent=1, ensure_ascii=False) + "\n")
        shutil.copy2(path, downloads / path.name)
    if failed:
        print("\n".join(failed), file=sys.stderr)
        return 1
    references = (ROOT / "REFERENCES.md").read_text()
    (SOURCE / "references.md").write_text(references)
    print(f"site: notebooks ready in {time.monotonic() - start:.0f} s ({SOURCE.relative_to(ROOT)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
