"""Chapter 1's bubble explorer: p and m sliders, both bubble conventions, live plot.

``bubble_explorer()`` builds the control; a notebook only displays it. The numbers come
from :mod:`ppbook.symbolic` (exact values from the derived sympy expressions, floats from
:mod:`ppbook.symbolic.numeric`), the curves from :mod:`ppbook.views.bubble`. The plot is a
matplotlib ``Figure`` rendered to PNG in an ``Image`` widget, so it works with the
default inline backend, needs no ipympl and touches no pyplot state.

Conventions (REFERENCES.md): bubble fraction f = idle/total = (p-1)/(m+p-1) (GPipe,
arXiv:1811.06965); bubble ratio r = idle/compute = (p-1)/m (Megatron-LM,
arXiv:2104.04473; Ultra-Scale Playbook).
"""

import io

import ipywidgets as widgets
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ppbook.symbolic.checks import check_count
from ppbook.symbolic.formula import formulas
from ppbook.symbolic.numeric import bubble_fraction, bubble_ratio
from ppbook.symbolic.symbols import m as m_symbol
from ppbook.symbolic.symbols import p as p_symbol
from ppbook.views.bubble import CONVENTION_LABELS, bubble_curve

DPI = 80


def _exact(name: str, p: int, m: int) -> str:
    """The exact value of a derived formula at (p, m), e.g. ``7/39``."""
    return str(formulas()[name].expr.subs({p_symbol: p, m_symbol: m}))


class BubbleExplorer(widgets.VBox):
    """Sliders for p and m, a readout of f and r, and both curves against m for that p.

    ``stages_slider`` and ``microbatches_slider`` drive :meth:`update`, which refreshes
    ``readout`` (HTML), the lines in ``axes`` and the PNG in ``image``.
    """

    def __init__(
        self,
        num_stages: int = 8,
        num_microbatches: int = 32,
        max_stages: int = 32,
        max_microbatches: int = 128,
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
        stages_slider = widgets.IntSlider(
            value=num_stages, min=1, max=max_stages, description="stages p"
        )
        microbatches_slider = widgets.IntSlider(
            value=num_microbatches, min=1, max=max_microbatches, description="micro-batches m"
        )
        for slider in (stages_slider, microbatches_slider):
            slider.style.description_width = "initial"
        readout = widgets.HTML()
        # Shown at its natural size (6.5 x 3.5 in at DPI): stretched, a PNG turns blurry.
        width, height = int(6.5 * DPI), int(3.5 * DPI)
        image = widgets.Image(
            format="png", layout=widgets.Layout(width=f"{width}px", height=f"{height}px")
        )
        super().__init__([widgets.HBox([stages_slider, microbatches_slider]), readout, image])
        self.stages_slider = stages_slider
        self.microbatches_slider = microbatches_slider
        self.readout = readout
        self.image = image
        self.microbatch_range = list(range(1, max_microbatches + 1))
        self.figure = Figure(figsize=(6.5, 3.5), layout="constrained")
        FigureCanvasAgg(self.figure)
        self.axes = self.figure.add_subplot()
        self.curves = {}
        self.markers = {}
        for convention, style in (("fraction", "-"), ("ratio", "--")):
            (self.curves[convention],) = self.axes.plot(
                self.microbatch_range,
                self.microbatch_range,
                style,
                label=CONVENTION_LABELS[convention],
            )
            color = self.curves[convention].get_color()
            (self.markers[convention],) = self.axes.plot([1], [0], "o", color=color)
        self.axes.set_xlabel("micro-batches per step, m")
        self.axes.set_ylabel("bubble: f solid, r dashed")
        self.axes.set_xlim(1, max_microbatches)
        self.axes.set_ylim(0, 1)
        self.axes.legend(loc="upper right")
        self.axes.grid(alpha=0.3)
        stages_slider.observe(self.update, names="value")
        microbatches_slider.observe(self.update, names="value")
        self.update()

    def update(self, change: dict | None = None) -> None:
        """Recompute f and r for the sliders' p and m; redraw the readout and the plot."""
        p = self.stages_slider.value
        m = self.microbatches_slider.value
        f, r = bubble_fraction(p, m), bubble_ratio(p, m)
        self.readout.value = (
            f"<b>p = {p}, m = {m}</b>: "
            f"bubble fraction f = (p-1)/(m+p-1) = {_exact('bubble_fraction', p, m)} "
            f"= <b>{f:.4f}</b> of all device time is idle; "
            f"bubble ratio r = (p-1)/m = {_exact('bubble_ratio', p, m)} "
            f"= <b>{r:.4f}</b> of the compute time. (f = r/(1+r).)"
        )
        for convention, value in (("fraction", f), ("ratio", r)):
            self.curves[convention].set_ydata(bubble_curve(convention, p, self.microbatch_range))
            self.markers[convention].set_data([m], [value])
        # The ratio exceeds 1 when m < p - 1: let the axis follow so its dot stays in view.
        self.axes.set_ylim(0, max(1.0, 1.1 * r))
        self.axes.set_title(f"p = {p} stages; dots at m = {m}", fontsize="medium")
        buffer = io.BytesIO()
        self.figure.savefig(buffer, format="png", dpi=DPI)
        self.image.value = buffer.getvalue()


def bubble_explorer(
    num_stages: int = 8,
    num_microbatches: int = 32,
    max_stages: int = 32,
    max_microbatches: int = 128,
) -> BubbleExplorer:
    """Build chapter 1's explorer: move p and m, watch f and r and their curves follow."""
    return BubbleExplorer(num_stages, num_microbatches, max_stages, max_microbatches)
