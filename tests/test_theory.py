"""Tests for posenc.theory: the objects the sinusoidal chapter's proofs use.

The encodings themselves come from the PyTorch face (float64 positions, so the
comparisons are exact to rounding); posenc.theory is NumPy only.
"""


import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc.torch as pt
from posenc.theory import (
    first_confusable_offset,
    layout_permutation,
    shift_matrix,
    sinusoidal_distance,
    sinusoidal_dot,
)

LAYOUTS = ("interleaved", "concat")


def encode(positions, dim, *, base=10000.0, layout="interleaved"):
    """float64 sinusoidal encodings from the PyTorch face, as NumPy."""
    positions = torch.as_tensor(np.asarray(positions, dtype=np.float64))
    return pt.sinusoidal(positions, dim, base=base, layout=layout).numpy()


# ----------------------------------------------------------------------------- layout_permutation

def test_layout_permutation_expected_values():
    np.testing.assert_array_equal(layout_permutation(8), [0, 2, 4, 6, 1, 3, 5, 7])
    np.testing.assert_array_equal(
        layout_permutation(8, src="concat", dst="interleaved"), [0, 4, 1, 5, 2, 6, 3, 7])
    for layout in LAYOUTS:
        np.testing.assert_array_equal(layout_permutation(6, src=layout, dst=layout), np.arange(6))


@pytest.mark.parametrize("dim", [2, 4, 10, 64])
@pytest.mark.parametrize("src,dst", [(a, b) for a in LAYOUTS for b in LAYOUTS])
def test_layout_permutation_maps_encodings(dim, src, dst):
    pos = np.arange(0, 300, 7)
    perm = layout_permutation(dim, src=src, dst=dst)
    np.testing.assert_array_equal(encode(pos, dim, layout=src)[:, perm],
                                  encode(pos, dim, layout=dst))


@pytest.mark.parametrize("src, dst", [("interleaved", "concat"), ("concat", "interleaved")])
def test_layout_permutation_converts_weights_as_its_docstring_says(src, dst):
    # The docstring once gave W_src[:, argsort(perm)], which changes the outputs.
    perm = layout_permutation(8, src=src, dst=dst)
    rng = np.random.default_rng(0)
    x_src, w_src = rng.normal(size=(5, 8)), rng.normal(size=(3, 8))  # torch-style (out, in)
    x_dst = x_src[:, perm]
    np.testing.assert_allclose(x_dst @ w_src[:, perm].T, x_src @ w_src.T, atol=1e-12)
    np.testing.assert_allclose(x_dst @ w_src.T[perm], x_src @ w_src.T, atol=1e-12)  # Keras kernel
    assert not np.allclose(x_dst @ w_src[:, np.argsort(perm)].T, x_src @ w_src.T)
    text = " ".join(layout_permutation.__doc__.split())
    assert "W_dst = W_src[:, perm]" in text and "kernel_dst = kernel_src[perm]" in text
    assert "W_src[:, np.argsort" not in text and "W_src[:, inverse]" not in text


@pytest.mark.parametrize("dim", [2, 6, 32])
def test_layout_permutation_inverse(dim):
    forward = layout_permutation(dim, src="interleaved", dst="concat")
    backward = layout_permutation(dim, src="concat", dst="interleaved")
    np.testing.assert_array_equal(forward[backward], np.arange(dim))
    np.testing.assert_array_equal(np.argsort(forward), backward)


@pytest.mark.parametrize("src, dst", [("interleaved", "concat"), ("concat", "interleaved")])
def test_layout_permutation_converts_a_weight_as_its_docstring_says(src, dst):
    rng = np.random.default_rng(0)
    x_src = encode(np.arange(5), 8, layout=src) + rng.normal(size=(5, 8))
    weight, kernel = rng.normal(size=(3, 8)), rng.normal(size=(8, 3))    # (out, in), (in, out)
    perm = layout_permutation(8, src=src, dst=dst)
    x_dst = x_src[:, perm]
    np.testing.assert_allclose(x_dst @ weight[:, perm].T, x_src @ weight.T, atol=1e-12)
    np.testing.assert_allclose(x_dst @ kernel[perm], x_src @ kernel, atol=1e-12)
    doc = " ".join(layout_permutation.__doc__.split())
    assert "W_dst = W_src[:, perm]" in doc and "kernel_dst = kernel_src[perm]" in doc


