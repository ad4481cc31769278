"""Chapter 2's schedule explorer: pick a schedule, p, m, v and the costs; see its timeline.

``schedule_explorer()`` builds the control; a notebook only displays it. Every change
builds the schedule (:func:`ppbook.schedules.build`), simulates it
(:func:`ppbook.simulate.simulate`) and redraws the Gantt chart and memory panel
(:func:`ppbook.views.gantt.plot_timeline`) into one reused matplotlib ``Figure``, rendered to PNG
in an ``Image`` widget: no ipympl needed, no pyplot state touched. A combination a
schedule rejects (interleaved 1F1B with m not a multiple of p, say) shows the rule's
message instead of a picture.

The sliders follow the package's cost convention (:mod:`ppbook.costs`): F, B and W time
one pass over one device's share of the model (1/p of it), so switching between
schedules with different v compares them fairly; the readout says what one chunk pass
takes. W is the part of B that schedules splitting the backward run as their own pass
(I = B - W); the others run B whole, so for them the W slider is off and ignored.

Tests and benchmarks drive it without a browser through :meth:`ScheduleExplorer.update`.
Bubble conventions (REFERENCES.md): bubble fraction f = idle/total (GPipe) and bubble
ratio r = idle/compute (Megatron-LM, Ultra-Scale Playbook).
"""

from __future__ import annotations

import html
import io

import ipywidgets as widgets
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ppbook.costs import Costs
from ppbook.schedule import Schedule
from ppbook.schedules import SCHEDULES, build
from ppbook.simulate import simulate
from ppbook.timeline import ACTIVATION_UNIT, Timeline
from ppbook.views.colors import DRAWN_KINDS, IDLE_COLOR, KIND_COLORS, KIND_NAMES
from ppbook.views.gantt import chunk_cost_note, plot_timeline, title_text

FIGSIZE = (10.5, 5.0)  # inches
DPI = 72
MAX_HATCHED = 64  # hatch a rank's later chunks only when few: hatching draws slowly


class ScheduleExplorer(widgets.VBox):
    """Controls for schedule, p, m, v, F, B, W and comm; the metrics; the timeline picture.

    After each change (or :meth:`update`), ``timeline`` is the simulated
    :class:`~ppbook.timeline.Timeline` (``None`` when the combination is rejected),
    ``error`` the rejection message (``None`` when accepted), ``readout`` the metrics or
    error (HTML) and ``image`` the PNG of ``figure`` (axes ``axes`` and ``memory_axes``).
    """

    def __init__(
        self,
        schedule: str = "1f1b",
        num_stages: int = 4,
        num_microbatches: int = 8,
        num_chunks: int = 2,
        F: float = 1.0,
        B: float = 2.0,
        W: float = 1.0,
        comm: float = 0.0,
    ) -> None:
        self.controls = {
            "schedule": widgets.Dropdown(options=list(SCHEDULES), description="schedule"),
            "num_stages": widgets.IntSlider(min=1, max=16, description="ranks p"),
            "num_microbatches": widgets.IntSlider(min=1, max=64, description="micro-batches m"),
            "num_chunks": widgets.IntSlider(min=1, max=4, description="chunks v"),
            "F": widgets.FloatSlider(min=0.1, max=4.0, step=0.1, description="F forward"),
            "B": widgets.FloatSlider(min=0.1, max=8.0, step=0.1, description="B backward"),
            "W": widgets.FloatSlider(min=0.0, max=4.0, step=0.1, description="W (part of B)"),
            "comm": widgets.FloatSlider(min=0.0, max=2.0, step=0.05, description="comm c"),
        }
        for control in self.controls.values():
            control.style.description_width = "initial"
            if hasattr(control, "continuous_update"):
                control.continuous_update = False
        self.readout = widgets.HTML()
        # Shown at its natural size: a stretched PNG turns blurry.
        self.image = widgets.Image(
            format="png",
            layout=widgets.Layout(
                width=f"{int(FIGSIZE[0] * DPI)}px", height=f"{int(FIGSIZE[1] * DPI)}px"
            ),
        )
        self.figure = Figure(figsize=FIGSIZE, dpi=DPI)
        self.canvas = FigureCanvasAgg(self.figure)
        self.axes = self.figure.add_axes((0.08, 0.34, 0.9, 0.64))
        self.memory_axes = self.figure.add_axes((0.08, 0.09, 0.9, 0.2), sharex=self.axes)
        self.axes.tick_params(labelbottom=False)  # the memory panel below shows the time axis
        self.timeline: Timeline | None = None
        self.error: str | None = None
        self._chosen_chunks = num_chunks
        self._holding = False
        c = self.controls
        rows = [
            widgets.HBox([c["schedule"], c["num_stages"], c["num_microbatches"], c["num_chunks"]]),
            widgets.HBox([c["F"], c["B"], c["W"], c["comm"]]),
        ]
        super().__init__([*rows, self.readout, self.image])
        self.update(
            schedule=schedule,
            num_stages=num_stages,
            num_microbatches=num_microbatches,
            num_chunks=num_chunks,
            F=F,
            B=B,
            W=W,
            comm=comm,
        )
        for control in self.controls.values():
            control.observe(self._on_change, names="value")

    @property
    def state(self) -> dict:
        """The controls' values, by the names :meth:`update` takes."""
        return {name: control.value for name, control in self.controls.items()}

    def update(self, **values) -> Timeline | None:
        """Set some controls (names as in :attr:`state`), then simulate and redraw once.

        Returns the new timeline, or ``None`` when the schedule rejects the combination
        (then :attr:`error` says why). A value a control cannot take is a ValueError.
        """
        unknown = set(values) - set(self.controls)
        if unknown:
            raise ValueError(
                f"unknown control(s) {sorted(unknown)}; the controls are {list(self.controls)}"
            )
        self._holding = True
        try:
            for name, value in values.items():
                self._set(name, value)
                if name == "num_chunks":
                    self._chosen_chunks = value
        finally:
            self._holding = False
        self.refresh()
        return self.timeline

    def refresh(self) -> None:
        """Simulate the current state and redraw the metrics and the picture."""
        self._sync_chunks()
        state = self.state
        spec = SCHEDULES[state["schedule"]]
        try:
            schedule = build(
                state["schedule"],
                state["num_stages"],
                state["num_microbatches"],
                state["num_chunks"] if spec.chunks == "any" else None,
            )
            timeline = simulate(schedule, device_share_costs(schedule, state))
        except ValueError as exc:
            self.timeline, self.error = None, str(exc)
            self.readout.value = (
                f"<pre style='color:#b00020'>{html.escape(state['schedule'])}: "
                f"{html.escape(self.error)}\nrule: {html.escape(spec.rule)}</pre>"
            )
            self.image.layout.display = "none"
            return
        self.timeline, self.error = timeline, None
        self.controls["W"].disabled = not schedule.split_backward
        for axes in (self.axes, self.memory_axes):  # keep the axes, drop the last drawing
            for artist in [*axes.collections, *axes.texts, *axes.lines]:
                artist.remove()
        plot_timeline(
            timeline,
            self.axes,
            memory_ax=self.memory_axes,
            title=False,  # the readout above says it, as text that costs no drawing time
            legend=False,
            max_hatched=MAX_HATCHED,
        )
        peaks = [timeline.peak_activations(rank) for rank in range(timeline.num_ranks)]
        self.memory_axes.set_ylim(0, 1.08 * max(peaks, default=1) + 0.5)  # follow the peak
        self.readout.value = _metrics_html(timeline, peaks)
        buffer = io.BytesIO()
        self.canvas.print_png(buffer, pil_kwargs={"compress_level": 1})
        self.image.value = buffer.getvalue()
        self.image.layout.display = None

    def _set(self, name: str, value) -> None:
        control = self.controls[name]
        if name == "schedule":
            if value not in SCHEDULES:
                raise ValueError(
                    f"unknown schedule {value!r}; choose one of {', '.join(SCHEDULES)}"
                )
        elif not control.min <= value <= control.max:
            raise ValueError(
                f"{control.description} must be in {control.min}..{control.max}, got {value}"
            )
        control.value = value

    def _sync_chunks(self) -> None:
        """Enable v only for schedules that take chunks; show the v others run."""
        chunks = SCHEDULES[self.controls["schedule"].value].chunks
        slider = self.controls["num_chunks"]
        holding, self._holding = self._holding, True
        try:
            slider.disabled = chunks != "any"
            slider.value = {"any": self._chosen_chunks, "none": 1, "two": 2}[chunks]
        finally:
            self._holding = holding

    def _on_change(self, change) -> None:
        if self._holding:
            return
        if change["owner"] is self.controls["num_chunks"]:
            self._chosen_chunks = change["new"]
        self.refresh()


