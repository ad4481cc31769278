"""ppbook size: the published Megatron-LM configurations, hand-worked small cases, the
cached activation counts against the simulator's timeline, the JSON and bad input."""

import csv
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppbook.cli import main
from ppbook.links import nominal_links
from ppbook.memory import ModelShape, peak_memory, total_parameters
from ppbook.schedules import SCHEDULES, build
from ppbook.simulate import simulate
from ppbook.sizing import (
    CHUNKS,
    MAX_EVEN_CHUNKS,
    SIZING_SCHEDULES,
    _lower_bound,
    chunks_for,
    size,
)
from ppbook.sizing_costs import (
    A100_SXM_80GB,
    H100_SXM,
    Hardware,
    _frontier,
    _undominated,
    check_rule,
    held_frontier,
    last_actions,
    route_length,
    schedule_of,
)
from ppbook.sizing_result import parallel_of

TABLE = Path(__file__).resolve().parents[1] / "data" / "megatron_table1.csv"
ROWS = list(csv.DictReader(TABLE.open()))
SMALL = ModelShape(layers=8, hidden=256, heads=8, vocab=1000, seq_len=128)


def megatron_shape(row) -> ModelShape:
    return ModelShape(
        int(row["layers"]), int(row["hidden_size"]), int(row["attention_heads"]), 51200, 2048
    )


def run_json(capsys, *argv) -> tuple[int, dict]:
    status = main(["size", *argv, "--json"])
    return status, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("row", ROWS, ids=[r["parameters_billion"] for r in ROWS])
def test_parameter_counts_round_to_megatron_table_1(row):
    assert f"{total_parameters(megatron_shape(row)) / 1e9:.1f}" == row["parameters_billion"]


