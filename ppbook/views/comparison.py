"""The measured step of a GPU recording beside its simulation (chapter 9).

:func:`plot_comparison` draws a :class:`ppbook.runtime.measure.Comparison` (what
:mod:`ppbook.runtime.recording` loads) as two Gantt charts on one time axis. Like the other
views it changes no global matplotlib setting.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ppbook.views.gantt import plot_timeline

if TYPE_CHECKING:  # a recording's comparison; importing it would import torch
    from ppbook.runtime.measure import Comparison


def plot_comparison(comparison: Comparison, where: str):
    """The measured step (top) and its simulation under the measured costs (bottom), in
    seconds on one time axis; ``where`` (what ran it) heads the top, the costs (F and B per
    stage, the transfer, in ms) the bottom. Returns the figure."""
    import matplotlib.pyplot as plt

    simulated = replace(comparison.simulated, time_unit="s")  # simulated on costs in seconds
    fig, axes = plt.subplots(2, 1, figsize=(7.5, 5.5), sharex=True, layout="constrained")
    plot_timeline(comparison.measured, ax=axes[0])
    plot_timeline(simulated, ax=axes[1])
    costs = comparison.costs
    per_stage = "; ".join(
        f"{kind} " + ", ".join(f"{1e3 * t:.3g}" for t in _per_stage(getattr(costs, kind)))
        for kind in "FB"
    )
    shared = ""
    if costs.device_model:
        share = costs.topology.interference if costs.topology is not None else 0.0
        shared = (
            f"\ncopies (ms): send {1e3 * costs.send_copy:.3g}, receive {1e3 * costs.recv_copy:.3g}"
            f", input {1e3 * costs.input_copy:.3g}; interference c = {share:.2f}"
        )
    headings = (
        f"measured on {where}",
        f"simulated under the measured costs (ms, per stage): {per_stage}; "
        f"transfer {1e3 * costs.transfer:.3g}{shared}",
    )
    for ax, heading in zip(axes, headings, strict=True):
        ax.set_title(f"{heading}\n{ax.get_title()}", fontsize="medium")
        ax.label_outer()  # one time axis, at the bottom
    return fig


def _per_stage(cost) -> list[float]:
    """A cost as a list: one value per stage, or the one value every stage has."""
    return list(cost) if isinstance(cost, list | tuple) else [cost]
