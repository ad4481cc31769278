"""The site's Python API reference: one page per part of the package, from the docstrings.

:func:`parts` walks the ``ppbook`` package (pkgutil) and groups its modules by their first
component below ``ppbook`` (``ppbook.schedules.*`` on one page, the top-level modules on
another). Old module paths that moved (:data:`ppbook.moved.MOVED`) are left out: each is
the very module at its new path, documented there. Sphinx's autodoc writes each module's
docstrings when the site is built, so the pages cannot drift from the code.
``python site/api_reference.py FOLDER`` writes ``FOLDER/api.md`` and ``FOLDER/api/*.md``.
"""

from __future__ import annotations

import pkgutil
import sys
from pathlib import Path

import ppbook
from ppbook.moved import MOVED

REFUSES_IMPORT = {
    "ppbook.assign.guarded_transport": "it loads only inside the grader's measuring run "
    "(python -m ppbook.assign.measure_transport), which names the student's transport file",
}
"""Modules that refuse to be imported on their own, and why: named on the page instead."""


def modules() -> list[str]:
    """Every module of the package except the old paths kept as aliases."""
    found = ["ppbook"]
    for info in pkgutil.walk_packages(ppbook.__path__, prefix="ppbook."):
        name = info.name
        if name in MOVED or name in REFUSES_IMPORT:
            continue
        if any(part.startswith("_") for part in name.split(".")[1:]):
            continue
        found.append(name)
    return sorted(found)


def parts() -> dict[str, list[str]]:
    """Page name -> modules on it: ``ppbook.<part>`` and what is below it, or the top level."""
    grouped: dict[str, list[str]] = {}
    packages = {
        m
        for m in modules()
        if (Path(ppbook.__path__[0]) / m.split(".", 1)[-1].replace(".", "/")).is_dir()
    }
    for name in modules():
        pieces = name.split(".")
        if name == "ppbook" or (len(pieces) == 2 and name not in packages):
            page = "ppbook"
        else:
            page = ".".join(pieces[:2])
        grouped.setdefault(page, []).append(name)
    return dict(sorted(grouped.items(), key=lambda item: (item[0] != "ppbook", item[0])))


def page(title: str, names: list[str]) -> str:
    lines = [f"# `{title}`", ""]
    if title == "ppbook":
        lines += ["The package and its top-level modules.", ""]
    for name in names:
        directive = ["```{eval-rst}", f".. automodule:: {name}", "   :members:"]
        # a package function named like one of its modules (ppbook.schedules.dualpipe):
        # documented in that module, once
        clashes = sorted(
            other.rsplit(".", 1)[1]
            for other in modules()
            if "." in other and other.rsplit(".", 1)[0] == name
        )
        if clashes:
            directive.append(f"   :exclude-members: {', '.join(clashes)}")
        lines += [*directive, "```", ""]
    refused = [(m, why) for m, why in REFUSES_IMPORT.items() if m.startswith(title + ".")]
    for name, why in refused:
        lines += [f"`{name}` is not shown here: {why}.", ""]
    return "\n".join(lines)


def write(folder: Path) -> None:
    (folder / "api").mkdir(parents=True, exist_ok=True)
    grouped = parts()
    index = [
        "# Python API reference",
        "",
        "Written from the package's docstrings when the site is built (Sphinx autodoc, "
        "`site/api_reference.py`), one page per part of `ppbook`. Modules that moved in 0.2.0 "
        "keep their old path as an alias of the new one (`ppbook.moved`); they are documented "
        "under the new path.",
        "",
        "```{toctree}",
        ":maxdepth: 1",
        "",
        *[f"api/{name}" for name in grouped],
        "```",
        "",
    ]
    (folder / "api.md").write_text("\n".join(index))
    for name, names in grouped.items():
        (folder / "api" / f"{name}.md").write_text(page(name, names))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python site/api_reference.py FOLDER", file=sys.stderr)
        return 2
    write(Path(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
