"""Chapter 1's picture of the bubble against m (timelines are drawn by :mod:`ppbook.views.gantt`).

The functions draw on a matplotlib ``Axes`` the caller owns and change no global
setting; no text is smaller than :data:`~ppbook.views.figure.MIN_TEXT_PX` display
pixels. The bubble curves come from :mod:`ppbook.symbolic.numeric`; every label says
which convention it shows (REFERENCES.md): the bubble fraction f = (p-1)/(m+p-1)
(GPipe, arXiv:1811.06965) or the bubble ratio r = (p-1)/m (Megatron-LM,
arXiv:2104.04473; Ultra-Scale Playbook).
"""

from collections.abc import Iterable, Sequence

from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from ppbook.symbolic.numeric import bubble_fraction, bubble_ratio
from ppbook.views.figure import text_size

#: Legend text of each convention, with its formula.
CONVENTION_LABELS = {
    "fraction": "bubble fraction f = (p-1)/(m+p-1)",
    "ratio": "bubble ratio r = (p-1)/m",
}
_STYLE = {"fraction": "-", "ratio": "--"}


def bubble_curve(
    convention: str, num_stages: int, microbatches: Sequence[int], num_chunks: int = 1
) -> list[float]:
    """The bubble in ``convention`` ("fraction" or "ratio") at each m of ``microbatches``,
    with ``num_chunks`` v chunks per rank (interleaved 1F1B when v > 1)."""
    if convention not in CONVENTION_LABELS:
        raise ValueError(f'convention must be "fraction" or "ratio", got {convention!r}')
    func = bubble_fraction if convention == "fraction" else bubble_ratio
    return [func(num_stages, m, num_chunks) for m in microbatches]


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
    ax.set_title(
        ", ".join(CONVENTION_LABELS[c] for c in conventions),
        fontsize=text_size(ax.figure, "medium"),
    )
    ax.legend(fontsize=text_size(ax.figure, "small"), ncols=2)
    ax.grid(alpha=0.3)
    return lines
