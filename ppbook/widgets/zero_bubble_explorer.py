"""Chapter 4's explorer of the automatic zero-bubble scheduler under a memory limit.

``zero_bubble_explorer()`` builds the control; a notebook only displays it. A slider sets
the memory limit K, in micro-batch activations of a full stage per rank (the Zero Bubble
paper's ZB-1p is K = p, ZB-2p is K = 2p; arXiv:2401.10241, sec. 3), others set p, m, the
costs F, I, W of one device's share of the model and the transfer time c. Every change
builds ``zb-auto`` for them (:func:`ppbook.schedules.build` with ``costs`` and
``memory_limit``), simulates one step (:func:`ppbook.simulate.simulate`) and redraws the
Gantt chart and the memory panel (:func:`ppbook.views.gantt.plot_timeline`), with the
limit drawn as a dashed line, into one reused matplotlib ``Figure`` shown as a 2x PNG at
its declared size (:mod:`ppbook.widgets.layout`: controls that wrap, tracks >= 150 px):
no ipympl, no pyplot state. A combination the scheduler refuses shows its message and
hides the picture, keeping its space.

The readout names both measures of the bubble (REFERENCES.md): the bubble fraction
f = idle/total over all ranks and the step's makespan, and the paper's bubble rate,
1 - (one rank's compute) / (longest rank span), :attr:`ppbook.timeline.Timeline.zb_bubble_rate`,
which leaves out the idle time at the pipeline's ends that consecutive steps fill once the
optimizer step is post-validated. Beside them, ZB-H1 (K = p) and ZB-H2 (K = 2p-1) on the
same costs. Tests drive it without a browser through :meth:`ZeroBubbleExplorer.update`.
"""

from __future__ import annotations

import html

import ipywidgets as widgets

from ppbook.costs import Costs
from ppbook.schedules import build, zb_h1, zb_h2
from ppbook.simulate import simulate
from ppbook.timeline import ACTIVATION_UNIT, Timeline
from ppbook.views.colors import DRAWN_KINDS, IDLE_COLOR, KIND_COLORS, KIND_NAMES
from ppbook.views.figure import column_figure
from ppbook.views.gantt import plot_timeline
from ppbook.views.text import plural
from ppbook.widgets.explorer import Explorer
from ppbook.widgets.layout import TEXT, clear_axes, hide_picture, picture, readout, show_figure

HEIGHT = 4.4  # inches; the width is the notebook column's (ppbook.views.figure)
LIMIT_COLOR = "#b00020"
LIMIT_PER_STAGE = 3
"""The memory-limit slider reaches LIMIT_PER_STAGE * p: past 2p (ZB-2p) nothing is left to gain."""


class ZeroBubbleExplorer(Explorer):
    """Sliders for K, p, m, F, I, W and c; the bubble, the peak memory; the timeline.

    After each change (or :meth:`update`), ``timeline`` is the simulated one-step
    :class:`~ppbook.timeline.Timeline` of ``zb-auto`` (``None`` when the combination is
    refused), ``error`` the refusal (``None`` when accepted), ``readout`` the metrics or
    error (HTML), ``limit_line`` the memory limit drawn on ``memory_axes`` and ``image``
    the PNG of ``figure``.
    """

    def __init__(
        self,
        memory_limit: int = 4,
        num_stages: int = 4,
        num_microbatches: int = 8,
        F: float = 1.0,
        I: float = 1.0,  # noqa: E741 (PyTorch's name for the input-gradient pass)
        W: float = 1.0,
        comm: float = 0.0,
    ) -> None:
        controls = {
            "memory_limit": widgets.IntSlider(min=1, max=24, description="memory limit K"),
            "num_stages": widgets.IntSlider(min=2, max=8, description="ranks p"),
            "num_microbatches": widgets.IntSlider(min=1, max=32, description="micro-batches m"),
            "F": widgets.FloatSlider(min=0.1, max=3.0, step=0.1, description="F forward"),
            "I": widgets.FloatSlider(min=0.1, max=3.0, step=0.1, description="I input grad"),
            "W": widgets.FloatSlider(min=0.1, max=3.0, step=0.1, description="W weight grad"),
            "comm": widgets.FloatSlider(min=0.0, max=1.0, step=0.05, description="comm c"),
        }
        self.readout = readout(min_height="8em")
        self.figure = column_figure(HEIGHT, layout=None)
        self.image = picture(self.figure)
        self.axes = self.figure.add_axes((0.12, 0.4, 0.86, 0.57))
        self.memory_axes = self.figure.add_axes((0.12, 0.1, 0.86, 0.24), sharex=self.axes)
        self.axes.tick_params(labelbottom=False)  # the memory panel below shows the time axis
        self.limit_line = None
        self.timeline: Timeline | None = None
        self.error: str | None = None
        values = {
            "num_stages": num_stages,
            "memory_limit": memory_limit,
            "num_microbatches": num_microbatches,
            "F": F,
            "I": I,
            "W": W,
            "comm": comm,
        }
        self._start(controls, [self.readout, self.image], values)

    @property
    def costs(self) -> Costs:
        """The sliders' costs: F, I, W of one device's share of the model, transfer c."""
        s = self.state
        return Costs(F=s["F"], I=s["I"], W=s["W"], comm=s["comm"])

    def update(self, **values) -> Timeline | None:
        """Set some controls (names as in :attr:`state`), then build, simulate, redraw once.

        ``num_stages`` is set first, so that the memory limit's range (1 to
        :data:`LIMIT_PER_STAGE` p) follows it. Returns the new timeline, or ``None`` when the
        scheduler refuses the combination (then :attr:`error` says why). A value a control
        cannot take is a ValueError.
        """
        super().update(**values)
        return self.timeline

    def _apply(self, values: dict) -> None:
        """p first, so that the memory limit's range follows it."""
        if "num_stages" in values:
            self._set("num_stages", values["num_stages"])
        self._fit_limit()
        super()._apply({k: v for k, v in values.items() if k != "num_stages"})

    def refresh(self) -> None:
        """Build zb-auto for the current state, simulate it, redraw the readout and picture."""
        s = self.state
        p, m, limit = s["num_stages"], s["num_microbatches"], s["memory_limit"]
        costs = self.costs
        try:
            schedule = build("zb-auto", p, m, costs=costs, memory_limit=limit)
            timeline = simulate(schedule, costs)
        except ValueError as exc:
            self.timeline, self.error = None, str(exc)
            self.readout.value = (
                f"<pre style='color:{LIMIT_COLOR}'>zb-auto, p = {p}, m = {m}, K = {limit}: "
                f"{html.escape(self.error)}</pre>"
            )
            hide_picture(self.image)
            return
        self.timeline, self.error = timeline, None
        clear_axes(self.axes, self.memory_axes)  # keep the axes, drop the last drawing
        plot_timeline(timeline, self.axes, memory_ax=self.memory_axes, title=False, legend=False)
        self.limit_line = self.memory_axes.axhline(
            limit, color=LIMIT_COLOR, linestyle="--", linewidth=1.2, zorder=5
        )
        self.memory_axes.text(
            0.995,
            limit,
            f" limit K = {limit}",
            color=LIMIT_COLOR,
            fontsize="small",
            ha="right",
            va="bottom",
            transform=self.memory_axes.get_yaxis_transform(),
        )
        self.memory_axes.set_ylim(0, 1.25 * limit + 0.5)
        self.readout.value = _metrics_html(timeline, limit, costs)
        show_figure(self.image, self.figure)

    def _fit_limit(self) -> None:
        """Let the memory-limit slider reach LIMIT_PER_STAGE * p (keeping K within it)."""
        slider = self.controls["memory_limit"]
        top = LIMIT_PER_STAGE * self.controls["num_stages"].value
        slider.value = min(slider.value, top)
        slider.max = top

    def _changed(self, change: dict) -> None:
        if change["owner"] is self.controls["num_stages"]:
            self._fit_limit()


