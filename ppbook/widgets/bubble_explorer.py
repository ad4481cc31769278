"""Chapter 1's bubble explorer: p, m, v and a target bubble; both conventions; what m the
target needs; a small timeline whose idle ramps shrink as m grows.

``bubble_explorer()`` builds the control; a notebook only displays it. The numbers come
from :mod:`ppbook.symbolic` (exact values from the derived sympy expressions, floats from
:mod:`ppbook.symbolic.numeric`, the smallest m for a target from
:func:`~ppbook.symbolic.numeric.min_microbatches`), the curves from
:mod:`ppbook.views.bubble_curves`, the timeline from :func:`ppbook.simulate.simulate` of GPipe
(v = 1) or interleaved 1F1B (v > 1) at t_f = 1, t_b = 2. The picture is one matplotlib
``Figure`` shown as a 2x PNG at its declared size (:mod:`ppbook.widgets.layout`): no
ipympl, no pyplot state.

With v > 1 chunks per rank the m slider steps through multiples of p, where the
interleaved formulas hold (Megatron-LM's rule), and the readout says so.

Conventions (REFERENCES.md): bubble fraction f = idle/total = (p-1)/(vm+p-1) (GPipe,
arXiv:1811.06965; v = 1) and bubble ratio r = idle/compute = (p-1)/(vm) (Megatron-LM,
arXiv:2104.04473; Ultra-Scale Playbook).
"""

from __future__ import annotations

import ipywidgets as widgets

from ppbook.costs import Costs
from ppbook.schedules import gpipe, interleaved_1f1b
from ppbook.simulate import simulate
from ppbook.symbolic.checks import check_count
from ppbook.symbolic.formula import formulas
from ppbook.symbolic.numeric import bubble_fraction, bubble_ratio, min_microbatches
from ppbook.symbolic.symbols import m as m_symbol
from ppbook.symbolic.symbols import p as p_symbol
from ppbook.symbolic.symbols import v as v_symbol
from ppbook.timeline import Timeline
from ppbook.views.bubble_curves import CONVENTION_LABELS, bubble_curve
from ppbook.views.colors import IDLE_COLOR, KIND_COLORS
from ppbook.views.figure import column_figure, text_size
from ppbook.widgets.explorer import Explorer, fit_slider
from ppbook.widgets.layout import TEXT, picture, readout, show_figure

TIMELINE_COSTS = Costs(F=1.0, B=2.0)
"""Pass times of the small timeline: chapter 1's t_f = 1, t_b = 2 (one device's share)."""


def _exact(name: str, p: int, m: int, v: int) -> str:
    """The exact value of a derived formula at (p, m, v), e.g. ``7/39``."""
    return str(formulas()[name].expr.subs({p_symbol: p, m_symbol: m, v_symbol: v}))


