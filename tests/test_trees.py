"""Tree positions (hierarchical, HierarchicalEncoding): the schemes' own properties, against
a reference."""

import keras
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from keras import ops

import posenc.keras as ks
import posenc.torch as ts
from faces import np32, tensor
import reference as ref

FACES = {"torch": ts, "keras": ks}


# --------------------------------------------------------------------------- helpers

def ref_hierarchical(paths, dim, max_depth, base=10000.0):
    paths = np.asarray(paths)
    w = dim // max_depth
    out = np.zeros(paths.shape[:-1] + (dim,))
    for level in range(max_depth):
        idx = paths[..., level]
        block = ref.sinusoidal(np.maximum(idx, 0), w, base)
        out[..., level * w:(level + 1) * w] = block * (idx >= 0)[..., None]
    return out


def random_paths(rng, shape, max_depth, max_children):
    """Valid paths: a random depth in 1..max_depth, then -1 padding."""
    depth = rng.integers(1, max_depth + 1, size=shape)
    idx = rng.integers(0, max_children, size=shape + (max_depth,))
    return np.where(np.arange(max_depth) < depth[..., None], idx, -1)


# --------------------------------------------------------------------------- hierarchical

@settings(max_examples=25, deadline=None)
@given(max_depth=st.integers(1, 4), half_width=st.integers(1, 4),
       lead=st.lists(st.integers(1, 3), min_size=0, max_size=2), seed=st.integers(0, 2**16))
@pytest.mark.keras
def test_hierarchical_matches_reference_in_both_faces(max_depth, half_width, lead, seed):
    dim = 2 * half_width * max_depth
    paths = random_paths(np.random.default_rng(seed), tuple(lead), max_depth, 50)
    expected = ref_hierarchical(paths, dim, max_depth)
    for face in FACES:
        out = FACES[face].hierarchical(tensor(face, paths), dim, max_depth=max_depth)
        assert tuple(out.shape) == tuple(lead) + (dim,)
        np.testing.assert_allclose(np32(out), expected, atol=1e-6)


@pytest.mark.keras
def test_hierarchical_torch_keras_parity():
    paths = random_paths(np.random.default_rng(0), (4, 9), 3, 1000)
    np.testing.assert_allclose(
        np32(ts.hierarchical(torch.as_tensor(paths), 24, max_depth=3, base=500.0)),
        np32(ks.hierarchical(ops.convert_to_tensor(paths), 24, max_depth=3, base=500.0)),
        atol=1e-5)


@pytest.mark.parametrize("face", FACES)
def test_hierarchical_siblings_share_the_parents_channels(face):
    # root's children 2 and 5, and two children of node [2]
    paths = np.array([[2, -1, -1], [5, -1, -1], [2, 0, -1], [2, 7, -1], [2, 7, 3]])
    pe = np32(FACES[face].hierarchical(tensor(face, paths), 12, max_depth=3))
    w = 4
    parent, child_a, child_b, grandchild = pe[0], pe[2], pe[3], pe[4]
    np.testing.assert_array_equal(child_a[:w], parent[:w])   # the parent's level
    np.testing.assert_array_equal(child_b[:w], parent[:w])
    assert not np.allclose(child_a[w:2 * w], child_b[w:2 * w])  # their own level differs
    np.testing.assert_array_equal(parent[w:], 0.0)          # padded levels are zero
    np.testing.assert_array_equal(grandchild[:2 * w], child_b[:2 * w])
    assert not np.allclose(pe[0][:w], pe[1][:w])             # root-level siblings differ


@pytest.mark.parametrize("face", FACES)
def test_hierarchical_encoding_sums_one_row_per_level(face):
    enc = FACES[face].HierarchicalEncoding(3, 4, 8)
    paths = np.array([[1, -1, -1], [1, 3, -1], [1, 3, 0], [1, 2, -1]])
    out = np32(enc.encoding(tensor(face, paths)))
    tables = (enc.level_tables.detach().numpy() if face == "torch"
              else np.asarray(enc.level_tables.numpy()))
    np.testing.assert_allclose(out[0], tables[0, 1], atol=1e-7)
    np.testing.assert_allclose(out[1], tables[0, 1] + tables[1, 3], atol=1e-7)
    np.testing.assert_allclose(out[2], tables[0, 1] + tables[1, 3] + tables[2, 0], atol=1e-7)
    # a child is its parent plus its own row; siblings share the parent's part
    np.testing.assert_allclose(out[1] - out[0], tables[1, 3], atol=1e-7)
    np.testing.assert_allclose(out[3] - out[0], tables[1, 2], atol=1e-7)
