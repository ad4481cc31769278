"""What a model is and how each pipeline stage runs it: :class:`ModelShape` and
:class:`Parallel` (chapters 6 to 8, ``ppbook size``).

:class:`ModelShape` describes a decoder-only transformer as current ones are built: the
GPT-3-style layer by default (full multi-head attention, a 4h GELU MLP with biases,
LayerNorm, learned positions, tied embeddings) and, through its optional fields, grouped
query attention (``kv_heads``), SwiGLU (``gated_mlp``, ``ffn_hidden``), RMSNorm without
biases, rotary positions (``position_embeddings=False``), untied embeddings, mixture of
experts (``experts``, top-``experts_per_token``, ``shared_experts``, ``dense_layers``) and
DeepSeek's multi-head latent attention (``kv_lora_rank``, ``q_lora_rank``,
``qk_rope_head_dim``, ``v_head_dim``). The model cards
(:mod:`ppbook.cost_model.model_cards`) fill these fields from Hugging Face config files.

:class:`Parallel` says how a stage is run: tensor (``tp``, with sequence parallelism
``sp``), data (``dp``), expert (``ep``, inside the data-parallel group, as Megatron-Core
and DeepSeek-V3 place it) and context (``cp``) parallelism, the ZeRO stage, the bytes each
parameter's gradient, master copy and Adam moments take, activation recomputation and the
attention kernel.

:func:`check_fit` is the one place that says which layouts split a shape into whole
pieces (Megatron-LM's rules: whole heads and whole key/value groups per tensor-parallel
rank, whole experts per expert-parallel rank).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ppbook.checks import as_count, shown

RECOMPUTE = ("none", "selective", "full")
"""Activation recomputation, as in :data:`ppbook.symbolic.transformer.RECOMPUTE`."""

ATTENTION = ("standard", "flash")
"""Attention kernels: ``standard`` keeps the s x s scores (Korthikanti et al. 2022),
``flash`` (FlashAttention-2, Dao 2023, arXiv:2307.08691) keeps only its inputs, output and
logsumexp."""

NORMS = ("layernorm", "rmsnorm")

MAX_COUNT = 10**15
"""The largest count a shape or layout takes (``10^15``): beyond it products of counts
leave the range where floats are exact and the search's arithmetic stops meaning much."""


