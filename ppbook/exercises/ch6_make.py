"""Exercises 6.7 to 6.10 of chapter 6, which make the reader derive, construct or implement
(``notebooks/06_memory.ipynb``); :mod:`ppbook.exercises.ch6` registers them with the rest.

Each answer is judged by what makes it right, against an independent answer:

- 6.7 (derive): a sympy expression for the bytes a Llama-style layer keeps per token,
  evaluated on drawn shapes against :func:`ppbook.cost_model.memory_bytes.layer_activation_bytes`
  (whose terms ``tests/test_memory_torch.py`` checks against PyTorch's saved tensors);
- 6.8 (construct): a recomputation mode per stage, simulated (:func:`ppbook.simulate.simulate`
  with each stage's own costs) and measured by :func:`~ppbook.cost_model.memory_bytes.peak_memory`;
- 6.9 (construct): a layout of Llama 3 70B, simulated and measured the same way;
- 6.10 (implement): a function that counts the bytes a torch module saves for its backward,
  run on attention and SwiGLU blocks of drawn shapes built here and compared with
  :func:`~ppbook.cost_model.memory_bytes.layer_activation_terms`. torch is imported only
  inside that check.
"""

from __future__ import annotations

import random
from functools import cache

import sympy as sp

from ppbook.checks import shown
from ppbook.cost_model.flops import stage_values
from ppbook.cost_model.memory_bytes import (
    RECOMPUTE,
    ModelShape,
    Parallel,
    layer_activation_bytes,
    layer_activation_terms,
    peak_memory,
)
from ppbook.cost_model.model_cards import model_card
from ppbook.cost_model.search_costs import GB
from ppbook.costs import Costs
from ppbook.exercises import exercise, integer, number, right, wrong
from ppbook.exercises.ch6_jobs import MODEL_13B, SPEED, run
from ppbook.schedules import build
from ppbook.simulate import simulate

# ----- derive: a Llama layer's bytes per token -------------------------------------------

NAMES = ("h", "a", "g", "d_ff", "e", "t")
"""The symbols of exercise 6.7's answer, matched by name: hidden size, query heads,
key/value heads, MLP width, bytes an element, tensor-parallel size."""

_BASE = {"h": 4096, "a": 32, "g": 8, "d_ff": 14336, "e": 2, "t": 2}
"""A shape whose every symbol can double and stay a valid layer (for the hints)."""


def _shapes(count: int = 12, seed: int = 67) -> list[dict[str, int]]:
    """``count`` drawn shapes: t | g | a, h = a times a head width, t | d_ff."""
    rng = random.Random(seed)
    out = [dict(_BASE)]
    while len(out) < count:
        t = rng.choice((1, 2, 4, 8))
        g = t * rng.randint(1, 4)
        a = g * rng.randint(1, 8)
        d_ff = t * rng.randint(8, 4000)
        width = rng.choice((16, 32, 64, 128, 192))
        out.append({"h": a * width, "a": a, "g": g, "d_ff": d_ff, "e": rng.choice((2, 4)), "t": t})
    return out


def _per_token(v: dict[str, int], **changes) -> float:
    """Bytes one layer keeps per token on one rank, from the memory model (``changes``:
    the slips, a layout or layer the question does not ask about)."""
    layer = {"gated_mlp": True, "kv_heads": v["g"], "dropout": False} | {
        k: changes.pop(k) for k in ("gated_mlp", "kv_heads", "dropout") if k in changes
    }
    t = changes.pop("t", v["t"])
    shape = ModelShape(
        layers=1, hidden=v["h"], heads=v["a"], vocab=32, seq_len=16 * t, ffn_hidden=v["d_ff"],
        norm="rmsnorm", linear_bias=False, position_embeddings=False, tied_embeddings=False,
        bytes_per_element=v["e"], **layer,
    )  # fmt: skip
    parallel = Parallel(tp=t, **({"sp": True, "attention": "flash"} | changes))
    return layer_activation_bytes(shape, parallel) / shape.seq_len


_SLIPS = (
    (
        {"sp": False},
        "the norms' inputs and outputs whole on every rank",
        "with sequence parallelism every tensor of the layer is split over the t ranks.",
    ),
    (
        {"kv_heads": None},
        "K and V with all a heads, as unfused attention repeats them",
        "FlashAttention keeps K and V as grouped-query attention makes them: g heads of h/a.",
    ),
    (
        {"gated_mlp": False},
        "two d_ff-wide tensors in the MLP, as GELU's MLP keeps",
        "SwiGLU keeps its gate and up outputs and the down projection's input: 3 d_ff.",
    ),
    (
        {"dropout": True},
        "GPT's dropout masks",
        "Llama trains without dropout: no masks.",
    ),
    (
        {"t": 1},
        "the whole layer, not one rank's share",
        "each of the t ranks keeps 1/t of every tensor here.",
    ),
)


