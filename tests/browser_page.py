"""Reading and driving a notebook page in JupyterLab for tests/test_browser.py.

Everything here goes through what a reader sees: the menu's Run All Cells, the status bar,
the cells' prompts and outputs, the sliders' handles (moved with the keyboard), their
labels and readouts. Measurements are CSS pixels at the page's viewport.
"""

from __future__ import annotations

import re
import time

NEWS = re.compile(r"notified about (official )?Jupyter news")
"""JupyterLab 4.6 asks 'Would you like to get notified about official Jupyter news?'."""
POP_UPS = ".jp-Dialog, .Toastify__toast"
"""JupyterLab's dialogs and notification toasts: a reader's first start shows none."""
WIDGET_ERROR = "Error displaying widget"
STDERR = ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
WIDGET_OUTPUT = ".jp-OutputArea-output:has(> .jupyter-widgets)"
ERROR_LINE = re.compile(r"Traceback \(most recent call last\)|^\s*\w*(Error|Exception)\b", re.M)

RUN_STATE = """() => {
  const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')]
    .map(e => e.textContent.trim());
  return {
    running: prompts.filter(t => t.includes('*')).length,
    numbered: prompts.filter(t => /\\[\\d+\\]/.test(t)).length,
    idle: [...document.querySelectorAll('#jp-main-statusbar span')]
      .some(e => /(^|\\| )Idle$/.test(e.textContent.trim())),
  };
}"""

CONTROLS = """root => [...root.querySelectorAll('.widget-slider, .widget-dropdown')]
  .filter(e => e.offsetParent !== null)
  .map(e => {
    const label = (e.querySelector('.widget-label')?.textContent || '').trim();
    const select = e.querySelector('select');
    if (select) {  // ipywidgets writes option labels with no-break spaces
      const value = (select.selectedOptions[0]?.textContent || '').replace(/\u00a0/g, ' ');
      return {label, kind: 'dropdown', value};
    }
    const handle = e.querySelector('.noUi-handle');
    const readout = (e.querySelector('.widget-readout')?.textContent || '').trim();
    // aria-valuetext holds the value itself; noUiSlider rounds aria-valuenow to one decimal
    const value = Number(handle.getAttribute('aria-valuetext'));
    return {
      label, kind: 'slider', readout, value,
      min: Number(handle.getAttribute('aria-valuemin')),
      max: Number(handle.getAttribute('aria-valuemax')),
      disabled: e.querySelector('.noUi-target').hasAttribute('disabled'),
      track: e.querySelector('.noUi-target').getBoundingClientRect().width,
    };
  })"""

FIGURE = """img => {
  const box = img.getBoundingClientRect();
  const attribute = Number(img.getAttribute('width')) || 0;
  const css = img.style.width.endsWith('px') ? parseFloat(img.style.width) : 0;
  const declared = attribute || css || img.naturalWidth;
  return {declared, shown: box.width, natural: img.naturalWidth,
          how: attribute ? 'width attribute' : css ? 'CSS width' : 'its pixels',
          hidden: img.offsetParent === null};
}"""


def open_notebook(page, server, path: str, timeout: float = 90) -> None:
    """Open ``path`` with ``?reset`` and wait until its kernel reads Idle."""
    page.goto(server.url(f"lab/tree/{path}?reset&token={server.token}"))
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=timeout * 1000)
    page.wait_for_selector("#jp-main-statusbar >> text=Idle", timeout=timeout * 1000)


def run_all(page, timeout: float = 150) -> float:
    """Run All Cells from the menu; wait until no cell runs and the kernel is idle again.

    Returns the seconds it took. Run All before the kernel connects does nothing, so
    :func:`open_notebook` waits for Idle first.
    """
    start = time.monotonic()
    page.locator("#jp-MainMenu .lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
    settled = 0
    while time.monotonic() - start < timeout:
        state = page.evaluate(RUN_STATE)
        done = state["running"] == 0 and state["numbered"] > 0 and state["idle"]
        settled = settled + 1 if done else 0
        if settled >= 3:
            return time.monotonic() - start
        time.sleep(0.3)
    raise TimeoutError(f"Run All still running after {timeout:.0f} s: {page.evaluate(RUN_STATE)}")


def wait_for_widgets(page, timeout: float = 20) -> None:
    """Widget outputs render after their cell finished: wait until none is still empty."""
    page.wait_for_function(
        """() => [...document.querySelectorAll('.jp-OutputArea-output')]
          .filter(e => e.dataset.mimeType === 'application/vnd.jupyter.widget-view+json')
          .every(e => e.textContent.trim() || e.querySelector('img, .jupyter-widgets'))""",
        timeout=timeout * 1000,
    )


def pop_ups(page) -> list[str]:
    """The text of every dialog or notification toast on the page."""
    return [" ".join(t.split())[:200] for t in page.locator(POP_UPS).all_inner_texts()]


def cell_errors(page) -> list[str]:
    """The first lines of every error a cell shows (tracebacks and exceptions on stderr)."""
    texts = [e.text_content() or "" for e in page.locator(STDERR).all()]
    return [" ".join(t.split())[:300] for t in texts if ERROR_LINE.search(t)]


def widget_text(widget) -> str:
    """The widget's readout: the text of its HTML parts, whitespace collapsed."""
    parts = widget.locator(".widget-html-content").all_inner_texts()  # table cells apart
    return " ".join(" ".join(parts).split())


def picture_sources(widget) -> list[str | None]:
    return [img.get_attribute("src") for img in widget.locator("img").all()]


def picture_shown(widget) -> bool:
    return any(img.is_visible() for img in widget.locator("img").all())


def cell_source(widget) -> str:
    """The code of the cell whose output is ``widget``."""
    return widget.evaluate(
        "e => e.closest('.jp-CodeCell').querySelector('.jp-InputArea .cm-content').innerText"
    )


def press(page, widget, label: str, key: str) -> None:
    """Focus the handle of the slider labelled ``label`` and press ``key``."""
    slider = widget.locator(".widget-slider").filter(
        has=page.locator(".widget-label", has_text=re.compile(f"^{re.escape(label)}$"))
    )
    slider.locator(".noUi-handle").first.focus()
    page.keyboard.press(key)
