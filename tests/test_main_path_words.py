"""scripts/main_path_words.py: what counts as the main path, and what does not."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "main_path_words.py"

_spec = importlib.util.spec_from_file_location("main_path_words", SCRIPT)
mpw = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = mpw  # dataclasses look the module up while it loads
_spec.loader.exec_module(mpw)

FRONT = """---
jupytext:
  formats: ipynb,md:myst
kernelspec:
  name: python3
---
"""

# Visible prose: heading (2) + paragraph (8) + exercise title (2) + exercise body (4)
# + tab title (1) + tab prose (3) = 20 words. Hidden prose: 5 + 4 + 3 + 6 = 18 words.
CHAPTER = FRONT + """
```{code-cell} ipython3
:tags: [remove-cell]

import sys  # many words in a code cell that must not count at all
```

(sec-small)=
# Small chapter

One two three {ref}`sec-small` uses $m - n$ and `code`.

$$
a + b = c \\quad \\text{words in math do not count}
$$ (eq-small)

```{exercise} Exercise title
:label: ex-small

Four visible exercise words.
```

````{solution} ex-small
:class: dropdown

Five hidden words in solution.

```python
print("code inside a solution does not count")
```
````

```{admonition} Hidden admonition
:class: dropdown

Three hidden words.
```

::::{tab-set}
:::{tab-item} PyTorch
Three tab words.
```{literalinclude} ../posenc/torch/scratch.py
:pyobject: rope_half
```
:::
::::

:::::{dropdown} Evidence
::::{note}
Colon fenced nested note.
::::
:::::

```python
x = 1  # fenced code outside any directive does not count
```
"""


def test_counts_main_path_and_total():
    counts = mpw.count_text(CHAPTER)
    assert counts.main == 20
    # hidden: "Five hidden words in solution." (5) + "Hidden admonition" (2)
    # + "Three hidden words." (3) + "Evidence" (1) + "Colon fenced nested note." (4)
    assert counts.total == 20 + 15


def test_role_code_and_inline_math_are_one_word_each():
    assert mpw.count_words("See {ref}`sec-a-long-label` and {numref}`Figure %s <fig-x>`.") == 4
    assert mpw.count_words("Take `torch.arange(0, 10)` and $\\theta_i = b^{-2i/d}$.") == 4
    assert mpw.count_words("A [linked phrase](https://example.org) here.") == 4


def test_markup_is_not_counted_as_words():
    text = "(sec-x)=\n## A title\n\n| a | b |\n|---|---|\n| one | two |\n\n<!-- no -->\n% no\n"
    assert mpw.count_words(text) == 2 + 4


@pytest.mark.parametrize("opener", ["```{toggle}", "```{dropdown} Title here", "::::{solution}"])
def test_collapsed_directives_leave_the_main_path(opener):
    char = opener[0]
    closer = char * (len(opener) - len(opener.lstrip(char)))
    text = f"Visible words.\n\n{opener}\nInside the block.\n{closer}\n"
    counts = mpw.count_text(text)
    assert counts.main == 2
    assert counts.total > counts.main


def test_class_toggle_in_yaml_options_is_collapsed():
    text = "Seen.\n\n```{note}\n---\nclass: toggle\n---\nNot seen here.\n```\n"
    counts = mpw.count_text(text)
    assert (counts.main, counts.total) == (1, 4)


def test_visible_directive_keeps_its_prose():
    text = "```{note}\nA visible note.\n```\n"
    assert mpw.count_text(text).main == 3


def test_longer_fence_contains_shorter_one():
    # The ``` inside the 4-backtick solution must not close it early.
    text = "````{solution} ex\n:class: dropdown\n\n```\ncode\n```\nAfter the code.\n````\nOut.\n"
    counts = mpw.count_text(text)
    assert counts.main == 1
    assert counts.total == 4


def test_cli_prints_table_and_checks_limits(tmp_path):
    chapter = tmp_path / "99_tiny.md"
    chapter.write_text(CHAPTER)
    out = subprocess.run([sys.executable, str(SCRIPT), str(chapter)],
                         capture_output=True, text=True, check=True).stdout
    row = next(line for line in out.splitlines() if "99_tiny.md" in line)
    assert row.split()[-2:] == ["20", "35"]
    over = subprocess.run([sys.executable, str(SCRIPT), "--check", "--max", "19", str(chapter)],
                          capture_output=True, text=True)
    assert over.returncode == 1
    assert "99_tiny.md" in over.stderr
    within = subprocess.run([sys.executable, str(SCRIPT), "--check", str(chapter)],
                            capture_output=True, text=True)
    assert within.returncode == 0


def test_cli_names_a_missing_file():
    result = subprocess.run([sys.executable, str(SCRIPT), "no_such_chapter.md"],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert "no_such_chapter.md" in result.stderr


def test_only_the_first_tab_is_on_the_main_path():
    text = ("::::{tab-set}\n:sync-group: framework\n\n:::{tab-item} PyTorch\n:sync: torch\n"
            "Torch words here.\n:::\n\n:::{tab-item} Keras\n:sync: keras\n"
            "Keras words, four more.\n:::\n::::\n")
    counts = mpw.count_text(text)
    assert counts.main == 1 + 3           # "PyTorch" and the first tab's prose
    assert counts.total == 4 + 1 + 4      # plus "Keras" and its prose


def test_evidence_pages_are_listed_but_not_held_to_the_limits(tmp_path):
    long_page = "word " * 40
    (tmp_path / "98_long_evidence.md").write_text(long_page)
    (tmp_path / "98_long.md").write_text("Short chapter.\n")
    files = [str(tmp_path / "98_long.md"), str(tmp_path / "98_long_evidence.md")]
    result = subprocess.run([sys.executable, str(SCRIPT), "--check", "--max", "10", *files],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "(evidence page)" in result.stdout
    result = subprocess.run([sys.executable, str(SCRIPT), "--check", "--max", "10",
                             str(tmp_path / "98_long_evidence.md"),
                             str(tmp_path / "98_long.md"), str(tmp_path / "98_long.md")],
                            capture_output=True, text=True)
    assert result.returncode == 0
    (tmp_path / "98_long.md").write_text(long_page)
    result = subprocess.run([sys.executable, str(SCRIPT), "--check", "--max", "10", *files],
                            capture_output=True, text=True)
    assert result.returncode == 1 and "98_long.md" in result.stderr
