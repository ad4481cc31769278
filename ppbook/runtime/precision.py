"""Mixed-precision training in bfloat16, as Megatron-LM keeps it (``dtype="bfloat16"``).

The scheme. The model's weights and activations are bf16: every forward and backward
computes in bf16, and the messages between ranks carry bf16 activations and gradients
(half the bytes of float32). Beside each bf16 weight the rank keeps an fp32 *master*
copy, and the fp32 buffer the gradients add up in (Megatron-LM's ``main_grad``). After
each backward that produced weight gradients (a ``B``, or a ``W`` of a split backward),
:meth:`MasterWeights.collect` adds that micro-batch's bf16 gradient into the fp32 buffer
and clears the bf16 one, so that the m micro-batches of a step add up in fp32, not in
bf16. The optimizer (its state, Adam's moments, in fp32) steps the fp32 masters, with the
fp32 sums as their gradients; :meth:`MasterWeights.step` then copies the masters back
into the bf16 weights, rounding each once.

Why this scheme and not ``torch.autocast`` over fp32 weights: it is what pipeline
trainers run. Megatron-LM's ``Float16OptimizerWithFloat16Params`` and its distributed
optimizer hold bf16 model weights with fp32 main parameters and fp32 ``main_grad``
accumulation across micro-batches (``accumulate_allreduce_grads_in_fp32``); TorchTitan's
FSDP2 ``MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)`` computes with
bf16 copies of fp32 sharded weights and steps the fp32 ones. In a pipeline the bf16
weights also make every activation, and so every message between stages, bf16 by
construction; autocast would keep fp32 weights and send whatever dtype each part ends in.

float32 and float64 runs keep no masters: there the weights train in their own dtype.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

MIXED = "bfloat16"
"""The ``RunConfig.dtype`` that trains in mixed precision."""

UNIT_ROUNDOFF = 2.0**-8
"""bf16's unit roundoff u: 8 significant bits (7 stored), so rounding to bf16 changes a
number by at most u = 2^-8 of its magnitude (Higham, *Accuracy and Stability of Numerical
Algorithms*, sec. 2.1, with t = 8)."""


def compute_dtype(dtype: str) -> torch.dtype:
    """The dtype the model computes in: ``dtype`` itself (bf16 in mixed precision)."""
    return getattr(torch, dtype)


def master_dtype(dtype: str) -> torch.dtype:
    """The dtype weights, gradient sums and optimizer state are kept in: fp32 in mixed
    precision, else ``dtype``."""
    return torch.float32 if dtype == MIXED else getattr(torch, dtype)


class MasterWeights:
    """fp32 master copies of bf16 ``weights``, with the fp32 buffers their gradients add
    up in (each master's ``.grad``). Build the optimizer on :attr:`masters`."""

    def __init__(self, weights: Sequence[nn.Parameter]):
        self.weights = list(weights)
        self.masters = [nn.Parameter(w.detach().to(torch.float32).clone()) for w in self.weights]
        for master in self.masters:
            master.grad = torch.zeros_like(master)

    def by_weight(self) -> dict[int, nn.Parameter]:
        """Each weight's master, by the weight's ``id``."""
        return dict(zip(map(id, self.weights), self.masters, strict=True))

    def collect(self) -> None:
        """Add each weight's bf16 gradient (one micro-batch's) into its fp32 buffer, in fp32,
        and clear it, so that the next micro-batch's gradient starts from nothing."""
        for weight, master in zip(self.weights, self.masters, strict=True):
            if weight.grad is not None:
                master.grad.add_(weight.grad.to(torch.float32))
                weight.grad = None

    def zero(self) -> None:
        """Empty the fp32 gradient buffers, for a new step."""
        for master in self.masters:
            master.grad.zero_()

    @torch.no_grad()
    def copy_back(self) -> None:
        """Round the fp32 masters into the bf16 weights the model computes with."""
        for weight, master in zip(self.weights, self.masters, strict=True):
            weight.copy_(master)

    def step(self, optimizer: torch.optim.Optimizer | None) -> None:
        """The optimizer step on the fp32 masters, then the masters copied back to bf16."""
        if optimizer is not None:
            optimizer.step()
        self.copy_back()
