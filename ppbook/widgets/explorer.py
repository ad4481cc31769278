"""What every ppbook explorer shares: named controls, their state, and one redraw per change.

An explorer holds ``controls`` (name -> ipywidgets control), lays them out in rows that wrap
(:func:`~ppbook.widgets.layout.control_rows`) above its readouts and picture, and redraws
once per change: moving a control calls :meth:`Explorer.refresh`; :meth:`Explorer.update`
sets several controls (each checked, so a value no control can take is a one-line
ValueError) and then redraws once. Subclasses write ``refresh`` and, where controls depend
on each other (the m slider follows the schedule and p), ``_apply`` and ``_changed``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import ipywidgets as widgets

from ppbook.widgets.layout import control_rows


class Explorer(widgets.VBox):
    """Named controls above readouts and a picture, redrawn once per change."""

    def _start(self, controls: dict, below: list, values: dict) -> None:
        """Lay out ``controls`` above ``below``, set ``values``, then watch the controls."""
        self.controls = controls
        self._holding = False
        super().__init__([control_rows(controls.values()), *below])
        self.update(**values)
        for control in controls.values():
            control.observe(self._on_change, names="value")

    @property
    def state(self) -> dict:
        """The controls' values, by the names :meth:`update` takes."""
        return {name: control.value for name, control in self.controls.items()}

    def update(self, **values) -> None:
        """Set some controls (names as in :attr:`state`), then redraw once. A value a
        control cannot take is a ValueError and leaves every control as it was."""
        unknown = set(values) - set(self.controls)
        if unknown:
            raise ValueError(
                f"unknown control(s) {sorted(unknown)}; the controls are {list(self.controls)}"
            )
        before = self.state
        with self._held():
            try:
                self._apply(values)
            except ValueError:
                self._apply(before)  # the controls set so far go back
                raise
        self.refresh()

    def refresh(self) -> None:
        """Compute and redraw for the current state (each explorer writes its own)."""
        raise NotImplementedError

    def _apply(self, values: dict) -> None:
        """Set each control in turn; an explorer whose controls depend on each other orders
        and fits them here."""
        for name, value in values.items():
            self._set(name, value)

    def _set(self, name: str, value) -> None:
        """Set one control, refusing a value it cannot take with a one-line ValueError."""
        control = self.controls[name]
        options = getattr(control, "options", None)
        if options is not None:
            if value not in options:
                raise ValueError(
                    f"{control.description} must be one of {list(options)}, got {value!r}"
                )
        elif not control.min <= value <= control.max:
            raise ValueError(
                f"{control.description} must be in {control.min}..{control.max}, got {value}"
            )
        control.value = value

    def _changed(self, change: dict) -> None:
        """What a moved control changes in the others, before the redraw (nothing here)."""

    @contextmanager
    def _held(self) -> Iterator[None]:
        """Controls set inside do not each trigger a redraw."""
        holding, self._holding = self._holding, True
        try:
            yield
        finally:
            self._holding = holding

    def _on_change(self, change: dict) -> None:
        if self._holding:
            return
        with self._held():
            self._changed(change)
        self.refresh()


def fit_slider(slider: widgets.IntSlider, low: int, step: int, top: int) -> None:
    """Make ``slider`` offer low, low + step, ... up to ``top`` (just ``low`` when ``top``
    is below it); move its value up to the nearest one offered (down when none is above)."""
    high = max(low, low + (top - low) // step * step)
    value = min(high, max(low, slider.value))
    value = low + -(-(value - low) // step) * step  # up to the next value offered
    value = value if value <= high else value - step
    slider.min, slider.max = min(slider.min, low), max(slider.max, high)  # never min > max
    slider.step, slider.value = step, value
    slider.min, slider.max = low, high
