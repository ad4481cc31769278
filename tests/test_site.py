"""The book's website (``make site``, site/): built once, every page opened in Chromium.

A session fixture builds the site as ``make site`` does (site/build.py: each notebook
executed once, reusing ``_build/executed/`` when nothing changed); that execution is also
the chapters' nbval-style check (no cell raises). Without Debian's ``chromium`` the
browser tests are skipped, saying why; the build is checked all the same.
The pages are served from ``_build/html/`` on 127.0.0.1 and opened in headless Chromium at
1280 px (Playwright over Debian's Chromium; never ``playwright install``). Any request to
another host is refused and counted as an error: the site must render offline. On every
page: no console error; every math element typeset by MathJax and no raw ``$...$`` left in
the text; every image loaded, with alt text, and shown at 80 % of the width it declares or
more; every local link (and its #fragment) leads somewhere. The search page finds "bubble".
A full-page screenshot of each page goes to ``$PPBOOK_SITE_SHOTS`` or a temporary folder,
printed at the start. ``PPBOOK_SITE_BUILT=1`` checks the site already built instead.
"""

from __future__ import annotations

import base64
import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "site"))
import prepare  # noqa: E402  (site/prepare.py: which notebooks become pages)

HTML = ROOT / "_build" / "html"
WIDTH, HEIGHT = 1280, 800
MIN_SHOWN = 0.8  # of the width an image declares
BUILD_TIMEOUT = 1500  # s: every notebook executed from scratch on two busy cores
RAW_MATH = re.compile(r"(?<![\w$])\$[^$\n]{1,200}\$(?![\w$])|\\\(|\\\[")

SITE_TIMEOUT = pytest.mark.timeout(BUILD_TIMEOUT + 600)


def say(request, line: str) -> None:
    """Print past pytest's capture: the timings and the screenshots' folder always show."""
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)


@pytest.fixture(scope="session")
def site(request) -> Path:
    """``_build/html`` as ``make site`` builds it (once per session). With
    ``PPBOOK_SITE_BUILT=1`` the site already in ``_build/html`` (``make site`` just ran) is
    checked as it is."""
    if os.environ.get("PPBOOK_SITE_BUILT") == "1" and (HTML / "index.html").exists():
        say(request, "site test: checking the site already in _build/html (PPBOOK_SITE_BUILT=1)")
        return HTML
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(ROOT / "site" / "build.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
    )
    if done.returncode != 0:
        said = [
            line
            for line in (done.stdout + done.stderr).splitlines()
            if ("error" in line.lower() or "warning:" in line.lower()) and "IPKernelApp" not in line
        ]
        pytest.fail("make site failed:\n" + "\n".join(said[-30:] or [done.stderr[-4000:]]))
    say(request, f"site test: site built in {time.monotonic() - started:.0f} s")
    return HTML


@SITE_TIMEOUT
def test_every_chapter_ran_from_a_fresh_kernel_without_an_error(site):
    """The build executes each chapter once, in a fresh kernel from notebooks/, and stops
    on any cell that raises: the check nbval makes of notebooks that store no outputs, so
    nbval leaves the chapters to this test (notebooks/conftest.py)."""
    for notebook in prepare.pages():
        executed = json.loads((prepare.EXECUTED / notebook.name).read_text())
        code = [c for c in executed["cells"] if c["cell_type"] == "code"]
        assert code and all(c.get("execution_count") for c in code), notebook.name
        errors = [o for c in code for o in c.get("outputs", ()) if o["output_type"] == "error"]
        assert not errors, f"{notebook.name}: {errors[0].get('ename')}"


@SITE_TIMEOUT
def test_every_notebook_is_a_page_of_the_site(site):
    pages = {p.name for p in site.glob("*.html")}
    assert "index.html" in pages
    wanted = {p.stem + ".html" for p in prepare.pages()} | {
        "references.html",
        "cli.html",
        "api.html",
        "guide_running.html",
        "guide_sizing.html",
        "guide_instructors.html",
    }
    assert wanted <= pages, f"pages missing: {sorted(wanted - pages)}"
    for name in wanted:
        text = (site / name).read_text()
        assert "traceback" not in re.findall(r'class="([^"]*)"', text), f"{name}: an error output"
        assert "Traceback (most recent call last)" not in text, f"{name} shows a traceback"
    # the committed notebook, without outputs, is a download on each chapter's page
    for notebook in prepare.pages():
        page = (site / (notebook.stem + ".html")).read_text()
        links = re.findall(rf'href="(_downloads/[0-9a-f]+/{re.escape(notebook.name)})"', page)
        assert links, f"{notebook.stem}.html has no download link for {notebook.name}"
        downloaded = json.loads((site / links[0]).read_text())
        assert downloaded == json.loads(notebook.read_text())


