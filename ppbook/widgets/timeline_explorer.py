"""Chapter 2's schedule explorer: pick a schedule, p, m, v and the costs; see its timeline.

``schedule_explorer()`` builds the control; a notebook only displays it. Every change
builds the schedule (:func:`ppbook.schedules.build`), simulates it
(:func:`ppbook.simulate.simulate`) and redraws the Gantt chart and memory panel
(:func:`ppbook.views.gantt.plot_timeline`) into one reused matplotlib ``Figure``, shown as
a 2x PNG at its declared size (:mod:`ppbook.widgets.layout`): no ipympl, no pyplot state.
Below the picture, the closed form against the simulated makespan and every schedule on
the same p, m and costs (:mod:`ppbook.widgets.compare`).

The sliders offer only what the schedule takes: for interleaved 1F1B the m slider steps
through multiples of p (Megatron-LM's rule), for ZB-H2 it starts at 2p-1, for DualPipe p
and m are even and m >= 2p; the readout says so whenever a schedule narrows the slider.
A setting the schedule still refuses (W larger than B) keeps the picture's space and
says which value would do.

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
import re

import ipywidgets as widgets

from ppbook.schedules import SCHEDULES
from ppbook.timeline import ACTIVATION_UNIT, Timeline
from ppbook.views.colors import DRAWN_KINDS, IDLE_COLOR, KIND_COLORS, KIND_NAMES
from ppbook.views.figure import column_figure
from ppbook.views.gantt import chunk_cost_note, plot_timeline, title_text
from ppbook.widgets.compare import (
    closed_form_html,
    compare,
    comparison_html,
    microbatch_note,
    microbatch_steps,
    simulate_state,
    stage_steps,
)
from ppbook.widgets.explorer import Explorer, fit_slider
from ppbook.widgets.layout import TEXT, clear_axes, hide_picture, picture, readout, show_figure

HEIGHT = 4.2  # inches; the width is the notebook column's (ppbook.views.figure)
MAX_HATCHED = 64  # hatch a rank's later chunks only when few: hatching draws slowly
MAX_LABELLED = 64  # micro-batch numbers in the boxes only when few: text draws slowly
MAX_STAGES, MAX_MICROBATCHES = 16, 64


class ScheduleExplorer(Explorer):
    """Controls for schedule, p, m, v, F, B, W and comm; the metrics; the timeline picture;
    the closed form against the simulator; every schedule side by side.

    After each change (or :meth:`update`), ``timeline`` is the simulated
    :class:`~ppbook.timeline.Timeline` (``None`` when the combination is rejected),
    ``error`` the rejection message (``None`` when accepted), ``readout`` the metrics or
    error (HTML), ``closed_form`` and ``comparison`` the two teaching readouts (HTML) and
    ``image`` the PNG of ``figure`` (axes ``axes`` and ``memory_axes``).
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
        slider = widgets.IntSlider
        controls = {
            "schedule": widgets.Dropdown(options=list(SCHEDULES), description="schedule"),
            "num_stages": slider(min=1, max=MAX_STAGES, description="ranks p"),
            "num_microbatches": slider(min=1, max=MAX_MICROBATCHES, description="micro-batches m"),
            "num_chunks": slider(min=1, max=4, description="chunks v"),
            "F": widgets.FloatSlider(min=0.1, max=4.0, step=0.1, description="F forward"),
            "B": widgets.FloatSlider(min=0.1, max=8.0, step=0.1, description="B backward"),
            "W": widgets.FloatSlider(min=0.0, max=4.0, step=0.1, description="W (part of B)"),
            "comm": widgets.FloatSlider(min=0.0, max=2.0, step=0.05, description="comm c"),
        }
        self.readout = readout(min_height="5.5em")
        self.closed_form = readout()
        self.comparison = readout()
        self.figure = column_figure(HEIGHT, layout=None)
        self.image = picture(self.figure)
        self.axes = self.figure.add_axes((0.12, 0.36, 0.86, 0.6))
        self.memory_axes = self.figure.add_axes((0.12, 0.1, 0.86, 0.2), sharex=self.axes)
        self.axes.tick_params(labelbottom=False)  # the memory panel below shows the time axis
        self.timeline: Timeline | None = None
        self.error: str | None = None
        self._chosen_chunks = num_chunks
        self._table: tuple[tuple, list] = ((), [])  # the table's state and rows
        below = [self.readout, self.image, self.closed_form, self.comparison]
        values = {
            "schedule": schedule,
            "num_stages": num_stages,
            "num_microbatches": num_microbatches,
            "num_chunks": num_chunks,
            "F": F,
            "B": B,
            "W": W,
            "comm": comm,
        }
        self._start(controls, below, values)

    def update(self, **values) -> Timeline | None:
        """Set some controls (names as in :attr:`state`), then simulate and redraw once.

        The schedule, p and v are set first, so that the m slider offers what the
        schedule takes (:func:`~ppbook.widgets.compare.microbatch_steps`). Returns the new
        timeline, or ``None`` when the schedule rejects the combination (then
        :attr:`error` says why). A value a control cannot take is a ValueError.
        """
        super().update(**values)
        return self.timeline

    def _apply(self, values: dict) -> None:
        """The schedule, p and v first, then the sliders fitted to them, then the rest."""
        first = [n for n in ("schedule", "num_stages", "num_chunks") if n in values]
        for name in first:
            if name == "num_stages":
                self._fit_sliders()
            self._set(name, values[name])
            if name == "num_chunks":
                self._chosen_chunks = values[name]
        self._fit_sliders()
        super()._apply({n: v for n, v in values.items() if n not in first})

    def refresh(self) -> None:
        """Simulate the current state and redraw the metrics, the picture and the tables."""
        self._sync_chunks()
        state = self.state
        note = microbatch_note(state["schedule"], state["num_stages"], MAX_MICROBATCHES)
        note = f"<br>{html.escape(note)}" if note else ""
        try:
            timeline = simulate_state(state["schedule"], state)
        except ValueError as exc:
            self.timeline, self.error = None, str(exc)
            self.readout.value = (
                f"<div style='{TEXT};color:#b00020'>"
                f"{html.escape(state['schedule'])}: {html.escape(self.error)}<br>"
                f"{html.escape(_hint(state))}{note}</div>"
            )
            hide_picture(self.image)
            self.closed_form.value = ""
            self._fill_comparison(state)
            return
        self.timeline, self.error = timeline, None
        self.controls["W"].disabled = not timeline.schedule.split_backward
        clear_axes(self.axes, self.memory_axes)  # keep the axes, drop the last drawing
        plot_timeline(
            timeline,
            self.axes,
            memory_ax=self.memory_axes,
            title=False,  # the readout above says it, as text that costs no drawing time
            legend=False,
            labels=None if len(timeline.schedule) <= MAX_LABELLED else False,
            max_hatched=MAX_HATCHED,
        )
        peaks = [timeline.peak_activations(rank) for rank in range(timeline.num_ranks)]
        self.memory_axes.set_ylim(0, 1.08 * max(peaks, default=1) + 0.5)  # follow the peak
        self.readout.value = _metrics_html(timeline, peaks, note)
        show_figure(self.image, self.figure)
        self.closed_form.value = closed_form_html(timeline, state)
        self._fill_comparison(state)

    def _fill_comparison(self, state: dict) -> None:
        """Every schedule side by side; simulated again only when p, m, v or a cost moved."""
        state = state | {"num_chunks": self._chosen_chunks}  # v for the schedules taking it
        key = tuple(value for name, value in state.items() if name != "schedule")
        if self._table[0] != key:
            self._table = (key, compare(state))
        self.comparison.value = comparison_html(self._table[1], self.controls["schedule"].value)

    def _set(self, name: str, value) -> None:
        control = self.controls[name]
        if name == "schedule":
            if value not in SCHEDULES:
                raise ValueError(
                    f"unknown schedule {value!r}; choose one of {', '.join(SCHEDULES)}"
                )
        elif not control.min <= value <= control.max or (
            isinstance(control, widgets.IntSlider) and (value - control.min) % control.step
        ):
            why = f" in steps of {control.step}" if control.step != 1 else ""
            why += f" for {self.controls['schedule'].value}" if why else ""
            raise ValueError(
                f"{control.description} must be in {control.min}..{control.max}{why}, got {value}"
            )
        control.value = value

    def _fit_sliders(self) -> None:
        """Let the p and m sliders offer what the schedule takes, moving p and m up to the
        nearest value it takes (down when none is left above)."""
        name = self.controls["schedule"].value
        with self._held():
            stages, microbatches = self.controls["num_stages"], self.controls["num_microbatches"]
            fit_slider(stages, *stage_steps(name), MAX_STAGES)
            fit_slider(microbatches, *microbatch_steps(name, stages.value), MAX_MICROBATCHES)

    def _sync_chunks(self) -> None:
        """Enable v only for schedules that take chunks; show the v others run."""
        chunks = SCHEDULES[self.controls["schedule"].value].chunks
        slider = self.controls["num_chunks"]
        with self._held():
            slider.disabled = chunks != "any"
            slider.value = {"any": self._chosen_chunks, "none": 1, "two": 2}[chunks]

    def _changed(self, change: dict) -> None:
        if change["owner"] is self.controls["num_chunks"]:
            self._chosen_chunks = change["new"]
        if change["owner"] in (self.controls["schedule"], self.controls["num_stages"]):
            self._fit_sliders()


