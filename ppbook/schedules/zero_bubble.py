"""Zero-bubble schedules (Qi et al. 2024, arXiv:2401.10241). Placeholder: being written."""

from __future__ import annotations


def zb_h1(num_stages: int, num_microbatches: int):
    raise NotImplementedError("zb-h1 is being written")


def zb_h2(num_stages: int, num_microbatches: int):
    raise NotImplementedError("zb-h2 is being written")


def zb_v(num_stages: int, num_microbatches: int):
    raise NotImplementedError("zb-v is being written")