@SITE_TIMEOUT
def test_instructor_material_stays_off_the_site(site):
    """The site is for readers and students: the notebooks it offers are the pages' own and
    the assignments' student copies, never an instructor copy; the start page keeps no
    guide for instructors."""
    student = ROOT / "notebooks" / "assignments" / "student"
    offered = [*prepare.pages(), *student.glob("*.ipynb")]
    allowed = {json.dumps(json.loads(p.read_text()), sort_keys=True) for p in offered}
    for path in site.rglob("*.ipynb"):
        content = json.dumps(json.loads(path.read_text()), sort_keys=True)
        assert content in allowed, (
            f"not a page's notebook or a student copy: {path.relative_to(site)}"
        )
    start = (site / "00_start.html").read_text()
    assert "For instructors" not in start and "Instructor guide" not in start
    assert "BEGIN SOLUTION" not in start


def executed(cells: list[str], folder: Path) -> dict:
    """A notebook of ``cells`` run as site/prepare.py runs one (its first cell the alt-text
    hook, removed afterwards), as plain JSON."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(c) for c in [prepare.ALT_HOOK, *cells]]
    NotebookClient(notebook, timeout=120, resources={"metadata": {"path": str(folder)}}).execute()
    del notebook.cells[0]
    return json.loads(nbformat.writes(notebook))


def test_a_figure_becomes_an_image_with_its_titles_as_alt_text(tmp_path):
    """Without a kernel: the PNG inline, alt text from the titles and labels set here."""
    notebook = executed(
        [
            "%config InlineBackend.figure_formats = ['retina']",  # as ppbook.views.figure does
            "import matplotlib.pyplot as plt\n"
            "fig, (a, b) = plt.subplots(1, 2, figsize=(6, 2))\n"
            "fig.suptitle('two panels')\n"
            "a.set_title('left'); a.set_xlabel('time'); b.set_ylabel('memory')\n"
            "plt.show()",
        ],
        tmp_path,
    )
    static = prepare.make_static(notebook, "99_test.ipynb")
    images = [
        o["data"]["text/html"]
        for c in static["cells"]
        for o in c.get("outputs", [])
        if "text/html" in o.get("data", {})
    ]
    assert len(images) == 1, images
    assert 'alt="Figure: two panels; left, x: time; y: memory"' in images[0]
    assert 'src="data:image/png;base64,' in images[0]
    # a 2x PNG shown at its display size: half its pixels
    png = base64.b64decode(re.search(r"base64,([^\"]+)", images[0]).group(1))
    assert f"width:{int.from_bytes(png[16:20], 'big') // 2}px" in images[0]


def test_a_widget_becomes_its_first_state(tmp_path):
    """A ppbook explorer built with p = 4, m = 12: its sliders drawn at those values, its
    readout and its picture kept, the widget state dropped, the live line added."""
    notebook = executed(
        [
            "from ppbook.widgets.bubble_explorer import bubble_explorer\n"
            "bubble_explorer(num_stages=4, num_microbatches=12)"
        ],
        tmp_path,
    )
    static = prepare.make_static(notebook, "99_test.ipynb")
    assert "widgets" not in static["metadata"]
    (output,) = static["cells"][-1]["outputs"]
    shown = output["data"]["text/html"]
    assert re.search(r'stages p <input type="range"[^>]* value="4" disabled', shown), shown[:600]
    assert re.search(r'micro-batches m <input type="range"[^>]* value="12" disabled', shown)
    assert "p = 4, m = 12" in shown  # the readout
    assert shown.count('src="data:image/png;base64,') == 1
    assert "make book" in shown and "notebooks/99_test.ipynb" in shown


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # the test reports what matters itself
        pass


@pytest.fixture(scope="module")
def browser(request, site):
    executable = shutil.which("chromium")
    if executable is None:
        pytest.skip("no `chromium` on PATH (Debian: apt-get install -y chromium); not run")
    playwright = pytest.importorskip("playwright.sync_api", reason="Playwright not installed")
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(site))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    request.addfinalizer(server.shutdown)
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    driver = playwright.sync_playwright().start()
    request.addfinalizer(driver.stop)
    chromium = driver.chromium.launch(executable_path=executable, args=["--no-sandbox"])
    request.addfinalizer(chromium.close)
    context = chromium.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    offsite: list[str] = []

    def only_this_site(route) -> None:
        if route.request.url.startswith(base) or route.request.url.startswith("data:"):
            route.continue_()
        else:
            offsite.append(route.request.url)
            route.abort()

    context.route("**/*", only_this_site)
    shots = Path(
        os.environ.get("PPBOOK_SITE_SHOTS") or tempfile.mkdtemp(prefix="ppbook-site-shots-")
    )
    shots.mkdir(parents=True, exist_ok=True)
    say(request, f"site test: page screenshots in {shots}")
    return context.new_page(), base, shots, offsite


PAGE_FACTS = """() => {
  const problems = [];
  for (const img of document.querySelectorAll("article img, main img")) {
    const label = (img.alt || img.src.slice(0, 60)).slice(0, 80);
    if (!img.complete || img.naturalWidth === 0) problems.push(`image not loaded: ${label}`);
    if (!img.alt || !img.alt.trim())
      problems.push(`image without alt text: ${img.src.slice(0, 60)}`);
    const declared = parseFloat(img.style.width) || parseFloat(img.getAttribute("width")) || 0;
    const shown = img.getBoundingClientRect().width;
    if (declared && img.style.width.indexOf("%") < 0 && shown < %MIN% * declared)
      problems.push(`image shown at ${shown.toFixed(0)} px of its ${declared} px: ${label}`);
  }
  for (const math of document.querySelectorAll(".math")) {
    if (!math.querySelector("mjx-container"))
      problems.push(`math not typeset: ${math.textContent.slice(0, 60)}`);
  }
  const body = document.querySelector("main") || document.body;
  const copy = body.cloneNode(true);
  const skip = "pre, code, script, style, mjx-container, .highlight";
  copy.querySelectorAll(skip).forEach(e => e.remove());
  const links = [...document.querySelectorAll("a[href]")].map(a => a.href);
  return {problems, text: copy.innerText, links};
}""".replace("%MIN%", str(MIN_SHOWN))


def page_names(site: Path) -> list[str]:
    return sorted(
        p.relative_to(site).as_posix() for p in site.rglob("*.html") if "_static" not in p.parts
    )


def target_exists(site: Path, url: str, base: str, ids: dict[str, set[str]]) -> bool:
    """Whether a link of this site leads to a file, and to an element with its #fragment."""
    parts = urllib.parse.urlsplit(url)
    path = urllib.parse.unquote(parts.path.removeprefix(urllib.parse.urlsplit(base).path))
    target = site / (path or "index.html")
    if target.is_dir():
        target = target / "index.html"
    if not target.is_file():
        return False
    if parts.fragment and target.suffix == ".html":
        if target not in ids:
            ids[target] = set(re.findall(r'\bid="([^"]+)"', target.read_text()))
        return urllib.parse.unquote(parts.fragment) in ids[target]
    return True