def _rates(timeline: Timeline) -> str:
    return (
        f"makespan {timeline.makespan:.4g} {html.escape(plural(timeline.time_unit))}, "
        f"f = {timeline.bubble_fraction:.3f}, rate = {timeline.zb_bubble_rate:.3f}"
    )


def _metrics_html(timeline: Timeline, limit: int, costs: Costs) -> str:
    """The bubble by both measures, the peaks against the limit, ZB-H1 and ZB-H2 beside,
    and the colour key."""
    p, m = timeline.num_ranks, timeline.microbatches_per_step
    peaks = [timeline.peak_activations(rank) for rank in range(p)]
    shown_peaks = ", ".join(f"{peak:.3g}" for peak in peaks)
    beside = [f"ZB-H1 (K = p = {p}): {_rates(simulate(zb_h1(p, m), costs))}"]
    if m >= 2 * p - 1:
        beside.append(f"ZB-H2 (K = 2p-1 = {2 * p - 1}): {_rates(simulate(zb_h2(p, m), costs))}")
    else:
        beside.append(f"ZB-H2 needs m >= 2p-1 = {2 * p - 1}")
    key = " ".join(
        f"<span style='background:{KIND_COLORS[k]};color:white;padding:0 4px'>"
        f"{html.escape(KIND_NAMES[k])}</span>"
        for k in DRAWN_KINDS
        if k in "FIW"
    )
    idle = f"<span style='background:{IDLE_COLOR};padding:0 4px'>idle</span>"
    return (
        f"<div style='{TEXT}'>"
        f"<b>zb-auto: p = {p}, m = {m}, memory limit K = {limit}, one step, "
        f"makespan = {timeline.makespan:.4g} {html.escape(plural(timeline.time_unit))}</b><br>"
        f"bubble fraction f = idle/total = {timeline.bubble_fraction:.3f}; "
        f"the Zero Bubble paper's bubble rate 1 - m(F+I+W)/longest span = "
        f"<b>{timeline.zb_bubble_rate:.3f}</b><br>"
        f"peak activations per rank ({html.escape(ACTIVATION_UNIT)}): [{shown_peaks}], "
        f"limit K = {limit}<br>"
        f"costs per device share: F = {costs.F:g}, I = {costs.I:g}, W = {costs.W:g}, "
        f"c = {costs.comm:g} {html.escape(plural(timeline.time_unit))}<br>"
        f"on the same costs: {'; '.join(beside)}<br>"
        f"{key} {idle} &nbsp;lighter = later micro-batch; memory panel: one line per rank, "
        f"rank 0 darkest and widest, the dashed line the limit K</div>"
    )


def zero_bubble_explorer(**kwargs) -> ZeroBubbleExplorer:
    """The zb-auto explorer widget (an ipywidgets ``VBox``); see :class:`ZeroBubbleExplorer`."""
    return ZeroBubbleExplorer(**kwargs)
