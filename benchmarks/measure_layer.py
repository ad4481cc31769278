# ruff: noqa: B023, E741, F821 -- kept as it ran on the H200 (data/README.md), only reformatted
"""Measure a GPT layer's forward, full backward and input-only backward on this GPU in
bf16, and set them beside ppbook.cost_model.flops' counts (the sizing model's F, I, W).
Run from the repository root with PYTHONPATH=. on a GPU machine (--cpu: a tiny CPU smoke run);
prints one JSON line per shape."""

import json
import sys

import torch
import torch.nn.functional as fn

cpu = "--cpu" in sys.argv
dev, dt = ("cpu", torch.float32) if cpu else ("cuda", torch.bfloat16)
SHAPES = (
    [(256, 4, 128, 2, 2)]
    if cpu
    else [
        # hidden, heads, seq, micro-batch, layers stacked
        (2048, 16, 2048, 4, 4),
        (4096, 32, 4096, 1, 4),
        (8192, 64, 4096, 1, 4),
        (12288, 96, 2048, 1, 2),
    ]
)
PEAK = 989e12  # dense bf16, H100/H200 SXM datasheet


class Block(torch.nn.Module):
    def __init__(self, h, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(h), torch.nn.LayerNorm(h)
        self.qkv, self.proj = torch.nn.Linear(h, 3 * h), torch.nn.Linear(h, h)
        self.fc1, self.fc2 = torch.nn.Linear(h, 4 * h), torch.nn.Linear(4 * h, h)

    def forward(self, x):
        b, t, h = x.shape
        q, k, v = (
            self.qkv(self.ln1(x)).view(b, t, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        )
        a = fn.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, h))
        return x + self.fc2(fn.gelu(self.fc1(self.ln2(x))))


def timed(f, reps=10, warm=3):
    for _ in range(warm):
        f()
    if cpu:
        import time

        t = time.perf_counter()
        for _ in range(reps):
            f()
        return (time.perf_counter() - t) / reps
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(reps):
        f()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / 1e3 / reps


for h, heads, s, b, L in SHAPES:
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[Block(h, heads) for _ in range(L)]).to(dev, dt)
    params = list(model.parameters())
    x = torch.randn(b, s, h, device=dev, dtype=dt, requires_grad=True)
    dy = torch.randn(b, s, h, device=dev, dtype=dt)

    def fwd():
        with torch.no_grad():
            model(x)

    def full():
        torch.autograd.grad(model(x), [x, *params], dy)

    def inp():
        torch.autograd.grad(model(x), [x], dy)

    tf, tfb, tfi = timed(fwd), timed(full), timed(inp)
    F, B, I = tf / L, (tfb - tf) / L, (tfi - tf) / L
    row = {
        "hidden": h,
        "heads": heads,
        "seq": s,
        "mb": b,
        "dtype": str(dt),
        "device": torch.cuda.get_device_name(0) if not cpu else "cpu",
        "F_ms": F * 1e3,
        "B_ms": B * 1e3,
        "I_ms": I * 1e3,
        "W_ms": (B - I) * 1e3,
        "B_over_F": B / F,
        "I_over_F": I / F,
    }
    mega_f = (
        24 * b * s * h * h * (1 + s / (6 * h))
    )  # Megatron's forward FLOPs per layer (full attention)
    row["tflops_fwd_megatron"] = mega_f / F / 1e12
    row["tflops_fwdbwd_megatron"] = 3 * mega_f / (F + B) / 1e12
    row["mfu_fwdbwd"] = 3 * mega_f / (F + B) / PEAK
    try:
        from ppbook.cost_model.flops import layer_flops
        from ppbook.cost_model.memory_bytes import ModelShape, Parallel

        pf = layer_flops(
            ModelShape(layers=L, hidden=h, heads=heads, vocab=32000, seq_len=s),
            Parallel(microbatch_size=b),
        )
        row["ppbook_flops"] = {k: pf[k] for k in ("F", "I", "W", "B")}
        row["ppbook_at_50pct_ms"] = {k: pf[k] / (0.5 * PEAK) * 1e3 for k in ("F", "I", "W", "B")}
    except Exception as exc:  # report, do not stop
        row["ppbook_error"] = repr(exc)
    print(json.dumps(row), flush=True)
    del model, x, dy, params
    if not cpu:
        torch.cuda.empty_cache()
