"""The two faces mirror each other: same names, same arguments, same defaults."""

from __future__ import annotations

import inspect

import keras
import pytest

import posenc.keras as pk
import posenc.torch as pt


def _params(obj):
    target = obj.__init__ if inspect.isclass(obj) else obj
    params = inspect.signature(target).parameters.values()
    return [(p.name, p.kind, p.default) for p in params
            if p.name != "self" and p.kind is not inspect.Parameter.VAR_KEYWORD]


def test_same_public_names():
    assert pt.__all__ == pk.__all__
    assert len(pt.__all__) == len(set(pt.__all__))


@pytest.mark.parametrize("name", pt.__all__)
def test_same_signature(name):
    assert _params(getattr(pt, name)) == _params(getattr(pk, name))


@pytest.mark.parametrize("name", [n for n in pt.__all__ if inspect.isclass(getattr(pt, n))])
def test_classes_are_module_and_layer(name):
    import torch

    assert issubclass(getattr(pt, name), torch.nn.Module)
    assert issubclass(getattr(pk, name), keras.layers.Layer)


@pytest.mark.parametrize("name", pt.__all__)
def test_documented(name):
    for face in (pt, pk):
        doc = inspect.getdoc(getattr(face, name)) or ""
        assert len(doc.splitlines()) >= 3, f"{face.__name__}.{name} needs a docstring"
        assert "Args:" in doc or "Call arguments:" in doc, f"{face.__name__}.{name}: no Args section"


def test_family_module_names_are_shadowed_by_their_functions():
    # ``posenc.torch.sinusoidal`` is the function; the module is reached by its full name.
    import importlib

    for face in (pt, pk):
        assert callable(face.sinusoidal) and not inspect.ismodule(face.sinusoidal)
        module = importlib.import_module(f"{face.__name__}.sinusoidal")
        assert inspect.ismodule(module) and module.sinusoidal is face.sinusoidal
