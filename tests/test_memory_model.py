"""Memory in bytes and FLOPs per pass: the sympy counts against the papers' printed forms,
the plain-Python numbers against the sympy counts, and small cases worked by hand."""

import dataclasses
import itertools

import pytest
import sympy as sp

from ppbook import flops, memory
from ppbook.memory import ModelShape, Parallel
from ppbook.schedules import build
from ppbook.simulate import simulate
from ppbook.symbolic import activation_formulas
from ppbook.symbolic import activations as sa
from ppbook.symbolic import transformer as st
from ppbook.symbolic.transformer import L, V, a, b, e, f, h, s, t

# ----- the sympy counts give the papers' forms ----------------------------------------


@pytest.mark.parametrize(
    ("tp", "sp_", "recompute", "row"),
    [
        (False, False, "none", "activations"),
        (True, False, "none", "activations_tp"),
        (True, True, "none", "activations_tp_sp"),
        (True, False, "selective", "activations_tp_selective"),
        (True, True, "selective", "activations_tp_sp_selective"),
        (False, False, "full", "activations_full"),
    ],
)
def test_counted_activations_are_korthikanti_table_2(tp, sp_, recompute, row):
    counted = sa.layer_activation_bytes(tp, sp_, recompute).subs({e: 2, f: 4})
    assert sp.simplify(counted - sa.published_forms()[row]) == 0


def test_counted_output_layer_is_korthikanti_sec_4_3():
    counted = sa.output_activation_bytes(True).subs(e, 2)
    assert sp.simplify(counted - sa.published_forms()["output_layer_sp"]) == 0


def test_counted_flops_are_zero_bubble_table_1():
    counted = st.layer_flops()
    forms = sa.published_forms()
    for kind, row in (("F", "flops_F"), ("I", "flops_B"), ("W", "flops_W")):
        assert sp.simplify(counted[kind].subs(f, 4) - forms[row]) == 0
    # the paper's remark: B + W = 2 F (its B is I)
    assert sp.simplify(counted["I"] + counted["W"] - 2 * counted["F"]) == 0


def test_counted_parameters_are_megatron_12lh2():
    counted = st.model_parameters().subs(f, 4)  # Megatron's count leaves out the final norm
    assert sp.simplify(counted - 2 * h - sa.published_forms()["parameters"]) == 0


def test_records_are_derived_and_checked():
    records = activation_formulas()
    assert {r.provenance for r in records.values()} == {sa.DERIVED}
    assert records["layer_activation_bytes"](s=2048, b=1, h=12288, a=96) == 2048 * 12288 * (
        34 + 5 * 96 * 2048 // 12288
    )
    with pytest.raises(ValueError, match="t dividing a"):
        records["layer_activation_bytes_tp"](s=8, b=1, h=16, a=4, t=3)
    with pytest.raises(ValueError, match="seq_len s"):
        records["layer_activation_bytes"](s=0, b=1, h=16, a=4)
    with pytest.raises(TypeError, match="once each"):
        records["layer_activation_bytes"](8, 1, 16, 4, s=8)


# ----- the plain-Python numbers equal the sympy counts ---------------------------------

SHAPES = [(16, 32, 4, 128), (24, 48, 6, 96)]  # (seq_len, hidden, heads, vocab)
PARALLEL = [
    Parallel(tp=tp, sp=sp_, recompute=rc, microbatch_size=mb)
    for tp, sp_, rc, mb in itertools.product((1, 2), (False, True), memory.RECOMPUTE, (1, 3))
]


def at(shape: ModelShape, par: Parallel) -> dict:
    return {
        s: shape.seq_len,
        b: par.microbatch_size,
        h: shape.hidden,
        a: shape.heads,
        t: par.tp,
        V: shape.vocab,
        L: shape.layers,
        f: shape.ffn_multiple,
        e: shape.bytes_per_element,
    }


