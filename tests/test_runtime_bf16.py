"""bfloat16: mixed-precision training on the pipeline against one process trained the same way.

The scheme (:mod:`ppbook.runtime.precision`): bf16 weights, activations and messages;
fp32 master weights, fp32 gradient sums across micro-batches, the optimizer on the fp32
masters, copied back to bf16. The one-process reference runs the same scheme on the
whole batch at once.

The tolerance, derived. bf16 keeps 8 significant bits: rounding moves a value by at most
u = 2^-8 of its magnitude, n roundings in a row by about n u. The two runs compute the
same bf16 products and differ only in what they round:

- the pipeline rounds each of the m = 4 micro-batch gradients of a weight to bf16 before
  adding them in fp32; the one process rounds the whole batch's gradient once: m + 1;
- between a weight and the loss, each bf16 operation of the forward and of the backward
  may round the two runs' values differently: 2 d, with d the operations on the longest
  forward path: 3 per MLP block (Linear, Tanh, Linear), 12 per transformer block;
- the loss: one more (its scaling by 1/m per micro-batch against the whole batch's mean).

So each loss, gradient and parameter may differ by C u times its largest magnitude, with
C = m + 2 d + 2. Here: two MLP blocks (1F1B, ZB-H1: one per stage) d = 6, C = 18, a
bound of 18/256 = 7 %; four MLP blocks (DualPipeV, interleaved: 2p parts) d = 12, C = 30;
two transformer blocks d = 24, C = 54. fp32 accumulation (2^-24 per term) is negligible.
The measured differences are 2 to 14 u: inside the bound. A dropped micro-batch's
gradient (a quarter of the batch) or a gradient at the wrong scale (the loss not divided
by m) moves a gradient by far more than 7 % of its largest value: both fail the check.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from torch import nn
from torch.nn import functional

from ppbook.runtime import context, worker
from ppbook.runtime.comm import DTYPES, encode_header
from ppbook.runtime.config import RunConfig, check, model_bytes
from ppbook.runtime.launch import launch_many
from ppbook.runtime.models import build_blocks, step_data
from ppbook.runtime.precision import UNIT_ROUNDOFF, MasterWeights
from ppbook.runtime.reference import assert_matches_reference, mixed_tolerance, reference_run

U = 2.0**-8
M = 4


def bf16(schedule: str, **changes) -> RunConfig:
    base = RunConfig(
        schedule=schedule,
        nproc=2,
        num_microbatches=M,
        hidden=8,
        microbatch_size=2,
        steps=2,
        lr=0.1,
        dtype="bfloat16",
        collect_grads=True,
        timeout=30.0,
        label=schedule,
    )
    return replace(base, **changes)


# label -> (config, C derived in the module docstring)
CASES = {
    "1f1b one step": (bf16("1f1b", steps=1, label="1f1b one step"), M + 2 * 6 + 2),
    "zb-h1": (bf16("zb-h1"), M + 2 * 6 + 2),
    "dualpipev": (bf16("dualpipev"), M + 2 * 12 + 2),
    "transformer": (
        bf16("1f1b", model="transformer", seq_len=4, label="transformer"),
        M + 2 * 24 + 2,
    ),
    "zb-v adam": (bf16("zb-v", optimizer="adam", lr=0.01, label="zb-v adam"), M + 2 * 12 + 2),
}


@pytest.fixture(scope="module")
def results():
    configs = [config for config, _ in CASES.values()]
    return dict(zip(CASES, launch_many(configs), strict=True))


def worst_relative(got: dict, expected: dict) -> float:
    """The largest |got - expected| over each tensor, relative to that tensor's max |.|."""
    return max(
        ((got[k].double() - v.double()).abs().max() / v.double().abs().max()).item()
        for k, v in expected.items()
    )


