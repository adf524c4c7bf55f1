"""The built site in a real browser, offline (run by .ci/run after `make book`, with POSENC_SITE set).

Serves the site on localhost and opens every page of the table of contents in headless Chromium
with every request to another host blocked: each page must load, typeset its math, load every
image, log no console error, request nothing outside localhost, and (chapters) link to a notebook
of this repository in Colab. Search must find a chapter by name. A screenshot of each page is
written to _build/screenshots/<page>.png. At a 1280-pixel viewport every page must also fit its
column: no display equation wider than the text, no code box that scrolls sideways, no
cross-reference printed as its raw label (``layout_problems``; its own test runs on a small
synthetic page, without a built site).

Needs Playwright for Python and a Chromium: Debian's /usr/bin/chromium when present (or the one
named by POSENC_CHROMIUM), else Playwright's own (`playwright install chromium`).
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = os.environ.get("POSENC_SITE")
needs_site = pytest.mark.skipif(not SITE, reason="set POSENC_SITE=_build/html after `make book`")
SCREENSHOTS = ROOT / "_build" / "screenshots"
LOCAL_HOSTS = {"localhost", "127.0.0.1"}
CHROMIUM_ARGS = [
    "--no-sandbox",  # CI runs as root
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _toc_pages() -> list[str]:
    """Every page of _toc.yml in reading order, as paths without suffix ("book/intro", ...)."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    pages = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                pages.append(entry["file"])
            walk(entry.get("sections"))
            walk(entry.get("chapters"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    walk(toc.get("chapters"))
    return pages


PAGES = _toc_pages()


def _repository() -> tuple[str, str]:
    """(owner/name, branch) of the repository named in _config.yml."""
    import yaml

    repo = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]
    return urlsplit(repo["url"]).path.strip("/"), repo.get("branch", "main")


@pytest.fixture(scope="module")
def base_url():
    """The built site on a free localhost port, for the duration of this module."""
    site = (ROOT / SITE).resolve()
    assert (site / "index.html").is_file(), f"no built site at {site}: run `make book` first"

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(scope="module")
def browser():
    # With POSENC_SITE set, a missing Playwright or Chromium is an error; without it (the
    # synthetic-page tests only), a skip.
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if SITE:
            raise
        pytest.skip("Playwright for Python is not installed")

    executable = os.environ.get("POSENC_CHROMIUM") or shutil.which("chromium") or None
    with sync_playwright() as playwright:
        # launch() gives every run a fresh temporary profile (user-data-dir)
        try:
            browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        except Exception as exc:  # playwright's Error: no Chromium to launch
            if SITE:
                raise
            pytest.skip(f"no Chromium for Playwright: {exc}")
        try:
            yield browser
        finally:
            browser.close()


class Visit:
    """One page opened offline, with what it logged and requested."""

    def __init__(self, browser, url: str):
        self.context = browser.new_context(viewport={"width": 1280, "height": 900}, service_workers="block")
        self.page = self.context.new_page()
        self.page.set_default_timeout(120_000)   # the API page is over a megabyte of MathJax and code
        self.errors: list[str] = []
        self.external: list[str] = []
        self.failed: list[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(f"console: {m.text} ({m.location})"))
        self.page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        self.page.on("requestfailed", self._request_failed)
        self.page.on("response", lambda r: r.status >= 400 and self.failed.append(f"{r.status} {r.url}"))
        self.page.route("**/*", self._route)
        self.response = self.page.goto(url, wait_until="load")

    def _route(self, route):
        url = route.request.url
        if urlsplit(url).hostname in LOCAL_HOSTS:
            route.continue_()
        else:
            self.external.append(url)
            route.abort("blockedbyclient")

    def _request_failed(self, request):
        if urlsplit(request.url).hostname in LOCAL_HOSTS:
            self.failed.append(f"{request.failure} {request.url}")

    def settle(self):
        """Wait for MathJax, scroll through the page so that lazy images load, wait for images."""
        page = self.page
        page.wait_for_load_state("networkidle")
        page.evaluate("() => window.MathJax?.startup?.promise")
        page.evaluate(
            """async () => {
                for (let y = 0; y < document.body.scrollHeight; y += window.innerHeight) {
                    window.scrollTo({top: y, behavior: "instant"});  // the theme scrolls smoothly
                    await new Promise(r => setTimeout(r, 50));
                }
                window.scrollTo({top: 0, behavior: "instant"});
                await Promise.all([...document.images].map(img => img.decode().catch(() => null)));
            }"""
        )
        page.wait_for_load_state("networkidle")

    def close(self):
        self.context.close()


@pytest.fixture
def visit(browser, base_url):
    visits = []

    def open_(path: str) -> Visit:
        visits.append(Visit(browser, f"{base_url}/{path}"))
        return visits[-1]

    yield open_
    for v in visits:
        v.close()


@needs_site
@pytest.mark.parametrize("page_path", PAGES)
def test_page_works_offline(page_path, visit):
    v = visit(f"{page_path}.html")
    assert v.response is not None and v.response.ok, f"{page_path}.html did not load"
    v.settle()
    page = v.page
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / f"{Path(page_path).name}.png", full_page=True)
    _LAYOUT[page_path] = layout_problems(page)   # asserted by test_page_fits_the_column

    assert not v.external, f"requests to other hosts on load: {v.external}"
    assert not v.errors, "\n".join(v.errors)
    assert not v.failed, f"local requests that failed: {v.failed}"

    # one search box, in the sidebar (no second one in a top bar)
    searches = page.locator(".search-button-field, .search-button__button, form.bd-search").filter(visible=True)
    assert searches.count() == 1, f"{searches.count()} visible search boxes"

    # math: every math element typeset by MathJax, and no raw TeX left in the text
    source = (ROOT / SITE / f"{page_path}.html").read_text()
    n_math = page.locator(".math").count()
    if 'class="math' in source:
        assert n_math > 0
        untypeset = page.evaluate(
            "() => [...document.querySelectorAll('.math')]"
            ".filter(m => !m.querySelector('mjx-container')).map(m => m.textContent.slice(0, 80))"
        )
        assert not untypeset, f"math not typeset: {untypeset}"
    text = page.evaluate(
        """() => {
            const body = document.querySelector('main').cloneNode(true);
            body.querySelectorAll('pre, code, mjx-container, script, style').forEach(e => e.remove());
            return body.innerText;
        }"""
    )
    raw = re.findall(r".{0,30}(?:\$\$|\\\(|\\\[|\\begin\{).{0,30}", text)
    assert not raw, f"raw TeX in the rendered page: {raw}"

    # every image loaded
    broken = page.evaluate(
        "() => [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)"
    )
    assert not broken, f"images that did not load: {broken}"
    assert page.evaluate("() => document.images.length") >= (1 if "<img" in source else 0)


