"""The slider round trip in a reader's JupyterLab: key press to new picture (issue 11).

Run: ``.venv/bin/python benchmarks/bench_browser.py [NOTEBOOK ...] [--presses N]`` (not a
test; not run in CI; nothing is asserted). Needs ``chromium`` on PATH. It starts one
JupyterLab and one headless Chromium at 1280 x 800 as tests/test_browser.py does (its
helpers in tests/), opens each notebook (default: chapters 1 and 2), runs all cells, and
presses ArrowRight and ArrowLeft in turn on each widget's enabled sliders, N presses per
notebook spread over the sliders. A round trip is timed inside the page, from the key's
``keydown`` to the ``load`` of the widget's next picture, so the driver's own latency is
not counted; a press whose setting is refused (no picture within 5 s) is counted apart.
Prints each notebook's median and the median of all, against the goal of 300 ms on a
2-core machine.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

# The browser test's server, browser and page helpers, which this benchmark shares.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from browser_page import CONTROLS, WIDGET_OUTPUT, open_notebook, run_all  # noqa: E402
from browser_support import Chromium, LabServer, stop  # noqa: E402

GOAL_MS = 300
DEFAULT = ["01_bubble.ipynb", "02_schedules.ipynb"]
WATCH = """root => {
  window.__keys = []; window.__loads = [];
  document.addEventListener('keydown', () => window.__keys.push(performance.now()), true);
  for (const img of root.querySelectorAll('img')) {
    img.addEventListener('load', () => window.__loads.push(performance.now()));
  }
}"""


def round_trips(page, widget, presses: int) -> tuple[list[float], int]:
    """Milliseconds from key press to loaded picture; and how many presses were refused."""
    widget.scroll_into_view_if_needed()
    widget.evaluate(WATCH)
    sliders = [c for c in widget.evaluate(CONTROLS) if c["kind"] == "slider" and not c["disabled"]]
    handles = widget.locator(".widget-slider .noUi-handle")
    labels = [c["label"] for c in widget.evaluate(CONTROLS) if c["kind"] == "slider"]
    times, refused = [], 0
    for press in range(presses):
        slider = sliders[press // 2 % len(sliders)]
        key = ("ArrowRight", "ArrowLeft")[press % 2]
        if slider["value"] >= slider["max"]:
            key = ("ArrowLeft", "ArrowRight")[press % 2]
        loads = page.evaluate("window.__loads.length")
        handles.nth(labels.index(slider["label"])).focus()
        page.keyboard.press(key)
        try:
            page.wait_for_function(f"window.__loads.length > {loads}", timeout=5000)
        except Exception:
            refused += 1
            continue
        times.append(page.evaluate("window.__loads.at(-1) - window.__keys.at(-1)"))
    return times, refused


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", default=DEFAULT)
    parser.add_argument("--presses", type=int, default=20, help="presses per notebook")
    args = parser.parse_args()
    executable = shutil.which("chromium")
    if executable is None:
        sys.exit("no `chromium` on PATH (Debian: apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    folder = Path(tempfile.mkdtemp(prefix="ppbook-bench-browser-"))
    server = LabServer(folder)
    browser = Chromium(executable, folder)
    everything = []
    try:
        server.wait_ready()
        with sync_playwright() as driver:
            page = (
                driver.chromium.connect_over_cdp(browser.endpoint())
                .new_context(viewport={"width": 1280, "height": 800})
                .new_page()
            )
            for notebook in args.notebooks:
                open_notebook(page, server, notebook)
                run_all(page)
                page.wait_for_selector(WIDGET_OUTPUT + " img", timeout=20_000)
                times, refused = [], 0
                widgets = page.locator(WIDGET_OUTPUT).all()
                for widget in widgets:
                    more, no = round_trips(page, widget, args.presses // len(widgets))
                    times, refused = times + more, refused + no
                everything += times
                median = f"{statistics.median(times):.0f} ms" if times else "none"
                print(
                    f"{notebook}: key press to new picture, median {median} over {len(times)} "
                    f"presses (min {min(times, default=0):.0f}, max {max(times, default=0):.0f}); "
                    f"{refused} refused"
                )
                server.shut_down_kernels()
    finally:
        stop(browser.process)
        stop(server.process)
    if everything:
        median = statistics.median(everything)
        verdict = "within" if median < GOAL_MS else "over"
        print(f"all: median {median:.0f} ms over {len(everything)} presses, {verdict} {GOAL_MS} ms")


if __name__ == "__main__":
    main()