@pytest.mark.parametrize("row", ROWS, ids=[r["parameters_billion"] for r in ROWS])
def test_each_published_configuration_fits_an_a100_80gb_with_full_recomputation(row, capsys):
    # The table gives no micro-batch size: b = 1, the smallest (and Megatron's choice for
    # its largest models, Korthikanti et al. 2022, Table 3).
    shape = megatron_shape(row)
    status, out = run_json(
        capsys,
        *("--layers", row["layers"], "--hidden", row["hidden_size"]),
        *("--heads", row["attention_heads"], "--vocab", "51200", "--seq-len", "2048"),
        *("--global-batch", row["batch_size"], "--gpus", row["gpus"]),
        *("--gpu-memory-gb", "80", "--gpu-tflops", "312"),
        *("--intra-node-gbps", "300", "--inter-node-gbps", "25"),
        *("--tp", row["tensor_parallel_size"], "--pp", row["pipeline_parallel_size"]),
        *("--recompute", "full", "--microbatch-size", "1", "--top", "1"),
        *("--attention", "standard", "--no-sequence-parallel"),  # the 2021 runs' kernels
    )
    assert status == 0 and out["fits"] is True
    assert out["params"] == total_parameters(shape)
    assert 0 < out["memory_per_gpu_bytes"] <= 80e9
    tp, pp = int(row["tensor_parallel_size"]), int(row["pipeline_parallel_size"])
    assert out["split"] == {"tp": tp, "pp": pp, "dp": int(row["gpus"]) // (tp * pp)}


@pytest.mark.parametrize("row", ROWS[-2:], ids=[r["parameters_billion"] for r in ROWS[-2:]])
def test_the_largest_configurations_memory_is_peak_memory_of_the_full_simulated_step(row):
    # p = 35 and 64, m = 280 and 512: the activations counted at m = 2p must be the
    # simulated step's own.
    tp, pp = int(row["tensor_parallel_size"]), int(row["pipeline_parallel_size"])
    hardware = Hardware(int(row["gpus"]), **A100_SXM_80GB)
    result = size(
        megatron_shape(row),
        int(row["batch_size"]),
        hardware,
        tp=tp,
        pp=pp,
        microbatch_size=1,
        recompute="full",
        top=1,
    )
    ranks = result.memory(result.best)
    assert max(r.total for r in ranks) == pytest.approx(result.best.memory_bytes, rel=1e-12)


def test_json_keys(capsys):
    status, out = run_json(
        capsys,
        *("--layers", "8", "--hidden", "256", "--heads", "8", "--vocab", "1000"),
        *("--seq-len", "128", "--global-batch", "16", "--gpus", "4", "--top", "3"),
    )
    assert status == 0
    assert {"params", "fits", "memory_per_gpu_bytes", "split", "best", "ranked", "rejected"} <= set(
        out
    )
    assert out["params"] == total_parameters(SMALL)
    assert len(out["ranked"]) == 3 and out["ranked"][0] == out["best"]
    assert out["best"]["memory_per_gpu_bytes"] == out["memory_per_gpu_bytes"]
    times = [o["step_time_s"] for o in out["ranked"]]
    assert times == sorted(times)
    for key in ("tp", "pp", "dp", "schedule", "v", "microbatch_size", "num_microbatches"):
        assert key in out["best"]
    assert set(out["best"]["memory_breakdown_bytes"]) >= {"parameters", "activations", "total"}


def test_a_model_that_fits_one_gpu_runs_without_a_pipeline():
    # 4 GPUs on one node, a model of a few MB: every split fits. With 1024 samples a step
    # pp = 1 has no bubble, tp = 1 no all-reduce inside layers, and the gradient
    # all-reduce is small next to the compute: pure data parallelism wins. Gradients in
    # bf16 (2 bytes a parameter, as the hand count below; Megatron's fp32 ones double the
    # all-reduce).
    hardware = Hardware(4, utilisation=0.5)  # FLOPs at 50% of peak
    result = size(SMALL, 1024, hardware, top=1, gradient_bytes=2, attention="standard")
    best = result.best.config
    assert (best.tp, best.pp, best.dp, best.recompute) == (1, 1, 4, "none")
    # Its step by hand: m = 1024 / (4 b) micro-batches of b samples, each F + B over all
    # layers (Zero Bubble Table 1: F = 24 b s h^2 + 4 b s^2 h, B = I + W = 48 b s h^2 +
    # 8 b s^2 h per layer, the logits 2 b s h V in each of F, I and W), then a ring
    # all-reduce of 2 bytes per parameter over NVLink at NCCL's 80 % of its 450 GB/s:
    # 2 (4-1)/4 * 2 N / (0.8 * 450e9); then Adam, 52 bytes a parameter through HBM at 80 %
    # of the H100's 3350 GB/s.
    s, h, V, L = 128, 256, 1000, 8
    flops = L * (72 * s * h * h + 12 * s * s * h) + 3 * (2 * s * h * V)  # per sample
    speed = H100_SXM["tflops"] * 1e12 * 0.5
    allreduce = 2 * 3 / 4 * 2 * total_parameters(SMALL) / (0.8 * 450e9)
    adam = 52 * total_parameters(SMALL) / (0.8 * 3350e9)
    assert result.best.pipeline_s == pytest.approx(256 * flops / speed, rel=1e-12)
    assert result.best.allreduce_s == pytest.approx(allreduce, rel=1e-12)
    assert result.best.optimizer_s == pytest.approx(adam, rel=1e-12)
    assert result.best.step_time_s == pytest.approx(256 * flops / speed + allreduce + adam)
    assert result.best.bubble_fraction == pytest.approx(0.0, abs=1e-12)


def test_with_a_small_batch_the_all_reduce_makes_a_pipeline_faster():
    # 16 samples: 4 per GPU take about as long as the all-reduce of all the gradients, so
    # splitting the model into a pipeline (dp = 1: no all-reduce) wins despite its bubble.
    result = size(SMALL, 16, Hardware(4, utilisation=0.5))
    assert result.best.config.pp > 1 and result.best.allreduce_s == 0
    data_parallel = next(o for o in result.ranked if o.config.dp == 4)
    assert data_parallel.allreduce_s > 0.5 * data_parallel.pipeline_s


def test_rejection_reasons_say_what_failed():
    shape = ModelShape(layers=4, hidden=640, heads=40, vocab=1000, seq_len=64)
    result = size(shape, 8, Hardware(16, gpus_per_node=8, gpu_memory_gb=0.05))
    reasons = {kind: example.reason for kind, _, example in result.groups()}
    assert reasons["tp beyond a node"] == "tp 16 > 8 GPUs per node"
    assert "tp = 3 must divide heads = 40" not in str(reasons)  # 3 does not divide 16 GPUs
    assert reasons["more stages than layers"].endswith("> 4 layers")
    assert reasons["global batch not divisible"] == "global batch 8 not divisible by dp = 16"
    memory = reasons["does not fit in memory"]
    assert memory.startswith(("needs ", "parameters, gradients and optimizer state alone need "))
    assert "GB > 0.05 GB on pipeline rank" in memory
    zb_h2 = size(SMALL, 2, Hardware(2), pp=2, recompute="none")
    rules = [r for r in zb_h2.rejected if r.kind == "zb-h2's rule"]
    assert "m >= 2p-1" in rules[0].reason and "got m = 2 with p = 2" in rules[0].reason


def test_tp_that_does_not_split_the_heads_is_rejected_by_the_search():
    shape = ModelShape(layers=4, hidden=640, heads=40, vocab=1000, seq_len=64)
    result = size(shape, 16, Hardware(16, gpus_per_node=16))
    reasons = [r.reason for r in result.rejected if r.kind == "tp does not split the model"]
    assert reasons == ["tp = 16 must divide heads = 40 (whole heads per rank)"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--tp", "16", "--gpus", "16"], "tp 16 > 8 GPUs per node"),
        (["--tp", "16"], "tp = 16 must divide the 8 GPUs"),
        (["--tp", "8", "--gpus-per-node", "16", "--gpus", "16"], "tp = 8 must divide heads = 12"),
        (["--pp", "3"], "pp = 3 must divide the 8 GPUs"),
        (["--pp", "8", "--tp", "1"], "pp = 8 needs a layer per stage"),
        (["--gpu-memory-gb", "0.001"], "no configuration fits; the closest is tp = "),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, extra, message):
    base = ["--layers", "4", "--hidden", "768", "--heads", "12", "--vocab", "1000"]
    base += ["--seq-len", "64", "--global-batch", "8", "--gpus", "8"]
    argv = base + extra
    if "--gpus" in extra:  # the test gives its own cluster size
        argv = base[:-2] + extra
    status = main(["size", *argv])
    err = capsys.readouterr().err
    assert status == 2
    assert message in err and len(err.strip().splitlines()) == 1


def test_global_batch_not_divisible_by_any_split_says_so(capsys):
    argv = "--layers 4 --hidden 256 --heads 8 --vocab 100 --seq-len 32 --global-batch 3"
    status = main(["size", *argv.split(), "--gpus", "2", "--pp", "1", "--tp", "1"])
    assert status == 2
    assert "global batch not divisible" in capsys.readouterr().err


def test_text_report_has_the_table_the_breakdown_and_the_rejections(capsys):
    status = main(
        [
            "size",
            "--layers",
            "8",
            "--hidden",
            "256",
            "--heads",
            "8",
            "--vocab",
            "1000",
            "--seq-len",
            "128",
            "--global-batch",
            "16",
            "--gpus",
            "16",
            "--top",
            "4",
        ]
    )
    out = capsys.readouterr().out
    assert status == 0
    assert "step s  bubble f  GB/GPU  fits" in out
    assert "memory of pipeline rank" in out and "rejected (" in out
    assert "tp beyond a node: 1, e.g. tp = 16: tp 16 > 8 GPUs per node" in out


def test_memory_of_every_ranked_option_equals_peak_memory_on_its_simulated_timeline():
    # The search counts activations from each schedule's order (held_frontier); the
    # timeline, with real costs, transfers and contention, must give the same bytes.
    result = size(SMALL, 64, Hardware(8, gpus_per_node=4))
    first = {}  # the fastest option of each schedule, v and recomputation mode
    for option in result.ranked:
        c = option.config
        first.setdefault((c.schedule, c.v, c.recompute), option)
    assert {key[0] for key in first} >= set(SIZING_SCHEDULES)
    for option in first.values():
        ranks = result.memory(option)
        worst = max(ranks, key=lambda r: r.total)
        assert worst.total == pytest.approx(option.memory_bytes, rel=1e-12)
        assert worst.rank == option.memory_rank


def test_interleaving_tries_each_v_that_splits_the_layers_evenly():
    # Megatron-LM's 530B model: 105 layers on 35 stages, 3 a stage: v = 3 (one layer a
    # chunk) is the only v beyond 1 its interleaved schedule can run. 76.1B: 60 layers on
    # 4 stages, 15 a stage: v = 3 or 5.
    assert chunks_for(35, 105) == (2, 3, 4, 8)
    assert chunks_for(4, 60) == (2, 3, 4, 5, 8)
    assert chunks_for(4, 64) == CHUNKS == (2, 4, 8)
    shape = ModelShape(layers=105, hidden=256, heads=8, vocab=1000, seq_len=64)
    found = size(shape, 70, Hardware(35, gpus_per_node=5), tp=1, pp=35, top=None)
    tried = {o.config.v for o in found.ranked if o.config.schedule == "interleaved-1f1b"}
    assert 3 in tried


INTERLEAVED = ("interleaved-1f1b", "interleaved-zb")


def runs(name: str, p: int, m: int, v) -> bool:
    """Whether the builder takes (p, m, v) (interleaved: PyTorch's rounds)."""
    try:
        check_rule(name, p, m, v)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("name", SIZING_SCHEDULES)
def test_activations_held_are_those_of_m_equal_2p_for_longer_m(name):
    # Interleaved schedules at an m that is not a multiple of p run rounds of another
    # size, and are counted on their own schedule: held_frontier must still be exact.
    for v in range(2, MAX_EVEN_CHUNKS + 1) if name in INTERLEAVED else (None,):
        for p in range(2, 7):
            for m in range(2 * p, 5 * p + 1):
                if not runs(name, p, m, v):
                    continue
                assert held_frontier(name, p, m, v) == _frontier(name, p, m, v), (name, v, p, m)


def test_held_frontier_peak_equals_the_timeline_with_uneven_stage_bytes():
    shape = ModelShape(layers=16, hidden=128, heads=4, vocab=5000, seq_len=64)
    for name in SIZING_SCHEDULES:
        for v in CHUNKS[:2] if name in INTERLEAVED else (None,):
            result = size(
                shape,
                48,
                Hardware(4),
                tp=1,
                pp=4,
                microbatch_size=1,
                recompute="none",
                schedules=(name,),
            )
            option = next(o for o in result.ranked if o.config.v == v)
            c = option.config
            timeline = simulate(schedule_of(name, 4, c.num_microbatches, v))  # unit costs
            ranks = peak_memory(timeline, shape, parallel_of(c, layout=result.layout))
            assert max(r.total for r in ranks) == pytest.approx(option.memory_bytes, rel=1e-12)


def test_top_k_is_the_head_of_the_full_ranking_and_bounds_hold():
    every = size(SMALL, 64, Hardware(8, gpus_per_node=4))
    top = size(SMALL, 64, Hardware(8, gpus_per_node=4), top=5)
    for option in every.ranked:  # the bound the pruning relies on
        values = option.costs.per_stage(len(option.costs.F))  # the Costs it was simulated with
        bound = _lower_bound(option, values, SMALL, every.hardware, every.layout)
        assert bound <= option.step_time_s * (1 + 1e-12)
    assert [o.config for o in top.ranked] == [o.config for o in every.ranked[:5]]
    assert top.not_ranked == len(every.ranked) - 5


def test_bounds_hold_on_a_deeper_pipeline_across_nodes():
    # 16 layers on 32 GPUs of 4 a node: pipelines of up to 16 stages whose transfers
    # cross InfiniBand, uneven ends (the embedding, the head), every schedule and v.
    shape = ModelShape(layers=16, hidden=256, heads=8, vocab=5000, seq_len=128)
    hardware = Hardware(32, gpus_per_node=4, gpu_type="a100")
    every = size(shape, 64, hardware, tp=2)
    assert {o.config.schedule for o in every.ranked} >= set(SIZING_SCHEDULES)
    for option in every.ranked:
        values = option.costs.per_stage(len(option.costs.F))
        bound = _lower_bound(option, values, shape, hardware, every.layout)
        assert bound <= option.step_time_s * (1 + 1e-12), option.config


@pytest.mark.parametrize("name", SIZING_SCHEDULES)
def test_each_rank_s_last_step_is_that_of_m_equal_2p_for_longer_m(name):
    for v in range(2, MAX_EVEN_CHUNKS + 1) if name in INTERLEAVED else (None,):
        for p in range(2, 7):
            for m in range(2 * p, 5 * p + 1):
                if not runs(name, p, m, v):
                    continue
                built = build(name, p, m, v)
                last = tuple(
                    tuple((stage, kind) for stage, kind, _ in row[-1].parts)
                    for row in built.actions
                )
                assert last_actions(name, p, v, m) == last, (name, v, p, m)


def test_default_links_are_the_nominal_figures_of_data_links_csv():
    links = nominal_links()
    assert H100_SXM["intra_node_gbps"] == links["NVLink 4"]
    assert H100_SXM["inter_node_gbps"] == links["InfiniBand NDR"]


ONE_LAYER_FLOPS = {"F": 24, "I": 24, "W": 24}  # times s h^2 (Zero Bubble Table 1)
ATTENTION_FLOPS = {"F": 4, "I": 8, "W": 0}  # times s^2 h


def hand_flops(kind: str, s: int, h: int) -> int:
    """One layer's pass on one sample, by hand from Zero Bubble Table 1."""
    return ONE_LAYER_FLOPS[kind] * s * h * h + ATTENTION_FLOPS[kind] * s * s * h


def test_a_stage_boundary_across_nodes_pays_the_inter_node_link():
    # Two layers on two one-GPU nodes, one micro-batch of one sample through 1F1B:
    # F0, send, F1, B1, send back, B0; each message is s h 2 bytes at 1 GB/s.
    shape = ModelShape(layers=2, hidden=256, heads=8, vocab=1000, seq_len=128)
    hardware = Hardware(2, gpus_per_node=1, inter_node_gbps=1.0, utilisation=0.5)
    result = size(
        shape, 1, hardware, tp=1, pp=2, recompute="none", schedules=("1f1b",), attention="standard"
    )
    best = result.best
    assert best.config.num_microbatches == 1 and best.config.schedule == "1f1b"
    s, h, V = 128, 256, 1000
    layer = sum(hand_flops(k, s, h) for k in ("F", "I", "W"))  # F + B of one layer
    compute = (2 * layer + 3 * 2 * s * h * V) / hardware.flops_per_second
    message = s * h * 2 / 1e9
    assert best.pipeline_s == pytest.approx(compute + 2 * message, rel=1e-12)
    assert best.costs.topology.link(0, 1).name == "inter-node"


def test_tensor_parallelism_pays_four_all_reduces_a_layer():
    # tp = 2 on one node: each rank does half the FLOPs, and each layer all-reduces its
    # (s, h) output twice forward and twice backward, 2 (2-1)/2 * s h 2 bytes.
    shape = ModelShape(layers=2, hidden=256, heads=8, vocab=1000, seq_len=128)
    # (With sequence parallelism, the default, each all-reduce is an all-gather and a
    # reduce-scatter: the same bytes.) Standard attention: the FLOPs of the hand count.
    hardware = Hardware(2, utilisation=0.5)
    result = size(shape, 1, hardware, tp=2, recompute="none", attention="standard")
    best = result.best
    assert (best.config.tp, best.config.pp, best.config.num_microbatches) == (2, 1, 1)
    s, h, V = 128, 256, 1000
    flops = 2 * sum(hand_flops(k, s, h) for k in ("F", "I", "W")) + 3 * 2 * s * h * V
    # At NCCL's 80 % of NVLink; the embedding's output and the head's input gradient add one
    # all-reduce each to the two layers' 2 x 4.
    one = 2 * (2 - 1) / 2 * s * h * 2 / (0.8 * 450e9)
    expected = flops / 2 / result.hardware.flops_per_second + (2 * 4 + 2) * one
    assert best.pipeline_s == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("name", SIZING_SCHEDULES)
def test_rule_check_without_building_agrees_with_the_builder(name):
    for v in range(2, MAX_EVEN_CHUNKS + 1) if name in INTERLEAVED else (None,):
        for p in range(2, 6):
            for m in range(1, 5 * p):
                try:
                    build(name, p, m, v)
                    refused = None
                except ValueError as exc:
                    refused = str(exc)
                try:
                    check_rule(name, p, m, v)
                    said = None
                except ValueError as exc:
                    said = str(exc)
                assert said == refused, (name, v, p, m)


def test_without_learned_position_embeddings_the_model_has_s_h_fewer_parameters(capsys):
    argv = ("--layers", "8", "--hidden", "256", "--heads", "8", "--vocab", "1000")
    argv += ("--seq-len", "128", "--global-batch", "16", "--gpus", "4", "--top", "1")
    _, learned = run_json(capsys, *argv)
    _, rotary = run_json(capsys, *argv, "--no-position-embeddings")
    assert learned["params"] - rotary["params"] == 128 * 256  # s x h, counted by hand


def test_options_as_fast_as_each_other_rank_by_memory():
    every = size(SMALL, 64, Hardware(8, gpus_per_node=4))
    for a, b in zip(every.ranked, every.ranked[1:], strict=False):
        if float(f"{a.step_time_s:.9g}") == float(f"{b.step_time_s:.9g}"):
            assert a.memory_bytes <= b.memory_bytes
        else:
            assert a.step_time_s < b.step_time_s


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 3).flatmap(lambda d: st.sets(st.tuples(*[st.integers(0, 6)] * d), max_size=25))
)
def test_the_frontier_keeps_exactly_the_snapshots_no_other_one_covers(snapshots):
    # The definition, checked pair by pair, against the sweeps for one and two stages.
    covered = {
        s
        for s in snapshots
        for k in snapshots
        if k != s and all(a >= b for a, b in zip(k, s, strict=True))
    }
    kept = _undominated(snapshots)
    assert len(kept) == len(set(kept)) and set(kept) == snapshots - covered


