"""DualPipe and DualPipeV (DeepSeek-V3, arXiv:2412.19437). Placeholder: being written."""

from __future__ import annotations


def dualpipe(num_stages: int, num_microbatches: int):
    raise NotImplementedError("dualpipe is being written")


def dualpipev(num_stages: int, num_microbatches: int):
    raise NotImplementedError("dualpipev is being written")
