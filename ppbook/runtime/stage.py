"""One pipeline stage: a model part and the four computations a schedule asks of it.

- ``F`` :meth:`Stage.forward`: run the part on a micro-batch and keep what backward needs
  (the last part also computes the loss).
- ``B`` :meth:`Stage.backward`: the full backward, gradients for the stage input and for
  the weights together.
- ``I`` :meth:`Stage.backward_input` and ``W`` :meth:`Stage.backward_weight`: the same
  backward in two passes, as zero-bubble schedules split it (Qi et al. 2024, "Zero Bubble
  Pipeline Parallelism", arXiv:2401.10241, sec. 2). ``I`` computes the gradient for the
  stage input, which the previous stage is waiting for, and also the gradient at the output
  of every module that owns parameters; ``W`` later turns each of those into the module's
  weight gradients, a backward through that module alone. PyTorch's pipelining does the
  same at the level of autograd nodes (``stage_backward_input`` / ``stage_backward_weight``).

No communication here: :mod:`ppbook.runtime.execute` moves tensors between stages.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class Stage:
    """The state one stage chunk keeps between a micro-batch's forward and its backward.

    ``first``: the part takes the model input (no gradient for it is sent back).
    ``loss_fn``: given for the last part; its output is ``loss_fn(out, target) / m``, so
    that summing over the m micro-batches gives the loss of the whole batch.
    ``split_backward``: record what ``I`` and ``W`` need (zero-bubble schedules).
    ``log``: a list shared by the stages of one rank, to which each computation appends
    its action (``"1F3"``), so tests can check what really ran, in what order.
    """

    def __init__(
        self,
        stage: int,
        module: nn.Module,
        *,
        num_microbatches: int,
        first: bool,
        loss_fn: Loss | None = None,
        split_backward: bool = False,
        log: list[str] | None = None,
    ):
        self.stage = stage
        self.module = module
        self.num_microbatches = num_microbatches
        self.first = first
        self.loss_fn = loss_fn
        self.log = log if log is not None else []
        self.saved: dict[int, tuple] = {}  # micro-batch -> (input, output, module calls)
        self.weight_work: dict[int, list] = {}  # micro-batch -> what W still has to do
        self._calls: list | None = None
        if split_backward:
            for owner in self.param_owners():
                owner.register_forward_hook(self._record_call)

    def param_owners(self) -> list[nn.Module]:
        """The modules that own parameters directly (Linear, LayerNorm, ...)."""
        return [m for m in self.module.modules() if any(True for _ in m.parameters(recurse=False))]

    def _record_call(self, module: nn.Module, inputs, output) -> None:
        if self._calls is None:
            return
        if not isinstance(output, torch.Tensor):
            raise ValueError(
                f"splitting the backward needs each parameter-owning module to return one "
                f"tensor; {type(module).__name__} returned {type(output).__name__}"
            )
        if any(m is module for m, _ in self._calls):
            raise ValueError(
                f"{type(module).__name__} ran twice in one forward: splitting the backward "
                "needs each parameter-owning module to run once per micro-batch"
            )
        self._calls.append((module, output))

    # ----- F ----------------------------------------------------------------------------

    def forward(
        self, microbatch: int, x: torch.Tensor, target: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Run the part on ``x``; return its output (the scaled loss on the last part)."""
        self.log.append(f"{self.stage}F{microbatch}")
        if not self.first:  # a leaf, so that backward leaves its gradient in x.grad
            x = x.detach().requires_grad_()
        self._calls = []
        out = self.module(x)
        calls, self._calls = self._calls, None
        if self.loss_fn is not None:
            out = self.loss_fn(out, target) / self.num_microbatches  # a scalar
        self.saved[microbatch] = (x, out, calls)
        return out

    # ----- B ----------------------------------------------------------------------------

    def backward(self, microbatch: int, grad_output: torch.Tensor | None) -> torch.Tensor | None:
        """Full backward; return the gradient for the stage input (None on the first part)."""
        self.log.append(f"{self.stage}B{microbatch}")
        x, out, _ = self.saved.pop(microbatch)
        torch.autograd.backward(out, grad_output)
        return None if self.first else x.grad

    # ----- I and W ----------------------------------------------------------------------

    def backward_input(
        self, microbatch: int, grad_output: torch.Tensor | None
    ) -> torch.Tensor | None:
        """``I``: the gradient for the stage input; keep each module's output gradient for W."""
        self.log.append(f"{self.stage}I{microbatch}")
        x, out, calls = self.saved.pop(microbatch)
        outputs = [output for _, output in calls]
        wanted = outputs if self.first else [x, *outputs]
        grads = torch.autograd.grad(
            out, wanted, grad_output, retain_graph=True, allow_unused=True
        )  # the graph stays for W
        module_grads = grads if self.first else grads[1:]
        self.weight_work[microbatch] = [
            (output, grad, [w for w in module.parameters(recurse=False) if w.requires_grad])
            for (module, output), grad in zip(calls, module_grads, strict=True)
            if grad is not None
        ]
        return None if self.first else grads[0]

    def backward_weight(self, microbatch: int) -> None:
        """``W``: accumulate the weight gradients from what ``I`` kept."""
        self.log.append(f"{self.stage}W{microbatch}")
        for output, grad, params in self.weight_work.pop(microbatch):
            # retain_graph: a module's path to its own weights may cross a child's output
            torch.autograd.backward(output, grad, inputs=params, retain_graph=True)
