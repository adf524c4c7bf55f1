"""Inputs at the edges for the table encodings of both faces: small index dtypes, the torch
cache. (Shapes of ``positions`` and empty sequences: tests/test_layers.py; bad inputs:
tests/test_errors.py.)"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import torch

import posenc.keras as pk
import posenc.torch as pt
from faces import numpy, tensor
from posenc.interop import copy_weights

FACES = {"torch": pt, "keras": pk}
MODULES = [("SinusoidalEncoding", (8,)), ("LearnedEncoding", (40, 8)), ("HybridEncoding", (40, 8))]


def build(face: str, name: str, args):
    module = getattr(FACES[face], name)(*args)
    if face == "keras":
        module(np.zeros((1, 2, 8), "float32"))          # build the weights
    return module


@pytest.fixture(params=list(FACES))
def face(request):
    return request.param


@pytest.mark.parametrize("name, args", MODULES[1:])
@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64"])
def test_small_integer_dtypes_index_rows(face, name, args, dtype):
    # uint8 must not be read as a boolean mask; every integer dtype picks the same rows.
    module = build(face, name, args)
    want = numpy(module.encoding(tensor(face, np.array([1, 0, 1, 3]), "int64")))
    got = module.encoding(tensor(face, np.array([1, 0, 1, 3]), dtype))
    assert tuple(got.shape) == (4, 8)
    np.testing.assert_array_equal(numpy(got), want)


def test_torch_encoding_is_a_copy_of_the_cache():
    enc = pt.SinusoidalEncoding(8)
    x = torch.zeros(1, 4, 8)
    before = enc(x).clone()
    enc.encoding(4).mul_(0.0)                     # a caller scribbling on what it was given
    torch.testing.assert_close(enc(x), before)


def test_torch_cache_made_under_inference_mode_still_trains():
    enc = pt.SinusoidalEncoding(8)
    with torch.inference_mode():
        enc(torch.zeros(1, 6, 8))                 # first call fills the cache here
    weight = torch.ones(8, requires_grad=True)
    loss = (enc(torch.zeros(1, 6, 8)) * weight).sum()
    loss.backward()                               # fails if the cache is an inference tensor
    assert weight.grad is not None


@pytest.mark.keras
def test_faces_agree_on_small_integer_positions():
    source = pt.LearnedEncoding(300, 8)
    target = build("keras", "LearnedEncoding", (300, 8))
    copy_weights(source, target)
    positions = np.array([[3, 200, 255], [0, 1, 2]], dtype=np.uint8)
    x = np.random.default_rng(0).normal(size=(2, 3, 8)).astype(np.float32)
    torch_out = source(torch.as_tensor(x), positions=torch.as_tensor(positions)).detach().numpy()
    keras_out = keras.ops.convert_to_numpy(target(x, positions=positions))
    np.testing.assert_allclose(torch_out, keras_out, atol=1e-6)
