"""Model cards as data: the shapes of published models, each with its source and its
published parameter counts (``ppbook/data/model_cards.json``; ``ppbook size --model``).

A card holds a model's Hugging Face ``config.json`` fields (the names Hugging Face uses:
``hidden_size``, ``num_key_value_heads``, ``n_routed_experts``, ``kv_lora_rank``, ...; or
GPT-2's ``n_embd``, ``n_layer``, ... for the GPT-3 card), the sequence length the model was
trained at (``training_seq_len``, the default of :meth:`ModelCard.shape`; a config's
``max_position_embeddings`` is often a later long-context stage), the published counts and
where each figure comes from. :func:`read_hf_config` turns a model's own ``config.json``
into a card the same way.

What a config says, in :class:`~ppbook.cost_model.model_shape.ModelShape`'s terms: GPT-2
configs (``n_embd``) are GPT-3's layer (LayerNorm, biases, GELU MLP of 4h or ``n_inner``,
learned positions, tied embeddings unless ``tie_word_embeddings`` is false). Every other
config is a Llama-family layer: RMSNorm, rotary positions, a SwiGLU MLP of
``intermediate_size``, biases only where ``attention_bias``/``mlp_bias`` say, untied
embeddings unless ``tie_word_embeddings`` is true; MoE through ``num_local_experts``
(Mixtral) or ``n_routed_experts``, ``n_shared_experts``, ``moe_intermediate_size`` and
``first_k_dense_replace`` (DeepSeek); MLA through ``kv_lora_rank``. DeepSeek-V3's
multi-token-prediction module (``num_nextn_predict_layers``) is not counted.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import stat
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from ppbook.checks import shown
from ppbook.cost_model.model_shape import ModelShape

CARDS_JSON = Path(__file__).resolve().parents[1] / "data" / "model_cards.json"
"""The cards' file, shipped inside the package."""

MODEL_CARDS = ("llama3-8b", "llama3-70b", "llama3-405b", "mixtral-8x7b", "deepseek-v3", "gpt3-175b")
"""The names ``--model`` accepts, each a card of :data:`CARDS_JSON`."""

MAX_CONFIG_BYTES = 1 << 20
"""The largest ``config.json`` :func:`read_hf_config` reads (1 MiB; real ones are ~2 kB)."""


@dataclass(frozen=True)
class ModelCard:
    """One model: its config fields, training sequence length, published counts
    (``params``, ``active_params`` for MoE) and ``source`` (what each figure is from).
    ``memory_choices``: :class:`~ppbook.cost_model.model_shape.Parallel` fields its
    training report lists (DeepSeek-V3's BF16 moments and recomputation), else empty."""

    name: str
    config: dict
    seq_len: int
    published: dict = field(default_factory=dict)
    source: dict = field(default_factory=dict)
    memory_choices: dict = field(default_factory=dict)

    def shape(self, **overrides) -> ModelShape:
        """The card's :class:`ModelShape` at its training sequence length; keyword
        ``overrides`` replace ModelShape fields (``seq_len=4096``, ``layers=2``)."""
        fields = _shape_fields(self.config, self.name) | {"seq_len": self.seq_len}
        unknown = sorted(set(overrides) - {f.name for f in dataclasses.fields(ModelShape)})
        if unknown:
            raise ValueError(
                f"model card {self.name} cannot override {', '.join(unknown)}: not a "
                "ModelShape field"
            )
        return ModelShape(**(fields | overrides))


def _field(config: dict, name: str, source: str, kind: type = int, default=None, required=False):
    if name not in config or config[name] is None:
        if required:
            raise ValueError(f"{source}: config needs {name!r}, which is missing")
        return default
    value = config[name]
    if kind is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{source}: {name!r} must be true or false, got {shown(value)}")
        return value
    if kind is str:
        if not isinstance(value, str):
            raise ValueError(f"{source}: {name!r} must be a string, got {shown(value)}")
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{source}: {name!r} must be a whole number >= 0, got {shown(value)}")
    return value


def _dropout(config: dict, names, source: str, default: float = 0.0) -> bool:
    """Whether any of the config's dropout probabilities ``names`` is above 0."""
    for name in names:
        value = config.get(name, default)
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or not 0 <= value < 1:
            raise ValueError(
                f"{source}: {name!r} must be a probability in [0, 1), got {shown(value)}"
            )
    return any(config.get(name, default) > 0 for name in names)


