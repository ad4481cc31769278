"""Sizing a training job (chapter 8, ``ppbook size``): which tensor, pipeline and data
parallel split, schedule, v and micro-batch size fit a model in the GPUs' memory, and
which of them trains fastest.

:func:`size` enumerates every configuration: ``tp * pp * dp = num_gpus`` (``tp`` inside a
node and dividing the heads), a schedule of :data:`SIZING_SCHEDULES` (interleaved 1F1B with
v in :func:`chunks_for`), a micro-batch size ``b`` and a recomputation mode, with ``global
batch = dp * m * b``. For each it finds the peak memory of every GPU (static state and
the activations the schedule holds, :mod:`ppbook.cost_model.memory_bytes`, counted from the
schedule's
order as the simulator's timeline counts them, :func:`ppbook.cost_model.search_costs.held_frontier`)
and, for those that fit, the step time the simulator gives under the time model of
:mod:`ppbook.cost_model.search_costs` (compute, the step's own work of
:mod:`ppbook.cost_model.step_work`,
tensor-parallel all-reduces, pipeline transfers on the links they cross, the data-parallel
all-reduce and the optimizer step; stage costs, bound and ranking in
:mod:`ppbook.cost_model.search_step`). Each rejected configuration keeps the reason it was rejected.

Speed. A configuration whose parameters, gradients and optimizer state alone do not fit is
rejected before its schedule is built. The activations a schedule holds are counted once
per (schedule, p, v) at m = 2p, which gives every longer m the same counts
(:func:`~ppbook.cost_model.search_costs.held_frontier`). With ``top`` set, the configurations that
fit are simulated in order of a lower bound on their step time (a rank's first forward
waits for the forwards of the stages before it, then the rank computes all its passes,
then the all-reduce and the optimizer step run: no step is shorter), and the search stops
once the next bound is slower than the ``top``-th best simulated step; the rest fit but
cannot enter the top, and are counted as such. Schedules and simulations are cached by
(schedule, p, m, v) and by the costs (:mod:`ppbook.cost_model.search_costs`). Python's cyclic
garbage
collector is paused while :func:`size` runs: the schedules it builds are millions of small
tuples that hold no cycles, and the collector's passes over them took a third of a
1T-parameter search.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import replace
from functools import lru_cache, partial, wraps
from math import gcd, isqrt

from ppbook.checks import as_count, shown
from ppbook.cost_model.layer_time import ATTENTION, dropout_of
from ppbook.cost_model.memory_bytes import (
    RECOMPUTE,
    MemoryBreakdown,
    ModelShape,
    Parallel,
    check_fit,
    gathered_bytes,
    part_activation_bytes,
    static_bytes,
)
from ppbook.cost_model.search_costs import (
    Hardware,
    check_rule,
    held_frontier,
    limit_problem,
    peak_bytes,
    route_length,
)
from ppbook.cost_model.search_result import Config, Option, Rejection, SizingResult, parallel_of
from ppbook.cost_model.search_step import _costs, _lower_bound, _rank, _stage_values, _structure
from ppbook.schedules import SCHEDULES

SIZING_SCHEDULES = (
    "1f1b",
    "interleaved-1f1b",
    "interleaved-zb",
    "zb-h1",
    "zb-h2",
    "zb-v",
    "v-half",
    "v-min",
    "dualpipev",
)
"""The schedules searched, and why these: 1F1B is Megatron-LM's baseline; interleaved
1F1B trades v times more messages for a v times smaller bubble (at every m PyTorch runs),
and interleaved zero bubble (PyTorch's ScheduleInterleavedZeroBubble) splits its backward;
ZB-H1 keeps 1F1B's memory with a smaller bubble, ZB-H2 spends up to 2p-1 activations for
less; ZB-V and DualPipeV hold two chunks per GPU in a V, and V-Half and V-Min (Qi et al.
2024, "Pipeline Parallelism with Controllable Memory") hold about 1/2 and 1/3 of 1F1B's
activations for a larger bubble. Left out: GPipe and looped BFS (they hold all m
micro-batches' activations for 1F1B's bubble), DualPipe (two copies of the parameters;
made for MoE models' overlap) and zb-auto (its order depends on the costs, so neither its
memory nor its build can be shared between configurations)."""
EXTRA_SCHEDULES = ("dualpipe",)
"""Schedules ``ppbook size --schedule`` takes that the search does not try by default:
DualPipe, DeepSeek-V3's (two copies of the parameters, m >= 2p and even)."""
CHUNKS = (2, 4, 8)
"""The v always tried for interleaved 1F1B (where p v model parts have a layer each)."""
MAX_EVEN_CHUNKS = 8
"""Beside :data:`CHUNKS`, interleaved 1F1B tries each v up to this one that splits the
layers evenly over the p v model parts (:func:`chunks_for`)."""
STACK_2021 = {"attention": "standard", "sequence_parallel": False, "gradient_bytes": 2}
"""Keyword arguments of :func:`size` for a job run as Megatron-LM's 2021 runs were
(Narayanan et al. 2021, arXiv:2104.04473): standard attention that keeps its s x s
scores, no sequence parallelism, 16 bytes a parameter (bf16 weights and gradients, fp32
master weights and Adam moments). Chapter 8 sizes its 2021 jobs and Megatron-LM's Table 1
with it; the defaults of :func:`size` are today's (flash attention, sequence
parallelism, Megatron's fp32 gradients: 18 bytes a parameter)."""
LIMITS = "beyond the simulator's limits"
"""The kind of a rejection whose schedule :mod:`ppbook.limits` would refuse to build (too
many micro-batches, stages or actions): the search goes on with the others."""
MICROBATCH_SIZES = (1, 2, 4, 8)
"""The micro-batch sizes tried when none is given."""


def _collector_paused(function: Callable) -> Callable:
    """``function`` with the cyclic garbage collector paused while it runs (reference
    counting still frees everything), then restored as it was."""

    @wraps(function)
    def paused(*args, **kwargs):
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return function(*args, **kwargs)
        finally:
            if was_enabled:
                gc.enable()

    return paused


@_collector_paused
def size(
    shape: ModelShape,
    global_batch: int,
    hardware: Hardware,
    *,
    tp: int | None = None,
    pp: int | None = None,
    ep: int | None = None,
    cp: int = 1,
    microbatch_size: int | None = None,
    recompute: str | None = None,
    sequence_parallel: bool = True,
    zero: int = 0,
    schedules: tuple[str, ...] = SIZING_SCHEDULES,
    top: int | None = None,
    attention: str = "flash",
    dropout: bool | None = None,
    gradient_bytes: int = 4,
    master_bytes: int = 4,
    moment_bytes: int = 4,
    recompute_norm: bool = False,
    recompute_mla_up: bool = False,
    fp8_activations: bool = False,
    recompute_swiglu: bool = False,
) -> SizingResult:
    """Every configuration of ``shape`` on ``hardware`` for ``global_batch`` samples a step.

    ``tp``, ``pp``, ``ep``, ``microbatch_size`` and ``recompute`` fix what they name (a
    ValueError says why a fixed one cannot work); otherwise every value is tried
    (``recompute`` in :data:`ppbook.cost_model.memory_bytes.RECOMPUTE`; ``ep`` the divisors
    of dp that divide the experts, 1 for a dense model). ``cp`` context-parallel ranks
    (default 1) split each sequence: the GPUs are tp * cp * pp * dp. ``sequence_parallel``
    (default on), ``zero`` (ZeRO stage 0 to 3), the bytes of each parameter's gradient,
    master copy and Adam moments, and DeepSeek-V3's ``recompute_norm``,
    ``recompute_mla_up``, ``fp8_activations`` and ``recompute_swiglu`` apply to every
    configuration (:class:`~ppbook.cost_model.model_shape.Parallel`). ``top``: rank only
    the ``top`` fastest (much faster; see the module's docstring). ``schedules``: the
    schedules tried (one to fix it; with pp = 1 there is no pipeline and every schedule is
    plain gradient accumulation). ``attention``: ``"flash"`` (default) or ``"standard"``
    (:mod:`ppbook.cost_model.layer_time`; ignored under ``hardware.utilisation``);
    ``dropout``: the block drops out after attention and the MLP (and, with standard
    attention, on its probabilities), as Megatron-LM's GPT did; ``None``: the attention's
    default (:data:`ppbook.cost_model.layer_time.DROPOUT_DEFAULT`). Returns a
    :class:`~ppbook.cost_model.search_result.SizingResult`.
    """
    if not isinstance(shape, ModelShape) or not isinstance(hardware, Hardware):
        raise ValueError(
            "size needs a ppbook.cost_model.memory_bytes.ModelShape and a "
            "ppbook.cost_model.search_costs.Hardware"
        )
    batch = as_count(global_batch, "global_batch", "size")
    if recompute is not None and recompute not in RECOMPUTE:
        raise ValueError(f"recompute must be one of {', '.join(RECOMPUTE)}, got {recompute!r}")
    b_given = None if microbatch_size is None else as_count(microbatch_size, "microbatch_size")
    top = None if top is None else as_count(top, "top", "size")
    if attention not in ATTENTION:
        raise ValueError(f"attention must be one of {', '.join(ATTENTION)}, got {shown(attention)}")
    layout = Parallel(  # checks each choice
        sp=sequence_parallel,
        zero=zero,
        attention=attention,
        gradient_bytes=gradient_bytes,
        master_bytes=master_bytes,
        moment_bytes=moment_bytes,
        recompute_norm=recompute_norm,
        recompute_mla_up=recompute_mla_up,
        fp8_activations=fp8_activations,
        recompute_swiglu=recompute_swiglu,
    )
    unknown = [name for name in schedules if name not in SCHEDULES]
    if unknown or not schedules:
        raise ValueError(
            f"size needs schedules named in ppbook.schedules.SCHEDULES, got {shown(schedules)}"
        )
    block = (attention, dropout_of(attention, dropout))
    search = _Search(shape, hardware, batch, layout, block)
    modes = RECOMPUTE if recompute is None else (recompute,)
    n = hardware.num_gpus
    cp = _given("cp", cp, n)[0]
    n_cp = n // cp
    if ep is not None:
        _expert_parallel(shape, as_count(ep, "ep", "size"))
    _given("pp", pp, n_cp)
    for t in _given("tp", tp, n_cp) or _divisors(n_cp):
        problem = _tp_problem(shape, hardware, t, replace(layout, tp=t, cp=cp))
        if problem:
            if tp is not None:
                raise ValueError(problem[1])
            search.reject(*problem, f"tp = {t}")
            continue
        if pp is not None and (n_cp // t) % pp:
            if tp is not None:
                raise ValueError(f"tp * cp * pp = {t} * {cp} * {pp} must divide the {n} GPUs")
            search.reject(
                "tp * pp does not divide the GPUs",
                f"pp {pp} does not divide the {n_cp // t} GPUs left by tp {t}, cp {cp}",
                f"tp = {t}, pp = {pp}",
            )
            continue
        for p in _given("pp", pp, n_cp // t) or _divisors(n_cp // t):
            if p > shape.layers and pp is not None:
                raise ValueError(
                    f"pp = {p} needs a layer per stage; the model has {shape.layers} layers"
                )
            dp = n_cp // (t * p)
            for e in search.expert_sizes(t, p, dp, ep):
                for b in search.microbatch_sizes(t, p, dp, b_given):
                    for name, v in _variants(schedules, p, shape.layers):
                        m = batch // (dp * b)
                        base = Config(t, p, dp, name, v, b, m, modes[0], e, cp)
                        if search.fits_statically(base) and search.follows_rule(base):
                            for mode in modes:
                                search.evaluate(replace(base, recompute=mode))
    ranked, not_ranked = _rank(search.pending, hardware, top, layout, shape)
    return SizingResult(
        shape,
        hardware,
        batch,
        ranked,
        search.rejected,
        not_ranked,
        sequence_parallel,
        zero,
        layout,
    )


def _expert_parallel(shape: ModelShape, ep: int) -> None:
    if ep > 1 and not shape.is_moe:
        raise ValueError(f"ep = {ep} needs an MoE model (experts >= 1); use ep 1")
    if shape.is_moe and shape.experts % ep:
        raise ValueError(
            f"ep = {ep} must divide experts = {shape.experts} (whole experts per rank)"
        )


class _Search:
    """The search's state: the rejections so far and the options that fit, to be ranked."""

    def __init__(self, shape, hardware, batch, layout: Parallel, block) -> None:
        self.shape, self.hardware, self.batch, self.layout = shape, hardware, batch, layout
        self.block = block  # (attention, dropout)
        self.rejected: list[Rejection] = []
        self.pending: list[tuple[float, Option]] = []
        self._static_checked: dict[tuple, bool] = {}

    def reject(self, kind: str, reason: str, where: str, memory=None, split=None) -> None:
        self.rejected.append(Rejection(kind, reason, where, memory, split))

    def expert_sizes(self, t: int, p: int, dp: int, given: int | None) -> list[int]:
        """The expert-parallel sizes tried inside ``dp`` replicas: ``given``, or every
        divisor of dp that divides the experts (1 for a dense model)."""
        if given is None:
            if not self.shape.is_moe:
                return [1]
            return _divisors(gcd(dp, self.shape.experts))
        if dp % given:
            self.reject(
                "ep does not divide dp",
                f"ep = {given} does not divide dp = {dp} (experts are split inside the "
                "data-parallel group)",
                f"tp = {t}, pp = {p}, dp = {dp}",
            )
            return []
        return [given]

    def microbatch_sizes(self, t: int, p: int, dp: int, given: int | None) -> list[int]:
        """The micro-batch sizes that split the global batch over ``dp`` replicas."""
        where = f"tp = {t}, pp = {p}, dp = {dp}"
        if p > self.shape.layers:
            self.reject("more stages than layers", f"pp = {p} > {self.shape.layers} layers", where)
            return []
        if self.batch % dp:
            self.reject(
                "global batch not divisible",
                f"global batch {self.batch} not divisible by dp = {dp}",
                where,
            )
            return []
        out = []
        for b in [given] if given else MICROBATCH_SIZES:
            if (self.batch // dp) % b:
                self.reject(
                    "global batch not divisible",
                    f"{self.batch // dp} samples per replica not divisible by b = {b}",
                    f"{where}, b = {b}",
                )
            else:
                out.append(b)
        return out

    def fits_statically(self, c: Config) -> bool:
        """Whether the schedule has a layer per model part and its parameters, gradients and
        optimizer state alone fit (checked once per split and schedule)."""
        key = (c.tp, c.pp, c.dp, c.ep, c.schedule, c.v)
        if key in self._static_checked:
            return self._static_checked[key]
        where = _split_where(c) + f", {c.schedule_name}"
        parts = route_length(c.schedule, c.pp, c.v)
        ok = parts <= self.shape.layers
        if not ok:
            self.reject(
                "more stages than layers",
                f"{c.schedule} with pp = {c.pp}"
                + (f", v = {c.v}" if c.v else "")
                + f" needs {parts} model parts > {self.shape.layers} layers",
                where,
            )
        elif beyond := limit_problem(c.schedule, c.pp, 2 * c.pp, c.v):
            self.reject(LIMITS, beyond, where)
            ok = False
        else:
            layout = _structure(self.shape, c.schedule, c.pp, c.v, c.tp, c.ep)
            parallel = parallel_of(c, layout=self.layout)
            static = [
                sum(static_bytes(n, parallel, x).values()) + gathered_bytes(self.shape, parallel)
                for n, x in zip(layout.counts, layout.experts, strict=True)
            ]
            rank = max(range(len(static)), key=static.__getitem__)
            ok = static[rank] <= self.hardware.memory_bytes
            if not ok:
                self.reject(
                    "does not fit in memory",
                    f"parameters, gradients and optimizer state alone need "
                    f"{static[rank] / 1e9:.1f} GB > {self.hardware.gpu_memory_gb:g} GB "
                    f"on pipeline rank {rank}",
                    where,
                    static[rank],
                    (c.tp, c.pp, c.dp),
                )
        self._static_checked[key] = ok
        return ok

    def follows_rule(self, c: Config) -> bool:
        """Whether the schedule can be built for ``c``'s p, m and v: within the simulator's
        limits (:func:`~ppbook.cost_model.search_costs.limit_problem`), and its own rule."""
        beyond = limit_problem(c.schedule, c.pp, c.num_microbatches, c.v)
        if beyond:
            self.reject(LIMITS, beyond, _where(c).rsplit(", recompute", 1)[0])
            return False
        try:
            check_rule(c.schedule, c.pp, c.num_microbatches, c.v)
        except ValueError as exc:  # m >= 2p - 1 for ZB-H2, m >= 2p for DualPipe...
            self.reject(f"{c.schedule}'s rule", str(exc), _where(c).rsplit(", recompute", 1)[0])
            return False
        return True

    def evaluate(self, c: Config) -> None:
        """Memory of every GPU under ``c``; keep it to rank, or reject it and say why."""
        parallel = parallel_of(c, layout=self.layout)
        worst = _fullest(self.shape, c, self.layout)
        if worst.total > self.hardware.memory_bytes:
            self.reject(
                "does not fit in memory",
                f"needs {worst.total / 1e9:.1f} GB > {self.hardware.gpu_memory_gb:g} GB "
                f"on pipeline rank {worst.rank}",
                _where(c),
                worst.total,
                (c.tp, c.pp, c.dp),
            )
            return
        values = _stage_values(self.shape, self.hardware, c, parallel, self.block)
        option = Option(c, worst)
        bound = _lower_bound(option, values, self.shape, self.hardware, self.layout)
        self.pending.append((bound, option, partial(_costs, self.shape, self.hardware, c, values)))


@lru_cache(maxsize=8192)
def _fullest(shape: ModelShape, c: Config, layout: Parallel) -> MemoryBreakdown:
    """The memory of ``c``'s fullest GPU: it depends on the model and the configuration
    only, so a search that changes the GPUs' speed or links (the calculator's sliders)
    finds it again here. ``parameters`` includes ZeRO-3's gathered layers."""
    parallel = parallel_of(c, layout=layout)
    _, layers, parts, counts, experts = _structure(shape, c.schedule, c.pp, c.v, c.tp, c.ep)
    per_part = part_activation_bytes(shape, parallel, layers)
    frontier = held_frontier(c.schedule, c.pp, c.num_microbatches, c.v)
    held = peak_bytes(frontier, [per_part[k] for k in parts])
    gathered = gathered_bytes(shape, parallel)
    ranks = []
    for r, (n, x) in enumerate(zip(counts, experts, strict=True)):
        static = static_bytes(n, parallel, x)
        static["parameters"] += gathered
        ranks.append(MemoryBreakdown(r, n, **static, activations=held[r]))
    return max(ranks, key=lambda x: x.total)


def _given(name: str, value: int | None, total: int) -> list[int] | None:
    if value is None:
        return None
    value = as_count(value, name, "size")
    if total % value:
        raise ValueError(f"{name} = {value} must divide the {total} GPUs it is chosen from")
    return [value]


def _divisors(n: int) -> list[int]:
    """The divisors of ``n`` in increasing order, found up to its square root."""
    small = [d for d in range(1, isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def _tp_problem(shape, hardware, t: int, parallel: Parallel) -> tuple[str, str] | None:
    node = hardware.gpus_per_node
    if t > node:
        return ("tp beyond a node", f"tp {t} > {node} GPUs per node")
    if node % t:
        return ("tp beyond a node", f"tp {t} does not divide the {node} GPUs of a node")
    try:
        check_fit(shape, parallel)
    except ValueError as exc:
        return ("tp does not split the model", str(exc))
    return None


def chunks_for(pp: int, layers: int) -> tuple[int, ...]:
    """The v tried for interleaved 1F1B with ``pp`` stages and ``layers`` layers:
    :data:`CHUNKS`, and every v up to :data:`MAX_EVEN_CHUNKS` that gives each of the
    ``pp * v`` model parts the same number of layers (Megatron-LM's interleaved schedule
    runs only those: its 530B model, 105 layers on 35 stages, ran v = 3)."""
    even = (v for v in range(2, MAX_EVEN_CHUNKS + 1) if layers % (pp * v) == 0)
    return tuple(sorted({*CHUNKS, *even}))


def _variants(schedules, p: int, layers: int):
    if p == 1:  # no pipeline: one stage, the schedule is gradient accumulation
        yield "1f1b", None
        return
    for name in schedules:
        for v in chunks_for(p, layers) if SCHEDULES[name].chunks == "any" else (None,):
            yield name, v


def _split_where(c: Config) -> str:
    extra = (f", ep = {c.ep}" if c.ep > 1 else "") + (f", cp = {c.cp}" if c.cp > 1 else "")
    return f"tp = {c.tp}, pp = {c.pp}, dp = {c.dp}{extra}"


def _where(c: Config) -> str:
    return (
        f"{_split_where(c)}, {c.schedule_name}, b = {c.microbatch_size}, "
        f"m = {c.num_microbatches}, recompute {c.recompute}"
    )