def test_schedules_outside_ppbook_s_list_are_refused():
    with pytest.raises(ValueError, match=r"size needs schedules named in .*got \('1f1b', 'zb-9'\)"):
        size(SMALL, 64, Hardware(8, gpus_per_node=4), schedules=("1f1b", "zb-9"))


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_route_length_without_building_is_the_built_schedule_s_route(name):
    for p in (2, 4):
        for v in CHUNKS if SCHEDULES[name].chunks == "any" else (None,):
            built = build(name, p, 2 * p, v)
            assert route_length(name, p, v) == len(built.route(0)), (p, v)


# ----- today's jobs: model cards, ZeRO stages, expert and context parallelism -------------

SMALL_ARGV = ("--layers", "8", "--hidden", "256", "--heads", "8", "--vocab", "1000")
SMALL_ARGV += ("--seq-len", "128")


def test_a_model_card_gives_the_shape_and_its_training_sequence_length(capsys):
    argv = ("--model", "llama3-8b", "--global-batch", "64", "--gpus", "8")
    argv += ("--tp", "8", "--pp", "1", "--top", "1", "--microbatch-size", "1")
    status = main(["size", *argv])
    out = capsys.readouterr().out
    assert status == 0 and "32 layers, hidden 4096, 32 heads" in out and "sequence 8192" in out
    status = main(["size", *argv, "--seq-len", "4096"])  # a flag overrides the card
    assert status == 0 and "sequence 4096" in capsys.readouterr().out
    status, data = run_json(capsys, *argv)
    assert abs(data["params"] / 8.03e9 - 1) < 0.015  # Llama 3 8B's model page: 8.03B
    assert "active_params" not in data  # a dense model


