"""A graded notebook's report, and the rules that keep what a submission wrote from forging
it (issue 16): :class:`QuestionResult`, :class:`Report`, :func:`clean`, :func:`csv_cell`.

Every field that can carry a submission's text (feedback, notes, the notebook's name, an
error message) goes through :func:`clean` when a result or report is made: ANSI escape
sequences, other control characters (C0 and C1, carriage return, tab, newline) and
invisible formatting characters (bidi overrides, zero-width marks) are removed or become
spaces, and the field is cut to :data:`FEEDBACK_CHARS`. A submission therefore cannot add a
line ("4.1  10/10") to the report, move the terminal's cursor or reverse the text shown.
:func:`csv_cell` makes a cell safe for a spreadsheet (OWASP's advice on CSV injection).
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import asdict, dataclass, field

FEEDBACK_CHARS = 200
"""The longest line of feedback, note or name in a report."""

_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, erasing
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: window titles, hyperlinks
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC strings
    r"|\x1b[@-Z\\-_]"  # other two-character escapes
    r"|\x9b[0-?]*[ -/]*[@-~]"  # CSI as one C1 character
)
_INVISIBLE = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def clean(text: object, limit: int = FEEDBACK_CHARS) -> str:
    """``text`` as one plain line: no escape sequence, no control or invisible formatting
    character, runs of white space as one space, at most ``limit`` characters."""
    text = _ESCAPES.sub(" ", str(text))
    text = "".join(" " if unicodedata.category(ch) in _INVISIBLE else ch for ch in text)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def csv_cell(value: object) -> object:
    """``value`` as a spreadsheet shows it and cannot run: text that a spreadsheet would read
    as a formula (starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return) gets
    a leading ``'``; numbers stay numbers."""
    if isinstance(value, str) and value.startswith(_FORMULA):
        return "'" + value
    return value


def _points(value: object) -> float:
    """A score as a finite float (NaN or an infinity, which no score should give, is 0)."""
    number = float(value)
    return number if math.isfinite(number) else 0.0


@dataclass
class QuestionResult:
    name: str
    score: float
    max_score: float
    feedback: str

    def __post_init__(self):
        self.name, self.feedback = clean(self.name, 40), clean(self.feedback)
        self.score, self.max_score = _points(self.score), _points(self.max_score)


@dataclass
class Report:
    """A graded notebook: the total, one result per question, the isolation that was in force,
    notes on the run (cells that ran out of time, a kernel that died, forbidden calls) and
    the seed the questions' cases were drawn with (:attr:`ppbook.assign.questions.Question.
    variant`)."""

    notebook: str
    assignment: str
    questions: list[QuestionResult]
    isolation: str
    notes: list[str] = field(default_factory=list)
    seed: int | None = None

    def __post_init__(self):
        self.notebook, self.assignment = clean(self.notebook), clean(self.assignment, 80)
        self.notes = [clean(note) for note in self.notes]
        self.isolation = clean(self.isolation, 400)

    @property
    def score(self) -> float:
        return sum(q.score for q in self.questions)

    @property
    def max_score(self) -> float:
        return sum(q.max_score for q in self.questions)

    def clean(self) -> Report:
        """Clean every field again (a note may have been added since the report was made)."""
        self.__post_init__()
        for question in self.questions:
            question.__post_init__()
        return self

    def as_dict(self) -> dict:
        """The ``--json`` object."""
        self.clean()
        return {
            "notebook": self.notebook,
            "assignment": self.assignment,
            "score": self.score,
            "max_score": self.max_score,
            "questions": [asdict(q) for q in self.questions],
            "isolation": self.isolation,
            "notes": list(self.notes),
            "seed": self.seed,
        }

    def text(self) -> str:
        """The report a person reads: one line per question, the total, the notes, the
        isolation and the seed."""
        self.clean()
        width = max((len(q.name) for q in self.questions), default=0)
        lines = [f"{self.notebook} ({self.assignment}): {self.score:g} / {self.max_score:g}"]
        for q in self.questions:
            lines.append(f"  {q.name:<{width}}  {q.score:g}/{q.max_score:g}  {q.feedback}")
        lines += [f"  note: {note}" for note in self.notes]
        lines.append(f"  isolation: {self.isolation}")
        if self.seed is not None:
            lines.append(f"  seed: {self.seed} (grade again with --seed {self.seed})")
        return "\n".join(lines)
