"""Published layouts that ``ppbook size`` must find to fit (issue 18, item 2).

Llama 3 405B (Grattafiori et al. 2024, "The Llama 3 Herd of Models", arXiv:2407.21783,
sec. 3.3): TP 8, PP 16, DP 128 on 16,384 H100 80 GB, 8,192-token sequences, 2,048
sequences a step, FSDP-style sharding of gradients and optimizer state (``--zero 2``) and
no activation recomputation.

DeepSeek-V3 (DeepSeek-AI 2024, arXiv:2412.19437): PP 16 with DualPipe, EP 64 and ZeRO-1
data parallelism on 2,048 H800 80 GB (sec. 3.1 and 3.2), 4,096-token sequences and 15,360
a step (sec. 4.2), no tensor parallelism (sec. 3.2), with the memory choices its report
lists and the card carries: BF16 Adam moments, recomputed RMSNorm and MLA up-projections
(sec. 3.2.3), FP8 cached activations and the MoE SwiGLU's output recomputed (sec. 3.3.3).

On failure each test prints the memory breakdown of the layout's fullest GPU.
"""

import json
import re

from ppbook.cli import main

GB = 1e9


def breakdown(out: dict) -> str:
    """The memory of the best option (or the closest to fitting), in GB, for the failure
    message and the lead's note."""
    best = out.get("best")
    if not best:
        return f"nothing fits; closest: {out.get('closest')}; rejected: {out.get('rejected')}"
    parts = best["memory_breakdown_bytes"]
    keys = ("parameters", "gradients", "optimizer", "activations", "total")
    shown = ", ".join(f"{k} {parts[k] / GB:.1f}" for k in keys)
    return f"{best['schedule']} v={best['v']} b={best['microbatch_size']}: {shown} GB"


def size_json(capsys, *argv) -> tuple[int, dict]:
    status = main(["size", *argv, "--json"])
    return status, json.loads(capsys.readouterr().out)


def test_llama3_405b_published_layout_fits_h100_80gb(capsys):
    status, out = size_json(
        capsys,
        *("--model", "llama3-405b", "--global-batch", "2048", "--gpus", "16384"),
        *("--gpu-type", "h100", "--tp", "8", "--pp", "16", "--zero", "2"),
        *("--recompute", "none", "--top", "1"),
    )
    note = breakdown(out)
    assert status == 0 and out["fits"] is True, note
    assert out["split"] == {"tp": 8, "pp": 16, "dp": 128}, note
    assert out["memory_per_gpu_bytes"] <= 80 * GB, note
    assert out["best"]["recompute"] == "none", note
    # 405.9B published (Llama 3 405B's model page); the card's count within 1.5 %.
    assert abs(out["params"] / 405.9e9 - 1) < 0.015, out["params"]
    # One sample is one 8,192-token sequence: 2,048 sequences = 128 replicas x m x b.
    best = out["best"]
    assert best["num_microbatches"] * best["microbatch_size"] * 128 == 2048, note


DEEPSEEK_V3 = (
    *("--model", "deepseek-v3", "--global-batch", "15360", "--gpus", "2048"),
    *("--gpu-type", "h800", "--tp", "1", "--pp", "16", "--ep", "64", "--zero", "1"),
    *("--schedule", "dualpipe", "--recompute", "none", "--top", "1"),
)


def test_deepseek_v3_published_layout_fits_h800_80gb(capsys):
    status, out = size_json(capsys, *DEEPSEEK_V3)
    note = breakdown(out)
    assert status == 0 and out["fits"] is True, note
    assert out["split"] == {"tp": 1, "pp": 16, "dp": 128}, note
    assert out["memory_per_gpu_bytes"] <= 80 * GB, note
    best = out["best"]
    assert (best["schedule"], best["recompute"]) == ("dualpipe", "none"), note
    # One sample is one 4,096-token sequence: 15,360 = 128 replicas x m x b.
    assert best["num_microbatches"] * best["microbatch_size"] * 128 == 15360, note
    # 671B published (the report's abstract); the card's count within 1.5 %.
    assert abs(out["params"] / 671e9 - 1) < 0.015, out["params"]


def test_deepseek_v3_needs_its_fp8_activations_and_recomputed_swiglu(capsys):
    # Without sec. 3.3.3's choices the same layout is refused: the activations of the
    # micro-batches DualPipe holds (PP + 1) no longer fit beside the parameters' state.
    for off in (("--no-fp8-activations",), ("--no-recompute-swiglu",)):
        status, out = size_json(capsys, *DEEPSEEK_V3, *off)
        assert status == 2 and out["fits"] is False, breakdown(out)
        needs = [r["example"] for r in out["rejected"] if r["kind"] == "does not fit in memory"]
        assert needs, out["rejected"]
        gb = float(re.search(r"needs ([0-9.]+) GB > 80 GB", needs[0]).group(1))
        assert gb > 80, needs
