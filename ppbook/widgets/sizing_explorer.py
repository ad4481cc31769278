"""Chapter 8's sizing calculator: a model card and a cluster in; the fastest configurations
that fit, and the best one's simulated step, out.

``sizing_calculator()`` builds the control; a notebook only displays it. Every change runs
:func:`ppbook.cost_model.sizing_search.size` (the ``top`` fastest options, as ``ppbook size``
does), shows
them as a table with their step time in seconds, bubble fraction f = idle / total and
memory per GPU in GB (10^9 bytes), and draws the best one's pipeline step
(:func:`ppbook.views.gantt.plot_timeline`, times in seconds, activations in bytes) into
one reused matplotlib ``Figure`` shown as a 2x PNG at its declared size
(:mod:`ppbook.widgets.layout`: controls that wrap, a slider track >= 150 px). When
nothing fits, the readout says which configuration came closest and why it failed, and
the picture is hidden but keeps its space.

The model picker offers today's model cards (:data:`ppbook.cost_model.model_cards.MODEL_CARDS`:
Llama 3, Mixtral, DeepSeek-V3, GPT-3, read from their Hugging Face configs, each at its
training sequence length and with the memory choices its report lists) and the chapter's
GPT-style shapes (:data:`MODEL_CARDS`, MLP 4h, ppbook's
:class:`~ppbook.cost_model.memory_bytes.ModelShape`); GPU cards (:data:`GPU_CARDS`) are an
8-GPU node's figures (:mod:`ppbook.cost_model.search_costs`). The search runs with
``ppbook size``'s defaults (flash attention, sequence parallelism, Megatron's 18 bytes a
parameter). Tests drive it through :meth:`SizingCalculator.update`.
"""

from __future__ import annotations

import html

import ipywidgets as widgets

from ppbook.cost_model.memory_bytes import RECOMPUTE, ModelShape
from ppbook.cost_model.model_cards import MODEL_CARDS as CARD_NAMES
from ppbook.cost_model.model_cards import model_card
from ppbook.cost_model.search_costs import GPU_CARDS, MODEL_CARDS, Hardware
from ppbook.cost_model.search_result import SizingResult
from ppbook.cost_model.sizing_search import size
from ppbook.timeline import Timeline
from ppbook.views.figure import column_figure
from ppbook.views.gantt import plot_timeline
from ppbook.widgets.explorer import Explorer
from ppbook.widgets.layout import TEXT, clear_axes, hide_picture, picture, readout, show_figure

HEIGHT = 3.6  # inches; the width is the notebook column's (ppbook.views.figure)
TOP = 8
MAX_DRAWN = 30_000
"""Most actions drawn: a longer step is described, not drawn (drawing it takes minutes)."""
MODELS = (*CARD_NAMES, *MODEL_CARDS)
"""The model picker's choices: today's cards by name, then the chapter's GPT-style shapes."""
CLUSTER_SIZES = (8, 16, 32, 64, 128, 256, 512, 1024)
"""The GPU counts offered."""


def model_of(name: str) -> tuple[ModelShape, dict]:
    """The shape picked by ``name`` and the memory choices of its card (keyword arguments
    of :func:`~ppbook.cost_model.sizing_search.size`; none for the GPT-style shapes)."""
    if name in CARD_NAMES:
        card = model_card(name)
        return card.shape(), dict(card.memory_choices)
    return MODEL_CARDS[name], {}