@pytest.mark.timeout(120)
@pytest.mark.parametrize("label", list(CASES))
def test_bf16_pipelines_train_as_one_process_within_the_derived_bound(results, label):
    config, c = CASES[label]
    assert mixed_tolerance(config) == c * U  # the library counts as the docstring does
    result = results[label]
    reference = reference_run(config)
    assert all(g.dtype == torch.float32 for g in result.grads.values())  # fp32 sums
    assert all(p.dtype == torch.float32 for p in result.params.values())  # fp32 masters
    for got, want in zip(result.losses, reference.losses, strict=True):
        assert abs(got - want) <= c * U * abs(want)
    assert worst_relative(result.grads, reference.grads) <= c * U
    assert worst_relative(result.params, reference.params) <= c * U
    assert_matches_reference(result)  # what ppbook run --check calls


def one_microbatch_gradient(config: RunConfig, j: int) -> dict[str, torch.Tensor]:
    """Micro-batch j's share of the first step's gradient, in one process, mixed precision."""
    model = nn.Sequential(*build_blocks(config, 2))
    inputs, targets, _ = step_data(config, [model])
    weights = list(model.parameters())
    masters = MasterWeights(weights)
    (functional.mse_loss(model(inputs[j]), targets[j]) / config.num_microbatches).backward()
    masters.collect()
    named = dict(zip(map(id, weights), masters.masters, strict=True))
    return {name: named[id(p)].grad for name, p in model.named_parameters()}


def test_a_planted_error_exceeds_the_bound(results):
    config, c = CASES["1f1b one step"]
    result = results["1f1b one step"]
    reference = reference_run(config)
    dropped = one_microbatch_gradient(config, 0)
    planted = {name: g - dropped[name] for name, g in result.grads.items()}
    assert worst_relative(planted, reference.grads) > 2 * c * U  # far beyond the bound
    with pytest.raises(AssertionError, match="gradient of .* differs by .* more than the bound"):
        assert_matches_reference(replace(result, grads=planted))
    unscaled = {name: g * config.num_microbatches for name, g in result.grads.items()}
    with pytest.raises(AssertionError, match="more than the bound"):
        assert_matches_reference(replace(result, grads=unscaled))
    shifted = [loss * (1 + 2 * c * U) for loss in result.losses]
    with pytest.raises(AssertionError, match="loss of step 0"):
        assert_matches_reference(replace(result, losses=shifted))


def test_micro_batch_gradients_add_up_in_fp32_not_in_bf16():
    """1 + 3 x 2^-9: in bf16 each 2^-9 is lost (half an ulp of 1, rounded to even); fp32
    keeps all three."""
    weight = nn.Parameter(torch.zeros(1, dtype=torch.bfloat16))
    masters = MasterWeights([weight])
    for g in (1.0, 2.0**-9, 2.0**-9, 2.0**-9):
        weight.grad = torch.tensor([g], dtype=torch.bfloat16)
        masters.collect()
        assert weight.grad is None
    assert masters.masters[0].grad.item() == 1 + 3 * 2.0**-9
    in_bf16 = torch.tensor([1.0], dtype=torch.bfloat16)
    for _ in range(3):
        in_bf16 = in_bf16 + torch.tensor([2.0**-9], dtype=torch.bfloat16)
    assert in_bf16.item() == 1.0
    # the step on the fp32 master, copied back: rounded once to bf16, whose neighbours of
    # 1 are 2^-7 apart: 1 + 3 x 2^-9 lies nearer 1 + 2^-7
    optimizer = torch.optim.SGD(masters.masters, lr=1.0)
    masters.step(optimizer)
    assert masters.masters[0].item() == -(1 + 3 * 2.0**-9)
    assert weight.item() == -(1 + 2.0**-7) and weight.dtype == torch.bfloat16
    assert UNIT_ROUNDOFF == U


def test_messages_carry_bf16_at_half_the_bytes_of_float32():
    sizes = {}
    for dtype in ("float32", "bfloat16"):
        config = RunConfig(model="transformer", hidden=8, seq_len=4, dtype=dtype)
        parts = [nn.Sequential(b) for b in build_blocks(config, 2)]
        _, _, layouts = step_data(config, parts)
        assert {d for d, _ in layouts} == {getattr(torch, dtype)}
        sizes[dtype] = sum(
            torch.empty(shape, dtype=d).nbytes for d, shape in layouts
        )  # what the ranks post receives for
    assert sizes["bfloat16"] * 2 == sizes["float32"]
    header = encode_header((1, 0, 2), torch.zeros(2, 3, dtype=torch.bfloat16))
    assert DTYPES[header[3]] == torch.bfloat16