def test_layout_permutation_errors():
    with pytest.raises(ValueError, match="dim must be a multiple of 2"):
        layout_permutation(7)
    with pytest.raises(ValueError, match="layout=.*half"):
        layout_permutation(8, dst="half")
    with pytest.raises(ValueError, match="layout=.*'cat'"):
        layout_permutation(8, src="cat")


# ----------------------------------------------------------------------------- shift_matrix

def test_shift_matrix_expected_values():
    c, s = np.cos(1.0), np.sin(1.0)
    np.testing.assert_allclose(shift_matrix(1, 2), [[c, s], [-s, c]], atol=1e-15)
    # dim 4, base 100: frequencies 1 and 0.1; concat puts pair i on channels i, 2 + i
    c1, s1 = np.cos(2 * 0.1), np.sin(2 * 0.1)
    c0, s0 = np.cos(2.0), np.sin(2.0)
    expected = np.array([
        [c0, 0, s0, 0],
        [0, c1, 0, s1],
        [-s0, 0, c0, 0],
        [0, -s1, 0, c1],
    ])
    np.testing.assert_allclose(shift_matrix(2, 4, base=100.0, layout="concat"), expected,
                               atol=1e-15)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    k=st.one_of(st.integers(-100_000, 100_000),
                st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False)),
    half=st.integers(1, 48),
    base=st.sampled_from([10.0, 500.0, 10000.0, 1e6]),
    layout=st.sampled_from(LAYOUTS),
)
def test_shift_matrix_shifts_every_position(k, half, base, layout):
    dim = 2 * half
    pos = np.concatenate([np.arange(0, 50), np.arange(10_000, 10_050), [123456.25]])
    m = shift_matrix(k, dim, base=base, layout=layout)
    assert m.shape == (dim, dim) and m.dtype == np.float64
    shifted = encode(pos, dim, base=base, layout=layout) @ m.T
    np.testing.assert_allclose(shifted, encode(pos + k, dim, base=base, layout=layout), atol=1e-8)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_shift_matrix_is_a_rotation_group(layout):
    dim = 16
    ks = np.array([-40, -1, 0, 1, 3, 1000, 2.5])
    m = shift_matrix(ks, dim, layout=layout)
    assert m.shape == (len(ks), dim, dim)
    np.testing.assert_allclose(m @ np.swapaxes(m, -1, -2), np.broadcast_to(np.eye(dim), m.shape),
                               atol=1e-12)
    np.testing.assert_allclose(np.linalg.det(m), 1.0, atol=1e-12)
    np.testing.assert_allclose(shift_matrix(0, dim, layout=layout), np.eye(dim), atol=0)
    np.testing.assert_allclose(shift_matrix(-7, dim, layout=layout),
                               shift_matrix(7, dim, layout=layout).T, atol=1e-15)
    m3, m11 = shift_matrix(3, dim, layout=layout), shift_matrix(11, dim, layout=layout)
    np.testing.assert_allclose(m3 @ m11, shift_matrix(14, dim, layout=layout), atol=1e-12)
    # batched equals one at a time
    for k, mk in zip(ks, m):
        np.testing.assert_array_equal(mk, shift_matrix(k, dim, layout=layout))


def test_shift_matrix_is_block_diagonal_in_interleaved_layout():
    m = shift_matrix(5, 12)
    mask = np.kron(np.eye(6), np.ones((2, 2))) == 0
    assert np.all(m[mask] == 0)
    assert np.all(np.abs(m[~mask]) > 0)


def test_shift_matrix_batched_shape():
    assert shift_matrix(np.zeros((2, 3)), 6).shape == (2, 3, 6, 6)


