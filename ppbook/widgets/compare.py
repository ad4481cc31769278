"""Chapter 2's explorer, its teaching readouts: which m a schedule takes, every schedule
side by side, and a closed form against the simulator.

- :func:`microbatch_steps` and :func:`stage_steps`: the values the p and m sliders offer
  for a schedule, so the reader cannot reach a combination its builder refuses
  (the interleaved schedules: multiples of p, which PyTorch always runs; ZB-H2: m >= 2p-1;
  DualPipe: p even, m even and m >= 2p; DualPipeV: m >= 2p).
- :func:`compare`: every schedule of :data:`ppbook.schedules.SCHEDULES` simulated for the
  same p, m, v and costs (makespan, bubble fraction f = idle/total, bubble ratio
  r = idle/compute, the Zero Bubble paper's bubble rate and peak activations), as rows
  of a table (:func:`comparison_html`).
- :func:`closed_form_html`: the schedule's closed form from :func:`ppbook.symbolic.formulas`
  at the sliders' values beside the simulated makespan, and whether the formula's
  conditions (its ``requires``, and no transfer time) hold, so the reader sees where a
  formula stops holding (ZB-H1 when W > F, say).
"""

from __future__ import annotations

import html
import re
from fractions import Fraction
from typing import NamedTuple

from ppbook.costs import Costs
from ppbook.schedules import SCHEDULES, build
from ppbook.simulate import simulate
from ppbook.symbolic import formulas
from ppbook.symbolic import symbols as sym
from ppbook.timeline import ACTIVATION_UNIT, Timeline
from ppbook.views.text import plural
from ppbook.widgets.layout import TEXT


def stage_steps(schedule: str) -> tuple[int, int]:
    """``(smallest p, step)`` the ranks slider offers for ``schedule`` (DualPipe: even p)."""
    return (2, 2) if schedule == "dualpipe" else (1, 1)


def microbatch_steps(schedule: str, p: int) -> tuple[int, int]:
    """``(smallest m, step)`` the micro-batch slider offers for ``schedule`` at ``p`` ranks.

    The interleaved schedules get multiples of p, which PyTorch's classes always run (they
    also run m < p and any m that is a multiple of max(1, m // p); the slider keeps to the
    steps every p shares)."""
    return {
        "interleaved-1f1b": (p, p),
        "interleaved-zb": (p, p),
        "zb-h2": (2 * p - 1, 1),
        "dualpipe": (2 * p, 2),
        "dualpipev": (2 * p, 1),
    }.get(schedule, (1, 1))


def microbatch_note(schedule: str, p: int, top: int) -> str:
    """The m values the slider offers, in words, or "" when it offers every m."""
    low, step = microbatch_steps(schedule, p)
    if (low, step) == (1, 1):
        return ""
    ranks = "p even (the p slider steps by 2) and " if stage_steps(schedule)[1] == 2 else ""
    last = low + (top - low) // step * step
    values = f"{low}, {low + step}, ..., {last}" if last > low + step else f"{low}..{last}"
    if step == p:
        return (
            f"the m slider offers {schedule} the multiples of p = {p}, which PyTorch always "
            f"runs: {values}"
        )
    if step > 1:
        why = f"even and at least 2p = {2 * p}"
    else:
        why = f"at least {'2p-1' if schedule == 'zb-h2' else '2p'} = {low}"
    return f"{schedule} takes {ranks}m {why}: the m slider steps through {values}"


def split_costs(split_backward: bool, state: dict) -> Costs:
    """The sliders' costs (one device's share of the model); ``W`` only for a schedule that
    splits the backward (``I = B - W``), the others run ``B`` whole."""
    split = {"W": state["W"]} if split_backward else {}
    return Costs(F=state["F"], B=state["B"], comm=state["comm"], **split)


class Row(NamedTuple):
    """One schedule run on the same p, m, v and costs: its timeline, or why it was refused."""

    schedule: str
    timeline: Timeline | None
    refusal: str | None


def simulate_state(name: str, state: dict) -> Timeline:
    """Build ``name`` for the state's p, m (and v when it takes chunks) and simulate it."""
    spec = SCHEDULES[name]
    chunks = state["num_chunks"] if spec.chunks == "any" else None
    schedule = build(name, state["num_stages"], state["num_microbatches"], chunks)
    return simulate(schedule, split_costs(schedule.split_backward, state))


def compare(state: dict) -> list[Row]:
    """Every schedule on the state's p, m, v and costs, in the order of SCHEDULES."""
    rows = []
    for name in SCHEDULES:
        try:
            rows.append(Row(name, simulate_state(name, state), None))
        except ValueError as exc:
            rows.append(Row(name, None, str(exc)))
    return rows