def test_without_a_card_every_shape_flag_is_required_in_one_line(capsys):
    status = main(
        ["size", "--layers", "8", "--hidden", "256", "--global-batch", "8", "--gpus", "8"]
    )
    err = capsys.readouterr().err
    assert status == 2 and len(err.strip().splitlines()) == 1
    assert "give --model or all of --layers --hidden --heads --vocab --seq-len" in err
    assert "(missing --heads --vocab --seq-len)" in err


def test_an_moe_card_reports_its_active_parameters_whether_or_not_it_fits(capsys):
    argv = ("--model", "mixtral-8x7b", "--global-batch", "64", "--gpus", "8", "--top", "1")
    status, data = run_json(capsys, *argv, "--gpu-memory-gb", "1")  # nothing fits in 1 GB
    assert status == 2 and data["fits"] is False
    # Mixtral 8x7B: 46.7B parameters, 12.9B active (Mistral AI's announcement)
    assert abs(data["params"] / 46.7e9 - 1) < 0.015
    assert abs(data["active_params"] / 12.9e9 - 1) < 0.015


def _ranks(shape, **fixed):
    hardware = Hardware(32, gpu_memory_gb=10_000)  # the counts, not the fit, are tested
    result = size(shape, 64, hardware, tp=1, pp=4, microbatch_size=1, top=1, **fixed)
    return result, {r.rank: r for r in result.memory(result.best)}