def test_shift_matrix_depends_on_k():
    # a wrong matrix must fail the property: M_1 does not shift by 2
    pos = np.arange(20)
    wrong = encode(pos, 8) @ shift_matrix(1, 8).T
    assert np.abs(wrong - encode(pos + 2, 8)).max() > 0.1


def test_shift_matrix_errors():
    with pytest.raises(ValueError, match="dim must be a multiple of 2"):
        shift_matrix(1, 5)
    with pytest.raises(ValueError, match="layout"):
        shift_matrix(1, 4, layout="half")
    with pytest.raises(ValueError, match="base"):
        shift_matrix(1, 4, base=1.0)
    with pytest.raises(ValueError, match="k must be finite"):
        shift_matrix(np.inf, 4)


# ----------------------------------------------------------------------------- dot and distance

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("base", [100.0, 10000.0])
def test_sinusoidal_dot_matches_encodings(layout, base):
    dim = 32
    p = np.arange(0, 400, 3)
    q = np.arange(5, 405, 3)[::-1]
    measured = np.sum(encode(p, dim, base=base, layout=layout)
                      * encode(q, dim, base=base, layout=layout), axis=-1)
    np.testing.assert_allclose(sinusoidal_dot(q - p, dim, base=base), measured, atol=1e-10)


def test_sinusoidal_dot_values():
    assert sinusoidal_dot(0, 10) == pytest.approx(5.0)
    np.testing.assert_allclose(sinusoidal_dot(np.arange(-5, 6), 2), np.cos(np.arange(-5, 6)),
                               atol=1e-15)
    ks = np.arange(1, 3000)
    np.testing.assert_allclose(sinusoidal_dot(ks, 64), sinusoidal_dot(-ks, 64))
    assert sinusoidal_dot(ks, 64).max() < 32
    assert sinusoidal_dot(np.zeros((2, 3)), 8).shape == (2, 3)


def test_sinusoidal_distance_matches_encodings():
    dim = 24
    p = np.arange(0, 1000, 11)
    for k in (1, 2, 50, 777):
        measured = np.linalg.norm(encode(p + k, dim) - encode(p, dim), axis=-1)
        np.testing.assert_allclose(sinusoidal_distance(k, dim), measured, atol=1e-7)
    assert sinusoidal_distance(0, dim) == 0.0
    assert sinusoidal_distance(1, 2) == pytest.approx(np.sqrt(2 - 2 * np.cos(1.0)))


def test_larger_base_brings_neighbours_closer():
    d = [float(sinusoidal_distance(1, 64, base=b)) for b in (100.0, 1e4, 1e6)]
    assert d[0] > d[1] > d[2]


# ------------------------------------------------------------------ first_confusable_offset

def brute_force_confusable(dim, base, max_offset):
    enc = encode(np.arange(max_offset + 1), dim, base=base)
    dist = np.linalg.norm(enc - enc[0], axis=-1)
    hits = np.flatnonzero(dist[2:] < dist[1])
    return int(hits[0]) + 2 if hits.size else None


@pytest.mark.parametrize("dim,base", [(2, 10000.0), (4, 10.0), (4, 10000.0), (8, 10.0), (8, 3.0)])
def test_first_confusable_offset_matches_brute_force(dim, base):
    max_offset = 3000
    expected = brute_force_confusable(dim, base, max_offset)
    assert first_confusable_offset(dim, base=base, max_offset=max_offset, chunk=97) == expected


def test_first_confusable_offset_values():
    assert first_confusable_offset(2, max_offset=10) == 6
    assert first_confusable_offset(2, max_offset=5) is None
    assert first_confusable_offset(128, base=10000.0, max_offset=20_000) is None


def test_first_confusable_offset_errors():
    with pytest.raises(ValueError, match="max_offset must be an integer of at least 2"):
        first_confusable_offset(8, max_offset=1)
    with pytest.raises(ValueError, match="max_offset"):
        first_confusable_offset(8, max_offset=10.5)
    with pytest.raises(ValueError, match="chunk must be a positive integer"):
        first_confusable_offset(8, chunk=0)
    with pytest.raises(ValueError, match="base"):
        first_confusable_offset(8, base=0.5)
