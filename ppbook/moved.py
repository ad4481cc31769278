"""Modules that moved in 0.2.0, old path to new: each old path is still a module that gives
the very module at its new path (``import ppbook.sizing`` is ``ppbook.cost_model.sizing_search``).

:func:`current` turns a dotted name written with an old path into the one it now stands for;
the assignment scanner (:mod:`ppbook.assign.forbidden`) uses it, so a forbidden module stays
forbidden under both names.
"""

from __future__ import annotations

MOVED: dict[str, str] = {
    "ppbook.memory": "ppbook.cost_model.memory_bytes",
    "ppbook.flops": "ppbook.cost_model.flops",
    "ppbook.layer_time": "ppbook.cost_model.layer_time",
    "ppbook.gpu_cards": "ppbook.cost_model.gpu_cards",
    "ppbook.across_nodes": "ppbook.cost_model.across_nodes",
    "ppbook.step_work": "ppbook.cost_model.step_work",
    "ppbook.sizing": "ppbook.cost_model.sizing_search",
    "ppbook.sizing_costs": "ppbook.cost_model.search_costs",
    "ppbook.sizing_result": "ppbook.cost_model.search_result",
    "ppbook.sizing_step": "ppbook.cost_model.search_step",
    "ppbook.symbolic.memory": "ppbook.symbolic.activation_peaks",
    "ppbook.symbolic.bubble": "ppbook.symbolic.bubble_conventions",
    "ppbook.symbolic.sizing": "ppbook.symbolic.microbatch_target",
    "ppbook.views.memory": "ppbook.views.memory_panel",
    "ppbook.views.bubble": "ppbook.views.bubble_curves",
    "ppbook.widgets.bubble": "ppbook.widgets.bubble_explorer",
    "ppbook.widgets.sizing": "ppbook.widgets.sizing_explorer",
    "ppbook.schedule": "ppbook.pipeline_schedule",
    "ppbook.widgets.timeline": "ppbook.widgets.timeline_explorer",
    "ppbook.widgets.zero_bubble": "ppbook.widgets.zero_bubble_explorer",
}
"""Old module path: the path it moved to."""


def current(name: str) -> str:
    """``name`` with an old module path at its front replaced by the new one
    (``ppbook.sizing.SCHEDULES`` -> ``ppbook.cost_model.sizing_search.SCHEDULES``); other
    names unchanged."""
    for old, new in MOVED.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old) :]
    return name