class BubbleExplorer(Explorer):
    """Sliders for p, m, v and a target bubble b; a readout of f, r and the smallest m
    that meets the target; the curves against m and a small timeline.

    The sliders (``stages_slider``, ``microbatches_slider``, ``chunks_slider``,
    ``target_slider``; :meth:`update` takes ``num_stages``, ``num_microbatches``,
    ``num_chunks`` and ``target``) redraw through :meth:`refresh`: ``readout`` (HTML), the
    lines in ``axes``, the timeline in ``timeline_axes`` (its run in ``timeline``) and
    the PNG in ``image``.
    """

    def __init__(
        self,
        num_stages: int = 8,
        num_microbatches: int = 32,
        max_stages: int = 32,
        max_microbatches: int = 128,
        num_chunks: int = 1,
        target: float = 0.1,
    ) -> None:
        name = "bubble_explorer"
        max_stages = check_count(name, "max_stages", max_stages)
        max_microbatches = check_count(name, "max_microbatches", max_microbatches)
        if not 1 <= check_count(name, "num_stages p", num_stages) <= max_stages:
            raise ValueError(f"{name} needs num_stages p <= max_stages = {max_stages}")
        if not 1 <= check_count(name, "num_microbatches m", num_microbatches) <= max_microbatches:
            raise ValueError(
                f"{name} needs num_microbatches m <= max_microbatches = {max_microbatches}"
            )
        if not 1 <= check_count(name, "num_chunks v", num_chunks) <= 4:
            raise ValueError(f"{name} needs num_chunks v in 1..4, got {num_chunks}")
        if num_chunks > 1 and (num_microbatches % num_stages or max_microbatches < num_stages):
            raise ValueError(
                f"{name} needs num_microbatches m a multiple of num_stages p = {num_stages} "
                f"when v > 1 (Megatron-LM's rule), got m = {num_microbatches}"
            )
        if not 0.01 <= target <= 0.5:
            raise ValueError(f"{name} needs a target bubble in 0.01..0.5, got {target!r}")
        controls = {
            "num_stages": widgets.IntSlider(min=1, max=max_stages, description="stages p"),
            "num_microbatches": widgets.IntSlider(
                min=1, max=max_microbatches, description="micro-batches m"
            ),
            "num_chunks": widgets.IntSlider(min=1, max=4, description="chunks v"),
            "target": widgets.FloatSlider(
                min=0.01, max=0.5, step=0.01, description="target bubble b"
            ),
        }
        self.stages_slider = controls["num_stages"]
        self.microbatches_slider = controls["num_microbatches"]
        self.chunks_slider = controls["num_chunks"]
        self.target_slider = controls["target"]
        self.readout = readout(min_height="6em")
        self.figure = column_figure(5.2, layout=None)
        self.image = picture(self.figure)
        self.max_microbatches = max_microbatches
        self.axes = self.figure.add_axes((0.09, 0.52, 0.89, 0.42))
        self.timeline_axes = self.figure.add_axes((0.09, 0.1, 0.89, 0.28))
        self.timeline: Timeline | None = None
        self.curves = {}
        self.markers = {}
        small = text_size(self.figure, "small")
        for convention, style in (("fraction", "-"), ("ratio", "--")):
            (self.curves[convention],) = self.axes.plot([1], [0], style)
            color = self.curves[convention].get_color()
            (self.markers[convention],) = self.axes.plot([1], [0], "o", color=color)
        self.target_line = self.axes.axhline(0.1, color="#b00020", linestyle=":", linewidth=1.2)
        self.needed_line = self.axes.axvline(1, color="#b00020", linestyle=":", linewidth=1.2)
        self.axes.set_xlabel("micro-batches per step, m", fontsize=small)
        self.axes.set_ylabel("bubble", fontsize=small)
        self.axes.set_xlim(1, max_microbatches)
        self.axes.tick_params(labelsize=small)
        self.axes.grid(alpha=0.3)
        self.timeline_axes.tick_params(labelsize=small)
        self.timeline_axes.set_xlim(0, 1)
        self.timeline_axes.set_xlabel("share of the step (time / makespan)", fontsize=small)
        values = {
            "num_stages": num_stages,
            "num_chunks": num_chunks,
            "num_microbatches": num_microbatches,
            "target": target,
        }
        self._start(controls, [self.readout, self.image], values)

    def _apply(self, values: dict) -> None:
        """Set p and v first, let the m slider offer what they allow, then m and b; an m
        that is not a multiple of p while v > 1 is a ValueError."""
        for name in ("num_stages", "num_chunks"):
            if name in values:
                self._set(name, values[name])
        self._fit_microbatches()
        p, v = self.stages_slider.value, self.chunks_slider.value
        m = values.get("num_microbatches")
        if m is not None and v > 1 and m % p:
            raise ValueError(
                f"with v = {v} chunks m must be a multiple of p = {p} (Megatron-LM's rule), "
                f"got m = {m}"
            )
        if m is not None:
            self._set("num_microbatches", m)
        if "target" in values:
            self._set("target", values["target"])

    def _changed(self, change: dict) -> None:
        """A new p or v changes which m the slider offers."""
        if change["owner"] in (self.stages_slider, self.chunks_slider):
            self._fit_microbatches()

    def _fit_microbatches(self) -> None:
        """With v > 1 let the m slider offer the multiples of p only (Megatron-LM's rule)."""
        p, v = self.stages_slider.value, self.chunks_slider.value
        step = p if v > 1 else 1
        with self._held():
            fit_slider(self.microbatches_slider, step, step, self.max_microbatches)

    def refresh(self) -> None:
        """Recompute f, r and the m the target needs for the sliders' p, m, v and b;
        redraw the readout and the picture."""
        p, m = self.stages_slider.value, self.microbatches_slider.value
        v, target = self.chunks_slider.value, self.target_slider.value
        f, r = bubble_fraction(p, m, v), bubble_ratio(p, m, v)
        needed = min_microbatches(p, round(target, 6), "fraction", v)
        self.readout.value = _readout_html(p, m, v, target, f, r, needed)

        step = p if v > 1 else 1
        counts = list(range(step, self.max_microbatches + 1, step))
        for convention, value in (("fraction", f), ("ratio", r)):
            self.curves[convention].set_data(counts, bubble_curve(convention, p, counts, v))
            label = CONVENTION_LABELS[convention]
            self.curves[convention].set_label(label.replace("m", "vm") if v > 1 else label)
            self.markers[convention].set_data([m], [value])
        self.target_line.set_ydata([target, target])
        self.needed_line.set_xdata([needed, needed])
        self.needed_line.set_visible(needed <= self.max_microbatches)
        # The ratio exceeds 1 when vm < p - 1: let the axis follow so its dot stays in view.
        self.axes.set_ylim(0, max(1.0, 1.1 * r))
        small = text_size(self.figure, "small")
        self.axes.legend(loc="upper right", fontsize=small)
        self.axes.set_title(
            f"p = {p} stages, v = {v}: dots at m = {m}; dotted: target b = {target:.2f} "
            f"and the smallest m = {needed} that meets it",
            fontsize=small,
        )
        self._draw_timeline(p, m, v)
        show_figure(self.image, self.figure)

    def _draw_timeline(self, p: int, m: int, v: int) -> None:
        """GPipe (v = 1) or interleaved 1F1B (v > 1) at t_f = 1, t_b = 2, one bar per busy
        stretch, time as a share of the step: the idle ramps at both ends shrink as m grows."""
        schedule = gpipe(p, m) if v == 1 else interleaved_1f1b(p, m, v)
        self.timeline = timeline = simulate(schedule, TIMELINE_COSTS)
        ax = self.timeline_axes
        for artist in [*ax.collections, *ax.patches]:
            artist.remove()
        end = timeline.makespan
        for rank in range(p):
            ax.broken_barh([(0.0, 1.0)], (rank - 0.4, 0.8), color=IDLE_COLOR, zorder=0)
            for kind in ("F", "B"):
                bars = _busy(timeline, rank, kind)
                ax.broken_barh(
                    [(a / end, (b - a) / end) for a, b in bars],
                    (rank - 0.4, 0.8),
                    color=KIND_COLORS[kind],
                    zorder=1,
                )
        ax.set_ylim(p - 0.5, -0.5)
        ax.set_yticks([0, p - 1] if p > 1 else [0], ["rank 0", f"rank {p - 1}"][: min(p, 2)])
        name = "GPipe" if v == 1 else f"interleaved 1F1B, v = {v}"
        ax.set_title(
            f"{name}, p = {p}, m = {m}, t_f = 1, t_b = 2: forward blue, backward green, "
            f"idle grey = {timeline.bubble_fraction:.1%} of the step",
            fontsize=text_size(self.figure, "small"),
        )


