"""The trusted answer: the same model, the same batch, in one process, no pipeline.

:func:`reference_run` builds the model and the batch exactly as every rank does (same
seeds) and trains it for ``config.steps`` steps, each the whole batch forward and backward
at once, then the same optimizer step (:func:`ppbook.runtime.training.make_optimizer`). A
correct pipeline gives the same loss at every step, the same gradient for every parameter
and the same parameters after the last step, up to rounding: in float64 the two agree to
about 1e-12 (:func:`assert_matches_reference`).

In bfloat16 the one process trains with the same mixed precision as the ranks
(:mod:`ppbook.runtime.precision`): bf16 weights and activations, fp32 master weights,
the whole batch's bf16 gradient added into fp32 gradient buffers, the optimizer on the
fp32 masters, copied back to bf16. The pipeline adds m bf16-rounded micro-batch gradients
in fp32 where the one process rounds the whole batch's once, and every bf16 operation on
the way rounds: the two agree within :func:`mixed_tolerance`, a bound derived from bf16's
unit roundoff, not tuned.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import nn
from torch.nn import functional

from ppbook.runtime.config import RunConfig, build_schedule, num_parts
from ppbook.runtime.models import build_blocks, rounding_depth, step_data
from ppbook.runtime.precision import MIXED, UNIT_ROUNDOFF, MasterWeights
from ppbook.runtime.result import RunResult
from ppbook.runtime.training import make_optimizer


@dataclass
class Reference:
    """What one process gives for a run: the loss of every step, the gradients of the last
    step, and the parameters after the last step's optimizer step (by whole-model name)."""

    losses: list[float]
    grads: dict[str, torch.Tensor]
    params: dict[str, torch.Tensor]


def reference_run(config: RunConfig) -> Reference:
    """Train ``config``'s model for ``config.steps`` steps in one process (in bfloat16
    with fp32 masters: its parameters and gradients are reported as the fp32 ones)."""
    blocks = build_blocks(config, num_parts(build_schedule(config)))
    model = nn.Sequential(*blocks)
    inputs, targets, _ = step_data(config, [model])
    weights = [w for w in model.parameters() if w.requires_grad]
    masters = MasterWeights(weights) if config.dtype == MIXED else None
    stepped = masters.masters if masters is not None else weights
    optimizer = make_optimizer(config, stepped) if stepped else None
    shown = {} if masters is None else masters.by_weight()
    losses = []
    for _ in range(config.steps):
        model.zero_grad(set_to_none=True)
        if masters is not None:
            masters.zero()
        loss = functional.mse_loss(model(torch.cat(inputs)), torch.cat(targets))  # whole batch
        loss.backward()
        if masters is not None:
            masters.collect()  # the whole batch's bf16 gradient, added once in fp32
        losses.append(loss.item())
        grads = {
            name: shown.get(id(p), p).grad.clone()
            for name, p in model.named_parameters()
            if shown.get(id(p), p).grad is not None
        }
        if optimizer is not None:
            optimizer.step()
        if masters is not None:
            masters.copy_back()
    params = {name: shown.get(id(p), p).detach().clone() for name, p in model.named_parameters()}
    return Reference(losses, grads, params)


def mixed_tolerance(config: RunConfig) -> float:
    """How far, relative to a tensor's largest magnitude, a bfloat16 pipeline may differ
    from the one-process run: C u, with u = 2^-8 (:data:`UNIT_ROUNDOFF`) and
    C = m + 2 d + 2.

    Where C comes from. Rounding a value to bf16 moves it by at most u of its magnitude,
    and n roundings one after another by at most about n u (to first order). The two runs
    compute the same products in the same bf16 and differ only in what is rounded:

    - the pipeline rounds each of the m micro-batch gradients of a weight to bf16 before
      adding them in fp32, where the one process rounds the whole batch's sum once: at
      most m u of the largest gradient (plus one for the one process's rounding, counted
      in the +2);
    - a gradient reaching a weight went through the forward's and the backward's bf16
      operations between that weight and the loss, each of which may round the two
      runs' values differently (the loss is scaled per micro-batch here, once there): at
      most 2 d u, with d the bf16 operations of the model's forward on its longest path
      (:func:`ppbook.runtime.models.rounding_depth`);
    - the loss itself: its mean over a micro-batch and the scaling by 1/m: +2.

    fp32 accumulation adds 2^-24 per term, negligible beside these. The bound is a worst
    case to first order; measured differences are a few u (``tests/test_runtime_bf16.py``).
    """
    depth = rounding_depth(config, num_parts(build_schedule(config)))
    return (config.num_microbatches + 2 * depth + 2) * UNIT_ROUNDOFF