@pytest.mark.parametrize("par", PARALLEL, ids=str)
@pytest.mark.parametrize(("seq", "hid", "heads", "vocab"), SHAPES)
@pytest.mark.parametrize(("ffn", "size"), [(4, 2), (2, 4)])
def test_numeric_activations_equal_the_count(par, seq, hid, heads, vocab, ffn, size):
    shape = ModelShape(6, hid, heads, vocab, seq, ffn_multiple=ffn, bytes_per_element=size)
    values = at(shape, par)
    per_layer = sa.layer_activation_bytes(par.tp > 1 or par.sp, par.sp, par.recompute)
    assert memory.layer_activation_bytes(shape, par) == pytest.approx(
        float(per_layer.subs(values)), rel=1e-12
    )
    split = [1, 3, 2]
    parts = memory.part_activation_bytes(shape, par, split)
    first = split[0] * per_layer + sa.embedding_activation_bytes(par.sp)
    last = split[-1] * per_layer + sa.output_activation_bytes(par.sp)
    assert parts[0] == pytest.approx(float(first.subs(values)), rel=1e-12)
    assert parts[1] == pytest.approx(float((3 * per_layer).subs(values)), rel=1e-12)
    assert parts[2] == pytest.approx(float(last.subs(values)), rel=1e-12)


@pytest.mark.parametrize("par", PARALLEL, ids=str)
@pytest.mark.parametrize(("seq", "hid", "heads", "vocab"), SHAPES)
def test_numeric_flops_equal_the_count(par, seq, hid, heads, vocab):
    shape = ModelShape(6, hid, heads, vocab, seq)
    values = at(shape, par)
    counted = st.layer_flops(par.tp > 1, par.recompute)
    numeric = flops.layer_flops(shape, par)
    for kind in ("F", "I", "W"):
        assert numeric[kind] == pytest.approx(float(counted[kind].subs(values)), rel=1e-12)
    assert numeric["B"] == numeric["I"] + numeric["W"]
    logits = st.logits_flops(par.tp > 1)["F"].subs(values)
    last = flops.part_flops(shape, par, [4, 2])[-1]
    assert last["F"] == pytest.approx(float(2 * counted["F"].subs(values) + logits), rel=1e-12)


@pytest.mark.parametrize("tp", [1, 2, 4])
@pytest.mark.parametrize(("tied", "position"), list(itertools.product((True, False), repeat=2)))
def test_numeric_parameters_equal_the_count(tp, tied, position):
    shape = ModelShape(5, 32, 4, 128, 16, tied_embeddings=tied, position_embeddings=position)
    values = at(shape, Parallel(tp=tp))
    assert memory.layer_parameters(shape, tp) == st.layer_parameters(tp > 1).subs(values)
    assert memory.embedding_parameters(shape, tp) == st.embedding_parameters(tp > 1, position).subs(
        values
    )
    assert memory.head_parameters(shape, tp) == st.head_parameters(tp > 1).subs(values)
    assert memory.total_parameters(shape) == st.model_parameters(tied, position).subs(values)


# ----- small cases by hand, published totals -------------------------------------------


def test_parameters_by_hand():
    # h = 4, MLP width 16: QKV 4x12 + 12, projection 4x4 + 4, MLP 4x16 + 16 and 16x4 + 4,
    # two LayerNorms 2 x (4 + 4): 60 + 20 + 80 + 68 + 16 = 244 per layer.
    shape = ModelShape(layers=2, hidden=4, heads=2, vocab=10, seq_len=3)
    assert memory.layer_parameters(shape) == 244
    # embeddings 10x4 + positions 3x4 = 52, final LayerNorm 8, tied head: 488 + 52 + 8
    assert memory.total_parameters(shape) == 548
    # untied: another 10x4 head
    assert memory.total_parameters(ModelShape(2, 4, 2, 10, 3, tied_embeddings=False)) == 588
    # on 2 tensor-parallel ranks: (48 + 12 + 16 + 64 + 16 + 64) / 2 + biases 4 + 4 + norms 16
    assert memory.layer_parameters(shape, tp=2) == 110 + 24
    # two parts of one layer: the last holds the tied word embeddings' copy
    assert memory.part_parameters(shape, [1, 1]) == [244 + 52, 244 + 8 + 40]


