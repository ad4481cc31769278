"""The results of a sizing search (:func:`ppbook.cost_model.sizing_search.size`): configurations,
evaluated
options, rejections with their reasons, and the plain data ``ppbook size --json`` prints.

Memory is in bytes per GPU (GB = 10^9 bytes where shown), times in seconds; the bubble
fraction f = idle / total time of the pipeline's step (REFERENCES.md).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from ppbook.cost_model.memory_bytes import (
    MemoryBreakdown,
    ModelShape,
    Parallel,
    active_parameters,
    peak_memory,
    total_parameters,
)
from ppbook.cost_model.search_costs import Hardware, simulated
from ppbook.costs import Costs
from ppbook.timeline import Timeline


@dataclass(frozen=True)
class Config:
    """One way to run the job; ``num_microbatches`` is m per replica per step."""

    tp: int
    pp: int
    dp: int
    schedule: str
    v: int | None
    microbatch_size: int
    num_microbatches: int
    recompute: str
    ep: int = 1
    cp: int = 1

    @property
    def schedule_name(self) -> str:
        """The schedule with its v when it has one: ``"interleaved-1f1b v = 2"``."""
        return f"{self.schedule} v = {self.v}" if self.v else self.schedule

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Option:
    """A configuration that fits, evaluated: memory of its fullest GPU (``memory_rank``, a
    pipeline rank) with its breakdown, and, when simulated, the step time in seconds
    (``pipeline_s`` simulated, plus the data-parallel ``allreduce_s``, plus the optimizer
    step ``optimizer_s``) and the pipeline's bubble fraction f = idle / total."""

    config: Config
    breakdown: MemoryBreakdown
    step_time_s: float | None = None
    pipeline_s: float | None = None
    allreduce_s: float | None = None
    optimizer_s: float | None = None
    bubble_fraction: float | None = None
    costs: Costs | None = field(default=None, repr=False, compare=False)

    @property
    def memory_bytes(self) -> float:
        """The fullest GPU's bytes (its breakdown's total)."""
        return self.breakdown.total

    @property
    def memory_rank(self) -> int:
        """The pipeline rank of the fullest GPU."""
        return self.breakdown.rank

    def as_dict(self) -> dict:
        return {
            **self.config.as_dict(),
            "step_time_s": self.step_time_s,
            "pipeline_s": self.pipeline_s,
            "allreduce_s": self.allreduce_s,
            "optimizer_s": self.optimizer_s,
            "bubble_fraction": self.bubble_fraction,
            "memory_per_gpu_bytes": self.memory_bytes,
            "memory_rank": self.memory_rank,
            "memory_breakdown_bytes": self.breakdown.as_dict(),
            "fits": True,  # what does not fit is a Rejection
        }


@dataclass(frozen=True)
class Rejection:
    """A configuration (as far as it got: ``where``) rejected for ``reason``; ``kind`` groups
    reasons. Memory rejections say the bytes the fullest GPU needs (``memory_bytes``; the
    static state alone when that already does not fit) and the ``split`` (tp, pp, dp)."""

    kind: str
    reason: str
    where: str
    memory_bytes: float | None = None
    split: tuple[int, int, int] | None = None


@dataclass
class SizingResult:
    """What :func:`size` found: ``ranked`` options that fit, fastest first (the ``top`` best
    when ``top`` was given; ``not_ranked`` more fit but cannot be among them), ``rejected``."""

    shape: ModelShape
    hardware: Hardware
    global_batch: int
    ranked: list[Option]
    rejected: list[Rejection]
    not_ranked: int = 0
    sequence_parallel: bool = False
    zero: int = 0
    layout: Parallel | None = None

    @property
    def params(self) -> int:
        return total_parameters(self.shape)

    @property
    def active_params(self) -> int | None:
        """Parameters one token uses (MoE models; ``None`` for a dense one)."""
        return active_parameters(self.shape) if self.shape.is_moe else None

    @property
    def best(self) -> Option | None:
        return self.ranked[0] if self.ranked else None

    def closest(self) -> Rejection | None:
        """The rejection that came nearest to fitting (least memory), if memory rejected any."""
        sized = [r for r in self.rejected if r.memory_bytes is not None]
        return min(sized, key=lambda r: r.memory_bytes, default=None)

    def groups(self) -> list[tuple[str, int, Rejection]]:
        """Rejections by kind: (kind, count, an example), most frequent first; for memory the
        example is the closest to fitting."""
        by_kind: dict[str, list[Rejection]] = {}
        for rejection in self.rejected:
            by_kind.setdefault(rejection.kind, []).append(rejection)
        out = []
        for kind, items in by_kind.items():
            example = min(items, key=lambda r: r.memory_bytes or 0.0)
            out.append((kind, len(items), example))
        return sorted(out, key=lambda g: -g[1])

    def timeline(self, option: Option) -> Timeline:
        """The option's simulated pipeline step (times in seconds)."""
        c = option.config  # stage_costs gives seconds, so the timeline's time_unit is "s"
        return simulated(c.schedule, c.pp, c.num_microbatches, c.v, option.costs)

    def memory(self, option: Option) -> list[MemoryBreakdown]:
        """Every pipeline rank's memory, from :func:`ppbook.cost_model.memory_bytes.peak_memory`
        on the
        option's simulated timeline."""
        parallel = parallel_of(option.config, self.sequence_parallel, self.zero, layout=self.layout)
        return peak_memory(self.timeline(option), self.shape, parallel)

    def as_dict(self) -> dict:
        """Plain data for ``ppbook size --json``: ``params``, ``fits`` and
        ``memory_per_gpu_bytes`` of the best option (of the given split, when one was
        given), or of the closest to fitting when none fits; the ranked options, fastest
        first, and the rejections grouped by kind."""
        best, closest = self.best, self.closest()
        if best is not None:
            memory, split = best.memory_bytes, (best.config.tp, best.config.pp, best.config.dp)
        elif closest is not None:
            memory, split = closest.memory_bytes, closest.split
        else:
            memory, split = None, None
        return {
            "params": self.params,
            **({"active_params": self.active_params} if self.shape.is_moe else {}),
            "fits": best is not None,
            "memory_per_gpu_bytes": memory,
            "split": dict(zip(("tp", "pp", "dp"), split, strict=True)) if split else None,
            "best": best.as_dict() if best else None,
            "closest": None if best or closest is None else closest.where,
            "ranked": [o.as_dict() for o in self.ranked],
            "not_ranked": self.not_ranked,
            "rejected": [
                {"kind": kind, "count": n, "example": ex.reason, "where": ex.where}
                for kind, n, ex in self.groups()
            ],
            "global_batch": self.global_batch,
            "gpus": self.hardware.num_gpus,
            "gpu_memory_bytes": self.hardware.memory_bytes,
            "time_unit": "s",
        }


def parallel_of(
    config: Config,
    sequence_parallel: bool = False,
    zero: int = 0,
    *,
    layout: Parallel | None = None,
) -> Parallel:
    """How each stage of ``config`` runs (:class:`ppbook.cost_model.memory_bytes.Parallel`):
    ``layout``'s choices (sequence parallelism, ZeRO stage, attention, bytes per parameter,
    recomputed pieces) with ``config``'s split, micro-batch size and recomputation; without
    a layout, ``sequence_parallel`` and ``zero`` with the defaults of the rest."""
    if layout is None:
        layout = Parallel(sp=sequence_parallel, zero=zero)
    return replace(
        layout,
        tp=config.tp,
        dp=config.dp,
        ep=config.ep,
        cp=config.cp,
        recompute=config.recompute,
        microbatch_size=config.microbatch_size,
    )
