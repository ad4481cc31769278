"""The book as a reader meets it: JupyterLab in headless Chromium at 1280 x 800 (issue 11).

One JupyterLab server (127.0.0.1, a token, temporary workspace and settings folders, a
temporary copy of notebooks/) and one Debian Chromium driven by Playwright serve every
notebook: the start page and each chapter that builds a ppbook widget (found from its
imports, so a new chapter is covered; student copies of assignments are never opened).
For each: open it with ``?reset``, wait for the kernel to be idle, Run All Cells, then
check that no cell shows an error and no widget "Error displaying widget"; that no pop-up
shows (a dialog or a notification: the news prompt is off in the environment's settings);
that every slider track is at least 150 px wide and every figure is shown at 80 % of the
size it declares or more; and that moving each slider with the keyboard changes the
picture and makes the readout show the numbers ppbook computes here for the new value
(tests/browser_expected.py); a refused setting keeps the picture's space. Element
screenshots go to $PPBOOK_SHOTS or a temporary folder, printed at the start. Without
``chromium`` on PATH the test is skipped, saying why. Deselect with ``-m "not browser"``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import pytest
from browser_expected import RULES, controls_by_symbol, shows, symbol, widget_modules
from browser_page import (
    CONTROLS,
    FIGURE,
    NEWS,
    WIDGET_ERROR,
    WIDGET_OUTPUT,
    cell_errors,
    cell_source,
    open_notebook,
    picture_shown,
    picture_sources,
    pop_ups,
    press,
    run_all,
    wait_for_widgets,
    widget_text,
)
from browser_support import NOTEBOOKS, Chromium, LabServer, stop, widget_notebooks

pytestmark = pytest.mark.browser

WIDTH, HEIGHT = 1280, 800
MIN_TRACK = 150  # px: a slider a reader can drag
MIN_SHOWN = 0.8  # of the size a figure declares
WAIT = 10  # s for a readout to show a slider's new value
ROUND_TRIPS: list[float] = []


class Lab:
    def __init__(self, server: LabServer, page, shots: Path, say) -> None:
        self.server, self.page, self.shots, self.say = server, page, shots, say


@pytest.fixture(scope="module")
def lab(request, tmp_path_factory):
    executable = shutil.which("chromium")
    if executable is None:
        pytest.skip("no `chromium` on PATH (Debian: apt-get install -y chromium); not run")
    playwright = pytest.importorskip("playwright.sync_api", reason="Playwright not installed")
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")

    def say(line: str) -> None:
        """Print past pytest's capture: timings and the screenshots' folder always show."""
        if reporter is None or capture is None:
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)

    shots = Path(os.environ.get("PPBOOK_SHOTS") or tempfile.mkdtemp(prefix="ppbook-shots-"))
    shots.mkdir(parents=True, exist_ok=True)
    say(f"browser test: element screenshots in {shots}")
    folder = tmp_path_factory.mktemp("jupyterlab")
    started = time.monotonic()
    server = LabServer(folder)
    request.addfinalizer(lambda: stop(server.process))
    browser = Chromium(executable, folder)
    request.addfinalizer(lambda: stop(browser.process))
    server.wait_ready()
    driver = playwright.sync_playwright().start()
    request.addfinalizer(driver.stop)
    context = driver.chromium.connect_over_cdp(browser.endpoint()).new_context(
        viewport={"width": WIDTH, "height": HEIGHT}
    )
    say(f"browser test: server and browser up in {time.monotonic() - started:.1f} s")
    yield Lab(server, context.new_page(), shots, say)
    if ROUND_TRIPS:
        say(
            f"browser test: slider key press to right readout and picture, median "
            f"{statistics.median(ROUND_TRIPS) * 1000:.0f} ms over {len(ROUND_TRIPS)} moves"
        )
    say(f"browser test: {time.monotonic() - started:.1f} s in all")


@pytest.mark.parametrize("notebook", widget_notebooks())
def test_notebook_reads_well_in_jupyterlab(lab, notebook):
    started = time.monotonic()
    page, stem = lab.page, Path(notebook).stem
    open_notebook(page, lab.server, notebook)
    problems = []
    for text in pop_ups(page):
        fix = " (the environment's settings turn it off: run `make install`)"
        problems.append(f"a pop-up shows: {text!r}{fix if NEWS.search(text) else ''}")
    ran = run_all(page)
    wait_for_widgets(page)
    problems += [f"a cell shows an error: {error}" for error in cell_errors(page)]
    if page.get_by_text(WIDGET_ERROR).count():
        problems.append(f"a widget shows {WIDGET_ERROR!r}")
    measured = time.monotonic()
    found, shown = figure_problems(lab, stem)
    problems += found
    figures = time.monotonic() - measured
    code = "\n".join(
        "".join(cell["source"])
        for cell in json.loads((NOTEBOOKS / notebook).read_text())["cells"]
        if cell["cell_type"] == "code"
    )
    modules = widget_modules(code)
    widgets = page.locator(WIDGET_OUTPUT).all()
    if modules and not widgets:
        problems.append(f"imports {sorted(modules)} but shows no widget")
    moved = time.monotonic()
    for index, widget in enumerate(widgets):
        problems += widget_problems(lab, widget, modules, f"{stem}_widget{index}")
    moved = time.monotonic() - moved
    lab.server.shut_down_kernels()
    lab.say(
        f"browser test: {notebook}: {time.monotonic() - started:.1f} s (Run All {ran:.1f} s, "
        f"{len(shown)} figures in {figures:.1f} s, smallest shown at "
        f"{min(shown, default=1):.0%} of its size, {len(widgets)} widget(s) {moved:.1f} s), "
        f"{len(problems)} problem(s)"
    )
    assert not problems, f"{notebook} at {WIDTH} x {HEIGHT} (screenshots in {lab.shots}):\n" + (
        "\n".join(f"- {problem}" for problem in problems)
    )


def figure_problems(lab: Lab, stem: str) -> tuple[list[str], list[float]]:
    """Every picture in an output shown at 80 % of its declared width or more; the problems
    and each picture's shown share of its declared width."""
    problems, shown = [], []
    for index, img in enumerate(lab.page.locator(".jp-OutputArea-output img").all()):
        img.scroll_into_view_if_needed()
        size = img.evaluate(FIGURE)
        if size["hidden"] or not size["declared"]:
            continue
        shown.append(size["shown"] / size["declared"])
        if size["shown"] < MIN_SHOWN * size["declared"]:
            shoot(lab, img, f"{stem}_figure{index}.png")
            problems.append(
                f"figure {index} ({stem}_figure{index}.png) shown {size['shown']:.0f} px wide, "
                f"{size['shown'] / size['declared']:.0%} of the {size['declared']:.0f} px it "
                f"declares by {size['how']} ({size['natural']} px of image)"
            )
    return problems, shown