def test_expert_parallelism_keeps_experts_over_ep_of_each_rank():
    # Mixtral's shape at 1k tokens: pipeline rank 1 holds 8 of the 32 layers; each layer has
    # 8 experts of 3 matrices h x f (SwiGLU, h = 4096, f = 14336). With ep = 8 a rank keeps
    # one expert per layer: 8 layers x 7 experts x 3 h f fewer parameters.
    shape = ModelShape(
        32,
        4096,
        32,
        32000,
        1024,
        kv_heads=8,
        ffn_hidden=14336,
        gated_mlp=True,
        norm="rmsnorm",
        linear_bias=False,
        experts=8,
        experts_per_token=2,
        tied_embeddings=False,
        position_embeddings=False,
    )
    _, one = _ranks(shape, ep=1, recompute="full", zero=1)
    result, eight = _ranks(shape, ep=8, recompute="full", zero=1)
    assert result.best.config.ep == 8
    assert one[1].parameter_count - eight[1].parameter_count == 8 * 7 * 3 * 4096 * 14336


@pytest.mark.parametrize("zero", [0, 1, 2, 3])
def test_zero_stages_shard_the_state_as_trainers_keep_it(zero):
    # Megatron's bytes: 2 of bf16 weights, 4 of fp32 gradients, 4 + 4 + 4 of master weights
    # and Adam moments, by hand per stage: stage 1 shards the 12, stage 2 the 4 too,
    # stage 3 the 2 as well (and gathers two layers whole, not counted here).
    result = size(SMALL, 64, Hardware(8), tp=1, pp=2, zero=zero, microbatch_size=1, top=1)
    best = result.best
    n, dp = best.breakdown.parameter_count, best.config.dp
    assert dp == 4
    assert best.breakdown.optimizer == pytest.approx(12 * n / (dp if zero >= 1 else 1))
    assert best.breakdown.gradients == pytest.approx(4 * n / (dp if zero >= 2 else 1))
    if zero < 3:
        assert best.breakdown.parameters == pytest.approx(2 * n)
    else:
        assert 2 * n / dp < best.breakdown.parameters < 2 * n