def _busy(timeline: Timeline, rank: int, kind: str) -> list[tuple[float, float]]:
    """The stretches of time ``rank`` runs ``kind`` passes without a gap, (start, end)."""
    bars: list[list[float]] = []
    row = timeline.schedule.actions[rank]
    for action, start, end in zip(row, timeline.starts[rank], timeline.ends[rank], strict=True):
        if action.kind != kind:
            continue
        if bars and start - bars[-1][1] <= 1e-9:
            bars[-1][1] = end
        else:
            bars.append([start, end])
    origin = timeline.origin
    return [(a - origin, b - origin) for a, b in bars]


def _readout_html(p: int, m: int, v: int, target: float, f: float, r: float, needed: int) -> str:
    """Both conventions, exact and as decimals; the smallest m for the target; the m rule."""
    if v == 1:
        fraction = f"(p-1)/(m+p-1) = {_exact('bubble_fraction', p, m, v)}"
        ratio = f"(p-1)/m = {_exact('bubble_ratio', p, m, v)}"
    else:
        fraction = f"(p-1)/(vm+p-1) = {_exact('interleaved_bubble_fraction', p, m, v)}"
        ratio = f"(p-1)/(vm) = {_exact('interleaved_bubble_ratio', p, m, v)}"
    meets = "meets it" if f <= target + 1e-12 else "does not meet it yet"
    rule = (
        f"<br>with v = {v} chunks m must be a multiple of p = {p} (Megatron-LM's rule): "
        f"the m slider steps by {p}"
        if v > 1
        else ""
    )
    return (
        f"<div style='{TEXT}'>"
        f"<b>p = {p}, m = {m}, v = {v}</b>: "
        f"bubble fraction f = {fraction} = <b>{f:.4f}</b> of all device time is idle; "
        f"bubble ratio r = {ratio} = <b>{r:.4f}</b> of the compute time. (f = r/(1+r).)<br>"
        f"target bubble fraction b = {target:.2f}: the smallest m with f &lt;= b is "
        f"<b>m = {needed}</b> (f = {bubble_fraction(p, needed, v):.4f}); m = {m} {meets}"
        f"{rule}</div>"
    )


def bubble_explorer(
    num_stages: int = 8,
    num_microbatches: int = 32,
    max_stages: int = 32,
    max_microbatches: int = 128,
    num_chunks: int = 1,
    target: float = 0.1,
) -> BubbleExplorer:
    """Build chapter 1's explorer: move p, m, v and a target bubble; watch f, r, the m the
    target needs, the curves and a timeline follow."""
    return BubbleExplorer(
        num_stages, num_microbatches, max_stages, max_microbatches, num_chunks, target
    )
