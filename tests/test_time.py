"""Continuous time and Time2Vec: the schemes' own properties. Shapes, dtypes, parity on the
same weights, saving and training are the layer table's (tests/test_layers.py); bad input
is the error table's (tests/test_errors.py)."""

import keras
import numpy as np
import pytest
import torch

import posenc.keras as ks
import posenc.torch as ts
from posenc.keras.sinusoidal import sinusoidal as k_sinusoidal
from posenc.torch.sinusoidal import sinusoidal as t_sinusoidal
from faces import np32, tensor
import reference as ref

FACES = {"torch": ts, "keras": ks}


# --------------------------------------------------------------------------- helpers

def rotate(pe, angle_per_pair, layout):
    """Rotate each (sin, cos) pair of ``pe`` forward by its angle: PE(p) -> PE(p + c)."""
    half = pe.shape[-1] // 2
    if layout == "interleaved":
        s, c = pe[..., 0::2], pe[..., 1::2]
    else:
        s, c = pe[..., :half], pe[..., half:]
    cs, sn = np.cos(angle_per_pair), np.sin(angle_per_pair)
    s2, c2 = s * cs + c * sn, c * cs - s * sn
    if layout == "interleaved":
        out = np.empty_like(pe)
        out[..., 0::2], out[..., 1::2] = s2, c2
        return out
    return np.concatenate((s2, c2), axis=-1)


# --------------------------------------------------------------------------- continuous time

@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("layout", ["interleaved", "concat"])
def test_continuous_time_equals_sinusoid_of_scaled_time(face, layout):
    t = np.array([[0.0, 0.37, 1.5, 9.25], [2.0, 2.01, 40.0, 1000.125]], dtype=np.float32)
    enc = FACES[face].ContinuousTimeEncoding(8, time_scale=0.25, layout=layout)
    expected = ref.sinusoidal(t.astype(np.float64) / 0.25, 8, layout=layout)
    np.testing.assert_allclose(np32(enc.encoding(tensor(face, t))), expected, atol=1e-6)
    sinus = t_sinusoidal if face == "torch" else k_sinusoidal
    np.testing.assert_allclose(np32(enc.encoding(tensor(face, t))),
                               np32(sinus(tensor(face, t / 0.25), 8, layout=layout)), atol=1e-6)
    x = np.random.default_rng(0).normal(size=(2, 4, 8)).astype(np.float32)
    np.testing.assert_allclose(np32(enc(tensor(face, x), tensor(face, t))),
                               x + expected, atol=1e-6)


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("layout", ["interleaved", "concat"])
def test_continuous_time_shift_is_one_rotation_for_every_token(face, layout):
    rng = np.random.default_rng(3)
    dim, time_scale, shift = 16, 0.5, 3.7
    t = np.cumsum(rng.uniform(0.01, 3.0, size=(3, 7)), axis=-1)  # irregular float times
    enc = FACES[face].ContinuousTimeEncoding(dim, time_scale=time_scale, layout=layout)
    before = np32(enc.encoding(tensor(face, t)))
    after = np32(enc.encoding(tensor(face, t + shift)))
    angles = shift / time_scale * 10000.0 ** (-np.arange(0, dim, 2) / dim)
    np.testing.assert_allclose(after, rotate(before, angles, layout), atol=2e-5)
    # ... so dot products depend only on time differences
    assert not np.allclose(after, before, atol=1e-2)
    np.testing.assert_allclose(np.einsum("bid,bjd->bij", after, after),
                               np.einsum("bid,bjd->bij", before, before), atol=1e-4)


@pytest.mark.parametrize("face", FACES)
def test_continuous_time_keeps_fractions_of_large_timestamps(face):
    t = np.array([1_000_000.25, 1_000_000.5, 1_048_576.75], dtype=np.float32)
    enc = FACES[face].ContinuousTimeEncoding(8)
    np.testing.assert_allclose(np32(enc.encoding(tensor(face, t))),
                               ref.sinusoidal(t.astype(np.float64), 8), atol=1e-5)


@pytest.mark.parametrize("face", FACES)
def test_continuous_time_integer_timestamps_equal_float_ones(face):
    enc = FACES[face].ContinuousTimeEncoding(8, time_scale=2.0)
    np.testing.assert_array_equal(np32(enc.encoding(tensor(face, np.arange(5)))),
                                  np32(enc.encoding(tensor(face, np.arange(5.0)))))


# --------------------------------------------------------------------------- Time2Vec

@pytest.mark.parametrize("face", FACES)
def test_time2vec_formula(face):
    dim = 6
    layer = FACES[face].Time2Vec(dim)
    t = np.array([[0.0, 0.5, 2.25], [1.0, -3.0, 10.0]], dtype=np.float32)
    layer(tensor(face, np.zeros((2, 3, dim), np.float32)), tensor(face, t))
    freq = np.linspace(-2.0, 2.0, dim).astype(np.float32)
    phase = np.linspace(0.3, -0.7, dim).astype(np.float32)
    if face == "torch":
        with torch.no_grad():
            layer.frequency.copy_(torch.as_tensor(freq))
            layer.phase.copy_(torch.as_tensor(phase))
    else:
        layer.frequency.assign(freq)
        layer.phase.assign(phase)
    lin = t[..., None].astype(np.float64) * freq + phase
    expected = np.concatenate((lin[..., :1], np.sin(lin[..., 1:])), axis=-1)
    out = np32(layer.encoding(tensor(face, t)))
    np.testing.assert_allclose(out, expected, atol=1e-5)
    assert np.abs(out[..., 1:]).max() <= 1.0
    assert out.shape == (2, 3, dim)