def test_bf16_gradients_and_moments_are_flags(capsys):
    argv = (*SMALL_ARGV, "--global-batch", "16", "--gpus", "4", "--tp", "1", "--pp", "1")
    argv += ("--microbatch-size", "1", "--top", "1")
    _, fp32 = run_json(capsys, *argv)
    _, bf16 = run_json(capsys, *argv, "--grad-dtype", "bf16", "--adam-moments", "bf16")
    n = fp32["best"]["memory_breakdown_bytes"]["parameter_count"]
    assert fp32["best"]["memory_breakdown_bytes"]["gradients"] == 4 * n
    assert bf16["best"]["memory_breakdown_bytes"]["gradients"] == 2 * n
    assert fp32["best"]["memory_breakdown_bytes"]["optimizer"] == 12 * n
    assert bf16["best"]["memory_breakdown_bytes"]["optimizer"] == 8 * n  # fp32 master + 2 + 2


def test_context_parallelism_splits_each_sequence_and_needs_flash_attention(capsys):
    argv = (*SMALL_ARGV, "--global-batch", "16", "--gpus", "8", "--tp", "1", "--pp", "1")
    argv += ("--microbatch-size", "1", "--top", "1", "--recompute", "none")
    _, one = run_json(capsys, *argv)
    _, two = run_json(capsys, *argv, "--cp", "2")
    assert two["best"]["cp"] == 2 and two["split"] == {"tp": 1, "pp": 1, "dp": 4}
    acts = [d["best"]["memory_breakdown_bytes"]["activations"] for d in (one, two)]
    assert acts[1] < 0.6 * acts[0]  # the layers' activations halve; the logits too
    status = main(["size", *argv, "--cp", "2", "--attention", "standard"])
    err = capsys.readouterr().err
    assert status == 2 and "cp = 2 needs attention='flash'" in err


