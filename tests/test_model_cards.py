"""Model cards and parameter counts: the cards against their published counts, the counts
against PyTorch modules built from a shape (``sum(p.numel())``), and Hugging Face config
files read back into the same shapes."""

import json
import math
import os

import pytest

from ppbook.cost_model import parameters as params
from ppbook.cost_model.model_cards import (
    MAX_CONFIG_BYTES,
    MODEL_CARDS,
    card_for,
    model_card,
    read_hf_config,
)
from ppbook.cost_model.model_shape import ModelShape, Parallel

# ----- published counts -----------------------------------------------------------------

PUBLISHED = {  # name: (total, active, tolerance), as issue 18 lists them from each source
    "llama3-8b": (8.03e9, None, 0.015),
    "llama3-70b": (70.6e9, None, 0.015),
    "llama3-405b": (405.9e9, None, 0.015),
    "mixtral-8x7b": (46.7e9, 12.9e9, 0.015),
    "deepseek-v3": (671e9, 37e9, 0.02),  # without its 14B multi-token-prediction module
    "gpt3-175b": (175.0e9, None, 0.015),
}


@pytest.mark.parametrize("name", MODEL_CARDS)
def test_cards_come_within_the_published_counts(name):
    total, active, tolerance = PUBLISHED[name]
    shape = model_card(name).shape()
    assert params.total_parameters(shape) == pytest.approx(total, rel=min(tolerance, 0.015))
    if active is None:
        assert params.active_parameters(shape) == params.total_parameters(shape)
    else:
        assert params.active_parameters(shape) == pytest.approx(active, rel=tolerance)
    card = model_card(name)
    assert card.published["params"] == total  # the card carries the same figure
    assert {"config", "training_seq_len", "published"} <= set(card.source)


def test_cards_default_to_their_training_sequence_length():
    expected = {
        "llama3-8b": 8192,
        "llama3-405b": 8192,  # not the 128K of its final long-context stage
        "mixtral-8x7b": 32768,
        "deepseek-v3": 4096,
        "gpt3-175b": 2048,
    }
    for name, seq_len in expected.items():
        assert model_card(name).shape().seq_len == seq_len
    assert model_card("llama3-8b").shape(seq_len=2048).seq_len == 2048


def test_cards_have_the_published_shapes():
    llama = model_card("llama3-405b").shape()
    assert (llama.layers, llama.hidden, llama.heads, llama.num_kv_heads) == (126, 16384, 128, 8)
    assert (llama.ffn_size, llama.gated_mlp, llama.norm, llama.linear_bias) == (
        53248,
        True,
        "rmsnorm",
        False,
    )
    assert not llama.position_embeddings and not llama.tied_embeddings and not llama.dropout
    deepseek = model_card("deepseek-v3").shape()
    assert deepseek.uses_mla and deepseek.is_moe
    assert (deepseek.moe_layers, deepseek.experts, deepseek.experts_per_token) == (58, 256, 8)
    assert (deepseek.qk_head_size, deepseek.v_head_size) == (192, 128)
    assert model_card("deepseek-v3").memory_choices["moment_bytes"] == 2
    gpt3 = model_card("gpt3-175b").shape()
    assert gpt3.position_embeddings and gpt3.tied_embeddings and gpt3.dropout


def test_deepseek_card_lists_its_report_s_memory_choices_with_their_sections():
    card = model_card("deepseek-v3")
    assert card.memory_choices == {
        "moment_bytes": 2,  # sec. 3.3.3, Low-Precision Optimizer States
        "master_bytes": 4,
        "gradient_bytes": 4,
        "recompute_norm": True,  # sec. 3.2.3
        "recompute_mla_up": True,
        "fp8_activations": True,  # sec. 3.3.3, Low-Precision Activation and Communication
        "recompute_swiglu": True,  # sec. 3.3.3, Low-Precision Activation (2)
    }
    source = card.source["memory_choices"]
    for said in ("sec. 3.2.3", "sec. 3.3.3", "E5M6", "SwiGLU", "Not in the report"):
        assert said in source
    Parallel(**card.memory_choices)  # each a Parallel field, within its range
    for name in ("llama3-405b", "mixtral-8x7b", "gpt3-175b"):  # FP8 is DeepSeek-V3's own
        assert not model_card(name).memory_choices.get("fp8_activations")


