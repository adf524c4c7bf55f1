"""The rule that marks a test ``keras`` (tests/conftest.py), so the backend passes run the
tests of the Keras face and only those."""

from types import SimpleNamespace

import pytest

import posenc.keras as pk
import posenc.torch as pt
from conftest import uses_keras

FACES = {"torch": pt, "keras": pk}


def item(function, params=None, marker=None, fixtures=()):
    return SimpleNamespace(
        get_closest_marker=lambda name: marker if name == "keras" else None,
        callspec=SimpleNamespace(params=params) if params is not None else None,
        function=function, fixturenames=list(fixtures),
        _fixtureinfo=SimpleNamespace(name2fixturedefs={}))


def torch_only():
    return pt.sinusoidal(4, 8)


def both_faces():
    return [FACES[face].sinusoidal(4, 8) for face in FACES]


def calls_a_helper():
    return both_faces()


def by_name():
    return run(framework="keras")  # noqa: F821 (never called)


def per_face(face):
    return FACES[face].sinusoidal(4, 8)


@pytest.mark.parametrize("function, params, expected", [
    (torch_only, None, False),
    (both_faces, None, True),
    (calls_a_helper, None, True),
    (by_name, None, True),
    (per_face, {"face": "torch"}, False),
    (per_face, {"face": "keras"}, True),
    (torch_only, {"module": "posenc.keras.bias"}, True),
    (torch_only, {"call": lambda: pk.sinusoidal(4, 8)}, True),
    (torch_only, {"call": lambda: pt.sinusoidal(4, 8)}, False),
])
def test_a_test_is_keras_when_it_uses_the_keras_face(function, params, expected):
    assert uses_keras(item(function, params)) is expected


def test_an_explicit_mark_stands():
    assert uses_keras(item(torch_only, {"face": "torch"}, marker=pytest.mark.keras))