def test_activations_by_hand():
    # s = 3, b = 1, h = 4, a = 2, 16-bit: 34 s b h = 408 bytes of s b h tensors, and the
    # softmax output (2 bytes), its mask (1) and dropout output (2) of a s^2 b = 18 numbers.
    shape = ModelShape(layers=2, hidden=4, heads=2, vocab=10, seq_len=3)
    assert memory.layer_activation_bytes(shape, Parallel()) == 408 + 5 * 18
    assert memory.layer_activation_bytes(shape, Parallel(recompute="selective")) == 408
    assert memory.layer_activation_bytes(shape, Parallel(recompute="full")) == 2 * 12
    # first part: + a 1-byte embedding dropout mask of 12; last: + LayerNorm and output
    # layer inputs 2 x 24, 32-bit logits 4 x 3 x 10
    assert memory.part_activation_bytes(shape, Parallel(), [1, 1]) == [498 + 12, 498 + 48 + 120]


@pytest.mark.parametrize("vocab", [51200, 50257])
def test_gpt3_has_175b_parameters(vocab):
    # Brown et al. 2020 / Megatron-LM Table 1: 96 layers, h = 12288, s = 2048: 174.6e9
    gpt3 = ModelShape(layers=96, hidden=12288, heads=96, vocab=vocab, seq_len=2048)
    assert round(memory.total_parameters(gpt3) / 1e9, 1) == 174.6


def test_static_bytes_as_megatron_keeps_them():
    # Megatron-LM's distributed optimizer docs: 18 bytes a parameter (bf16 weights, fp32
    # main gradients, fp32 master weights and two Adam moments), 6 + 12/d when the
    # optimizer state is sharded over d data-parallel ranks
    assert memory.static_bytes(1000, Parallel()) == {
        "parameters": 2000,
        "gradients": 4000,
        "optimizer": 12000,
    }
    assert sum(memory.static_bytes(1000, Parallel(dp=4, zero=1)).values()) == 1000 * (6 + 12 / 4)
    assert memory.static_bytes(1000, Parallel(dp=4))["optimizer"] == 12000  # ZeRO off
    # ZeRO-2 shards the gradients too, ZeRO-3 (FSDP) the weights as well
    assert sum(memory.static_bytes(1000, Parallel(dp=4, zero=2)).values()) == 1000 * (2 + 16 / 4)
    assert sum(memory.static_bytes(1000, Parallel(dp=4, zero=3)).values()) == 1000 * 18 / 4
    # the mixed-precision Adam of the ZeRO paper (16-bit gradients): 16 bytes
    zero_paper = Parallel(gradient_bytes=2)
    assert sum(memory.static_bytes(1000, zero_paper).values()) == 16000
    # DeepSeek-V3: BF16 moments, fp32 master weights and gradients: 2 + 4 + 4 + 2 x 2
    deepseek = Parallel(moment_bytes=2)
    assert sum(memory.static_bytes(1000, deepseek).values()) == 14000


def test_expert_weights_shard_over_their_own_data_parallel_copies():
    # 400 of 1000 parameters are experts' weights; dp = 8 with ep = 4: 2 copies of each
    par = Parallel(dp=8, ep=4, zero=1)
    assert memory.static_bytes(1000, par, 400)["optimizer"] == 12 * (600 / 8 + 400 / 2)
    assert memory.static_bytes(1000, Parallel(dp=8, ep=4))["optimizer"] == 12000
    with pytest.raises(ValueError, match="expert_parameters <= num_parameters"):
        memory.static_bytes(10, par, 11)


def test_split_layers_favours_the_middle():
    assert memory.split_layers(10, 4) == [2, 3, 3, 2]
    assert memory.split_layers(9, 4) == [2, 3, 2, 2]
    assert memory.split_layers(8, 4) == [2, 2, 2, 2]


# ----- per rank, on simulated timelines ------------------------------------------------