# ----- counts against PyTorch modules built from a shape -------------------------------

torch = pytest.importorskip("torch")
nn = torch.nn


def _linear(inputs, outputs, bias):
    return nn.Linear(inputs, outputs, bias=bias, device="meta")


def _norm(shape, width):
    if shape.norm == "rmsnorm":
        return nn.RMSNorm(width, device="meta")
    return nn.LayerNorm(width, device="meta")


class Mlp(nn.Module):
    """One tensor-parallel rank's MLP: column-parallel in, row-parallel out (whole bias)."""

    def __init__(self, shape, width, tp):
        super().__init__()
        bias = shape.linear_bias
        self.up = _linear(shape.hidden, width // tp, bias)
        self.gate = _linear(shape.hidden, width // tp, bias) if shape.gated_mlp else None
        self.down = _linear(width // tp, shape.hidden, bias)


class Attention(nn.Module):
    """One rank's attention, as Hugging Face's Llama / DeepSeek-V3 modules lay it out."""

    def __init__(self, shape, tp):
        super().__init__()
        h, heads, bias = shape.hidden, shape.heads // tp, shape.linear_bias
        if shape.uses_mla:
            qk, v, nope = shape.qk_head_size, shape.v_head_size, shape.head_size
            if shape.q_lora_rank:
                self.q_a = _linear(h, shape.q_lora_rank, bias)
                self.q_a_norm = nn.RMSNorm(shape.q_lora_rank, device="meta")
                self.q_b = _linear(shape.q_lora_rank, heads * qk, bias)
            else:
                self.q = _linear(h, heads * qk, bias)
            self.kv_a = _linear(h, shape.kv_lora_rank + shape.qk_rope_head_dim, bias)
            self.kv_a_norm = nn.RMSNorm(shape.kv_lora_rank, device="meta")
            self.kv_b = _linear(shape.kv_lora_rank, heads * (nope + v), bias)
            self.o = _linear(heads * v, h, bias)
        else:
            d, kv = shape.head_size, shape.num_kv_heads // tp
            self.q = _linear(h, heads * d, bias)
            self.k = _linear(h, kv * d, bias)
            self.v = _linear(h, kv * d, bias)
            self.o = _linear(heads * d, h, bias)


class Layer(nn.Module):
    def __init__(self, shape, moe, tp=1, ep=1):
        super().__init__()
        self.norm1, self.norm2 = _norm(shape, shape.hidden), _norm(shape, shape.hidden)
        self.attention = Attention(shape, tp)
        if not moe:
            self.mlp = Mlp(shape, shape.ffn_size, tp)
            return
        self.router = nn.Linear(shape.hidden, shape.experts, bias=False, device="meta")
        width = shape.moe_ffn_size
        self.experts = nn.ModuleList(Mlp(shape, width, tp) for _ in range(shape.experts // ep))
        self.shared = nn.ModuleList(Mlp(shape, width, tp) for _ in range(shape.shared_experts))


class Model(nn.Module):
    def __init__(self, shape):
        super().__init__()
        self.embed = nn.Embedding(shape.vocab, shape.hidden, device="meta")
        if shape.position_embeddings:
            self.positions = nn.Embedding(shape.seq_len, shape.hidden, device="meta")
        self.layers = nn.ModuleList(
            Layer(shape, shape.is_moe_layer(k)) for k in range(shape.layers)
        )
        self.norm = _norm(shape, shape.hidden)
        self.head = _linear(shape.hidden, shape.vocab, False)
        if shape.tied_embeddings:
            self.head.weight = self.embed.weight


def numel(module):
    return sum(p.numel() for p in module.parameters())  # a tied weight counts once


LLAMA_LAYER = {  # SwiGLU, RMSNorm, no biases, rotary positions, untied embeddings
    "gated_mlp": True,
    "norm": "rmsnorm",
    "linear_bias": False,
    "position_embeddings": False,
    "tied_embeddings": False,
}
SMALL_SHAPES = {
    "gpt": ModelShape(3, 16, 4, 40, 8),
    "gqa-swiglu": ModelShape(3, 16, 4, 40, 8, kv_heads=2, ffn_hidden=24, **LLAMA_LAYER),
    "gqa-bias-head-dim": ModelShape(2, 12, 4, 40, 8, kv_heads=2, head_dim=4, ffn_hidden=20),
    "moe": ModelShape(
        3,
        16,
        4,
        40,
        8,
        kv_heads=2,
        ffn_hidden=24,
        **LLAMA_LAYER,
        experts=8,
        experts_per_token=2,
        shared_experts=1,
        moe_ffn_hidden=12,
        dense_layers=1,
    ),  # fmt: skip
    "mla-moe": ModelShape(
        4,
        16,
        4,
        40,
        8,
        head_dim=6,
        ffn_hidden=24,
        **LLAMA_LAYER,
        experts=4,
        experts_per_token=2,
        shared_experts=2,
        moe_ffn_hidden=8,
        dense_layers=2,
        q_lora_rank=6,
        kv_lora_rank=5,
        qk_rope_head_dim=2,
        v_head_dim=3,
    ),  # fmt: skip
    "mla-no-q-rank": ModelShape(
        2,
        16,
        4,
        40,
        8,
        head_dim=6,
        gated_mlp=True,
        norm="rmsnorm",
        linear_bias=False,
        kv_lora_rank=5,
        qk_rope_head_dim=2,
        v_head_dim=3,
        dropout=False,
    ),  # fmt: skip
}


@pytest.mark.parametrize("name", SMALL_SHAPES)
def test_total_parameters_are_those_of_a_torch_model(name):
    shape = SMALL_SHAPES[name]
    model = Model(shape)
    assert params.total_parameters(shape) == numel(model)
    # active: all but the routed experts a token is not sent to
    unused = 0
    for layer in model.layers:
        if hasattr(layer, "experts"):
            per_expert = numel(layer.experts[0])
            unused += (shape.experts - shape.experts_per_token) * per_expert
    assert params.active_parameters(shape) == numel(model) - unused


@pytest.mark.parametrize("name", SMALL_SHAPES)
@pytest.mark.parametrize("tp", [1, 2])
def test_one_tensor_parallel_rank_holds_a_torch_shard(name, tp):
    shape = SMALL_SHAPES[name]
    for moe in (False, True) if shape.is_moe else (False,):
        ep_values = (1, 2) if moe else (1,)
        for ep in ep_values:
            layer = Layer(shape, moe, tp, ep)
            assert params.layer_parameters(shape, tp, moe=moe, ep=ep) == numel(layer)
            if moe:
                experts = sum(numel(m) for m in layer.experts)
                assert params.expert_layer_parameters(shape, tp, ep) == experts


def test_model_parts_add_up_to_the_model_and_keep_the_experts_apart():
    shape = SMALL_SHAPES["mla-moe"]
    parts = params.part_parameters(shape, [1, 2, 1])
    # untied: the parts add up to the model
    assert sum(parts) == params.total_parameters(shape)
    experts = params.part_expert_parameters(shape, [1, 2, 1])
    per_layer = params.expert_layer_parameters(shape)
    assert experts == [0, per_layer, per_layer]  # layers 0, 1 dense; 2, 3 MoE
    assert params.part_parameters(shape, [4], ep=2)[0] < parts[0] + parts[1] + parts[2]


# ----- Hugging Face config files --------------------------------------------------------


@pytest.mark.parametrize("name", MODEL_CARDS)
def test_a_config_json_gives_the_card_shape(name, tmp_path):
    card = model_card(name)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(card.config))
    read = read_hf_config(path)
    assert read.shape(seq_len=card.seq_len) == card.shape()
    # its sequence length: the config's max_position_embeddings (or n_positions)
    config_len = card.config.get("max_position_embeddings", card.config.get("n_positions"))
    assert read.seq_len == config_len
    # the folder holding config.json reads the same, and training_seq_len is taken first
    path.write_text(json.dumps(card.config | {"training_seq_len": card.seq_len}))
    assert read_hf_config(tmp_path).shape() == card.shape()


def _refused(tmp_path, config, words):
    path = tmp_path / "config.json"
    path.write_text(config if isinstance(config, str) else json.dumps(config))
    with pytest.raises(ValueError, match=words) as refused:
        read_hf_config(path)
    assert "\n" not in str(refused.value)


LLAMA = model_card("llama3-8b").config


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ({k: v for k, v in LLAMA.items() if k != "hidden_size"}, "'hidden_size', which is missing"),
        (LLAMA | {"num_key_value_heads": 3}, "kv_heads dividing heads"),
        (LLAMA | {"hidden_size": True}, "'hidden_size' must be a whole number"),
        (LLAMA | {"num_hidden_layers": -2}, "'num_hidden_layers' must be a whole number"),
        (LLAMA | {"hidden_size": 4.5}, "'hidden_size' must be a whole number"),
        (LLAMA | {"tie_word_embeddings": "no"}, "'tie_word_embeddings' must be true or false"),
        (LLAMA | {"hidden_act": "gelu"}, "is not a SwiGLU MLP"),
        (LLAMA | {"num_local_experts": 8}, "'num_experts_per_tok', which is missing"),
        (LLAMA | {"attention_dropout": 2}, "probability"),
        (LLAMA | {"vocab_size": 10**20}, "vocab <= 10\\^15"),
        ('{"hidden_size": NaN}', "not valid JSON: JSON constant NaN"),
        ('{"hidden_size": Infinity}', "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ("{", "not valid JSON"),
        (b"\xff\xfe".decode("latin-1"), "not valid JSON"),
    ],
)
def test_bad_configs_are_refused_in_one_line(tmp_path, config, words):
    _refused(tmp_path, config, words)


def test_a_config_must_be_a_small_regular_file(tmp_path):
    with pytest.raises(ValueError, match="cannot read config"):
        read_hf_config(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="cannot read config"):
        read_hf_config(tmp_path)  # a folder without config.json
    big = tmp_path / "big.json"
    big.write_text(" " * (MAX_CONFIG_BYTES + 1))
    with pytest.raises(ValueError, match="at most 1 MiB"):
        read_hf_config(big)
    if os.path.exists("/dev/zero"):
        with pytest.raises(ValueError, match="must be a regular file"):
            read_hf_config("/dev/zero")
    fifo = tmp_path / "fifo"
    if hasattr(os, "mkfifo"):
        os.mkfifo(fifo)
        with pytest.raises(ValueError, match="must be a regular file"):
            read_hf_config(fifo)


def test_unknown_cards_and_fields_are_refused():
    with pytest.raises(ValueError, match="model must be one of llama3-8b"):
        model_card("llama4")
    with pytest.raises(ValueError, match="cannot override layer_count"):
        model_card("llama3-8b").shape(layer_count=2)
    assert model_card("llama3-8b").shape(layers=2).layers == 2


def test_counts_stay_exact_at_the_size_limit():
    huge = ModelShape(10**6, 10**4, 10**2, 10**6, 10**3)
    total = params.total_parameters(huge)
    assert isinstance(total, int)
    assert total == 10**6 * params.layer_parameters(huge) + 10**10 + 10**7 + 2 * 10**4
    assert math.isfinite(float(total))


def test_card_for_takes_a_name_or_a_path(tmp_path):
    assert card_for("mixtral-8x7b") is model_card("mixtral-8x7b")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(model_card("llama3-70b").config))
    assert card_for(str(path)).shape(seq_len=8192) == model_card("llama3-70b").shape()
    assert card_for(tmp_path).config == model_card("llama3-70b").config
    with pytest.raises(ValueError, match="model must be one of llama3-8b"):
        card_for("llama5")
    with pytest.raises(ValueError, match="cannot read config"):
        card_for("./missing/config.json")
    with pytest.raises(ValueError, match="a card's name or a config.json path"):
        card_for(42)