def _hint(state: dict) -> str:
    """A value the controls can reach that the schedule takes, or the schedule's rule
    (its clauses about command-line flags left out)."""
    if state["W"] > state["B"]:
        return (
            f"W is the part of B that runs as its own pass: move W to at most "
            f"B = {state['B']:g}, or B to at least W = {state['W']:g}"
        )
    rule = re.sub(r"\s*\([^()]*--[^()]*\)", "", SCHEDULES[state["schedule"]].rule)
    clauses = [clause.strip() for clause in rule.split(";") if "--" not in clause]
    return f"the rule of {state['schedule']}: {'; '.join(clauses)}"


def _metrics_html(timeline: Timeline, peaks: list[float], note: str) -> str:
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
        f"<div style='{TEXT}'><b>{title}</b><br>"
        f"peak activations per rank ({html.escape(ACTIVATION_UNIT)}): [{shown_peaks}]<br>"
        f"{key} {idle} &nbsp;lighter = later micro-batch; "
        "memory panel: one line per rank, rank 0 darkest and widest<br>"
        f"{html.escape(chunk_cost_note(timeline.schedule))}{note}</div>"
    )


def schedule_explorer(**kwargs) -> ScheduleExplorer:
    """The schedule explorer widget (an ipywidgets ``VBox``); see :class:`ScheduleExplorer`."""
    return ScheduleExplorer(**kwargs)
