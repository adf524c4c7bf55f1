"""Checks of the built site (run by .ci/run after `make book`, with POSENC_SITE set)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = os.environ.get("POSENC_SITE")
pytestmark = pytest.mark.skipif(not SITE, reason="set POSENC_SITE=_build/html after `make book`")
CHAPTERS = sorted((ROOT / "notebooks").glob("*.md"))


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_page_has_colab_link_to_existing_ipynb(md):
    html = (ROOT / SITE / "notebooks" / f"{md.stem}.html").read_text()
    links = re.findall(r'https://colab\.research\.google\.com/github/[^/]+/[^/]+/blob/main/([^"]+)"', html)
    assert links, f"no Colab link on {md.stem}.html"
    for path in links:
        assert path.endswith(".ipynb") and (ROOT / path).exists(), path


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_page_has_math_figures_and_no_errors(md):
    html = (ROOT / SITE / "notebooks" / f"{md.stem}.html").read_text()
    assert "math notranslate" in html            # typeset math
    assert "<figure" in html and "<img" in html   # at least one figure from the code
    assert "Traceback" not in html
    assert "{glue" not in html                    # every glued number was filled in


def test_pages_load_no_script_or_style_from_another_host():
    pages = sorted((ROOT / SITE).rglob("*.html"))
    assert pages
    remote = re.compile(r'<(?:script|link)\b[^>]*\b(?:src|href)="(?:https?:)?//[^"]*"[^>]*>')
    for page in pages:
        html = page.read_text()
        found = [tag for tag in remote.findall(html) if "<script" in tag or 'rel="stylesheet"' in tag or 'rel="preload"' in tag]
        assert not found, f"{page.relative_to(ROOT / SITE)}: {found}"
    assert (ROOT / SITE / "_static" / "mathjax" / "tex-chtml.js").is_file()   # MathJax is bundled