def widget_problems(lab: Lab, widget, modules: dict, stem: str) -> list[str]:
    """Slider tracks wide enough; each slider moved right (or left at its end) and back."""
    page = lab.page
    widget.scroll_into_view_if_needed()
    source = cell_source(widget)
    named = {modules[n] for n in modules if re.search(rf"\b{n}\s*\(", source)}
    module = (named or set(modules.values()) or {None}).pop()
    controls = widget.evaluate(CONTROLS)
    sliders = [c for c in controls if c["kind"] == "slider"]
    problems = [
        f"{stem}: slider '{c['label']}' track {c['track']:.0f} px wide (< {MIN_TRACK} px)"
        for c in sliders
        if c["track"] < MIN_TRACK
    ]
    shoot(lab, widget, f"{stem}.png")
    rule = RULES.get(module)
    if rule is None:
        return [
            *problems,
            f"{stem}: no rule in tests/browser_expected.py for ppbook.widgets.{module}",
        ]
    problem = readout_problem(page, widget, rule, "as first shown", time.monotonic())
    problems += [f"{stem}: {problem}"] if problem else []
    for slider in sliders:
        if slider["disabled"]:
            continue
        label = slider["label"]
        there, back = ("ArrowRight", "ArrowLeft")
        if slider["value"] >= slider["max"]:
            there, back = back, there
        for key in (there, back):
            before = {
                "sources": picture_sources(widget),
                "height": widget.bounding_box()["height"],
                "value": value_of(widget, label),
            }
            pressed = time.monotonic()
            press(page, widget, label, key)
            try:
                page.wait_for_function(
                    "([root, label, old]) => [...root.querySelectorAll('.widget-slider')].some("
                    "s => s.querySelector('.widget-label').textContent.trim() === label && "
                    "s.querySelector('.widget-readout').textContent.trim() !== old)",
                    arg=[widget.element_handle(), label, before["value"]],
                    timeout=5000,
                )
            except Exception:
                problems.append(f"{stem}: {key} on slider '{label}' did not move it")
                break
            moved = f"after {key} on '{label}' ({before['value']} -> {value_of(widget, label)})"
            problem = readout_problem(page, widget, rule, moved, pressed, before)
            problems += [f"{stem}: {problem}"] if problem else []
            if key == there:
                shoot(lab, widget, f"{stem}_{symbol(label)}.png")
    return problems