def reference_step(config: RunConfig) -> tuple[float, dict[str, torch.Tensor]]:
    """The loss and every parameter's gradient of ``config``'s model in one process, at
    its initial parameters (the first step of :func:`reference_run`)."""
    first = reference_run(replace(config, steps=1))
    return first.losses[0], first.grads


def assert_matches_reference(
    result: RunResult, rtol: float | None = None, atol: float | None = None
) -> None:
    """Assert that ``result``'s losses, gradients and parameters equal the single-process ones.

    Needs a run with ``collect_grads=True``. Tolerances default to 1e-10 in float64 and
    1e-4 in float32 (summing micro-batch gradients rounds differently than one batch). In
    bfloat16 each loss, gradient and parameter may differ by :func:`mixed_tolerance` times
    its largest magnitude in the one-process run (``rtol`` and ``atol`` are then unused).
    """
    if result.grads is None:
        raise ValueError("comparing gradients needs a run with collect_grads=True")
    if result.config.dtype == MIXED:
        _assert_mixed_matches(result, reference_run(result.config))
        return
    tight = result.config.dtype == "float64"
    rtol = rtol if rtol is not None else (1e-10 if tight else 1e-4)
    atol = atol if atol is not None else (1e-12 if tight else 1e-6)
    reference = reference_run(result.config)
    schedule = result.schedule
    label = f"{schedule.name} p={schedule.num_ranks} m={schedule.num_microbatches}"
    torch.testing.assert_close(
        result.losses,
        reference.losses,
        rtol=rtol,
        atol=atol,
        msg=lambda m: f"{label}: the loss of some step differs. {m}",
    )
    for what, got, expected in (
        ("gradient of {}", result.grads, reference.grads),
        ("value of {} after the last step", result.params, reference.params),
    ):
        _same_names(label, what, got, expected)
        for name, value in expected.items():
            torch.testing.assert_close(
                got[name],
                value,
                rtol=rtol,
                atol=atol,
                msg=lambda m, name=name, what=what: f"{label}: {what.format(name)} differs. {m}",
            )


def _same_names(label: str, what: str, got: dict, expected: dict) -> None:
    """AssertionError naming the tensors that only one side of a comparison has."""
    if set(got) != set(expected):
        missing = sorted(set(got) ^ set(expected))
        raise AssertionError(f"{label}: the {what.format(missing)} is missing on one side")


def _assert_mixed_matches(result: RunResult, reference: Reference) -> None:
    """The bfloat16 comparison: each tensor within ``mixed_tolerance x max |reference|``."""
    schedule = result.schedule
    label = f"{schedule.name} p={schedule.num_ranks} m={schedule.num_microbatches} bfloat16"
    allowed = mixed_tolerance(result.config)
    losses = zip(result.losses, reference.losses, strict=True)
    pairs = [
        (f"loss of step {k}", torch.tensor(got), torch.tensor(want))
        for k, (got, want) in enumerate(losses)
    ]
    for what, got, expected in (
        ("gradient of {}", result.grads, reference.grads),
        ("value of {} after the last step", result.params, reference.params),
    ):
        _same_names(label, what, got, expected)
        pairs += [(what.format(name), got[name], value) for name, value in expected.items()]
    for what, got, want in pairs:
        got, want = got.double(), want.double()
        scale = want.abs().max().item() if want.numel() else 0.0
        worst = (got - want).abs().max().item() if want.numel() else 0.0
        if not worst <= allowed * scale:  # also catches NaN
            raise AssertionError(
                f"{label}: the {what} differs by {worst:.3g}, more than the bound "
                f"{allowed:.3g} x {scale:.3g} (C u times its largest magnitude; see "
                "ppbook.runtime.reference.mixed_tolerance)"
            )