CHAPTERS = [p for p in PAGES if p.startswith("notebooks/")]


@needs_site
def test_pages_have_distinct_screenshot_names():
    names = [Path(p).name for p in PAGES]
    assert len(set(names)) == len(names), names


@needs_site
@pytest.mark.parametrize("page_path", CHAPTERS)
def test_chapter_colab_link_opens_a_notebook_of_the_repo(page_path, visit):
    v = visit(f"{page_path}.html")
    repo, branch = _repository()
    hrefs = v.page.eval_on_selector_all(
        "a[href*='colab.research.google.com']", "links => links.map(a => a.href)"
    )
    assert hrefs, f"no Colab link on {page_path}.html"
    prefix = f"https://colab.research.google.com/github/{repo}/blob/{branch}/"
    for href in hrefs:
        assert href.startswith(prefix), href
        path = href[len(prefix):]
        assert path == f"{page_path}.ipynb", href
        assert (ROOT / path).is_file(), f"{path} is not in the repository"


@needs_site
def test_search_finds_a_scheme_by_name(visit):
    v = visit("search.html?q=sinusoidal")
    page = v.page
    page.wait_for_selector("#search-results .search-summary", timeout=30_000)
    titles = page.locator("#search-results ul.search li a").all_inner_texts()
    assert any("Sinusoidal encoding" in t for t in titles), titles
    assert not v.external, f"requests to other hosts: {v.external}"
    assert not v.errors, "\n".join(v.errors)