def _shape_fields(config: dict, source: str) -> dict:
    """ModelShape's fields (all but ``seq_len``) from Hugging Face config fields."""
    if not isinstance(config, dict):
        raise ValueError(f"{source}: a config must be a JSON object, got {type(config).__name__}")

    def get(name, kind=int, default=None, required=False):
        return _field(config, name, source, kind, default, required)

    if "n_embd" in config:  # GPT-2 (and GPT-3) names
        hidden = get("n_embd", required=True)
        inner = get("n_inner")
        return {
            "layers": get("n_layer", required=True),
            "hidden": hidden,
            "heads": get("n_head", required=True),
            "vocab": get("vocab_size", required=True),
            "ffn_hidden": inner,
            "tied_embeddings": get("tie_word_embeddings", bool, True),
            "dropout": _dropout(config, ("resid_pdrop", "attn_pdrop", "embd_pdrop"), source, 0.1),
        }
    heads = get("num_attention_heads", required=True)
    out = {
        "layers": get("num_hidden_layers", required=True),
        "hidden": get("hidden_size", required=True),
        "heads": heads,
        "vocab": get("vocab_size", required=True),
        "kv_heads": get("num_key_value_heads"),
        "head_dim": get("head_dim"),
        "ffn_hidden": get("intermediate_size", required=True),
        "gated_mlp": True,
        "norm": "rmsnorm",
        "linear_bias": get("attention_bias", bool, False) or get("mlp_bias", bool, False),
        "position_embeddings": False,
        "tied_embeddings": get("tie_word_embeddings", bool, False),
        "dropout": _dropout(config, ("attention_dropout", "hidden_dropout"), source),
    }
    act = get("hidden_act", str, "silu")
    if act not in ("silu", "swish"):
        raise ValueError(
            f"{source}: 'hidden_act' {shown(act)} is not a SwiGLU MLP; ppbook reads "
            "Llama-family configs with silu (or GPT-2 configs)"
        )
    experts = get("num_local_experts") or get("n_routed_experts") or 0
    if experts:
        freq = get("moe_layer_freq", default=1)
        if freq != 1:
            raise ValueError(f"{source}: 'moe_layer_freq' must be 1 (every layer MoE), got {freq}")
        out |= {
            "experts": experts,
            "experts_per_token": get("num_experts_per_tok", required=True),
            "shared_experts": get("n_shared_experts", default=0),
            "moe_ffn_hidden": get("moe_intermediate_size"),
            "dense_layers": get("first_k_dense_replace", default=0),
        }
    if get("kv_lora_rank") is not None:
        out |= {
            "kv_heads": None,
            "head_dim": get("qk_nope_head_dim", required=True),
            "q_lora_rank": get("q_lora_rank"),
            "kv_lora_rank": get("kv_lora_rank"),
            "qk_rope_head_dim": get("qk_rope_head_dim", required=True),
            "v_head_dim": get("v_head_dim", required=True),
        }
    return {k: v for k, v in out.items() if v is not None}


def _training_seq_len(config: dict, source: str) -> int:
    for name in ("training_seq_len", "max_position_embeddings", "n_positions", "n_ctx"):
        if config.get(name) is not None:
            return _field(config, name, source)
    raise ValueError(f"{source}: config needs 'max_position_embeddings' (or 'n_positions')")


@cache
def _cards() -> dict[str, ModelCard]:
    raw = json.loads(CARDS_JSON.read_text())
    return {
        name: ModelCard(
            name=name,
            config=raw[name]["config"],
            seq_len=raw[name]["training_seq_len"],
            published=raw[name]["published"],
            source=raw[name]["source"]
            | (
                {"memory_choices": raw[name]["memory_choices_source"]}
                if "memory_choices_source" in raw[name]
                else {}
            ),
            memory_choices=raw[name].get("memory_choices", {}),
        )
        for name in MODEL_CARDS
    }


def model_card(name: str) -> ModelCard:
    """The built-in card ``name`` (one of :data:`MODEL_CARDS`); a ValueError names them."""
    if name not in MODEL_CARDS:
        raise ValueError(
            f"model must be one of {', '.join(MODEL_CARDS)} or a config.json path, "
            f"got {shown(name)}"
        )
    return _cards()[name]


def card_for(model) -> ModelCard:
    """``--model``'s card: a built-in name of :data:`MODEL_CARDS`, else a path to a
    ``config.json`` (or the folder holding one), read by :func:`read_hf_config`."""
    if isinstance(model, str) and model in MODEL_CARDS:
        return model_card(model)
    if isinstance(model, str) and not any(c in model for c in "/\\.") and model:
        return model_card(model)  # a name, not a path: the error lists the cards
    if not isinstance(model, str | os.PathLike):
        raise ValueError(f"model must be a card's name or a config.json path, got {shown(model)}")
    return read_hf_config(model)


def _no_constant(name: str):
    raise ValueError(f"JSON constant {name} is not a number a config may hold")


def read_hf_config(path) -> ModelCard:
    """A card from a model's own Hugging Face ``config.json`` (``path``: the file, or the
    folder holding it). The sequence length is ``training_seq_len`` if the file has one,
    else ``max_position_embeddings``; a one-line ValueError names a missing or bad field."""
    path = Path(os.fspath(path))
    if path.is_dir():
        path = path / "config.json"
    try:
        info = path.stat()
    except OSError as error:
        raise ValueError(f"cannot read config {str(path)!r}: {error.strerror or error}") from None
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"config {str(path)!r} must be a regular file (a config.json)")
    if info.st_size > MAX_CONFIG_BYTES:
        raise ValueError(
            f"config {str(path)!r} is {info.st_size} bytes; a config.json is at most 1 MiB"
        )
    source = f"config {path.name!r}"
    try:
        with path.open("rb") as handle:
            text = handle.read(MAX_CONFIG_BYTES + 1).decode("utf-8")
        config = json.loads(text, parse_constant=_no_constant)
    except OSError as error:
        raise ValueError(f"cannot read {source}: {error.strerror or error}") from None
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        message = str(error).splitlines()[0][:120]
        raise ValueError(f"{source} is not valid JSON: {message}") from None
    if not isinstance(config, dict):
        raise ValueError(f"{source}: a config must be a JSON object, got {type(config).__name__}")
    for name, value in config.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{source}: {name!r} is not a finite number")
    card = ModelCard(
        name=str(path),
        config=config,
        seq_len=_training_seq_len(config, source),
        source={"config": str(path)},
    )
    try:
        card.shape()  # every field checked now, with the file named
    except ValueError as error:
        message = str(error)
        raise ValueError(
            message if message.startswith(source) else f"{source}: {message}"
        ) from None
    return card