@pytest.mark.browser
@SITE_TIMEOUT
def test_every_page_renders_in_chromium(request, site, browser):
    page, base, shots, offsite = browser
    problems: list[str] = []
    ids: dict[Path, set[str]] = {}
    started = time.monotonic()
    errors: list[str] = []

    def on_console(message) -> None:
        if message.type == "error":
            errors.append(message.text)

    page.on("console", on_console)
    page.on("pageerror", lambda error: errors.append(str(error)))
    for name in page_names(site):
        errors.clear()
        offsite.clear()
        page.goto(base + name, wait_until="load")
        page.wait_for_function(
            "() => !window.MathJax || (MathJax.startup && MathJax.startup.promise && "
            "(MathJax.startup.promise.then(() => window.__typeset = true), window.__typeset))",
            timeout=30_000,
        )
        facts = page.evaluate(PAGE_FACTS)
        page.screenshot(path=str(shots / (name.replace("/", "_") + ".png")), full_page=True)
        found = [f"console error: {e}" for e in errors] + facts["problems"]
        found += [f"fetched from the network: {url}" for url in offsite]
        raw = RAW_MATH.findall(facts["text"])
        found += [f"raw math left in the text: {r!r}" for r in raw[:5]]
        for link in set(facts["links"]):
            if link.startswith(base) and not target_exists(site, link, base, ids):
                found.append(f"link to nowhere: {link.removeprefix(base)}")
        problems += [f"{name}: {p}" for p in found]
    say(
        request,
        f"site test: {len(page_names(site))} pages checked in {time.monotonic() - started:.0f} s",
    )
    assert not problems, "\n".join(problems)


@pytest.mark.browser
@SITE_TIMEOUT
def test_search_finds_bubble(site, browser):
    page, base, shots, _ = browser
    page.goto(base + "search.html?q=bubble", wait_until="load")
    results = page.locator("#search-results ul.search li")
    results.first.wait_for(timeout=30_000)
    page.screenshot(path=str(shots / "search_bubble.png"), full_page=False)
    found = [
        results.nth(i).locator("a").first.get_attribute("href") for i in range(results.count())
    ]
    assert any(href and href.startswith("01_bubble.html") for href in found), found
