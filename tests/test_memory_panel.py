"""The memory panel shows every rank, also where ranks hold the same amounts at once."""

import matplotlib

matplotlib.use("Agg")  # tests only: the package never picks a backend

import numpy as np  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from ppbook.costs import Costs  # noqa: E402
from ppbook.schedules import dualpipe, one_f_one_b  # noqa: E402
from ppbook.simulate import simulate  # noqa: E402
from ppbook.views.memory import plot_memory  # noqa: E402

DUALPIPE = simulate(dualpipe(4, 8), Costs(F=1, B=2))


def pixels_of_each_line(timeline):
    """How many pixels of the drawn panel show each rank's colour, by rank."""
    fig = Figure(figsize=(8, 3), dpi=100)
    ax = fig.add_subplot()
    plot_memory(timeline, ax, legend=False)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    image = np.asarray(canvas.buffer_rgba())[..., :3] / 255.0  # (height, width, rgb)
    return [
        int((np.abs(image - to_rgb(line.get_color())).max(axis=-1) < 0.06).sum())
        for line in ax.lines
    ]


def test_dualpipe_mirrored_ranks_hold_the_same_curves():
    # The premise: DualPipe's rank r and rank p-1-r hold the same amounts at the same times.
    assert DUALPIPE.memory(0) == DUALPIPE.memory(3)
    assert DUALPIPE.memory(1) == DUALPIPE.memory(2)


def test_every_rank_of_dualpipe_is_visible():
    fig = Figure()
    ax = fig.add_subplot()
    plot_memory(DUALPIPE, ax)
    assert [line.get_label() for line in ax.lines] == [f"rank {r}" for r in range(4)]
    # each rank's line differs from every other in colour, dashes and width
    for attribute in ("get_color", "get_linestyle", "get_linewidth"):
        values = [str(getattr(line, attribute)()) for line in ax.lines]
        assert len(set(values)) == 4, (attribute, values)
    # and shows on the drawn picture, though another rank's line lies on the same path
    seen = pixels_of_each_line(DUALPIPE)
    assert min(seen) >= 100, seen


def test_every_rank_visible_among_sixteen():
    seen = pixels_of_each_line(simulate(one_f_one_b(16, 32)))
    assert len(seen) == 16 and min(seen) >= 20, seen