def _evaluate(expr: sp.Expr, v: dict[str, int]) -> float:
    by_name = {x: v[x.name] for x in expr.free_symbols}
    return number(expr.subs(by_name), f"an expression that gives a finite number at {_at(v)}")


@exercise(
    "6.7",
    "Derive, as a sympy expression in h, a, g, d_ff, e and t, the bytes one Llama-style layer "
    "(RMSNorm, grouped-query attention with a query and g key/value heads of width h/a, "
    "FlashAttention, a SwiGLU MLP of width d_ff, no dropout, e bytes an element) keeps per "
    "token of its micro-batch on one of t tensor-parallel ranks with sequence parallelism, "
    "no recomputation.",
    kind="derive",
    solution="Per token, on one rank (sequence parallelism splits every tensor by t): the "
    "two norms' inputs and outputs, 4eh/t; Q, K and V, e(a + 2g)(h/a)/t, since FlashAttention "
    "keeps K and V as narrow as grouped-query attention makes them; the attention's output "
    "(the output projection's input), eh/t; FlashAttention's fp32 logsumexp, 4a/t; SwiGLU's "
    "gate and up outputs and the down projection's input, 3e d_ff/t. In all "
    "`(e*(4*h + (a + 2*g)*h/a + h + 3*d_ff) + 4*a)/t`; for Llama 3 70B at t = 8 "
    "(h = 8192, a = 64, g = 8, d_ff = 28672, e = 2) 34,336 bytes a token, 281 MB a layer at "
    "s = 8192. No s x s term: what grows with the sequence is only the tokens.",
    answer_name="answer_7",
)
def _llama_layer_bytes(answer):
    if not isinstance(answer, sp.Expr):
        return wrong(
            f"this exercise wants a sympy expression, got {shown(answer)}.",
            "h, a, g, d_ff, e, t = sympy.symbols('h a g d_ff e t', positive=True)",
        )
    unknown = sorted(x.name for x in answer.free_symbols if x.name not in NAMES)
    if unknown:
        extra = " (per token: leave s and b out)" if {"s", "b"} & set(unknown) else ""
        return wrong(
            f"the expression uses {', '.join(unknown)}; it may use only {', '.join(NAMES)}{extra}.",
            "h, a, g, d_ff, e, t = sympy.symbols('h a g d_ff e t', positive=True)",
        )
    shapes = _shapes()
    given = [_evaluate(answer, v) for v in shapes]
    truth = [_per_token(v) for v in shapes]
    if all(abs(x - y) <= 1e-9 * y for x, y in zip(given, truth, strict=True)):
        return right(
            f"equal to the memory model's layer on {len(shapes)} drawn shapes; Llama 3 70B at "
            f"t = 8 keeps {_evaluate(answer, {**_LLAMA_70B, 't': 8}):,.0f} bytes a token."
        )
    for changes, what, hint in _SLIPS:
        slip = [_per_token(v, **dict(changes)) for v in shapes]
        if all(abs(x - y) <= 1e-9 * y for x, y in zip(given, slip, strict=True)):
            return wrong(f"the expression counts {what}.", hint)
    lse = [y - 4 * v["a"] / v["t"] for v, y in zip(shapes, truth, strict=True)]
    for share, what in ((0, "no logsumexp"), (1, "a logsumexp of e bytes")):
        slip = [y + share * v["e"] * v["a"] / v["t"] for v, y in zip(shapes, lse, strict=True)]
        if all(abs(x - y) <= 1e-9 * y for x, y in zip(given, slip, strict=True)):
            return wrong(
                f"the expression keeps {what}.",
                "FlashAttention keeps one fp32 logsumexp (4 bytes) per head and token.",
            )
    return wrong(
        f"at {_at(_BASE)} it gives {_evaluate(answer, _BASE):,.6g} bytes a token; the layer "
        f"keeps {_per_token(_BASE):,.6g}.",
        f"it is wrong in how it grows with {_wrong_growth(answer)}: list what each block keeps.",
    )


_LLAMA_70B = {"h": 8192, "a": 64, "g": 8, "d_ff": 28672, "e": 2}