def comparison_html(rows: list[Row], current: str) -> str:
    """The rows as an HTML table, the current schedule in bold."""
    heads = (
        "schedule",
        "v",
        "makespan",
        "bubble fraction f",
        "bubble ratio r",
        "ZB bubble rate",
        "peak activations",
    )
    cell = "style='padding:0 8px;text-align:right'"
    first = "style='padding:0 8px;text-align:left;white-space:nowrap'"
    lines = ["<tr>" + "".join(f"<th {cell}>{h}</th>" for h in heads) + "</tr>"]
    unit = "time unit"
    for row in rows:
        name = html.escape(row.schedule)
        if row.timeline is None:
            why = html.escape(row.refusal.split(";")[0])
            values = f"<td {first}>{name}</td><td colspan='6' style='padding:0 8px'>{why}</td>"
        else:
            t = row.timeline
            unit = t.time_unit
            v = t.schedule.num_stages / t.num_ranks
            peak = max(t.peak_activations(rank) for rank in range(t.num_ranks))
            shown = (
                f"{v:g}",
                f"{t.makespan:.4g}",
                f"{t.bubble_fraction:.3f}",
                f"{t.bubble_ratio:.3f}",
                f"{t.zb_bubble_rate:.3f}",
                f"{peak:.3g}",
            )
            values = f"<td {first}>{name}</td>" + "".join(f"<td {cell}>{s}</td>" for s in shown)
        weight = "font-weight:bold;" if row.schedule == current else ""
        lines.append(f"<tr style='{weight}'>{values}</tr>")
    note = (
        f"All schedules on the same p, m and costs. makespan in {plural(unit)}; "
        "ZB bubble rate = 1 - (one rank's compute) / (longest rank span), the Zero Bubble "
        f"paper's measure; peak activations: the fullest rank, in {ACTIVATION_UNIT}."
    )
    return (
        f"<div style='{TEXT}'><b>Schedules side by side</b>"
        f"<table>{''.join(lines)}</table>{html.escape(note)}</div>"
    )


class ClosedForm(NamedTuple):
    """A schedule's makespan formula, as the readout writes it, and its arguments."""

    name: str  # in ppbook.symbolic.formulas()
    written: str
    split: bool  # takes t_i = B - W and t_w = W


CLOSED_FORMS = {
    "gpipe": ClosedForm("gpipe_makespan", "(m+p-1)(F+B)", False),
    "1f1b": ClosedForm("gpipe_makespan", "(m+p-1)(F+B)", False),
    "interleaved-1f1b": ClosedForm("interleaved_makespan", "m(F+B) + (p-1)(F+B)/v", False),
    "zb-h1": ClosedForm("zb_h1_makespan", "m(F+I+W) + (p-1)(F+I-W)", True),
    "zb-h2": ClosedForm("zb_h2_makespan", "m(F+I+W) + (p-1)(F + max(0, I-2W))", True),
}
"""The schedules with a makespan formula in :func:`ppbook.symbolic.formulas`."""

_LETTERS = {"t_f": "F", "t_b": "B", "t_i": "I", "t_w": "W"}


def _exact(value) -> Fraction:
    """A slider's float as the decimal it shows (0.1 as 1/10), so W = F compares equal."""
    return Fraction(str(round(value, 9)))


def _words(words: str) -> str:
    """A condition in the sliders' letters: ``t_w <= t_f (W no longer than F)`` -> ``W <= F``."""
    words = re.sub(r"\bt_([fbiw])\b", lambda match: _LETTERS[match.group(0)], words)
    return re.sub(r"\s*\([^()]*\)$", "", words) if re.search(r"[<>=]", words) else words


def closed_form_html(timeline: Timeline, state: dict) -> str:
    """The closed form against the simulated makespan, and whether its conditions hold."""
    name = timeline.schedule.name
    unit = plural(timeline.time_unit)
    simulated = f"simulated makespan = {timeline.makespan:.4g} {unit}"
    form = CLOSED_FORMS.get(name)
    if form is None:
        return (
            f"<div style='{TEXT}'>no closed form in ppbook.symbolic for "
            f"{html.escape(name)}; {simulated}</div>"
        )
    formula = formulas()[form.name]
    F, B, W = (_exact(state[k]) for k in ("F", "B", "W"))
    values = {sym.p: state["num_stages"], sym.m: state["num_microbatches"], sym.t_f: F}
    values |= {sym.v: state["num_chunks"], sym.t_b: B, sym.t_i: B - W, sym.t_w: W}
    at = {a: values[a] for a in formula.args}
    needs = [_words(words) for _, words in formula.requires] + ["c = 0 (no transfer time)"]
    failed = [
        _words(words) for condition, words in formula.requires if not bool(condition.subs(at))
    ]
    if state["comm"] != 0:
        failed.append("c = 0 (no transfer time)")
    closed = float(formula.function(*(at[a] for a in formula.args)))
    agrees = abs(closed - timeline.makespan) <= 1e-9 * max(1.0, abs(closed))
    if failed:
        verdict = f"formula holds: no (needs {' and '.join(failed)})"
        if agrees:
            verdict += ", though it gives the simulated value here"
    else:
        verdict = f"formula holds: yes (needs {' and '.join(needs)})"
    letters = " with I = B - W" if form.split else ""
    return (
        f"<div style='{TEXT}'>"
        f"closed form {html.escape(form.written)}{letters} = {closed:.4g} {unit}; "
        f"{simulated}; {html.escape(verdict)}</div>"
    )