SMALL = ModelShape(layers=8, hidden=8, heads=2, vocab=16, seq_len=4)
# per layer, b = 1: 34 s b h = 1088 and 5 a s^2 b = 160 bytes; 12 h^2 + 13 h = 872 parameters
LAYER_BYTES, LAYER_PARAMS = 1248, 872
FIRST_BYTES = 2 * LAYER_BYTES + 32  # two layers and the embedding dropout's mask (s b h)
LAST_BYTES = 2 * LAYER_BYTES + 2 * 2 * 32 + 4 * 4 * 16  # LayerNorm, output inputs; logits
FIRST_PARAMS = 2 * LAYER_PARAMS + 16 * 8 + 4 * 8  # word and position embeddings
LAST_PARAMS = 2 * LAYER_PARAMS + 16 + 16 * 8  # final LayerNorm, tied copy of the embeddings


def test_one_f_one_b_first_stage_holds_p_microbatches():
    timeline = simulate(build("1f1b", 4, 8))
    first, *_, last = memory.peak_memory(timeline, SMALL, Parallel())
    assert first.parameter_count == FIRST_PARAMS
    assert first.activations == 4 * FIRST_BYTES
    assert first.total == 18 * FIRST_PARAMS + 4 * FIRST_BYTES
    assert last.parameter_count == LAST_PARAMS
    assert last.activations == LAST_BYTES  # the last stage holds one micro-batch
    assert last.as_dict()["total"] == 18 * LAST_PARAMS + LAST_BYTES


def test_gpipe_first_stage_holds_every_microbatch():
    first = memory.peak_memory(simulate(build("gpipe", 4, 6)), SMALL, Parallel())[0]
    assert first.activations == 6 * FIRST_BYTES


@pytest.mark.parametrize("name", ["gpipe", "1f1b", "zb-h1", "zb-h2"])
def test_peak_is_the_simulated_count_times_each_stage_bytes(name):
    timeline = simulate(build(name, 4, 8), steps=2)
    par = Parallel(tp=2, sp=True, microbatch_size=2)
    split = [1, 3, 3, 1]
    per_part = memory.part_activation_bytes(SMALL, par, split)
    for rank, row in enumerate(memory.peak_memory(timeline, SMALL, par, split)):
        assert row.activations == pytest.approx(timeline.peak_activations(rank) * per_part[rank])


def test_zero1_shards_the_optimizer_state():
    timeline = simulate(build("1f1b", 4, 4))
    plain = memory.peak_memory(timeline, SMALL, Parallel(dp=8))[0]
    sharded = memory.peak_memory(timeline, SMALL, Parallel(dp=8, zero=1))[0]
    assert plain.optimizer == 12 * FIRST_PARAMS
    assert sharded.optimizer == 12 * FIRST_PARAMS / 8
    assert sharded.parameters == plain.parameters == 2 * FIRST_PARAMS


def test_tied_embeddings_are_kept_twice_only_on_two_ranks():
    head = 16 * 8
    total = memory.total_parameters(SMALL)
    assert sum(memory.rank_parameters(build("1f1b", 4, 4), SMALL)) == total + head
    # ZB-V puts the first and the last part on rank 0: one copy
    assert sum(memory.rank_parameters(build("zb-v", 4, 8), SMALL)) == total
    untied = ModelShape(8, 8, 2, 16, 4, tied_embeddings=False)
    assert sum(memory.rank_parameters(build("1f1b", 4, 4), untied)) == memory.total_parameters(
        untied
    )


def test_stage_costs_time_each_chunk_pass_by_its_flops():
    schedule = build("interleaved-1f1b", 2, 4, 2)
    par = Parallel(recompute="full")
    speed = 1e9
    costs = flops.stage_costs(schedule, SMALL, par, speed, layers_per_part=[1, 3, 3, 1])
    timeline = simulate(schedule, costs)
    per_part = flops.part_flops(SMALL, par, [1, 3, 3, 1])
    for row in timeline.intervals:
        for interval in row:
            stage, kind, _ = interval.action
            expected = per_part[schedule.model_part(stage)][kind] / speed
            assert interval.duration == pytest.approx(expected)
    sizes = memory.part_activation_bytes(SMALL, par, [1, 3, 3, 1])
    assert timeline.activation_bytes == pytest.approx(sizes)


