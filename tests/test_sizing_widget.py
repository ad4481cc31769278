"""The sizing calculator, driven without a browser through update() and its controls."""

import matplotlib

matplotlib.use("Agg")  # tests only: the package never picks a backend

import pytest  # noqa: E402
from widget_layout import check_controls, check_picture  # noqa: E402

from ppbook.sizing import size  # noqa: E402
from ppbook.sizing_costs import A100_SXM_80GB, Hardware  # noqa: E402
from ppbook.views.colors import KIND_COLORS  # noqa: E402
from ppbook.widgets.sizing import (  # noqa: E402
    MODEL_CARDS,
    TOP,
    SizingCalculator,
    sizing_calculator,
)

PNG = b"\x89PNG\r\n\x1a\n"
MODEL = "Megatron 1.7B (Table 1)"


@pytest.fixture(scope="module")
def calculator():
    return sizing_calculator(model=MODEL, gpu="A100 SXM 80 GB", gpus=8, global_batch=64)


def boxes_drawn(calculator):
    return sum(
        len(c.get_paths()) for c in calculator.axes.collections if c.get_label() in KIND_COLORS
    )


def test_shows_the_searchs_ranking_and_the_best_step(calculator):
    assert isinstance(calculator, SizingCalculator)
    want = size(MODEL_CARDS[MODEL], 64, Hardware(8, utilisation=0.5, **A100_SXM_80GB), top=TOP)
    got = calculator.result
    assert [o.config for o in got.ranked] == [o.config for o in want.ranked]
    html = calculator.readout.value
    assert "1.7B parameters, global batch 64, 8 GPUs of 80 GB" in html
    for option in want.ranked:
        assert f"<td style='padding:0 6px'>{option.step_time_s:.3f}</td>" in html
    best = want.best.config
    timeline = calculator.timeline
    assert timeline.schedule.num_ranks == best.pp
    assert timeline.schedule.num_microbatches == best.num_microbatches
    assert timeline.time_unit == "s"
    assert timeline.makespan == pytest.approx(want.best.pipeline_s)
    assert bytes(calculator.image.value).startswith(PNG)
    assert boxes_drawn(calculator) == len(timeline.schedule)
    assert calculator.axes.get_xlabel() == "time (s)"


def test_update_searches_again_and_redraws_in_the_same_figure(calculator):
    figure, axes = calculator.figure, calculator.axes
    result = calculator.update(gpus=16, global_batch=128, recompute="full")
    assert result.hardware.num_gpus == 16 and result.global_batch == 128
    assert {o.config.recompute for o in result.ranked} == {"full"}
    assert calculator.figure is figure and calculator.axes is axes
    assert boxes_drawn(calculator) == len(calculator.timeline.schedule)  # old boxes gone


def test_nothing_fits_says_the_closest_and_why(calculator):
    calculator.update(model="GPT-3 175B", gpus=8, recompute="search")
    assert calculator.result.best is None and calculator.timeline is None
    html = calculator.readout.value
    assert "no configuration fits; closest: tp = " in html and "GB &gt; 80 GB" in html
    layout = calculator.image.layout
    assert layout.visibility == "hidden" and layout.display is None  # hidden, space kept
    calculator.update(model=MODEL, gpus=8, global_batch=64)  # and it recovers
    assert calculator.result.best is not None
    check_picture(calculator.image)


def test_moving_a_control_searches_again(calculator):
    calculator.update(model=MODEL, gpus=8, global_batch=64, gpu="A100 SXM 80 GB")
    before = calculator.result.best.step_time_s
    calculator.controls["gpu"].value = "H100 SXM 80 GB"
    assert calculator.result.hardware.tflops == 989.0
    assert calculator.result.best.step_time_s < before


def test_a_value_a_control_cannot_take_is_refused(calculator):
    with pytest.raises(ValueError, match="GPUs must be one of"):
        calculator.update(gpus=12)
    with pytest.raises(ValueError, match="utilisation must be in"):
        calculator.update(utilisation=0.9)
    with pytest.raises(ValueError, match="unknown control"):
        calculator.update(speed=2)


def test_layout_wraps_controls_and_shows_a_sharp_picture(calculator):
    controls = calculator.children[0]
    assert len(controls.children) == len(calculator.controls)
    check_controls(controls)
    check_picture(calculator.image)


def test_the_model_picker_offers_today_s_cards_with_their_memory_choices():
    from ppbook.cost_model.model_cards import model_card
    from ppbook.widgets.sizing_explorer import MODELS

    assert {"llama3-8b", "mixtral-8x7b", "deepseek-v3"} <= set(MODELS)
    picker = sizing_calculator(model="llama3-8b", gpu="H100 SXM 80 GB", gpus=8, global_batch=64)
    card = model_card("llama3-8b")
    assert picker.result.shape == card.shape() and picker.result.shape.seq_len == 8192
    assert f"{picker.result.params / 1e9:.1f}B parameters" in picker.readout.value
    want = size(card.shape(), 64, Hardware(8, utilisation=0.5), top=TOP)
    assert [o.config for o in picker.result.ranked] == [o.config for o in want.ranked]
    picker.update(model="deepseek-v3", gpus=1024, global_batch=1024)
    layout = picker.result.layout  # DeepSeek-V3's report: BF16 Adam moments, recomputation
    assert layout.moment_bytes == 2 and layout.recompute_norm and layout.recompute_mla_up
