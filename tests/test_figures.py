"""Figures fit the notebook column, are sharp, and keep their text readable (issue 11).

Sizes are checked in display pixels: a figure's inches times its dpi, the size an image
declares (a 2x PNG declares half its pixels). The notebook column of JupyterLab 4 at a
1280 px window measured 848 px. Text must be at least 9 display pixels high.
"""

import json
import os
import struct
import subprocess
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")  # tests only: the package never picks a backend

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from ppbook.costs import Costs  # noqa: E402
from ppbook.schedule import Schedule  # noqa: E402
from ppbook.schedules import gpipe, interleaved_1f1b, one_f_one_b  # noqa: E402
from ppbook.simulate import simulate  # noqa: E402
from ppbook.timeline import Timeline  # noqa: E402
from ppbook.views.bubble import plot_bubble_vs_microbatches  # noqa: E402
from ppbook.views.figure import (  # noqa: E402
    column_figure,
    display_size,
    png_bytes,
)
from ppbook.views.gantt import plot_timeline, timeline_figure  # noqa: E402
from ppbook.views.labels import BoxLabel  # noqa: E402

COLUMN_PX = 848  # JupyterLab 4.6's output area at a 1280 x 800 window, measured in Chromium
MIN_TEXT_PX = 9  # the smallest readable text, in display pixels


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def png_pixels(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's header (its IHDR chunk), read without matplotlib."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def drawn(fig):
    """Draw ``fig`` as the notebook does (Agg) and return it."""
    fig.canvas.draw()
    return fig


def texts_shown(fig):
    """Every text drawn: non-empty, visible, and (box labels) not left out."""
    for text in fig.findobj(Text):
        if not text.get_visible() or not text.get_text().strip():
            continue
        if isinstance(text, BoxLabel) and text.shown_size is None:
            continue
        yield text


# --- size and sharpness -------------------------------------------------------------


def test_column_figure_declares_its_size_and_renders_twice_as_many_pixels():
    fig = column_figure(3.0)
    assert display_size(fig) == (750, 300)  # 7.5 x 3 in at 100 dpi
    assert display_size(fig)[0] <= 0.9 * COLUMN_PX  # shown whole, with room to spare
    fig.add_subplot().plot([0, 1], [0, 1])
    assert png_pixels(png_bytes(fig)) == (1500, 600)
    assert display_size(fig) == (750, 300)  # rendering at 2x leaves the figure as it was
    assert not plt.get_fignums()  # not a pyplot figure
    assert column_figure(2.0, pyplot=True).number in plt.get_fignums()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"height": 3.0, "width": 13}, "width <= 8.5 inches"),
        ({"height": 0}, "height (inches) to be a finite number > 0"),
        ({"height": float("nan")}, "height (inches) to be a finite number > 0"),
        ({"height": "3"}, "height (inches) to be a finite number > 0"),
    ],
)
def test_column_figure_refuses_sizes_the_column_cannot_show(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
        column_figure(**kwargs)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("memory", [True, False])
def test_timeline_figure_fits_the_column_at_full_size(memory):
    timeline = simulate(one_f_one_b(4, 8))
    fig = timeline_figure(timeline, memory=memory)
    width, height = display_size(fig)
    assert fig.dpi == 100 and width <= COLUMN_PX and height <= 800
    # shown at >= 80 % of its size even in a column 10 % narrower than measured
    assert min(1.0, 0.9 * COLUMN_PX / width) >= 0.8
    assert png_pixels(png_bytes(fig)) == (2 * width, 2 * height)
    wide = timeline_figure(timeline, memory=memory, width=8.5)
    assert display_size(wide)[0] == 850


# --- readable text ------------------------------------------------------------------


def _widget_like(timeline, dpi):
    fig = Figure(figsize=(7.5, 4.0), dpi=dpi, layout="constrained")
    FigureCanvasAgg(fig)
    plot_timeline(timeline, fig.add_subplot(2, 1, 1), memory_ax=fig.add_subplot(2, 1, 2))
    return fig


FIGURES = {
    "timeline with memory": lambda: timeline_figure(
        simulate(interleaved_1f1b(4, 8, 2), Costs(F=1, B=2, comm=0.05))
    ),
    "timeline at 72 dpi": lambda: _widget_like(simulate(one_f_one_b(4, 8)), 72),
    "measured two-rank": lambda: timeline_figure(simulate(gpipe(2, 8)), memory=False),
    "bubble curves": lambda: (
        plot_bubble_vs_microbatches(column_figure(4.2).add_subplot())["fraction", 2].figure
    ),
}


@pytest.mark.parametrize("name", FIGURES)
def test_no_text_is_smaller_than_nine_display_pixels(name):
    fig = drawn(FIGURES[name]())
    sizes = {t.get_text(): t.get_fontsize() * fig.dpi / 72 for t in texts_shown(fig)}
    assert sizes  # titles, ticks, legends, labels
    small = {text: round(px, 1) for text, px in sizes.items() if px < MIN_TEXT_PX - 1e-9}
    assert not small


# --- labels in boxes ----------------------------------------------------------------

ONE_RANK = Schedule.from_strings([["0F0", "0F1", "0F2", "0B0", "0B1", "0B2"]], name="one rank")


def _one_rank(durations):
    starts, ends, t = [], [], 0.0
    for d in durations:
        starts.append(t)
        t += d
        ends.append(t)
    return Timeline.from_arrays(ONE_RANK, [starts], [ends])


def _box_px(label):
    start, end, _, _ = label.box
    (x0, _), (x1, _) = label.axes.transData.transform([(start, 0), (end, 0)])
    return abs(x1 - x0)


def test_a_label_is_left_out_of_a_narrow_box_and_kept_in_a_wide_one():
    timeline = _one_rank([0.1, 0.5, 20, 30, 25, 23.4])  # 0.1 % and 0.5 % of the axis, then wide
    fig = drawn(timeline_figure(timeline, memory=False))
    size_at = {label.box[0]: label.shown_size for label in fig.axes[0].texts}
    sizes = [size_at.get(start) for start in timeline.starts[0]]
    assert sizes[:2] == [None, None]  # under a pixel and 3 px wide: left out
    assert sizes[2:] == pytest.approx([9.0] * 4)  # over 100 px wide: the largest size


@pytest.mark.parametrize(
    "timeline",
    [
        simulate(one_f_one_b(4, 32)),
        simulate(interleaved_1f1b(4, 8, 2), Costs(F=1, B=2, comm=0.05)),
        _one_rank([0.4, 0.9, 1.5, 3, 10, 40]),
    ],
    ids=["1f1b 4x32", "interleaved", "one rank"],
)
def test_every_label_shown_fits_its_box_and_every_one_left_out_would_not(timeline):
    fig = timeline_figure(timeline)
    renderer = fig.canvas.get_renderer()
    fig.canvas.draw()
    labels = [t for t in fig.axes[0].texts if isinstance(t, BoxLabel)]
    assert any(label.shown_size for label in labels)
    for label in labels:
        room = _box_px(label)
        if label.shown_size is not None:  # its rendered extent, measured by matplotlib
            extent = label.get_window_extent(renderer)
            assert extent.width <= room
            assert label.shown_size * fig.dpi / 72 >= MIN_TEXT_PX - 1e-9
        else:  # at the smallest readable size it would fill most of the box or overflow
            probe = Text(0, 0, label.get_text(), fontsize=label.smallest, figure=fig)
            assert probe.get_window_extent(renderer).width > 0.8 * room - 2


def test_labels_can_be_forced_into_every_box_at_the_smallest_readable_size():
    timeline = _one_rank([0.1, 0.5, 20, 30, 25, 23.4])
    fig = drawn(timeline_figure(timeline, memory=False, labels=True))
    sizes = sorted(label.shown_size for label in fig.axes[0].texts)
    assert len(sizes) == 6 and sizes[0] == pytest.approx(MIN_TEXT_PX * 72 / fig.dpi)
    fig = drawn(timeline_figure(timeline, memory=False, labels=False))
    assert not fig.axes[0].texts


def test_labels_on_hatched_boxes_sit_on_a_light_patch_in_dark_text():
    timeline = simulate(interleaved_1f1b(2, 4, 2), Costs(F=1.0, B=2.0, comm=0.1))
    fig = drawn(timeline_figure(timeline, memory=False))
    labels = [t for t in fig.axes[0].texts if t.shown_size is not None]
    hatched = [t for t in labels if t.hatched]
    plain = [t for t in labels if not t.hatched]
    assert hatched and plain
    chunk_of = {s: c for r in range(2) for c, s in enumerate(timeline.schedule.stages_on(r))}
    later = {
        (iv.start, rank)
        for rank, row in enumerate(timeline.intervals)
        for iv in row
        if chunk_of[iv.action.stage] > 0
    }
    assert {(t.box[0], round((t.box[2] + t.box[3]) / 2)) for t in hatched} <= later
    for label in hatched:
        patch = label.get_bbox_patch()
        assert patch is not None and patch.get_visible()
        assert min(patch.get_facecolor()[:3]) > 0.9  # light behind the digits
        assert sum(to_rgb(label.get_color())) < 0.5  # dark digits on it
    assert all(label.get_bbox_patch() is None for label in plain)


# --- shared time axes ---------------------------------------------------------------


@pytest.mark.parametrize("longer_first", [True, False])
def test_timelines_on_a_shared_time_axis_all_show_to_the_longest_makespan(longer_first):
    short = simulate(one_f_one_b(2, 8), Costs(F=1.0, B=2.0))
    long = simulate(gpipe(2, 8), Costs(F=1.5, B=3.0))
    assert long.makespan > 1.3 * short.makespan
    fig, axes = plt.subplots(2, 1, sharex=True)
    order = (long, short) if longer_first else (short, long)
    for ax, timeline in zip(axes, order, strict=True):
        plot_timeline(timeline, ax=ax)
    for ax in axes:
        assert ax.get_xlim() == pytest.approx((0.0, long.makespan))


def test_a_reused_axes_follows_its_new_timeline_both_ways():
    short = simulate(one_f_one_b(2, 4))
    long = simulate(gpipe(2, 16))
    fig, (ax, memory_ax) = plt.subplots(2, 1, sharex=True)
    for timeline in (long, short, long):  # as a widget redraws: remove, then plot again
        for axes in (ax, memory_ax):
            for artist in [*axes.collections, *axes.texts, *axes.lines]:
                artist.remove()
        plot_timeline(timeline, ax, memory_ax=memory_ax)
        assert ax.get_xlim() == memory_ax.get_xlim() == pytest.approx((0.0, timeline.makespan))


def test_unshared_axes_keep_their_own_limits():
    short, long = simulate(one_f_one_b(2, 4)), simulate(gpipe(2, 16))
    fig, (top, bottom) = plt.subplots(2, 1)
    plot_timeline(long, ax=top)
    plot_timeline(short, ax=bottom)
    assert bottom.get_xlim() == pytest.approx((0.0, short.makespan))
    assert top.get_xlim() == pytest.approx((0.0, long.makespan))


# --- notebooks ----------------------------------------------------------------------

IPYTHON_SCRIPT = textwrap.dedent(
    """
    import base64, json, struct
    import matplotlib
    matplotlib.use("module://matplotlib_inline.backend_inline")
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config
    config = Config()
    config.HistoryManager.enabled = False
    shell = InteractiveShell.instance(config=config)
    import matplotlib.pyplot as plt
    from ppbook.views.figure import setup_notebook
    plt.close(plt.figure())  # pyplot settles its backend's settings on the first figure
    before = dict(matplotlib.rcParams)
    setup_notebook()
    fig, ax = plt.subplots(figsize=(7.5, 3))
    ax.plot([0, 1], [0, 1])
    data, metadata = shell.display_formatter.format(fig)
    png = data["image/png"]
    png = base64.b64decode(png) if isinstance(png, str) else png
    print(json.dumps({
        "pixels": struct.unpack(">II", png[16:24]),
        "declared": metadata.get("image/png", {}),
        "rc_same": dict(matplotlib.rcParams) == before,
    }))
    """
)


def test_setup_notebook_makes_inline_figures_2x_pngs_that_declare_their_size(tmp_path):
    env = dict(os.environ, IPYTHONDIR=str(tmp_path), MPLBACKEND="Agg")
    run = subprocess.run(
        [sys.executable, "-c", IPYTHON_SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    width, height = out["pixels"]
    declared = out["declared"]
    assert declared == {"width": width // 2, "height": height // 2}
    assert 600 <= declared["width"] <= 750  # 7.5 in at 100 dpi, cropped to its content
    assert out["rc_same"]


def test_setup_notebook_outside_ipython_changes_nothing():
    from ppbook.views.figure import setup_notebook

    before = dict(matplotlib.rcParams)
    assert setup_notebook() is None
    assert dict(matplotlib.rcParams) == before
