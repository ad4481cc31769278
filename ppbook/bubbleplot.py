"""Chapter 1's pictures: the bubble against m, and a GPipe timeline drawn by hand.

Both functions draw on a matplotlib ``Axes`` the caller owns and change no global
setting. The bubble curves come from :mod:`ppbook.symbolic.numeric`; every label says
which convention it shows (REFERENCES.md): the bubble fraction f = (p-1)/(m+p-1)
(GPipe, arXiv:1811.06965) or the bubble ratio r = (p-1)/m (Megatron-LM,
arXiv:2104.04473; Ultra-Scale Playbook). The timeline comes from
:func:`ppbook.symbolic.gpipe_timeline`, the closed forms of the GPipe recurrences.
"""

from collections.abc import Iterable, Sequence

from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from ppbook.symbolic.gpipe import TimedPass
from ppbook.symbolic.numeric import bubble_fraction, bubble_ratio

#: Legend text of each convention, with its formula.
CONVENTION_LABELS = {
    "fraction": "bubble fraction f = (p-1)/(m+p-1)",
    "ratio": "bubble ratio r = (p-1)/m",
}
_STYLE = {"fraction": "-", "ratio": "--"}
_PASS_COLORS = {"F": "tab:blue", "B": "tab:orange"}


def bubble_curve(convention: str, num_stages: int, microbatches: Sequence[int]) -> list[float]:
    """The bubble in ``convention`` ("fraction" or "ratio") at each m of ``microbatches``."""
    if convention not in CONVENTION_LABELS:
        raise ValueError(f'convention must be "fraction" or "ratio", got {convention!r}')
    func = bubble_fraction if convention == "fraction" else bubble_ratio
    return [func(num_stages, m) for m in microbatches]


def plot_bubble_vs_microbatches(
    ax: Axes,
    stages: Iterable[int] = (2, 4, 8, 16),
    max_microbatches: int = 64,
    conventions: Sequence[str] = ("fraction", "ratio"),
) -> dict[tuple[str, int], Line2D]:
    """Draw f and/or r against m = 1..max_microbatches, one colour per p.

    Solid lines are the bubble fraction f, dashed lines the bubble ratio r. Returns the
    lines by (convention, p). The y axis stops at 1: r exceeds 1 when m < p - 1.
    """
    microbatches = list(range(1, max_microbatches + 1))
    lines = {}
    for color, p in enumerate(stages):
        for convention in conventions:
            label = f"p = {p}, {convention} {convention[0]}"
            (lines[convention, p],) = ax.plot(
                microbatches,
                bubble_curve(convention, p, microbatches),
                _STYLE[convention],
                color=f"C{color}",
                label=label,
            )
    ax.set_xlabel("micro-batches per step, m")
    ax.set_ylabel("bubble: f solid, r dashed")
    ax.set_ylim(0, 1)
    ax.set_xlim(1, max_microbatches)
    ax.set_title(", ".join(CONVENTION_LABELS[c] for c in conventions), fontsize="medium")
    ax.legend(fontsize="small", ncols=2)
    ax.grid(alpha=0.3)
    return lines


def draw_timeline(ax: Axes, passes: Iterable[TimedPass], title: str = "") -> None:
    """Draw each stage's passes as bars (``broken_barh``): forwards blue, backwards orange.

    Stage 0 is the top row; each bar is labelled with its micro-batch. Empty space on a
    row is that device's bubble.
    """
    passes = list(passes)
    num_stages = 1 + max(x.stage for x in passes)
    for x in passes:
        row = num_stages - 1 - x.stage
        ax.broken_barh(
            [(x.start, x.finish - x.start)],
            (row - 0.4, 0.8),
            facecolors=_PASS_COLORS[x.kind],
            edgecolor="white",
        )
        label = f"{x.kind}{x.microbatch}"
        middle = (x.start + x.finish) / 2
        ax.text(middle, row, label, ha="center", va="center", fontsize="x-small", color="white")
    ax.set_yticks(range(num_stages), [f"stage {s}" for s in reversed(range(num_stages))])
    ax.set_xlabel("time (units of one forward pass)")
    ax.set_xlim(0, max(x.finish for x in passes))
    if title:
        ax.set_title(title, fontsize="medium")
