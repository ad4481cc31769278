"""The repository stands on its own: licence, citation, and references it ships itself.

A reader who clones the repository gets every file the product points to: the book's
references are REFERENCES.md at the root (no path outside the repository), the licence
says which parts are MIT and which CC BY 4.0, and CITATION.cff is valid CFF 1.2.0 with
the version pyproject.toml builds.
"""

import re
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
# What a reader gets: the package, the chapters, the README, the tests, data, benchmarks.
PRODUCT = ["ppbook", "notebooks", "README.md", "REFERENCES.md", "tests", "data", "benchmarks"]
TEXT_SUFFIXES = {".py", ".ipynb", ".md", ".txt", ".toml", ".yml", ".yaml", ".csv", ".json"}


def product_files():
    for entry in PRODUCT:
        path = ROOT / entry
        files = [path] if path.is_file() else sorted(path.rglob("*"))
        for file in files:
            skipped = {"__pycache__", ".ipynb_checkpoints"} & set(file.parts)
            if file.is_file() and file.suffix in TEXT_SUFFIXES and not skipped:
                yield file


def test_citation_cff_is_valid_cff_1_2_0_with_pyprojects_version():
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert citation["cff-version"] == "1.2.0"
    for key in ("message", "title", "authors", "version", "license", "date-released"):
        assert citation[key], key
    assert citation["version"] == PYPROJECT["project"]["version"]
    assert citation["authors"] == [{"name": "ppbook contributors"}]
    assert citation["license"] == PYPROJECT["project"]["license"] == "MIT"
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(citation["date-released"]))


def test_license_names_mit_for_code_and_cc_by_4_for_prose_and_figures():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "MIT License" in text
    assert "Creative Commons Attribution 4.0 International (CC BY 4.0)" in text
    assert "Permission is hereby granted, free of charge" in text  # the MIT text itself
    assert "creativecommons.org/licenses/by/4.0/legalcode" in text


def test_pyproject_license_is_an_spdx_string_with_its_file():
    """PEP 639: a TOML table here makes setuptools warn on every build."""
    project = PYPROJECT["project"]
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").is_file()


@pytest.mark.parametrize("pattern", [r"\.\./shared/", r"/work/shared/", r"shared/REFERENCES"])
def test_the_product_refers_to_no_file_outside_the_repository(pattern):
    this_file = Path(__file__).resolve()
    offenders = [
        str(file.relative_to(ROOT))
        for file in product_files()
        if file.resolve() != this_file and re.search(pattern, file.read_text(encoding="utf-8"))
    ]
    assert not offenders, f"{pattern} in {offenders}"


def test_every_path_to_references_md_leads_to_the_one_at_the_root():
    """``REFERENCES.md`` alone cites the root file; a path to it must resolve there."""
    root_file = ROOT / "REFERENCES.md"
    assert root_file.is_file()
    wrong = []
    for file in product_files():
        for prefix in re.findall(r"([\w./-]*/)REFERENCES\.md", file.read_text(encoding="utf-8")):
            if (file.parent / prefix / "REFERENCES.md").resolve() != root_file:
                wrong.append(f"{file.relative_to(ROOT)}: {prefix}REFERENCES.md")
    assert not wrong, wrong


def test_every_arxiv_paper_the_product_cites_is_in_references():
    references = (ROOT / "REFERENCES.md").read_text(encoding="utf-8")
    cited = {
        arxiv_id: str(file.relative_to(ROOT))
        for file in product_files()
        for arxiv_id in re.findall(r"arXiv:(\d{4}\.\d{4,5})", file.read_text(encoding="utf-8"))
    }
    assert cited, "no arXiv citations found: the search is broken"
    missing = {i: f for i, f in cited.items() if f"arXiv:{i}" not in references}
    assert not missing, f"cited but not in REFERENCES.md: {missing}"


def test_references_cover_the_books_sources_and_both_conventions():
    references = (ROOT / "REFERENCES.md").read_text(encoding="utf-8")
    for source in (
        "GPipe",
        "PipeDream",
        "Megatron-LM",
        "Zero Bubble",
        "DeepSeek-V3",
        "Korthikanti",
        "Ultra-Scale Playbook",
        "torch.distributed.pipelining",
    ):
        assert source in references, source
    assert "(p-1)/(m+p-1)" in references and "(p-1)/m" in references
    assert "bubble fraction f" in references and "bubble ratio r" in references