def test_sequence_parallelism_is_on_by_default_and_can_be_switched_off(capsys):
    argv = (*SMALL_ARGV, "--global-batch", "16", "--gpus", "8", "--tp", "8", "--pp", "1")
    argv += ("--microbatch-size", "1", "--top", "1", "--recompute", "none")
    _, on = run_json(capsys, *argv)
    _, off = run_json(capsys, *argv, "--no-sequence-parallel")
    acts = [d["best"]["memory_breakdown_bytes"]["activations"] for d in (on, off)]
    assert acts[0] < acts[1]  # the norms' and dropouts' activations split over tp


def test_a_hugging_face_config_json_is_a_model_card(tmp_path, capsys):
    # Llama 3 8B's own config fields (Hugging Face names), written to a file: the same
    # shape and count as the built-in card; its max_position_embeddings is the sequence.
    config = {
        "model_type": "llama",
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "tie_word_embeddings": False,
        "max_position_embeddings": 8192,
        "hidden_act": "silu",
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    argv = ("--global-batch", "64", "--gpus", "8", "--tp", "8", "--pp", "1", "--top", "1")
    _, from_file = run_json(capsys, "--model", str(path), *argv)
    _, from_card = run_json(capsys, "--model", "llama3-8b", *argv)
    assert from_file["params"] == from_card["params"]
    assert abs(from_file["params"] / 8.03e9 - 1) < 0.015
    status = main(["size", "--model", str(tmp_path / "missing.json"), *argv])
    err = capsys.readouterr().err
    assert status == 2 and "cannot read config" in err and len(err.strip().splitlines()) == 1