# ------------------------------------------------------------------ fitting the column

# Run in the page at its viewport: what does not fit the article's column. Every tab of a
# tab-set is shown while it measures (a reader may pick either framework); code folded away
# (hide-input cells, closed dropdowns) is not measured, since it is not on the page until opened.
LAYOUT_PROBLEMS_JS = r"""() => {
    const problems = [];
    const article = document.querySelector('article.bd-article')
        || document.querySelector('main') || document.body;
    const where = (el) => {
        const id = el.closest('[id]');
        return id ? `#${id.id}` : el.tagName.toLowerCase();
    };
    const contentWidth = (el) => {
        const style = getComputedStyle(el);
        return el.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    };
    // on the page: laid out, and not inside a closed <details> (whose content Chromium hides
    // with content-visibility, so it still has client rects)
    const shown = (el) => (el.checkVisibility ? el.checkVisibility()
                                              : el.getClientRects().length > 0);

    const allTabs = document.createElement('style');
    allTabs.textContent = '.sd-tab-content { display: block !important; }';
    document.head.appendChild(allTabs);
    try {
        // display equations: MathJax's box against the block the equation sits in
        for (const box of article.querySelectorAll('mjx-container[display="true"]')) {
            if (!shown(box)) continue;
            const math = box.querySelector('mjx-math') || box;
            const block = box.closest('div.math') || box.parentElement;
            const width = math.getBoundingClientRect().width;
            const column = Math.min(contentWidth(block), contentWidth(article));
            if (width > column + 1) {
                problems.push(`equation ${where(box)} is ${Math.round(width)} px wide ` +
                              `in a ${Math.round(column)} px column`);
            }
        }
        // code boxes: no listing scrolls sideways, so no comment hides past its edge (the
        // book's CSS wraps a long line onto the next row instead)
        for (const pre of article.querySelectorAll('div.highlight pre')) {
            if (!shown(pre) || pre.closest('.cell_output, .output')) continue;
            const lines = pre.textContent.replace(/\n+$/, '').split('\n');
            const longest = lines.reduce((a, b) => (b.length > a.length ? b : a), '');
            const quote = longest.trim().slice(0, 90);
            if (pre.scrollWidth > pre.clientWidth + 1) {
                problems.push(`code box ${where(pre)} overflows by ` +
                              `${pre.scrollWidth - pre.clientWidth} px: ${quote}`);
            }
        }
    } finally {
        allTabs.remove();
    }
    // cross-references printed as their labels
    const label = /^(eq|fig|sec|tbl)-[\w-]+$/;
    for (const a of article.querySelectorAll('a')) {
        const text = a.textContent.trim();
        if (label.test(text)) problems.push(`link text is a raw label: ${text}`);
    }
    const prose = article.cloneNode(true);
    prose.querySelectorAll('pre, code, mjx-container, script, style').forEach(e => e.remove());
    const inProse = /.{0,40}\b(?:eq|fig|sec|tbl)-[a-z0-9]+(?:-[a-z0-9]+)*\b.{0,20}/g;
    for (const m of prose.textContent.matchAll(inProse)) {
        problems.push(`raw label in the text: ${m[0].trim()}`);
    }
    for (const m of prose.textContent.matchAll(/.{0,40}eq\. \(eq-.{0,30}/g)) {
        problems.push(`raw equation label: ${m[0].trim()}`);
    }
    return [...new Set(problems)];
}"""


# what layout_problems found on each page that test_page_works_offline opened (one visit each)
_LAYOUT: dict[str, list[str]] = {}