def _at(v: dict[str, int]) -> str:
    return ", ".join(f"{k} = {x}" for k, x in v.items())


def _wrong_growth(answer: sp.Expr) -> str:
    """The symbols whose doubling changes the answer's error (the slip's direction)."""
    error = _evaluate(answer, _BASE) - _per_token(_BASE)
    named = []
    for name in NAMES:
        doubled = {**_BASE, name: 2 * _BASE[name]}
        if name == "a":  # h/a must stay whole
            doubled["h"] = _BASE["h"]
        moved = _evaluate(answer, doubled) - _per_token(doubled)
        if abs(moved - error) > 1e-9 * _per_token(doubled):
            named.append(name)
    return " and ".join(named) if named else "none of them: a constant is off"


# ----- construct: a recomputation mode per stage ------------------------------------------

STAGES, MICROBATCHES, SAMPLES = 8, 16, 4
"""Exercise 6.8's pipeline: 1F1B, p = 8, m = 16 micro-batches of b = 4 samples."""


def per_stage_run(modes: list[str]):
    """1F1B on the 13B model with stage ``k`` recomputing ``modes[k]``: the timeline (each
    stage's own costs, seconds at :data:`~ppbook.exercises.ch6.SPEED`) and each rank's
    :class:`~ppbook.cost_model.memory_bytes.MemoryBreakdown` under its own mode."""
    schedule = build("1f1b", STAGES, MICROBATCHES)
    layouts = {x: Parallel(recompute=x, microbatch_size=SAMPLES) for x in set(modes)}
    values = {x: stage_values(schedule, MODEL_13B, par, SPEED) for x, par in layouts.items()}
    keys = values[modes[0]]
    mixed = {key: [values[x][key][k] for k, x in enumerate(modes)] for key in keys}
    timeline = simulate(schedule, Costs(**mixed, time_unit="s"))
    memory = [peak_memory(timeline, MODEL_13B, layouts[x])[k] for k, x in enumerate(modes)]
    return timeline, memory


def _least_that_fits() -> list[str]:
    """Per rank, the first mode of :data:`RECOMPUTE` (none, selective, full) that fits 80 GB:
    a rank's peak depends only on its own mode (1F1B's order fixes how many micro-batches it
    holds), and less recomputation never lengthens a step."""
    fits = {x: per_stage_run([x] * STAGES)[1] for x in RECOMPUTE}
    return [next(x for x in RECOMPUTE if fits[x][k].total <= 80 * GB) for k in range(STAGES)]


@exercise(
    "6.8",
    "1F1B with p = 8, m = 16 micro-batches of b = 4 samples, the 13B model on 80 GB devices: "
    'construct a recomputation mode per stage ("none", "selective" or "full", a list of 8) '
    "that fits every rank with the shortest simulated step.",
    kind="construct",
    solution="Rank r holds p - r micro-batches of its 5 layers, so each rank needs its own "
    "mode: the least recomputation that fits it. Rank 0 (8 micro-batches) fits only with "
    "full recomputation (36.9 GB; 90.6 GB with selective), ranks 1 to 5 with selective "
    "(78.2 GB down to 49.7 GB; rank 5 would need 100 GB without), ranks 6 and 7 need none "
    '(76.1 and 58.8 GB): `["full"] + ["selective"] * 5 + ["none"] * 2`, 14.6 s a step '
    'against 18.2 s with "full" everywhere.',
    answer_name="answer_8",
)
def _recompute_per_stage(answer):
    if isinstance(answer, str | bytes) or not hasattr(answer, "__iter__"):
        return wrong(f"this exercise wants a list of {STAGES} modes, got {shown(answer)}.")
    modes = [x.strip().lower() if isinstance(x, str) else x for x in answer]
    if len(modes) != STAGES or any(x not in RECOMPUTE for x in modes):
        return wrong(
            f"this exercise wants {STAGES} modes, each one of {', '.join(RECOMPUTE)}; got "
            f"{shown(answer)}."
        )
    timeline, memory = per_stage_run(modes)
    over = [x for x in memory if x.total > 80 * GB]
    if over:
        top = over[0]
        return wrong(
            f'rank {top.rank} needs {_gb(top.total)} with "{modes[top.rank]}", over 80 GB.',
            f"rank {top.rank} holds {STAGES - top.rank} micro-batches of b = {SAMPLES} "
            "samples at once: it needs more recomputation.",
        )
    best = _least_that_fits()
    best_step = per_stage_run(best)[0].makespan
    if timeline.makespan <= best_step * (1 + 1e-9):
        return right(
            f"every rank fits ({', '.join(f'{x.total / GB:.3g}' for x in memory)} GB) in a "
            f'{timeline.makespan:.3g} s step; "full" everywhere takes '
            f"{per_stage_run(['full'] * STAGES)[0].makespan:.3g} s."
        )
    rank = next(k for k in range(STAGES) if RECOMPUTE.index(modes[k]) > RECOMPUTE.index(best[k]))
    lighter = [best[k] if k == rank else x for k, x in enumerate(modes)]
    fits = per_stage_run(lighter)
    return wrong(
        f"every rank fits, in a {timeline.makespan:.3g} s step; but rank {rank} fits with "
        f'"{best[rank]}" too ({_gb(fits[1][rank].total)}), and the step would take '
        f"{fits[0].makespan:.3g} s.",
        "give each rank the least recomputation that fits it: ranks that hold fewer "
        "micro-batches need less.",
    )


