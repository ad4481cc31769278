"""What each ppbook widget must show for the control values a reader set in the browser.

The browser test reads a widget's controls from the page (label and value) and asks the
rule for its ppbook.widgets module which numbers the readout must then show. The rules
compute them here, in the test process, from the package's models (the closed forms, the
simulator, the sizing search), not from the widget: the page must agree with them.

A control is found by its symbol: the label's first word when it is one capital letter
(``F forward``, ``W (part of B)``), otherwise its last word (``ranks p``, ``memory limit
K``, ``comm c``), otherwise the whole label (``schedule``, ``utilisation``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")


@dataclass
class Expected:
    """Numbers the readout must show, or, for a setting the model refuses, its reason."""

    numbers: dict[str, float]
    refusal: str | None = None


def symbol(label: str) -> str:
    words = label.split()
    if not words:
        return label
    if len(words[0]) == 1 and words[0].isupper():
        return words[0]
    if len(words[-1]) == 1:
        return words[-1]
    return label


def controls_by_symbol(controls: list[dict]) -> dict:
    """``{symbol: value}`` of the controls as read from the page (ints stay ints)."""
    return {symbol(c["label"]): c["value"] for c in controls}


def shows(text: str, value: float) -> bool:
    """Whether ``text`` shows ``value`` to the precision it prints (or as a percentage).

    A number counts when it has at least two significant digits or two decimals, so a bare
    ``0`` or ``1`` in the prose never stands for 0.18.
    """
    for token in NUMBER.findall(text):
        decimals = len(token.split(".")[1].split("e")[0].split("E")[0]) if "." in token else 0
        digits = token.lstrip("-").replace(".", "").split("e")[0].split("E")[0].lstrip("0")
        if decimals < 2 and len(digits) < 2 and float(token) != value:
            continue
        shown = float(token)
        half = 0.5 * 10.0**-decimals if "e" not in token.lower() else abs(shown) * 5e-4
        for scale in (1.0, 100.0):
            if abs(shown - scale * value) <= half * 1.0000001 + 1e-12:
                return True
    return False


def bubble(values: dict) -> Expected:
    """Chapter 1: the bubble fraction f and ratio r of GPipe-style p, m (and v) stages."""
    from ppbook.symbolic.numeric import bubble_fraction, bubble_ratio

    p, m, v = int(values["p"]), int(values["m"]), int(values.get("v", 1))
    return Expected({"f": bubble_fraction(p, m, v), "r": bubble_ratio(p, m, v)})


def timeline(values: dict) -> Expected:
    """Chapter 2: the schedule simulated under the sliders' costs (one device's share)."""
    from ppbook.costs import Costs
    from ppbook.schedules import SCHEDULES, build
    from ppbook.simulate import simulate

    name = values["schedule"]
    chunks = int(values["v"]) if SCHEDULES[name].chunks == "any" else None
    try:
        schedule = build(name, int(values["p"]), int(values["m"]), chunks)
    except ValueError as exc:
        return Expected({}, refusal=str(exc))
    split = {"W": values["W"]} if schedule.split_backward else {}
    costs = Costs(F=values["F"], B=values["B"], comm=values["c"], **split)
    run = simulate(schedule, costs)
    return Expected(
        {
            "makespan": run.makespan,
            "bubble fraction f": run.bubble_fraction,
            "bubble ratio r": run.bubble_ratio,
        }
    )


def zero_bubble(values: dict) -> Expected:
    """Chapter 4: zb-auto under the memory limit K for the sliders' F, I, W and c."""
    from ppbook.costs import Costs
    from ppbook.schedules import build
    from ppbook.simulate import simulate

    costs = Costs(F=values["F"], I=values["I"], W=values["W"], comm=values["c"])
    p, m, limit = int(values["p"]), int(values["m"]), int(values["K"])
    try:
        schedule = build("zb-auto", p, m, costs=costs, memory_limit=limit)
    except ValueError as exc:
        return Expected({}, refusal=str(exc))
    run = simulate(schedule, costs)
    return Expected(
        {
            "makespan": run.makespan,
            "bubble fraction f": run.bubble_fraction,
            "bubble rate": run.zb_bubble_rate,
        }
    )


def sizing(values: dict) -> Expected:
    """Chapter 8: the fastest configuration that fits, its step time in seconds."""
    from ppbook.cost_model.model_cards import MODEL_CARDS as CARD_NAMES
    from ppbook.cost_model.model_cards import model_card
    from ppbook.memory import RECOMPUTE
    from ppbook.sizing import size
    from ppbook.sizing_costs import Hardware
    from ppbook.widgets.sizing import GPU_CARDS, MODEL_CARDS  # the cards: data, not the code

    hardware = Hardware(
        num_gpus=int(values["GPUs"]),
        utilisation=float(values["utilisation"]),
        **GPU_CARDS[values["GPU"]],
    )
    recompute = values["recompute"] if values["recompute"] in RECOMPUTE else None
    name = values["model"]
    if name in CARD_NAMES:  # a published card: its shape and its memory choices
        shape, choices = model_card(name).shape(), dict(model_card(name).memory_choices)
    else:
        shape, choices = MODEL_CARDS[name], {}
    result = size(
        shape, int(values["global batch"]), hardware, recompute=recompute, top=1, **choices
    )
    if result.best is None:
        return Expected({}, refusal="no configuration fits")
    return Expected({"best step s": result.best.step_time_s})


RULES = {
    "bubble": bubble,
    "timeline": timeline,
    "zero_bubble": zero_bubble,
    "sizing": sizing,
}
"""One rule per ppbook.widgets module; a widget from a module without one fails the test."""


def widget_modules(code: str) -> dict[str, str]:
    """``{constructor name: ppbook.widgets module}`` from a notebook's imports."""
    found = {}
    imports = re.findall(r"from ppbook\.widgets\.(\w+) import (\([^)]*\)|[^\n]+)", code)
    for module, names in imports:
        for name in re.split(r"[\s,()]+", names):
            if name:
                found[name] = module
    return found