def test_model_bytes_count_bf16_weights_fp32_masters_and_gradient_sums():
    config = RunConfig(model="mlp", hidden=12, num_blocks=3, dtype="bfloat16")
    blocks = build_blocks(config, 2)
    count = sum(p.numel() for b in blocks for p in b.parameters())
    assert all(p.dtype == torch.bfloat16 for b in blocks for p in b.parameters())
    assert model_bytes(config, check(config)) == count * (2 + 4 + 4)


def test_torch_engine_refuses_bf16_with_the_fix():
    with pytest.raises(ValueError, match="use engine 'ppbook'"):
        check(RunConfig(dtype="bfloat16", engine="torch"))


def test_the_cli_offers_bfloat16_and_its_help_says_what_it_keeps_in_fp32():
    import argparse

    from ppbook.cli.run import add_arguments, make_config

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert make_config(parser.parse_args(["--dtype", "bfloat16"]), None).dtype == "bfloat16"
    assert "fp32 master weights" in " ".join(parser.format_help().split())
    with pytest.raises(SystemExit):
        parser.parse_args(["--dtype", "float16"])


# ----- the device is current before any CUDA work --------------------------------------


class Stop(Exception):
    """Ends init_distributed at its first step after the device."""


def record_start_up(monkeypatch, gpus: int) -> list[str]:
    events: list[str] = []
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: events.append(f"set_device {d}"))
    monkeypatch.setattr(context, "bind_backward_thread", lambda d: events.append(f"bind {d}"))

    def store(*args, **kwargs):
        events.append("rendezvous")
        raise Stop

    monkeypatch.setattr(context.dist, "FileStore", store)
    monkeypatch.setattr(context.dist, "rendezvous", store)
    monkeypatch.setattr(context.dist, "init_process_group", store)
    return events


@pytest.mark.parametrize(("gpus", "rank", "device"), [(1, 1, "cuda:0"), (2, 1, "cuda:1")])
def test_a_rank_makes_its_device_current_before_the_rendezvous(
    monkeypatch, tmp_path, gpus, rank, device
):
    """torch.cuda patched: the device setter and the backward thread's binding come first,
    for ranks sharing one GPU (device 0, where the warning came from) and one per GPU."""
    events = record_start_up(monkeypatch, gpus)
    with pytest.raises(Stop):
        context.init_distributed(rank, 2, device="cuda", rendezvous=tmp_path / "r")
    assert events == [f"set_device {device}", f"bind {device}", "rendezvous"]


def test_under_torchrun_the_local_rank_picks_the_device_first(monkeypatch):
    events = record_start_up(monkeypatch, 2)
    for name, value in (("RANK", "3"), ("WORLD_SIZE", "4"), ("LOCAL_RANK", "1")):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    with pytest.raises(Stop):
        context.init_distributed(3, 4, device="cuda", rendezvous=None)
    assert events == ["set_device cuda:1", "bind cuda:1", "rendezvous"]


def test_a_cpu_rank_makes_no_cuda_call(monkeypatch, tmp_path):
    events = record_start_up(monkeypatch, 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: pytest.fail("asked CUDA"))
    with pytest.raises(Stop):
        context.init_distributed(0, 2, device="cpu", rendezvous=tmp_path / "r")
    assert events == ["rendezvous"]


def test_the_worker_joins_the_group_before_it_builds_a_model(monkeypatch, tmp_path):
    events: list[str] = []

    def joined(*args, **kwargs):
        events.append("init_distributed")
        raise Stop

    monkeypatch.setattr(worker, "init_distributed", joined)
    monkeypatch.setattr(worker, "build_blocks", lambda *a: events.append("build_blocks"))
    config = RunConfig(device="cpu")
    with pytest.raises(Stop):
        worker.serve(0, 2, [(config, check(config))], rendezvous=tmp_path / "r")
    assert events == ["init_distributed"]
