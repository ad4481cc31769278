"""The Zero Bubble paper's profiled costs (its Table 9) and bubble rates (its Table 5).

Qi, Wan, Huang and Lin 2024, "Zero Bubble Pipeline Parallelism", arXiv:2401.10241:
Table 9 (Appendix D) gives, for four models and twelve (p, m) configurations, the times
T_F, T_B, T_W and T_comm the authors profiled; Table 5 (section 5.3) gives each schedule's
bubble rate computed from those times. The numbers live in the repository's ``data/``
folder (``data/README.md`` says where each comes from); this module reads them and
:func:`reproduce_table5` sets the simulator's rates beside the paper's (chapter 4).

The paper's B is the input-gradient pass only, ppbook's ``I``; 1F1B runs the full backward
``B = I + W`` as one pass. Its bubble rate is :attr:`ppbook.timeline.Timeline.zb_bubble_rate`:
1 minus one step's compute m(F+I+W) over the longest stage span (first start to last end),
and a transfer delays its receiver by T_comm without occupying either rank, as in
ppbook's simulator (the paper's Appendix G, constraints 4 and 5).

The ``data/`` folder is not part of the installed package: run from a clone.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from ppbook.checks import as_count, as_quantity
from ppbook.costs import Costs
from ppbook.schedule import Schedule
from ppbook.schedules import build
from ppbook.simulate import simulate

DATA_DIR = Path(__file__).resolve().parents[1] / "data"
"""Where the tables are: the ``data/`` folder next to the package in a clone."""
TABLE9 = "zero_bubble_table9.csv"
TABLE5 = "zero_bubble_table5.csv"

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


def reproduce_table5(schedules: tuple[str, ...] = tuple(SCHEDULES)) -> list[Reproduction]:
    """Simulate each configuration of Table 9 under each schedule; one row per pair.

    ``schedules`` are the paper's names (keys of :data:`SCHEDULES`). Each schedule is built
    by :func:`ppbook.schedules.build` (ZB-1p and ZB-2p by ``zb-auto`` with the memory limit
    p and 2p, given the configuration's costs), simulated for one step under Table 9's
    costs, and measured by :attr:`~ppbook.timeline.Timeline.zb_bubble_rate`.
    """
    unknown = [name for name in schedules if name not in SCHEDULES]
    if unknown:
        raise ValueError(
            f"reproduce_table5 builds the schedules {', '.join(SCHEDULES)}, got {unknown[0]!r}"
        )
    papers = {(r.model, r.num_stages, r.num_microbatches): r for r in table5()}
    result = []
    for row in table9():
        key = (row.model, row.num_stages, row.num_microbatches)
        if key not in papers:
            raise ValueError(f"data/{TABLE5} has no row for {key}, which data/{TABLE9} has")
        for name in schedules:
            schedule = _build(name, row)
            rate = simulate(schedule, row.costs).zb_bubble_rate
            result.append(Reproduction(*key, name, rate, papers[key].rates[name]))
    return result


def _build(name: str, row: ProfiledCosts) -> Schedule:
    kind, limit = SCHEDULES[name]
    p, m = row.num_stages, row.num_microbatches
    if limit is None:
        return build(kind, p, m)
    return build(kind, p, m, costs=row.costs, memory_limit=limit * p)