# ----- bad input ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: ModelShape(2, 10, 4, 16, 4), "heads dividing hidden"),
        (lambda: ModelShape(0, 8, 2, 16, 4), "layers >= 1"),
        (lambda: ModelShape(2, 8, 2, 16, 4, tied_embeddings=1), "True or False"),
        (lambda: Parallel(zero=4), "zero to be 0, 1, 2 or 3"),
        (lambda: Parallel(dp=6, ep=4), "ep = 4 dividing dp = 6"),
        (lambda: Parallel(gradient_bytes=3), "gradient_bytes in"),
        (lambda: Parallel(attention="xformers"), "attention in"),
        (lambda: ModelShape(2, 8, 4, 16, 4, kv_heads=3), "kv_heads dividing heads"),
        (lambda: ModelShape(2, 8, 2, 16, 4, experts=4, experts_per_token=5), "experts_per_token"),
        (lambda: ModelShape(2, 8, 2, 16, 4, shared_experts=1), "experts >= 1"),
        (lambda: ModelShape(2, 8, 2, 16, 4, experts=4, dense_layers=2), "dense_layers <"),
        (lambda: ModelShape(2, 8, 2, 16, 4, kv_lora_rank=4), "qk_rope_head_dim"),
        (lambda: ModelShape(2, 8, 2, 16, 4, v_head_dim=4), "only with multi-head latent"),
        (lambda: ModelShape(10**16, 8, 2, 16, 4), "layers <= 10\\^15"),
        (lambda: ModelShape(2, 8, 2, 10**400, 4), "vocab <= 10\\^15"),
        (lambda: ModelShape(2, 8, 2, 16, 4, norm="batchnorm"), "norm in"),
        (
            lambda: ModelShape(2, 8, 2, 16, 4, experts=4, capacity_factor=float("nan")),
            "capacity_factor",
        ),
        (
            lambda: memory.layer_activation_bytes(SMALL, Parallel(cp=2)),
            "needs attention='flash'",
        ),
        (
            lambda: memory.layer_activation_bytes(SMALL, Parallel(cp=8, dp=1, attention="flash")),
            "cp = 8 must divide seq_len",
        ),
        (
            lambda: memory.layer_parameters(ModelShape(2, 8, 4, 16, 4, kv_heads=2), tp=4),
            "tp = 4 must divide kv_heads = 2",
        ),
        (lambda: memory.layer_parameters(SMALL, ep=2), "ep = 2 needs an MoE model"),
        (
            lambda: memory.layer_parameters(ModelShape(2, 8, 2, 16, 4, experts=6), ep=4),
            "ep = 4 must divide experts = 6",
        ),
        (lambda: Parallel(recompute="partial"), "recompute in"),
        (lambda: Parallel(tp=0), "tp >= 1"),
        (lambda: memory.layer_activation_bytes(SMALL, Parallel(tp=4)), "tp = 4 must divide"),
        (
            lambda: memory.layer_activation_bytes(
                ModelShape(2, 8, 2, 16, 3), Parallel(tp=2, sp=True)
            ),
            "dividing seq_len",
        ),
        (lambda: memory.part_parameters(SMALL, [4, 3]), "add up to the model's 8 layers"),
        (lambda: memory.split_layers(2, 4), "at least one layer per part"),
        (
            lambda: memory.rank_parameters(build("1f1b", 4, 4), SMALL, layers_per_part=[4, 4]),
            "through 4 stages",
        ),
        (lambda: flops.stage_costs(build("1f1b", 2, 2), SMALL, Parallel(), 0), "flops_per_second"),
    ],
)
def test_bad_input_is_refused_in_one_line(make, words):
    with pytest.raises(ValueError, match=words) as refused:
        make()
    assert "\n" not in str(refused.value)


def test_numeric_and_symbolic_layers_know_the_same_recomputation_modes():
    assert memory.RECOMPUTE == st.RECOMPUTE


@pytest.mark.parametrize("tp", [0, 3, 2.0])
def test_parameters_refuse_a_tensor_parallel_size_that_does_not_split_the_heads(tp):
    with pytest.raises(ValueError, match="tp"):
        memory.layer_parameters(SMALL, tp)