def _gb(x: float) -> str:
    return f"{x / GB:.4g} GB"


# ----- construct: a layout for Llama 3 70B -------------------------------------------------

MAX_GPUS = 24
"""Exercise 6.9's budget: GPUs in one pipeline's layout (tp p dp cp)."""


@exercise(
    "6.9",
    "Llama 3 70B (its model card: s = 8192) trained with 1F1B, m = 16 micro-batches of "
    "b = 1 sample, on 80 GB devices: construct a layout, a pair (p, Parallel(...)), that "
    f"fits every rank on at most {MAX_GPUS} GPUs (tp p dp cp) without full recomputation.",
    kind="construct",
    solution="The static state, 18 bytes for each of 70.6 billion parameters, is 1,270 GB: "
    "over 24 GPUs about 53 GB each, whatever the split (ZeRO shards it over dp, which "
    "costs GPUs too). Rank 0 then holds p micro-batches of L/p layers, 80 layers' worth "
    "whatever p, so a layer may keep at most about 0.3 GB on it: only t = 8 with sequence "
    "parallelism gets there (FlashAttention, or selective recomputation of the scores). "
    '`(3, Parallel(tp=8, sp=True, attention="flash"))`: 24 GPUs, rank 0 at 77.1 GB. '
    "Without sequence parallelism the norms' region stays whole on every rank; with p = 4 "
    "and t = 8 it would fit too, on 32 GPUs.",
    answer_name="answer_9",
)
def _llama_layout(answer):
    if (
        isinstance(answer, str | bytes)
        or not hasattr(answer, "__len__")
        or len(answer) != 2
        or not isinstance(answer[1], Parallel)
    ):
        return wrong(
            f"this exercise wants a pair (p, Parallel(...)), got {shown(answer)}.",
            "from ppbook.cost_model.memory_bytes import Parallel",
        )
    p = integer(answer[0], f"p, a whole number of stages from 1 to {MICROBATCHES}", 1, 16)
    par = answer[1]
    if par.microbatch_size != 1:
        return wrong(f"the exercise fixes b = 1 sample a micro-batch, got {par.microbatch_size}.")
    if par.recompute == "full":
        return wrong("the exercise asks for a layout without full recomputation.")
    gpus = par.tp * p * par.dp * par.cp
    if gpus > MAX_GPUS:
        return wrong(
            f"tp p dp cp = {par.tp} x {p} x {par.dp} x {par.cp} = {gpus} GPUs, over {MAX_GPUS}.",
            "each of tp, p, dp and cp multiplies the GPUs one copy of the model takes.",
        )
    llama = model_card("llama3-70b").shape()
    memory = run("1f1b", llama, par, p, MICROBATCHES)[1]
    top = max(memory, key=lambda x: x.total)
    static = top.total - top.activations
    if top.total <= 80 * GB:
        return right(
            f"{gpus} GPUs; the busiest rank, rank {top.rank}, needs {_gb(top.total)} "
            f"({_gb(static)} static, {_gb(top.activations)} activations)."
        )
    said = (
        f"rank {top.rank} needs {_gb(top.total)} ({_gb(static)} static, "
        f"{_gb(top.activations)} activations), over 80 GB."
    )
    if static > 80 * GB:
        return wrong(
            said,
            "18 bytes a parameter, shared by the tp p ranks (and ZeRO's dp); context "
            "parallelism splits the sequence, not the weights.",
        )
    if par.attention == "standard" and par.recompute == "none":
        return wrong(said, "at s = 8192 the attention's s x s scores dwarf the rest of a layer.")
    if par.tp > 1 and not par.sp:
        return wrong(
            said, "with tensor parallelism alone the norms' region is whole on every rank."
        )
    sharing = par.tp * p * (par.dp if par.zero else 1)  # ranks the static state is shared by
    if sharing < MAX_GPUS:
        return wrong(
            said,
            f"the static state leaves {_gb(80 * GB - static)} for activations: share the 18 "
            f"bytes a parameter over more of your {MAX_GPUS} GPUs.",
        )
    return wrong(
        said,
        "rank 0 holds p micro-batches of L/p layers, L layers' worth whatever p: what one "
        "layer keeps on a rank must shrink.",
    )


