"""The README is a front page that stays true: two commands in its quick start, every file
it names exists, every notebook is in its chapter map, and its picture is what
docs/readme_figure.py draws from the simulator."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _section(title: str) -> str:
    return README.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_quick_start_has_exactly_the_two_commands():
    block = re.findall(r"```bash\n(.*?)```", _section("Quick start"), re.S)
    commands = [line.split("#")[0].strip() for b in block for line in b.splitlines()]
    assert [c for c in commands if c] == ["make book", "make test"]


def test_every_path_the_readme_names_exists():
    named = set(re.findall(r"`((?:ppbook|docs|notebooks|data|tests|benchmarks)/[\w./-]*)`", README))
    named |= set(re.findall(r"\]\(((?:docs|notebooks)/[\w./-]+)\)", README))
    assert named, "the README names no files"
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, missing


def test_the_chapter_map_lists_every_notebook_and_no_other():
    rows = set(re.findall(r"^\| `([\w/]+)` \|", _section("The book"), re.M))
    notebooks = {p.stem for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert rows - {"assignments/"} == notebooks


def test_the_reading_order_names_five_files_of_the_package():
    files = re.findall(r"^\d\. `([\w/.]+)`", _section("Reading the package"), re.M)
    assert len(files) == 5 and all((ROOT / f).is_file() for f in files), files


def test_the_picture_is_the_one_the_simulator_draws(tmp_path):
    script = ROOT / "docs" / "readme_figure.py"
    out = tmp_path / "figure.png"
    subprocess.run([sys.executable, str(script), str(out)], check=True, capture_output=True)
    committed = Image.open(ROOT / "docs" / "images" / "one_f_one_b.png")
    drawn = Image.open(out)
    assert abs(committed.width - drawn.width) <= 4 and abs(committed.height - drawn.height) <= 4
    # the caption's numbers are the simulator's: makespan (m+p-1)(F+B) and f = (p-1)/(m+p-1)
    from ppbook.costs import Costs
    from ppbook.schedules import build
    from ppbook.simulate import simulate

    run = simulate(build("1f1b", 4, 8), Costs(F=1.0, B=2.0))
    assert f"makespan {run.makespan:g}" in README and "f = idle/total = 3/11" in README
    assert abs(run.bubble_fraction - 3 / 11) < 1e-12