def device_share_costs(schedule: Schedule, state: dict) -> Costs:
    """The sliders' costs, which time one device's share of the model (1/p of it).

    They go to the simulator as they are: it runs each chunk pass in ``cost *
    schedule.chunk_share`` (F/v for interleaved 1F1B with v chunks, F/2 for ZB-V and
    DualPipeV, F for GPipe, 1F1B, ZB-H1, ZB-H2 and DualPipe). ``W`` is passed only to
    schedules that split the backward (``I = B - W``); the others run ``B`` whole, so any
    ``W`` on the slider is fine for them.
    """
    split = {"W": state["W"]} if schedule.split_backward else {}
    return Costs(F=state["F"], B=state["B"], comm=state["comm"], **split)


def _metrics_html(timeline: Timeline, peaks: list[float]) -> str:
    """Title, both bubble conventions by name, peak activations, the colour key, the units."""
    kinds = {step.kind for row in timeline.schedule.actions for step in row}
    key = " ".join(
        f"<span style='background:{KIND_COLORS[k]};color:white;padding:0 4px'>"
        f"{html.escape(KIND_NAMES[k])}</span>"
        for k in DRAWN_KINDS
        if k in kinds
    )
    idle = f"<span style='background:{IDLE_COLOR};padding:0 4px'>idle</span>"
    title = html.escape(title_text(timeline, convention=False)).replace("\n", "<br>")
    shown_peaks = ", ".join(f"{peak:.3g}" for peak in peaks)
    return (
        f"<div style='font-family:monospace'><b>{title}</b><br>"
        f"peak activations per rank ({html.escape(ACTIVATION_UNIT)}): [{shown_peaks}]<br>"
        f"{key} {idle} &nbsp;lighter = later micro-batch; "
        "memory panel: one line per rank, rank 0 darkest and widest<br>"
        f"{html.escape(chunk_cost_note(timeline.schedule))}</div>"
    )


def schedule_explorer(**kwargs) -> ScheduleExplorer:
    """The schedule explorer widget (an ipywidgets ``VBox``); see :class:`ScheduleExplorer`."""
    return ScheduleExplorer(**kwargs)
