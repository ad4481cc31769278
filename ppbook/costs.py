"""The cost model the simulator times a schedule under.

Compute costs are per stage, in any time unit: ``F`` (forward), ``B`` (full backward),
``I`` (backward for the input only) and ``W`` (weight-gradient pass), PyTorch's kinds.
Given only ``B``, ``I`` and ``W`` default to half of it each; given ``I`` and ``W``, ``B``
defaults to their sum; given none, ``B = 2 F`` (the usual rule of thumb: a backward costs
two forwards). All three may be given apart: measured on real hardware, a split backward
``I + W`` often costs more than the full ``B`` (schedules such as DualPipeV run both).
An overlapped forward-and-backward pair (DualPipe's F&B) takes ``F + B`` of its two
stages unless ``FB`` gives its own time.

Every dependency that crosses ranks pays a transfer time ``comm + comm_bytes / bandwidth``.
The transfer delays the receiver but does not occupy either rank (communication overlaps
compute), so GPipe's makespan grows by ``2 (p - 1) * transfer`` (REFERENCES.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Cost = float | Sequence[float]


@dataclass(frozen=True)
class Costs:
    """Per-stage compute costs and the point-to-point transfer cost.

    Each of ``F``, ``B``, ``I``, ``W``, ``FB`` and ``activation_bytes`` is a scalar (the
    same for every stage) or a list with one value per stage.
    """

    F: Cost = 1.0
    B: Cost | None = None
    I: Cost | None = None  # noqa: E741 (PyTorch's name for the input-gradient pass)
    W: Cost | None = None
    FB: Cost | None = None
    comm: float = 0.0
    comm_bytes: float = 0.0
    bandwidth: float | None = None
    activation_bytes: Cost | None = None

    def __post_init__(self) -> None:
        for name in ("F", "B", "I", "W", "FB", "activation_bytes"):
            value = getattr(self, name)
            if value is None and name != "F":
                continue
            if isinstance(value, int | float) and not isinstance(value, bool):
                _check_scalar(name, value)
            elif isinstance(value, Sequence) and not isinstance(value, str):
                for s, x in enumerate(value):
                    _check_scalar(f"{name}[{s}]", x)
            else:
                raise ValueError(
                    f"cost {name} must be a number or a list of numbers (one per stage), "
                    f"got {value!r}"
                )
        for name in ("comm", "comm_bytes"):
            _check_scalar(name, getattr(self, name))
        if self.bandwidth is not None:
            _check_scalar("bandwidth", self.bandwidth)
            if self.bandwidth == 0:
                raise ValueError("bandwidth must be > 0 (bytes per time unit), got 0")
        elif self.comm_bytes:
            raise ValueError("comm_bytes needs a bandwidth (bytes per time unit) to turn into time")
        if self.B is None and (self.I is None) != (self.W is None):
            raise ValueError("give both I and W (B defaults to their sum), or give B")

    @property
    def transfer(self) -> float:
        """Time of one point-to-point transfer between ranks."""
        extra = self.comm_bytes / self.bandwidth if self.bandwidth else 0.0
        return self.comm + extra

    def per_stage(self, num_stages: int) -> dict[str, list[float]]:
        """Resolve defaults: ``{"F": [...], "B": [...], "I": [...], "W": [...], "FB": None}``.

        ``FB`` is a list only when given (otherwise a pair costs ``F + B`` of its stages).
        """
        f = _expand("F", self.F, num_stages)
        if self.B is not None:
            b = _expand("B", self.B, num_stages)
            i = _expand("I", self.I, num_stages) if self.I is not None else None
            w = _expand("W", self.W, num_stages) if self.W is not None else None
            if i is None and w is None:
                i = [x / 2 for x in b]
                w = [x / 2 for x in b]
            elif i is None:
                i = [_left("I", bb - ww) for bb, ww in zip(b, w, strict=True)]
            elif w is None:
                w = [_left("W", bb - ii) for bb, ii in zip(b, i, strict=True)]
        elif self.I is not None:
            i = _expand("I", self.I, num_stages)
            w = _expand("W", self.W, num_stages)
            b = [ii + ww for ii, ww in zip(i, w, strict=True)]
        else:
            b = [2 * x for x in f]
            i = [x / 2 for x in b]
            w = [x / 2 for x in b]
        fb = _expand("FB", self.FB, num_stages) if self.FB is not None else None
        return {"F": f, "B": b, "I": i, "W": w, "FB": fb}

    def activation_bytes_per_stage(self, num_stages: int) -> list[float] | None:
        """Bytes one micro-batch's activations take on each stage, if given."""
        if self.activation_bytes is None:
            return None
        return _expand("activation_bytes", self.activation_bytes, num_stages)

    @classmethod
    def parse(cls, text: str, **kwargs) -> Costs:
        """Parse the command line's ``F=1,B=2`` (keys F, B, I, W, FB)."""
        values: dict[str, float] = {}
        for item in filter(None, (s.strip() for s in text.split(","))):
            key, sep, value = item.partition("=")
            key = key.strip()
            if not sep or key not in ("F", "B", "I", "W", "FB"):
                raise ValueError(
                    f"cannot read cost {item!r}: expected KEY=VALUE with KEY one of F, B, I, W, FB"
                )
            try:
                values[key] = float(value)
            except ValueError:
                raise ValueError(f"cost {key} must be a number, got {value.strip()!r}") from None
        return cls(**values, **kwargs)


def _check_scalar(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value}")
    return float(value)


def _expand(name: str, value: Cost, num_stages: int) -> list[float]:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return [_check_scalar(name, value)] * num_stages
    values = list(value)
    if len(values) != num_stages:
        raise ValueError(
            f"cost {name} has {len(values)} values, but the schedule has {num_stages} stages: "
            "give one value per stage or a single number"
        )
    return [_check_scalar(f"{name}[{s}]", x) for s, x in enumerate(values)]


def _left(name: str, value: float) -> float:
    if value < 0:
        raise ValueError(f"cost {name} would be negative ({value}): I + W must not exceed B")
    return value