class SizingCalculator(Explorer):
    """Model, GPU, cluster size, global batch, recomputation and utilisation; the ranked
    options (``readout``) and the best one's step (``image`` of ``figure``).

    After each change (or :meth:`update`) ``result`` is the
    :class:`~ppbook.cost_model.search_result.SizingResult` and ``timeline`` the best option's
    simulated step (``None`` when nothing fits, or when it is too long to draw).
    """

    def __init__(
        self,
        model: str = "Megatron 18.4B (Table 1)",
        gpu: str = "A100 SXM 80 GB",
        gpus: int = 64,
        global_batch: int = 256,
        recompute: str = "search",
        utilisation: float = 0.5,
    ) -> None:
        controls = {
            "model": widgets.Dropdown(options=list(MODELS), description="model"),
            "gpu": widgets.Dropdown(options=list(GPU_CARDS), description="GPU"),
            "gpus": widgets.Dropdown(options=list(CLUSTER_SIZES), description="GPUs"),
            "global_batch": widgets.Dropdown(
                options=[32, 64, 128, 256, 512, 1024], description="global batch"
            ),
            "recompute": widgets.Dropdown(options=["search", *RECOMPUTE], description="recompute"),
            "utilisation": widgets.FloatSlider(
                min=0.2, max=0.8, step=0.05, description="utilisation"
            ),
        }
        self.readout = readout()
        self.figure = column_figure(HEIGHT, layout=None)
        self.image = picture(self.figure)
        self.axes = self.figure.add_axes((0.1, 0.14, 0.88, 0.8))
        self.result: SizingResult | None = None
        self.timeline: Timeline | None = None
        values = {
            "model": model,
            "gpu": gpu,
            "gpus": gpus,
            "global_batch": global_batch,
            "recompute": recompute,
            "utilisation": utilisation,
        }
        self._start(controls, [self.readout, self.image], values)

    def update(self, **values) -> SizingResult:
        """Set some controls (names as in :attr:`state`), then search and redraw once."""
        super().update(**values)
        return self.result

    def refresh(self) -> None:
        """Search the current state; redraw the table and the best option's step."""
        state = self.state
        hardware = Hardware(
            num_gpus=state["gpus"],
            utilisation=state["utilisation"],
            **GPU_CARDS[state["gpu"]],
        )
        recompute = None if state["recompute"] == "search" else state["recompute"]
        shape, choices = model_of(state["model"])
        self.result = size(
            shape,
            state["global_batch"],
            hardware,
            recompute=recompute,
            top=TOP,
            **choices,
        )
        best = self.result.best
        self.timeline = None
        if best is not None and best.config.num_microbatches * best.config.pp < MAX_DRAWN // 3:
            self.timeline = self.result.timeline(best)
        self.readout.value = _table_html(self.result)
        if self.timeline is None:
            hide_picture(self.image)
            return
        clear_axes(self.axes)  # keep the axes, drop the last drawing
        plot_timeline(self.timeline, self.axes, title=False, legend=False)
        show_figure(self.image, self.figure)


def _table_html(result: SizingResult) -> str:
    """The model and cluster, the ranked options, and (when none fits) the closest miss."""
    head = (
        f"<b>{result.params / 1e9:.1f}B parameters, global batch {result.global_batch}, "
        f"{result.hardware.num_gpus} GPUs of {result.hardware.gpu_memory_gb:g} GB</b><br>"
    )
    if result.best is None:
        closest = result.closest()
        why = f"closest: {closest.where}: {closest.reason}" if closest else "nothing to try"
        return (
            f"<div style='{TEXT}'>{head}"
            f"<span style='color:#b00020'>no configuration fits; {html.escape(why)}</span></div>"
        )
    cells = "".join(
        f"<th style='padding:0 6px'>{name}</th>"
        for name in (
            "tp",
            "pp",
            "dp",
            "schedule",
            "v",
            "b",
            "m",
            "recompute",
            "step s",
            "bubble f",
            "GB/GPU",
        )
    )
    rows = []
    for option in result.ranked:
        c = option.config
        values = (
            c.tp,
            c.pp,
            c.dp,
            c.schedule,
            c.v or "",
            c.microbatch_size,
            c.num_microbatches,
            c.recompute,
            f"{option.step_time_s:.3f}",
            f"{option.bubble_fraction:.3f}",
            f"{option.memory_bytes / 1e9:.1f}",
        )
        rows.append(
            "<tr>" + "".join(f"<td style='padding:0 6px'>{v}</td>" for v in values) + "</tr>"
        )
    note = (
        "step s: the simulated pipeline step plus the data-parallel all-reduce, in seconds; "
        "bubble f = idle / total of the pipeline; GB/GPU: the fullest GPU (10^9 bytes). "
        "Below: the best option's step (time in s)."
    )
    return (
        f"<div style='{TEXT}'>{head}<table><tr>{cells}</tr>{''.join(rows)}"
        f"</table>{html.escape(note)}</div>"
    )


def sizing_calculator(**kwargs) -> SizingCalculator:
    """The sizing calculator widget (an ipywidgets ``VBox``); see :class:`SizingCalculator`."""
    return SizingCalculator(**kwargs)