def layout_problems(page) -> list[str]:
    """What does not fit the column of ``page`` at its viewport (see LAYOUT_PROBLEMS_JS)."""
    return page.evaluate(LAYOUT_PROBLEMS_JS)


@needs_site
@pytest.mark.parametrize("page_path", PAGES)
def test_page_fits_the_column(page_path, visit):
    """At 1280 px: equations within the text column, code boxes that do not scroll sideways,
    and cross-references that print a title or a number, not a label."""
    problems = _LAYOUT.get(page_path)
    if problems is None:   # run alone, or in another worker than test_page_works_offline
        v = visit(f"{page_path}.html")
        v.settle()
        problems = layout_problems(v.page)
    assert not problems, f"{page_path}: " + "\n".join(problems)


_SYNTHETIC = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><style>{css}</style>
<style>
  body {{ margin: 0; }}
  article.bd-article {{ width: 600px; padding: 0 20px; font: 16px monospace; }}
  div.highlight pre {{ overflow-x: auto; }}
  mjx-container[display="true"] {{ display: block; }}
  mjx-math {{ display: inline-block; height: 1em; }}
</style></head>
<body><main><article class="bd-article">
  <section id="sec-a">
  <div class="math" id="equation-eq-wide"><mjx-container display="true">
    <mjx-math style="width: {eq_width}px"></mjx-math></mjx-container></div>
  <div class="highlight"><pre>{code}</pre></div>
  <div class="sd-tab-content" style="display: none"><div class="highlight"><pre>{tab_code}</pre>
  </div></div>
  <details><summary>Show code</summary><div class="highlight"><pre>{hidden_code}</pre></div>
  </details>
  <p>See <a href="#x">{link}</a> and {prose}.</p>
  <figure><figcaption>{caption}</figcaption></figure>
  </section>
</article></main></body></html>
"""
_SHORT = "x = 1"
_LONG = "y = " + "+".join(["value"] * 40)


def _synthetic(browser, tmp_path, css="", **parts):
    fields = dict(eq_width=300, code=_SHORT, tab_code=_SHORT, hidden_code=_LONG,
                  link="(2.1)", prose="the figure above", caption="A caption.")
    fields.update(parts)
    path = tmp_path / "page.html"
    path.write_text(_SYNTHETIC.format(css=css, **fields))
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(path.as_uri())
    try:
        return layout_problems(page)
    finally:
        page.close()


def test_layout_check_passes_a_page_that_fits(browser, tmp_path):
    # the long line in the closed <details> is not on the page, so it is not measured
    assert _synthetic(browser, tmp_path) == []


@pytest.mark.parametrize("part, value, expected", [
    ("eq_width", 900, "equation #equation-eq-wide is 900 px wide in a 600 px column"),
    ("code", _LONG, "code box #sec-a overflows"),
    ("tab_code", _LONG, "code box #sec-a overflows"),   # a hidden tab is measured too
    ("link", "eq-rope-bound", "link text is a raw label: eq-rope-bound"),
    ("caption", "the models of fig-context-lab, averaged", "raw label in the text: "),
    ("prose", "the bound of eq. (eq-rope-bound)", "raw equation label: "),
])
def test_layout_check_finds_each_problem(browser, tmp_path, part, value, expected):
    problems = _synthetic(browser, tmp_path, **{part: value})
    assert len(problems) >= 1 and any(p.startswith(expected) for p in problems), problems


def test_the_book_css_wraps_long_code_lines(browser, tmp_path):
    """_static/posenc.css wraps a listing's long lines instead of scrolling its box: the line
    that overflows the bare page fits the book's."""
    css = (ROOT / "_static" / "posenc.css").read_text()
    assert _synthetic(browser, tmp_path, css=css) == []
    assert any("overflows" in p for p in _synthetic(browser, tmp_path, code=_LONG))
    assert _synthetic(browser, tmp_path, css=css, code=_LONG) == []
