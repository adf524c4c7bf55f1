"""The rule that marks a test ``keras`` (tests/conftest.py), so the backend passes run the
tests of the Keras face and only those: the mark is explicit, never guessed from the code."""

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import posenc.keras as pk
import posenc.keras.bias as kbias
import posenc.torch as pt
from conftest import uses_keras


def item(params=None, marker=None, fixtures=()):
    return SimpleNamespace(
        get_closest_marker=lambda name: marker if name == "keras" else None,
        callspec=SimpleNamespace(params=params) if params is not None else None,
        fixturenames=list(fixtures))


@pytest.mark.parametrize("params, marker, fixtures, expected", [
    (None, None, (), False),                                   # no mark, no face: PyTorch only
    (None, pytest.mark.keras, (), True),                       # an explicit mark stands
    ({"face": "torch"}, pytest.mark.keras, (), True),
    ({"face": "torch"}, None, (), False),                      # the PyTorch case of a face pair
    ({"face": "keras"}, None, (), True),                       # the Keras case of a face pair
    ({"module": pk}, None, (), True),                          # a Keras face module
    ({"module": kbias}, None, (), True),
    ({"module": pt}, None, (), False),
    ({"name": "posenc.keras.bias"}, None, (), False),          # a string is not the face
    (None, None, ("mixed_bfloat16",), True),                   # a Keras-only fixture
    (None, None, ("tmp_path",), False),
])
def test_a_test_is_keras_only_when_it_says_so(params, marker, fixtures, expected):
    assert uses_keras(item(params, marker, fixtures)) is expected


def test_collected_face_pairs_are_split():
    """Collected for real: a face-parametrized test's Keras case is in the backend passes, its
    PyTorch case is not, and neither is a signature test (``backend_free``)."""
    tests = Path(__file__).resolve().parent
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist",
         "-p", "no:cacheprovider", "-W", "ignore", "-m", "keras and not backend_free",
         str(tests / "test_sinusoidal.py"), str(tests / "test_contract.py")],
        capture_output=True, text=True, cwd=tests.parent, check=False).stdout
    assert "test_layouts_are_permutations_of_each_other[keras]" in out
    assert "test_layouts_are_permutations_of_each_other[torch]" not in out
    assert "test_contract.py::" not in out