def _flag(value: object, name: str, owner: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{owner} needs {name} to be True or False, got {shown(value)}")
    return value


def _count(value: object, name: str, owner: str, minimum: int = 1) -> int:
    number = as_count(value, name, owner, minimum=minimum)
    if number > MAX_COUNT:
        raise ValueError(
            f"{owner} needs {name} <= 10^15, got a number of {len(str(number))} digits"
        )
    return number


def _optional_count(obj: object, name: str, owner: str, minimum: int = 1) -> None:
    value = getattr(obj, name)
    if value is not None:
        object.__setattr__(obj, name, _count(value, name, owner, minimum))


@dataclass(frozen=True)
class ModelShape:
    """A decoder-only transformer: ``layers`` layers of width ``hidden`` with ``heads``
    query heads, a ``vocab``-word vocabulary, ``seq_len`` tokens per sample, activations of
    ``bytes_per_element`` bytes (2: 16-bit).

    The defaults are the GPT-3 layer (an MLP of ``ffn_multiple * hidden``). The optional
    fields, each ``None``/0/False for "as GPT-3":

    - ``kv_heads``: key/value heads of grouped-query attention (None: ``heads``);
    - ``head_dim``: each head's width (None: ``hidden // heads``); with MLA the query/key
      head's part without rotary positions (DeepSeek's ``qk_nope_head_dim``);
    - ``ffn_hidden``: the MLP's width (None: ``ffn_multiple * hidden``); ``gated_mlp``:
      SwiGLU's three matrices (gate, up, down) instead of two;
    - ``norm``: ``"layernorm"`` (weight and bias) or ``"rmsnorm"`` (weight only);
      ``linear_bias``: whether the linear layers have biases (GPT yes; Llama no);
    - ``experts`` routed experts (0: dense), each token to ``experts_per_token`` of them,
      plus ``shared_experts`` every token uses, each of width ``moe_ffn_hidden`` (None:
      ``ffn_hidden``); the first ``dense_layers`` layers keep a dense MLP;
      ``capacity_factor``: tokens an expert takes, as a multiple of its even share (None:
      dropless, every routed token kept);
    - MLA (multi-head latent attention) when ``kv_lora_rank`` is set: keys and values
      through a rank-``kv_lora_rank`` latent, queries through ``q_lora_rank`` (None: a full
      projection), rotary parts of ``qk_rope_head_dim``, value heads of ``v_head_dim``;
    - ``dropout``: whether the layer drops out (GPT: after attention, on its scores and
      after the MLP; Llama, Mixtral and DeepSeek-V3 train without dropout).
    """

    layers: int
    hidden: int
    heads: int
    vocab: int
    seq_len: int
    ffn_multiple: int = 4
    tied_embeddings: bool = True
    position_embeddings: bool = True
    bytes_per_element: int = 2
    kv_heads: int | None = None
    head_dim: int | None = None
    ffn_hidden: int | None = None
    gated_mlp: bool = False
    norm: str = "layernorm"
    linear_bias: bool = True
    experts: int = 0
    experts_per_token: int = 1
    shared_experts: int = 0
    moe_ffn_hidden: int | None = None
    dense_layers: int = 0
    capacity_factor: float | None = None
    q_lora_rank: int | None = None
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    v_head_dim: int | None = None
    dropout: bool = True

    def __post_init__(self) -> None:
        owner = "ModelShape"
        counts = ("layers", "hidden", "heads", "vocab", "seq_len", "ffn_multiple")
        for name in (*counts, "bytes_per_element"):
            object.__setattr__(self, name, _count(getattr(self, name), name, owner))
        flags = ("tied_embeddings", "position_embeddings", "gated_mlp", "linear_bias", "dropout")
        for name in flags:
            _flag(getattr(self, name), name, owner)
        for name in ("kv_heads", "head_dim", "ffn_hidden", "moe_ffn_hidden"):
            _optional_count(self, name, owner)
        for name in ("q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "v_head_dim"):
            _optional_count(self, name, owner)
        for name in ("experts", "shared_experts", "dense_layers"):
            object.__setattr__(self, name, _count(getattr(self, name), name, owner, 0))
        object.__setattr__(
            self, "experts_per_token", _count(self.experts_per_token, "experts_per_token", owner)
        )
        if self.norm not in NORMS:
            raise ValueError(f"ModelShape needs norm in {NORMS}, got {shown(self.norm)}")
        if self.head_dim is None and self.hidden % self.heads:
            raise ValueError(
                f"ModelShape needs heads dividing hidden, got hidden {self.hidden} and "
                f"heads {self.heads} (or give head_dim)"
            )
        if self.num_kv_heads > self.heads or self.heads % self.num_kv_heads:
            raise ValueError(
                f"ModelShape needs kv_heads dividing heads = {self.heads} (grouped-query "
                f"attention), got kv_heads {self.kv_heads}"
            )
        self._check_moe()
        self._check_mla()

    def _check_moe(self) -> None:
        if not self.experts:
            moe_only = ("shared_experts", "dense_layers", "moe_ffn_hidden", "capacity_factor")
            for name in moe_only:
                if getattr(self, name):
                    raise ValueError(
                        f"ModelShape needs experts >= 1 to take {name} "
                        f"(got {name} {shown(getattr(self, name))} with experts 0)"
                    )
            if self.experts_per_token != 1:
                raise ValueError(
                    f"ModelShape needs experts >= 1 to route to experts_per_token = "
                    f"{self.experts_per_token} experts (a dense model has experts 0)"
                )
            return
        if self.experts_per_token > self.experts:
            raise ValueError(
                f"ModelShape needs experts_per_token <= experts = {self.experts}, got "
                f"{self.experts_per_token}"
            )
        if self.dense_layers >= self.layers:
            raise ValueError(
                f"ModelShape needs dense_layers < layers = {self.layers} in an MoE model, "
                f"got {self.dense_layers}"
            )
        factor = self.capacity_factor
        if factor is not None:
            ok = isinstance(factor, int | float) and not isinstance(factor, bool)
            if not ok or not math.isfinite(factor) or not 0 < factor <= self.experts:
                raise ValueError(
                    f"ModelShape needs capacity_factor None (dropless) or a number in "
                    f"(0, experts = {self.experts}], got {shown(factor)}"
                )

    def _check_mla(self) -> None:
        if self.kv_lora_rank is None:
            for name in ("q_lora_rank", "qk_rope_head_dim", "v_head_dim"):
                if getattr(self, name) is not None:
                    raise ValueError(
                        f"ModelShape takes {name} only with multi-head latent attention: "
                        f"give kv_lora_rank too, or leave {name} None"
                    )
            return
        if self.qk_rope_head_dim is None:
            raise ValueError(
                "ModelShape needs qk_rope_head_dim (the rotary part of each query/key "
                "head) with kv_lora_rank (multi-head latent attention)"
            )
        if self.kv_heads is not None and self.kv_heads != self.heads:
            raise ValueError(
                f"ModelShape with multi-head latent attention has one key/value head per "
                f"query head: leave kv_heads None, got {self.kv_heads}"
            )

    # ----- derived sizes ---------------------------------------------------------------

    @property
    def num_kv_heads(self) -> int:
        """Key/value heads: ``kv_heads``, or ``heads`` without grouped-query attention."""
        return self.heads if self.kv_heads is None else self.kv_heads

    @property
    def head_size(self) -> int:
        """Each head's width (with MLA: the query/key part without rotary positions)."""
        return self.hidden // self.heads if self.head_dim is None else self.head_dim

    @property
    def qk_head_size(self) -> int:
        """A query/key head's width: ``head_size``, plus the rotary part with MLA."""
        return self.head_size + (self.qk_rope_head_dim or 0)

    @property
    def v_head_size(self) -> int:
        """A value head's width: ``v_head_dim`` with MLA, else ``head_size``."""
        return self.v_head_dim if self.v_head_dim is not None else self.head_size

    @property
    def ffn_size(self) -> int:
        """The dense MLP's width: ``ffn_hidden`` or ``ffn_multiple * hidden``."""
        return self.ffn_multiple * self.hidden if self.ffn_hidden is None else self.ffn_hidden

    @property
    def moe_ffn_size(self) -> int:
        """Each expert's MLP width: ``moe_ffn_hidden`` or ``ffn_size``."""
        return self.ffn_size if self.moe_ffn_hidden is None else self.moe_ffn_hidden

    @property
    def is_moe(self) -> bool:
        """Whether the model routes tokens to experts."""
        return self.experts > 0

    @property
    def moe_layers(self) -> int:
        """How many layers have an MoE MLP (all but the first ``dense_layers``)."""
        return self.layers - self.dense_layers if self.experts else 0

    @property
    def uses_mla(self) -> bool:
        """Whether attention is DeepSeek's multi-head latent attention."""
        return self.kv_lora_rank is not None

    def is_moe_layer(self, layer: int) -> bool:
        """Whether layer ``layer`` (0-based) has an MoE MLP."""
        return self.is_moe and layer >= self.dense_layers


@dataclass(frozen=True)
class Parallel:
    """How each pipeline stage is run.

    - ``tp`` tensor-parallel ranks, ``sp``: with sequence parallelism (the norms and
      dropouts split over ``tp`` along the sequence);
    - ``dp`` data-parallel replicas; ``ep`` expert-parallel ranks inside them (each MoE
      layer's experts spread over ``ep`` ranks, whose expert weights then have ``dp/ep``
      data-parallel copies); ``cp`` context-parallel ranks (each sample's sequence split
      over ``cp`` ranks, ring attention);
    - ``zero``: 0 none; 1 optimizer state sharded over the data-parallel ranks (ZeRO-1,
      Megatron's distributed optimizer); 2 gradients too (ZeRO-2); 3 parameters too
      (ZeRO-3, PyTorch FSDP);
    - ``gradient_bytes`` per parameter's gradient (4: fp32, Megatron's main gradients; 2:
      bf16), ``master_bytes`` of its fp32 master copy (0: none), ``moment_bytes`` of each
      Adam moment (4: fp32; 2: bf16, as DeepSeek-V3);
    - ``recompute``: none, selective or full; ``recompute_norm``: the norms' outputs
      recomputed in the backward (DeepSeek-V3, its report sec. 3.2.3);
      ``recompute_mla_up``: MLA's up-projections recomputed (same);
    - ``fp8_activations``: the inputs of the linear layers cached for the backward in FP8,
      1 byte an element and a 4-byte scale per 1 x 128 tile, the inputs of the projection
      after attention in the 12-bit E5M6, and the MoE SwiGLU's inputs in FP8 (DeepSeek-V3,
      its report sec. 3.3.1 and 3.3.3); norms, attention and the router keep ``e`` bytes;
    - ``recompute_swiglu``: each MoE layer's experts keep their SwiGLU's inputs and
      recompute its output in the backward (DeepSeek-V3, sec. 3.3.3), with the router's
      weights applied inside it (Megatron-Core's weighted SwiGLU), so that no expert output
      is kept for the weights' gradient (:mod:`ppbook.cost_model.activation_bytes`);
    - ``attention``: ``"standard"`` (s x s scores kept) or ``"flash"``;
    - ``microbatch_size`` samples per micro-batch.
    """

    tp: int = 1
    sp: bool = False
    dp: int = 1
    zero: int = 0
    recompute: str = "none"
    microbatch_size: int = 1
    ep: int = 1
    cp: int = 1
    attention: str = "standard"
    gradient_bytes: int = 4
    master_bytes: int = 4
    moment_bytes: int = 4
    recompute_norm: bool = False
    recompute_mla_up: bool = False
    fp8_activations: bool = False
    recompute_swiglu: bool = False

    def __post_init__(self) -> None:
        owner = "Parallel"
        for name in ("tp", "dp", "microbatch_size", "ep", "cp"):
            object.__setattr__(self, name, _count(getattr(self, name), name, owner))
        flags = ("sp", "recompute_norm", "recompute_mla_up", "fp8_activations", "recompute_swiglu")
        for name in flags:
            _flag(getattr(self, name), name, owner)
        if self.zero not in (0, 1, 2, 3) or isinstance(self.zero, bool):
            raise ValueError(
                f"Parallel needs zero to be 0, 1, 2 or 3 (ZeRO stage; 3 = FSDP), got "
                f"{shown(self.zero)}"
            )
        if self.recompute not in RECOMPUTE:
            raise ValueError(
                f"Parallel needs recompute in {RECOMPUTE}, got {shown(self.recompute)}"
            )
        if self.attention not in ATTENTION:
            raise ValueError(
                f"Parallel needs attention in {ATTENTION}, got {shown(self.attention)}"
            )
        allowed = {"gradient_bytes": (2, 4), "master_bytes": (0, 2, 4), "moment_bytes": (1, 2, 4)}
        for name, values in allowed.items():
            value = getattr(self, name)
            if isinstance(value, bool) or value not in values:
                raise ValueError(f"Parallel needs {name} in {values}, got {shown(value)}")
            object.__setattr__(self, name, int(value))
        if self.dp % self.ep:
            raise ValueError(
                f"Parallel needs ep = {self.ep} dividing dp = {self.dp} (expert parallelism "
                "runs inside the data-parallel group)"
            )

    @property
    def expert_dp(self) -> int:
        """Data-parallel copies of each expert's weights: ``dp / ep``."""
        return self.dp // self.ep


def check_fit(shape: ModelShape, parallel: Parallel) -> None:
    """A one-line ValueError unless ``parallel`` splits ``shape`` into whole pieces, as
    Megatron-LM requires: ``tp`` divides the query heads, the key/value heads and the MLP
    widths; ``ep`` divides the experts (and needs an MoE model); ``cp`` (times ``tp`` with
    sequence parallelism) divides the sequence."""
    tp = parallel.tp
    if shape.heads % tp:
        raise ValueError(f"tp = {tp} must divide heads = {shape.heads} (whole heads per rank)")
    if shape.num_kv_heads % tp:
        raise ValueError(
            f"tp = {tp} must divide kv_heads = {shape.num_kv_heads} (whole key/value groups "
            "per rank, as Megatron-LM requires)"
        )
    if shape.ffn_size % tp or (shape.is_moe and shape.moe_ffn_size % tp):
        widths = f"ffn_hidden = {shape.ffn_size}"
        if shape.is_moe:
            widths += f" and moe_ffn_hidden = {shape.moe_ffn_size}"
        raise ValueError(f"tp = {tp} must divide {widths} (whole MLP columns per rank)")
    if parallel.ep > 1:
        if not shape.is_moe:
            raise ValueError(f"ep = {parallel.ep} needs an MoE model (experts >= 1); use ep 1")
        if shape.experts % parallel.ep:
            raise ValueError(
                f"ep = {parallel.ep} must divide experts = {shape.experts} (whole experts per rank)"
            )
    if parallel.cp > 1 and parallel.attention != "flash":
        raise ValueError(
            f"cp = {parallel.cp} needs attention='flash' (ring attention exchanges blocks "
            "of keys and values; it never forms the s x s scores)"
        )
    split = parallel.cp * (tp if parallel.sp else 1)
    if shape.seq_len % split:
        if parallel.cp == 1:
            raise ValueError(
                f"sequence parallelism needs tp = {tp} dividing seq_len = {shape.seq_len}"
            )
        what = "cp * tp (context and sequence parallelism)" if parallel.sp else "cp"
        raise ValueError(f"{what} = {split} must divide seq_len = {shape.seq_len}")


def split_layers(num_layers: int, num_parts: int) -> list[int]:
    """``num_layers`` over ``num_parts`` model parts as evenly as possible; the extra layers
    of an uneven split go to the middle parts first (the ends carry embedding and head)."""
    num_layers = as_count(num_layers, "num_layers", "split_layers")
    num_parts = as_count(num_parts, "num_parts", "split_layers")
    if num_layers < num_parts:
        raise ValueError(
            f"split_layers needs at least one layer per part, got {num_layers} layers "
            f"for {num_parts} parts"
        )
    base, extra = divmod(num_layers, num_parts)
    by_centre = sorted(range(num_parts), key=lambda k: (abs(2 * k - (num_parts - 1)), k))
    favoured = set(by_centre[:extra])
    return [base + (k in favoured) for k in range(num_parts)]


def layers_of(shape: ModelShape, layers_per_part) -> list[int]:
    """``layers_per_part`` checked: whole numbers >= 0 adding up to ``shape.layers``."""
    if isinstance(layers_per_part, str | bytes) or not hasattr(layers_per_part, "__iter__"):
        raise ValueError(
            f"layers_per_part must be a list of layer counts, got {shown(layers_per_part)}"
        )
    parts = [as_count(n, "layers_per_part[k]", "a stage split", minimum=0) for n in layers_per_part]
    if not parts or sum(parts) != shape.layers:
        raise ValueError(
            f"layers_per_part must add up to the model's {shape.layers} layers, got {parts}"
        )
    return parts