def test_stage_costs_are_in_seconds_and_say_so():
    schedule = build("1f1b", 2, 2)
    costs = flops.stage_costs(schedule, SMALL, Parallel(), 1e12)
    assert costs.time_unit == "s"
    assert simulate(schedule, costs).time_unit == "s"


# ----- today's stacks: FlashAttention, ZeRO-2/3, experts, context parallelism ------------


def test_flash_attention_drops_the_scores_and_keeps_a_logsumexp():
    # GPT layer, s = 4, b = 1, h = 8, a = 2: standard keeps 5 a s^2 b = 160 bytes of scores;
    # FlashAttention keeps instead a 4-byte logsumexp per head and token, 4 a s b = 32
    standard = memory.layer_activation_bytes(SMALL, Parallel())
    flash = memory.layer_activation_bytes(SMALL, Parallel(attention="flash"))
    assert standard - flash == 5 * 2 * 4**2 - 4 * 2 * 4
    # with selective recomputation neither is kept: the same 34 s b h
    assert (
        memory.layer_activation_bytes(SMALL, Parallel(attention="flash", recompute="selective"))
        == memory.layer_activation_bytes(SMALL, Parallel(recompute="selective"))
        == 34 * 32
    )


def test_grouped_query_attention_narrows_only_flash_attentions_k_and_v():
    mha = ModelShape(2, 16, 4, 32, 8, dropout=False)
    gqa = ModelShape(2, 16, 4, 32, 8, kv_heads=1, dropout=False)
    flash = Parallel(attention="flash")
    # K and V of 1 head of 4 instead of 4 heads: 2 x (16 - 4) x s b x e bytes less
    saved = memory.layer_activation_bytes(mha, flash) - memory.layer_activation_bytes(gqa, flash)
    assert saved == 2 * 12 * 8 * 2
    # unfused attention repeats K and V to every head before multiplying: no saving
    assert memory.layer_activation_bytes(mha, Parallel()) == memory.layer_activation_bytes(
        gqa, Parallel()
    )


def test_context_parallelism_splits_the_tokens():
    shape = ModelShape(2, 16, 4, 32, 8, dropout=False)
    whole = memory.layer_activation_bytes(shape, Parallel(attention="flash"))
    assert memory.layer_activation_bytes(shape, Parallel(attention="flash", cp=4)) == whole / 4
    both = Parallel(attention="flash", cp=2, tp=2, sp=True)
    assert memory.layer_activation_bytes(shape, both) == whole / 4  # everything split by t


def test_zero3_holds_a_shard_and_two_gathered_layers():
    timeline = simulate(build("1f1b", 4, 4))
    row = memory.peak_memory(timeline, SMALL, Parallel(dp=8, zero=3))[0]
    # its shard of 18 bytes a parameter over 8 ranks, and two whole layers' bf16 weights
    # (the running one and the prefetched next), less their own shard
    gathered = 2 * 2 * LAYER_PARAMS * (1 - 1 / 8)
    assert row.parameters == pytest.approx(2 * FIRST_PARAMS / 8 + gathered)
    assert row.gradients == 4 * FIRST_PARAMS / 8
    assert row.optimizer == 12 * FIRST_PARAMS / 8


def test_dualpipe_ranks_keep_two_parts_of_the_model():
    # DualPipe's table (DeepSeek-V3 report, Table 2): 2x parameters per device
    untied = ModelShape(8, 8, 2, 16, 4, tied_embeddings=False)
    one_f_one_b = memory.rank_parameters(build("1f1b", 4, 8), untied)
    dualpipe = memory.rank_parameters(build("dualpipe", 4, 8), untied)
    assert sum(dualpipe) == 2 * sum(one_f_one_b) == 2 * memory.total_parameters(untied)
    assert dualpipe[1] == one_f_one_b[1] + one_f_one_b[2]  # rank 1 holds parts 1 and 2