# ----- implement: the bytes a module saves for its backward ---------------------------------


@cache
def _blocks():
    """The two blocks 6.10 runs the reader's function on (torch imported here, once)."""
    import torch
    import torch.nn.functional as F  # noqa: N812 (PyTorch's own spelling)

    class FusedSwiGLU(torch.autograd.Function):
        """silu(gate) * up, keeping only its input [gate, up] (Megatron-LM's fused SwiGLU)."""

        @staticmethod
        def forward(ctx, gate_up):
            gate, up = gate_up.chunk(2, dim=-1)  # two views of one storage
            ctx.save_for_backward(gate, up)
            return F.silu(gate) * up

        @staticmethod
        def backward(ctx, grad):
            gate, up = (x.detach().requires_grad_() for x in ctx.saved_tensors)
            with torch.enable_grad():
                (F.silu(gate) * up).backward(grad)
            return torch.cat((gate.grad, up.grad), dim=-1)

    class Attention(torch.nn.Module):
        """Grouped-query attention with FlashAttention: Q, K, V, output projections."""

        def __init__(self, shape: ModelShape, dtype):
            super().__init__()
            h, d = shape.hidden, shape.head_size
            self.heads, self.kv_heads, self.d = shape.heads, shape.num_kv_heads, d
            self.q = torch.nn.Linear(h, self.heads * d, bias=False, dtype=dtype)
            self.k = torch.nn.Linear(h, self.kv_heads * d, bias=False, dtype=dtype)
            self.v = torch.nn.Linear(h, self.kv_heads * d, bias=False, dtype=dtype)
            self.o = torch.nn.Linear(self.heads * d, h, bias=False, dtype=dtype)

        def forward(self, x):  # (b, s, h)
            batch, seq, _ = x.shape

            def split(y, n):  # (b, s, n d) -> (b, n, s, d), a view
                return y.view(batch, seq, n, self.d).transpose(1, 2)

            q = split(self.q(x), self.heads)
            k, v = split(self.k(x), self.kv_heads), split(self.v(x), self.kv_heads)
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            return self.o(out.transpose(1, 2).reshape(batch, seq, -1))  # (b, s, h)

    class Mlp(torch.nn.Module):
        """A SwiGLU MLP: [gate, up] in one projection, the fused SwiGLU, the down projection."""

        def __init__(self, shape: ModelShape, dtype):
            super().__init__()
            h, width = shape.hidden, shape.ffn_size
            self.gate_up = torch.nn.Linear(h, 2 * width, bias=False, dtype=dtype)
            self.down = torch.nn.Linear(width, h, bias=False, dtype=dtype)

        def forward(self, x):  # (b, s, h)
            return self.down(FusedSwiGLU.apply(self.gate_up(x)))

    return torch, Attention, Mlp


def _drawn_blocks(seed: int):
    """Two cases of attention and MLP at drawn shapes and dtypes: (name, module, input,
    bytes the memory model says the block keeps)."""
    torch, attention, mlp = _blocks()
    rng = random.Random(seed)
    out = []
    for dtype in (torch.bfloat16, torch.float32):
        kv = rng.choice((1, 2))
        heads, width = kv * rng.choice((2, 3)), rng.choice((4, 8))
        batch, seq = rng.randint(1, 3), rng.randint(5, 12)
        shape = ModelShape(
            1, heads * width, heads, 32, seq, kv_heads=kv, ffn_hidden=rng.randint(10, 40),
            gated_mlp=True, dropout=False, bytes_per_element=torch.finfo(dtype).bits // 8,
        )  # fmt: skip
        terms = layer_activation_terms(shape, Parallel(microbatch_size=batch, attention="flash"))
        block_input = terms["norm_outputs"] / 2  # the norm's output: the block's input
        sizes = {
            "attention": block_input + terms["qkv"] + terms["softmax_lse"]
            + terms["attention_output"],
            "SwiGLU MLP": block_input + terms["mlp_hidden"],
        }  # fmt: skip
        for name, make in (("attention", attention), ("SwiGLU MLP", mlp)):
            torch.manual_seed(rng.randrange(2**31))
            x = torch.randn(batch, seq, shape.hidden, dtype=dtype, requires_grad=True)
            label = (
                f"{name}, {str(dtype).removeprefix('torch.')}, b s h = {batch} {seq} {shape.hidden}"
            )
            out.append((label, make(shape, dtype), x, sizes[name]))
    return out