def shoot(lab: Lab, element, name: str) -> None:
    """A screenshot of ``element`` whole: the window grows taller for it (same width, so
    the same layout), since the notebook panel clips what lies below the window."""
    height = element.bounding_box()["height"]
    tall = height > HEIGHT / 2  # the notebook panel shows about 650 of the window's 800 px
    if tall:
        lab.page.set_viewport_size({"width": WIDTH, "height": int(height) + HEIGHT})
    try:
        element.scroll_into_view_if_needed()
        element.screenshot(path=str(lab.shots / name))
    finally:
        if tall:
            lab.page.set_viewport_size({"width": WIDTH, "height": HEIGHT})


def value_of(widget, label: str) -> str:
    return next(c["readout"] for c in widget.evaluate(CONTROLS) if c["label"] == label)


def readout_problem(page, widget, rule, moved: str, pressed: float, before=None) -> str | None:
    """Wait until the readout shows what ``rule`` computes for the controls as they read
    now (a control may settle after another moved); then check the picture."""
    computed: dict[tuple, object] = {}
    text, expected = "", None
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        controls = widget.evaluate(CONTROLS)
        values = controls_by_symbol(controls)
        key = tuple(sorted(values.items()))
        if key not in computed:
            try:
                computed[key] = rule(values)
            except KeyError as missing:
                labels = [c["label"] for c in controls]
                return f"the rule needs a control {missing} and the widget shows {labels}"
        expected = computed[key]
        text = widget_text(widget)
        if expected.refusal is not None:
            done = " ".join(expected.refusal.split()) in text
        else:
            done = all(shows(text, value) for value in expected.numbers.values())
            done = done and (before is None or picture_sources(widget) != before["sources"])
        if done:
            break
        time.sleep(0.05)
    else:
        if expected.refusal is not None:
            return f"{moved}: the readout does not give the refusal {expected.refusal!r}: {text!r}"
        missing = {k: round(v, 4) for k, v in expected.numbers.items() if not shows(text, v)}
        if missing:
            return f"{moved}: the readout does not show {missing}: {text[:300]!r}"
        return f"{moved}: the picture did not change"
    if before is not None:
        ROUND_TRIPS.append(time.monotonic() - pressed)
    if expected.refusal is None and not picture_shown(widget):
        return f"{moved}: no picture shown"
    if before is not None and widget.bounding_box()["height"] < 0.9 * before["height"]:
        return (
            f"{moved}: the widget shrank from {before['height']:.0f} to "
            f"{widget.bounding_box()['height']:.0f} px "
            "(a refused setting keeps the picture's space)"
        )
    return None
