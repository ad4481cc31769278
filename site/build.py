"""``make site``: the book as a static website in ``_build/html/`` (``index.html`` first).

1. site/prepare.py executes each notebook of ``notebooks/`` once (reusing
   ``_build/executed/`` when nothing changed) and writes static copies to
   ``_build/site-src/``; a cell that raises stops the build with one line.
2. The pages of site/pages/ (the index's table of contents lists every notebook found),
   the guides of docs/ (running schedules, sizing a job, the grader), the references page
   (REFERENCES.md), the CLI reference (site/cli_reference.py, from the
   argument parsers) and the API reference (site/api_reference.py, autodoc) join them.
3. Sphinx (MyST-NB, Sphinx Book Theme; site/conf.py) writes the HTML, its search index and
   MathJax served from the site; any Sphinx warning fails the build (``-W``).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import api_reference  # noqa: E402
import cli_reference  # noqa: E402
import prepare  # noqa: E402

HTML = prepare.BUILD / "html"
DOCTREES = prepare.BUILD / "doctrees"


GUIDES = ("running", "sizing", "instructors")
"""docs/<name>.md: running schedules (launch, binding, security), sizing a job, and the
assignments' grader and its isolation; each becomes guide_<name>.html."""


def sources() -> None:
    source = prepare.SOURCE
    # the start page shares the book's title: in the contents it is the start
    chapters = "\n".join(
        f"Start here: the chapters and assignments <{path.stem}>"
        if path.name.startswith("00_")
        else path.stem
        for path in prepare.pages()
    )
    for page in (HERE / "pages").glob("*.md"):
        (source / page.name).write_text(page.read_text().replace("%CHAPTERS%", chapters))
    for guide in GUIDES:  # the repository's guides (docs/), as pages of the site
        (source / f"guide_{guide}.md").write_text(
            (HERE.parent / "docs" / f"{guide}.md").read_text()
        )
    (source / "cli.md").write_text(cli_reference.reference())
    api_reference.write(source)


SITE_MODULES = ("sphinx", "myst_nb", "sphinx_book_theme", "sphinx-mathjax-offline", "nbclient")


def missing_modules() -> list[str]:
    """The site's tools (pyproject's ``site`` extra) that this Python cannot import."""
    import importlib.util

    return [name for name in SITE_MODULES if importlib.util.find_spec(name) is None]


def main() -> int:
    start = time.monotonic()
    missing = missing_modules()
    if missing:
        print(
            f"site: error: {', '.join(missing)} not installed; install the site's tools with "
            "`pip install -e '.[site]'` (`make site` does)",
            file=sys.stderr,
        )
        return 2
    if prepare.main() != 0:
        return 1
    sources()
    if HTML.exists():
        shutil.rmtree(HTML)
    command = [
        sys.executable,
        "-m",
        "sphinx",
        "-b",
        "html",
        "-q",
        "-W",
        "--keep-going",
        "-c",
        str(HERE),
        "-d",
        str(DOCTREES),
        str(prepare.SOURCE),
        str(HTML),
    ]
    done = subprocess.run(command, check=False)
    if done.returncode != 0:
        print(
            f"site: error: Sphinx failed (exit {done.returncode}); its warnings are above",
            file=sys.stderr,
        )
        return 1
    print(
        f"site: built {HTML.relative_to(prepare.ROOT)}/index.html in "
        f"{time.monotonic() - start:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
