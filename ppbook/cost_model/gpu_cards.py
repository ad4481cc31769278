"""GPU cards as data: the figures of one GPU that the time model and the sizing search use
(``ppbook/data/gpu_cards.json``, each with its vendor datasheet as source).

A card gives a GPU's dense BF16 peak (TFLOP/s), its memory (GB = 10^9 bytes), its HBM
bandwidth (GB/s), its NVLink bandwidth per direction (GB/s) and the per-GPU network port
of the usual 8-GPU node (GB/s per direction). :data:`GPU_TYPES` names the cards
(``--gpu-type``); :func:`gpu_card` reads one, with a one-line error naming the known ones.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ppbook.checks import shown

CARDS_JSON = Path(__file__).resolve().parents[1] / "data" / "gpu_cards.json"
"""The cards' file, shipped inside the package."""

GPU_TYPES = ("a100", "h100", "h800", "h200")
"""The GPU types ``--gpu-type`` accepts, each a card of :data:`CARDS_JSON`."""


@dataclass(frozen=True)
class GpuCard:
    """One GPU as its datasheet prints it (see :data:`CARDS_JSON`'s ``_about``)."""

    key: str
    name: str
    peak_bf16_tflops: float
    memory_gb: float
    hbm_gbps: float
    nvlink_gbps: float
    network_gbps: float
    source: str

    def node(self) -> dict:
        """The keyword arguments of :class:`ppbook.cost_model.search_costs.Hardware` for this
        card."""
        return {
            "gpu_type": self.key,
            "gpu_memory_gb": self.memory_gb,
            "tflops": self.peak_bf16_tflops,
            "intra_node_gbps": self.nvlink_gbps,
            "inter_node_gbps": self.network_gbps,
        }


@cache
def _cards() -> dict[str, GpuCard]:
    raw = json.loads(CARDS_JSON.read_text())
    return {key: GpuCard(key=key, **raw[key]) for key in GPU_TYPES}


def gpu_card(gpu_type: str) -> GpuCard:
    """The card of ``gpu_type`` (one of :data:`GPU_TYPES`); a ValueError names the others."""
    if gpu_type not in GPU_TYPES:
        raise ValueError(f"gpu type must be one of {', '.join(GPU_TYPES)}, got {shown(gpu_type)}")
    return _cards()[gpu_type]
