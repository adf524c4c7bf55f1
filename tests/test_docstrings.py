"""Every ``Example:`` in posenc's docstrings runs and prints what it says."""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil
import re
from pathlib import Path

import pytest

import posenc

# The examples run once, under the first pass's backend (TensorFlow).
pytestmark = pytest.mark.backend_free



def _has_examples(name: str) -> bool:
    """Whether a module of the package holds a docstring example that runs (a ``>>>`` in its
    source, then doctest's own finder; an example marked ``+SKIP`` does not count)."""
    if ">>> " not in Path(importlib.util.find_spec(name).origin).read_text():
        return False
    module = importlib.import_module(name)
    return any(not example.options.get(doctest.SKIP)
               for test in doctest.DocTestFinder().find(module) for example in test.examples)


# Every module of the package with an example: found, not listed, so a new module's examples
# run without anyone adding it here.
MODULES = sorted(m.name for m in pkgutil.walk_packages(posenc.__path__, "posenc.")
                 if _has_examples(m.name))


def test_the_walk_finds_both_faces_and_the_lab():
    assert {"posenc.sinusoidal", "posenc.torch.rotary", "posenc.keras.rotary",
            "posenc.experiments.stats", "posenc.theory"} <= set(MODULES)
    assert not any(re.search(r"\.tests?\b", m) for m in MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no docstring examples"
    assert result.failed == 0, f"{result.failed} docstring example(s) of {name} failed"
