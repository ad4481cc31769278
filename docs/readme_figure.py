"""Draw the README's picture: 1F1B on 4 ranks with 8 micro-batches (F = 1, B = 2), simulated
by ppbook, with the activations each rank holds. Run: .venv/bin/python docs/readme_figure.py
[OUT] (default docs/images/one_f_one_b.png); tests/test_readme.py redraws it and compares."""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from ppbook.costs import Costs  # noqa: E402
from ppbook.schedules import build  # noqa: E402
from ppbook.simulate import simulate  # noqa: E402
from ppbook.views.gantt import timeline_figure  # noqa: E402

OUT = Path(__file__).with_name("images") / "one_f_one_b.png"


def draw(out: Path = OUT) -> Path:
    """Simulate 1F1B (p = 4, m = 8, F = 1, B = 2, no transfer time) and save its Gantt chart
    with the memory panel to ``out`` (PNG, 120 dpi); return ``out``."""
    timeline = simulate(build("1f1b", 4, 8), Costs(F=1.0, B=2.0))
    fig = timeline_figure(timeline, memory=True, width=8.0)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120, bbox_inches="tight", metadata={"Software": None})
    return out


if __name__ == "__main__":
    print(draw(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT))
