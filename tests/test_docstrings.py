"""Every ``Example:`` in posenc's docstrings runs and prints what it says."""

from __future__ import annotations

import doctest
import importlib

import keras  # noqa: F401  (the Keras face's examples are marked keras by their module name)
import pytest

MODULES = [
    "posenc.sinusoidal", "posenc.learned", "posenc.regularization", "posenc.trees",
    "posenc.modalities", "posenc.graphs",
    "posenc.bias", "posenc.shaw", "posenc.theory", "posenc.tasks", "posenc.positions",
    "posenc.torch.sinusoidal", "posenc.torch.learned", "posenc.torch.regularization",
    "posenc.torch.time", "posenc.torch.trees", "posenc.torch.modalities",
    "posenc.torch.graphs", "posenc.torch.bias", "posenc.torch.shaw", "posenc.torch.tasks",
    "posenc.keras.sinusoidal", "posenc.keras.learned", "posenc.keras.regularization",
    "posenc.keras.time", "posenc.keras.trees", "posenc.keras.modalities",
    "posenc.keras.graphs", "posenc.keras.bias", "posenc.keras.shaw", "posenc.keras.tasks",
    "posenc.rotary", "posenc.torch.rotary", "posenc.keras.rotary",
    "posenc.mrope", "posenc.torch.mrope", "posenc.keras.mrope",
    "posenc.vision", "posenc.torch.vision", "posenc.keras.vision",
    "posenc.attention", "posenc.torch.attention", "posenc.keras.attention",
    "posenc.diagnostics", "posenc.torch.diagnostics", "posenc.keras.diagnostics",
    "posenc.experiments.gradients", "posenc.interop",
    "posenc.batches", "posenc.torch.batches", "posenc.keras.batches",
    "posenc.stacks", "posenc.torch.stacks", "posenc.keras.stacks",
    "posenc.distance_bias", "posenc.torch.distance_bias", "posenc.keras.distance_bias",
    "posenc.content", "posenc.torch.content", "posenc.keras.content",
    "posenc.torch.flex",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no docstring examples"
    assert result.failed == 0, f"{result.failed} docstring example(s) of {name} failed"