def test_experts_split_over_expert_parallel_ranks_and_shard_over_dp_over_ep():
    moe = ModelShape(4, 8, 2, 16, 4, experts=4, experts_per_token=2, dense_layers=1)
    schedule = build("1f1b", 2, 2)
    whole = memory.rank_parameters(schedule, moe, layers_per_part=[2, 2])
    experts = memory.rank_expert_parameters(schedule, moe, layers_per_part=[2, 2])
    split = memory.rank_parameters(schedule, moe, layers_per_part=[2, 2], ep=2)
    # rank 0: one dense and one MoE layer, rank 1 two MoE layers; ep = 2 halves the experts
    assert experts[0] * 2 == experts[1]
    assert [w - s for w, s in zip(whole, split, strict=True)] == [e // 2 for e in experts]
    par = Parallel(dp=4, ep=2, zero=1)
    row = memory.peak_memory(simulate(schedule), moe, par, [2, 2])[1]
    expert = experts[1] // 2  # what rank 1 holds of its layers' experts with ep = 2
    assert row.optimizer == 12 * ((split[1] - expert) / 4 + expert / 2)


def test_moe_layers_keep_their_routed_copies():
    moe = ModelShape(2, 8, 2, 16, 4, experts=4, experts_per_token=2, dropout=False)
    dense = memory.layer_activation_terms(moe, Parallel(attention="flash"), moe=False)
    routed = memory.layer_activation_terms(moe, Parallel(attention="flash"), moe=True)
    tokens_k = 4 * 2  # s b tokens, 2 copies each
    assert routed["dispatched_tokens"] == routed["expert_outputs"] == 2 * tokens_k * 8
    assert routed["expert_hidden"] == 2 * tokens_k * 2 * 32  # GELU experts: 2 f per copy
    assert "mlp_hidden" in dense and "router" not in dense
    capped = dataclasses.replace(moe, capacity_factor=1.5)
    with_capacity = memory.layer_activation_terms(capped, Parallel(attention="flash"))
    assert with_capacity["dispatched_tokens"] == 1.5 * routed["dispatched_tokens"]


def test_deepseek_memory_choices_drop_norm_outputs_and_mla_projections():
    from ppbook.cost_model.model_cards import model_card

    card = model_card("deepseek-v3")
    shape = card.shape()
    plain = memory.layer_activation_terms(shape, Parallel(attention="flash"))
    chosen = memory.layer_activation_terms(
        shape, Parallel(attention="flash", **card.memory_choices)
    )
    assert {"norm_outputs", "mla_latent_norm_outputs", "qkv"} <= set(plain)
    assert not {"norm_outputs", "mla_latent_norm_outputs", "qkv"} & set(chosen)
    tokens = 4096
    assert plain["qkv"] == 2 * tokens * 128 * (192 + 192 + 128)  # after the up-projections
    assert chosen["mla_latents"] == 2 * tokens * (1536 + 512 + 64)  # kept: the latents


def test_korthikanti_22b_with_selective_recomputation_needs_more_than_80_gb():
    # Korthikanti et al. 2022, Table 3: the 22B model (48 layers, h 6144, 64 heads,
    # s 2048, v 51200) on t = 8, p = 1 with micro-batches of 4, on 80 GB A100s. With
    # selective recomputation but no sequence parallelism it needs 81.8 GB at Megatron's
    # 18 bytes a parameter; the 16 bytes of the ZeRO paper put it at 76.2 GB, under 80.
    from ppbook.cost_model.gpu_cards import gpu_card

    capacity = gpu_card("a100").memory_gb * 1e9
    shape = ModelShape(48, 6144, 64, 51200, 2048)
    timeline = simulate(build("1f1b", 1, 1))
    par = Parallel(tp=8, recompute="selective", microbatch_size=4)
    assert memory.peak_memory(timeline, shape, par)[0].total > capacity
    sixteen = dataclasses.replace(par, gradient_bytes=2)
    assert memory.peak_memory(timeline, shape, sixteen)[0].total < capacity
    # sequence parallelism with selective recomputation fits (the paper's "present work")
    both = dataclasses.replace(par, sp=True)
    assert memory.peak_memory(timeline, shape, both)[0].total < capacity