def _slips(module, x) -> dict[str, float]:
    """What the usual slips count for ``module`` on ``x``, from one pass under the hooks."""
    torch = _blocks()[0]
    params = {w.untyped_storage().data_ptr() for w in module.parameters()}
    saved = []  # (storage, its bytes, the tensor's bytes, elements, bytes an element)

    def pack(tensor):
        storage = tensor.untyped_storage()
        sizes = (storage.nbytes(), tensor.nbytes, tensor.numel(), tensor.element_size())
        saved.append((storage.data_ptr(), *sizes))
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        module(x)
    first = {}
    for ptr, *sizes in saved:
        first.setdefault(ptr, sizes)
    own = {ptr: v for ptr, v in first.items() if ptr not in params}
    return {
        "the parameters too: the weights each linear layer saves": sum(
            n for n, *_ in first.values()
        ),
        "each saved tensor, not each storage once: the block's input, which several "
        "layers save, comes in more than once": sum(
            size for ptr, _, size, _, _ in saved if ptr not in params
        ),
        "each storage once, but with the size of the first tensor seen in it, not the "
        "storage's bytes": sum(size for _, size, _, _ in own.values()),
        "elements, not bytes": sum(n // each for n, _, _, each in own.values()),
        "the elements of the first tensor seen in each storage, not bytes": sum(
            count for _, _, count, _ in own.values()
        ),
    }


@exercise(
    "6.10",
    "Implement saved_bytes(module, x): run module(x) and return the bytes of the tensors "
    "autograd saves for the backward, each storage once, parameters left out.",
    kind="implement",
    solution="Use `torch.autograd.graph.saved_tensors_hooks`: its pack hook sees every "
    "tensor saved for the backward. Leave out the storages of `module.parameters()`, count "
    "each storage once by `tensor.untyped_storage().data_ptr()` (Q, K and V linears all save "
    "the same input; the SwiGLU saves two views of one tensor) and add "
    "`storage.nbytes()`:\n\n```python\ndef saved_bytes(module, x):\n    weights = "
    "{w.untyped_storage().data_ptr() for w in module.parameters()}\n    kept = {}\n\n"
    "    def pack(tensor):\n        storage = tensor.untyped_storage()\n        if "
    "storage.data_ptr() not in weights:\n            kept[storage.data_ptr()] = "
    "storage.nbytes()\n        return tensor\n\n    with torch.autograd.graph."
    "saved_tensors_hooks(pack, lambda tensor: tensor):\n        module(x)\n    return "
    "sum(kept.values())\n```",
    answer_name="answer_10",
)
def _saved_bytes(answer):
    if not callable(answer):
        return wrong(f"this exercise wants a function saved_bytes(module, x), got {shown(answer)}.")
    cases = _drawn_blocks(seed=610)
    for label, module, x, truth in cases:
        try:
            given = answer(module, x)
        except Exception as error:  # the reader's code: any failure is a verdict  # noqa: BLE001
            return wrong(f"on the {label} block it raised {type(error).__name__}: {error}.")
        given = number(given, "a number of bytes from saved_bytes")
        if given == truth:
            continue
        for slip, value in _slips(module, x).items():
            if abs(given - value) < 0.5:
                return wrong(
                    f"on the {label} block it gives {given:,.0f} bytes; the block keeps "
                    f"{truth:,.0f} for its backward.",
                    f"it counts {slip}.",
                )
        return wrong(
            f"on the {label} block it gives {given:,.0f} bytes; the block keeps {truth:,.0f}.",
            "count what the pack hook of torch.autograd.graph.saved_tensors_hooks sees, "
            "each storage once, without the parameters.",
        )
    return right(
        f"equal to the memory model's count on {len(cases)} blocks of drawn shapes, "
        "bfloat16 and float32: attention with FlashAttention and GQA, and a SwiGLU MLP."
    )
