"""Coordinates (DETR's sine embedding, coordinate_encoding of the sinusoidal family): the
scheme's own properties."""

import math

import keras
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc.keras as ks
import posenc.torch as ts
from faces import dtype_name, np32, numpy, tensor
import reference as ref

FACES = {"torch": ts, "keras": ks}


# --------------------------------------------------------------------------- coordinates

def detr_sine(h, w, num_pos_feats, temperature=10000.0, scale=2 * math.pi, eps=1e-6):
    """DETR's PositionEmbeddingSine (normalize=True, no padding), written out in NumPy."""
    y = np.repeat(np.arange(1, h + 1, dtype=np.float64)[:, None], w, axis=1)
    x = np.repeat(np.arange(1, w + 1, dtype=np.float64)[None, :], h, axis=0)
    y, x = y / (h + eps) * scale, x / (w + eps) * scale
    j = np.arange(num_pos_feats)
    dim_t = temperature ** (2 * (j // 2) / num_pos_feats)
    out = []
    for coord in (y, x):
        angle = coord[..., None] / dim_t
        block = np.where(j % 2 == 0, np.sin(angle), np.cos(angle))
        out.append(block)
    return np.concatenate(out, axis=-1).reshape(h * w, 2 * num_pos_feats)


@pytest.mark.parametrize("face", ["torch", "keras"])
def test_coordinate_encoding_equals_detr_sine_embedding(face):
    h, w, dim = 5, 7, 64
    eps = 1e-6
    ys, xs = np.meshgrid(np.arange(1, h + 1) / (h + eps), np.arange(1, w + 1) / (w + eps),
                         indexing="ij")
    coords = np.stack((ys, xs), axis=-1).reshape(-1, 2).astype(np.float32)
    out = FACES[face].coordinate_encoding(tensor(face, coords), dim)
    np.testing.assert_allclose(numpy(out), detr_sine(h, w, dim // 2), atol=2e-6)


@pytest.mark.parametrize("face", ["torch", "keras"])
def test_coordinate_encoding_is_concatenated_sinusoids(face):
    rng = np.random.default_rng(0)
    boxes = rng.uniform(size=(3, 4, 4))
    out = numpy(FACES[face].coordinate_encoding(tensor(face, boxes), 32, scale=2 * math.pi))
    atol = 1e-12
    if dtype_name(tensor(face, boxes)) == "float32":  # JAX without x64 holds float32 boxes
        boxes, atol = boxes.astype(np.float32).astype(np.float64), 1e-7  # one float32 rounding
    blocks = [ref.sinusoidal(2 * math.pi * boxes[..., c], 8) for c in range(4)]
    np.testing.assert_allclose(out, np.concatenate(blocks, axis=-1), atol=atol)
    # per-coordinate scales, and integer coordinates equal sinusoidal_2d's layout
    out = numpy(FACES[face].coordinate_encoding(tensor(face, boxes[..., :2]), 16,
                                                scale=(3.0, 0.5)))
    expected = np.concatenate((ref.sinusoidal(3.0 * boxes[..., 0], 8),
                               ref.sinusoidal(0.5 * boxes[..., 1], 8)), axis=-1)
    np.testing.assert_allclose(out, expected, atol=atol)


@settings(max_examples=20, deadline=None)
@given(k=st.integers(1, 4), half=st.integers(1, 4), lead=st.lists(st.integers(1, 3), max_size=2))
@pytest.mark.keras
def test_coordinate_encoding_shapes_and_faces_agree(k, half, lead):
    dim = 2 * k * half
    coords = np.random.default_rng(k).uniform(size=(*lead, k)).astype(np.float32)
    t = ts.coordinate_encoding(torch.as_tensor(coords), dim)
    kk = ks.coordinate_encoding(keras.ops.convert_to_tensor(coords), dim)
    assert tuple(t.shape) == (*lead, dim) == tuple(kk.shape)
    assert t.dtype == torch.float32
    np.testing.assert_allclose(np32(t), np32(kk), atol=1e-6)


def test_coordinate_encoding_integer_coordinates_equal_the_2d_grid():
    from posenc.torch.sinusoidal import sinusoidal_2d

    rows, cols = np.meshgrid(np.arange(3), np.arange(4), indexing="ij")
    coords = torch.as_tensor(np.stack((rows, cols), -1).reshape(-1, 2))
    out = ts.coordinate_encoding(coords, 16, scale=1.0)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, sinusoidal_2d(3, 4, 16))


@pytest.mark.parametrize("face", ["torch", "keras"])
def test_coordinate_encoding_keeps_float_dtypes_and_is_accurate_for_bfloat16(face):
    coords = np.random.default_rng(0).uniform(size=(5, 2))
    out = FACES[face].coordinate_encoding(tensor(face, coords, "bfloat16"), 16)
    assert dtype_name(out) == "bfloat16"
    # the angles are computed wide from the bfloat16 coordinates, then rounded once
    exact = np.concatenate([ref.sinusoidal(2 * math.pi * numpy(tensor(face, coords, "bfloat16"))
                                           [..., c], 8) for c in range(2)], axis=-1)
    np.testing.assert_allclose(numpy(out), exact, atol=1e-2)
