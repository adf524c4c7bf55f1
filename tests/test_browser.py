"""The built site in a real browser, offline (run by .ci/run after `make book`, with POSENC_SITE set).

Serves the site on localhost and opens every page of the table of contents in headless Chromium
with every request to another host blocked: each page must load, typeset its math, load every
image, log no console error, request nothing outside localhost, and (chapters) link to a notebook
of this repository in Colab. Search must find a chapter by name. A screenshot of each page is
written to _build/screenshots/<page>.png.

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
pytestmark = pytest.mark.skipif(not SITE, reason="set POSENC_SITE=_build/html after `make book`")
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
    from playwright.sync_api import sync_playwright  # an error, not a skip, when POSENC_SITE is set

    executable = os.environ.get("POSENC_CHROMIUM") or shutil.which("chromium") or None
    with sync_playwright() as playwright:
        # launch() gives every run a fresh temporary profile (user-data-dir)
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
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


@pytest.mark.parametrize("page_path", PAGES)
def test_page_works_offline(page_path, visit):
    v = visit(f"{page_path}.html")
    assert v.response is not None and v.response.ok, f"{page_path}.html did not load"
    v.settle()
    page = v.page
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / f"{Path(page_path).name}.png", full_page=True)

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


def test_pages_have_distinct_screenshot_names():
    names = [Path(p).name for p in PAGES]
    assert len(set(names)) == len(names), names


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


def test_search_finds_a_scheme_by_name(visit):
    v = visit("search.html?q=sinusoidal")
    page = v.page
    page.wait_for_selector("#search-results .search-summary", timeout=30_000)
    titles = page.locator("#search-results ul.search li a").all_inner_texts()
    assert any("Sinusoidal encoding" in t for t in titles), titles
    assert not v.external, f"requests to other hosts: {v.external}"
    assert not v.errors, "\n".join(v.errors)
