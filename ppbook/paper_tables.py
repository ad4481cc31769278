"""The Zero Bubble paper's profiled costs (its Table 9) and bubble rates (its Table 5).

Qi, Wan, Huang and Lin 2024, "Zero Bubble Pipeline Parallelism", arXiv:2401.10241:
Table 9 (Appendix D) gives, for four models and twelve (p, m) configurations, the times
T_F, T_B, T_W and T_comm the authors profiled; Table 5 (section 5.3) gives each schedule's
bubble rate computed from those times; Table 3 gives the models' shapes. The numbers live
in the repository's ``data/`` folder (``data/README.md`` says where each comes from); this
module reads them and :func:`reproduce_table5` sets the simulator's rates beside the
paper's (chapter 4).

The memory limits of ZB-1p and ZB-2p (p and 2p activations, the paper's M_B) count a
micro-batch whose input gradient is done and whose W waits as M_W only (the paper's
Table 1): :attr:`PaperModel.w_memory` = M_W / M_B from the model's shape, passed to the
simulator as :attr:`ppbook.costs.Costs.w_memory`.

The paper's B is the input-gradient pass only, ppbook's ``I``; 1F1B runs the full backward
``B = I + W`` as one pass. Its bubble rate is :attr:`ppbook.timeline.Timeline.zb_bubble_rate`:
1 minus one step's compute m(F+I+W) over the longest stage span (first start to last end),
and a transfer delays its receiver by T_comm without occupying either rank, as in
ppbook's simulator (the paper's Appendix G, constraints 4 and 5).

The ``data/`` folder is not part of the installed package: run from a clone.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, replace
from pathlib import Path

from ppbook.checks import as_count, as_quantity
from ppbook.costs import Costs
from ppbook.schedules import build
from ppbook.simulate import simulate

DATA_DIR = Path(__file__).resolve().parent / "data"
"""Where the tables are: the ``data/`` folder next to the package in a clone."""
TABLE9 = "zero_bubble_table9.csv"
TABLE5 = "zero_bubble_table5.csv"
MODELS = "zero_bubble_models.csv"

SCHEDULES: dict[str, tuple[str, int | None]] = {
    "1F1B": ("1f1b", None),
    "ZB-H1": ("zb-h1", None),
    "ZB-H2": ("zb-h2", None),
    "ZB-1p": ("zb-auto", 1),
    "ZB-2p": ("zb-auto", 2),
}
"""Table 5's schedules that ppbook builds: the paper's name -> (ppbook's schedule, the
memory limit in multiples of p, in one stage's micro-batch activations, or None).
Table 5's 1F1B-I (interleaved, one transformer layer per chunk, uneven stages) is not here."""


@dataclass(frozen=True)
class ProfiledCosts:
    """One row of Table 9: a model on p stages with m micro-batches, and its pass times.

    ``I`` is the paper's T_B (the input-gradient pass). Times in the paper's unit, which it
    does not print (their sizes fit milliseconds); every bubble rate is a ratio of them.
    """

    model: str
    num_stages: int
    num_microbatches: int
    F: float
    I: float  # noqa: E741 (PyTorch's name for the input-gradient pass, the paper's B)
    W: float
    comm: float

    @property
    def costs(self) -> Costs:
        """The simulator's cost model: F, I, W per stage (B = I + W) and the transfer."""
        return Costs(F=self.F, I=self.I, W=self.W, comm=self.comm)


@dataclass(frozen=True)
class PaperModel:
    """One model of Table 3: ``layers`` transformer layers of width ``hidden`` with
    ``heads`` attention heads, on sequences of ``seq_len`` tokens."""

    model: str
    layers: int
    heads: int
    hidden: int
    seq_len: int

    @property
    def w_memory(self) -> float:
        """M_W / M_B: the share of a layer's activations its W still needs once its input
        gradient is done (Table 1 of the Zero Bubble paper).

        M_B is what a layer keeps for its backward, Korthikanti et al.'s
        sb(34h + 5as) bytes (16-bit; :func:`ppbook.symbolic.activations.activation_formulas`
        counts it); M_W = 32sbh bytes, the inputs of the four linear layers (sbh, sbh, sbh,
        4sbh) and the gradients of their outputs (3sbh, sbh, 4sbh, sbh), 2 bytes each. The
        micro-batch size b cancels: w = 32h / (34h + 5as).
        """
        from ppbook.symbolic.activations import activation_formulas  # sympy: only when used

        s, h, a = self.seq_len, self.hidden, self.heads
        held = activation_formulas()["layer_activation_bytes"](s=s, b=1, h=h, a=a)  # M_B
        return 32 * s * h / held


@dataclass(frozen=True)
class PaperRates:
    """One row of Table 5: a configuration and each schedule's bubble rate (the paper's
    names, ``"1F1B"``, ``"1F1B-I"``, ``"ZB-H1"``, ``"ZB-H2"``, ``"ZB-1p"``, ``"ZB-2p"``)."""

    model: str
    num_stages: int
    num_microbatches: int
    rates: dict[str, float]


@dataclass(frozen=True)
class Reproduction:
    """The simulator's bubble rate for one schedule and configuration, beside the paper's."""

    model: str
    num_stages: int
    num_microbatches: int
    schedule: str
    ours: float
    paper: float
    w_memory: float = 1.0
    """The share of an activation a waiting W held in the simulation (1: all of it)."""

    @property
    def difference(self) -> float:
        """Ours minus the paper's: negative where the simulated schedule idles less."""
        return self.ours - self.paper


def data_dir() -> Path:
    """The repository's ``data/`` folder, or a FileNotFoundError saying to use a clone."""
    if not DATA_DIR.is_dir():
        raise FileNotFoundError(
            f"the paper's tables are in the repository's data/ folder, not found at "
            f"{DATA_DIR} (it is not in the installed package): run from a clone of ppbook"
        )
    return DATA_DIR


def _rows(name: str) -> list[dict[str, str]]:
    with open(data_dir() / name, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _number(row: dict[str, str], key: str, name: str, line: int) -> float:
    where = f"data/{name} line {line}"
    text = row.get(key) or ""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{where} needs a number in column {key}, got {text!r}") from None
    return as_quantity(value, f"column {key}", where)


def _configuration(row: dict[str, str], name: str, line: int) -> tuple[str, int, int]:
    where = f"data/{name} line {line}"
    counts = []
    for key in ("p", "m"):
        text = row.get(key) or ""
        counts.append(as_count(int(text) if text.isdigit() else text, f"column {key}", where))
    return row["model"], counts[0], counts[1]


def table9() -> list[ProfiledCosts]:
    """Table 9's twelve rows, in the paper's order."""
    rows = []
    for line, row in enumerate(_rows(TABLE9), start=2):
        model, p, m = _configuration(row, TABLE9, line)
        times = [_number(row, key, TABLE9, line) for key in ("T_F", "T_B", "T_W", "T_comm")]
        rows.append(ProfiledCosts(model, p, m, *times))
    return rows


def table5() -> list[PaperRates]:
    """Table 5's twelve rows, in the paper's order."""
    rows = []
    for line, row in enumerate(_rows(TABLE5), start=2):
        model, p, m = _configuration(row, TABLE5, line)
        names = [key for key in row if key not in ("model", "p", "m")]
        rates = {key: _number(row, key, TABLE5, line) for key in names}
        rows.append(PaperRates(model, p, m, rates))
    return rows


def models() -> dict[str, PaperModel]:
    """Table 3's four models by name (``"1.5B"`` ...)."""
    shapes = {}
    for line, row in enumerate(_rows(MODELS), start=2):
        where = f"data/{MODELS} line {line}"
        counts = []
        for key in ("layers", "heads", "hidden", "seq_len"):
            text = row.get(key) or ""
            counts.append(as_count(int(text) if text.isdigit() else text, f"column {key}", where))
        shapes[row["model"]] = PaperModel(row["model"], *counts)
    return shapes


def reproduce_table5(schedules: tuple[str, ...] = tuple(SCHEDULES)) -> list[Reproduction]:
    """Simulate each configuration of Table 9 under each schedule; one row per pair.

    ``schedules`` are the paper's names (keys of :data:`SCHEDULES`). Each schedule is built
    by :func:`ppbook.schedules.build`, simulated for one step under Table 9's costs, and
    measured by :attr:`~ppbook.timeline.Timeline.zb_bubble_rate`. ZB-1p and ZB-2p are
    ``zb-auto`` with the memory limit p and 2p, given the configuration's costs with
    ``w_memory`` the model's M_W / M_B (:attr:`PaperModel.w_memory`), as the paper counts
    its limits; the handcrafted ones run on the costs alone (w changes neither their order
    nor their times, only the memory they report).
    """
    unknown = [name for name in schedules if name not in SCHEDULES]
    if unknown:
        raise ValueError(
            f"reproduce_table5 builds the schedules {', '.join(SCHEDULES)}, got {unknown[0]!r}"
        )
    papers = {(r.model, r.num_stages, r.num_microbatches): r for r in table5()}
    shapes = models() if any(SCHEDULES[name][1] for name in schedules) else {}
    result = []
    for row in table9():
        key = (row.model, row.num_stages, row.num_microbatches)
        if key not in papers:
            raise ValueError(f"data/{TABLE5} has no row for {key}, which data/{TABLE9} has")
        for name in schedules:
            kind, limit = SCHEDULES[name]
            p, m = row.num_stages, row.num_microbatches
            if limit is None:
                costs, schedule = row.costs, build(kind, p, m)
            else:
                if row.model not in shapes:
                    raise ValueError(
                        f"data/{MODELS} has no row for model {row.model}, which data/{TABLE9} has"
                    )
                costs = replace(row.costs, w_memory=shapes[row.model].w_memory)
                schedule = build(kind, p, m, costs=costs, memory_limit=limit * p)
            rate = simulate(schedule, costs).zb_bubble_rate
            paper = papers[key].rates[name]
            result.append(Reproduction(*key, name, rate, paper, costs.w_memory))
    return result
