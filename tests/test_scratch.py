"""The teaching versions in posenc.torch.scratch and posenc.keras.scratch equal the package."""

from __future__ import annotations


# Chapter 4

def test_chapter4_coordinate_encoding_scratch_equals_the_package():
    import numpy as np
    import torch

    import posenc.keras as pk
    import posenc.keras.scratch as sk
    import posenc.torch as pt
    import posenc.torch.scratch as st
    from faces import np32

    boxes = np.random.default_rng(0).uniform(size=(2, 5, 4)).astype(np.float32)
    expected = np32(pt.coordinate_encoding(torch.as_tensor(boxes), 64))
    np.testing.assert_allclose(np32(st.coordinate_encoding(torch.as_tensor(boxes), 64)),
                               expected, atol=1e-6)
    np.testing.assert_allclose(np32(sk.coordinate_encoding(boxes, 64)), expected, atol=1e-5)
    np.testing.assert_allclose(np32(pk.coordinate_encoding(boxes, 64)), expected, atol=1e-6)


def test_chapter4_laplacian_positions_scratch_equals_the_package_up_to_sign():
    import numpy as np
    import torch

    import posenc.keras.scratch as sk
    import posenc.torch as pt
    import posenc.torch.scratch as st
    from faces import np32

    # a connected graph whose eigenvalues are distinct, so each eigenvector is unique up to sign
    rng = np.random.default_rng(0)
    weights = np.triu(rng.uniform(0.5, 2.0, size=(7, 7)), 1)
    adjacency = (weights + weights.T).astype(np.float32)
    expected = np32(pt.laplacian_positions(adjacency, 3))
    for got in (np32(st.laplacian_positions(torch.as_tensor(adjacency), 3)),
                np32(sk.laplacian_positions(adjacency, 3))):
        signs = np.sign(np.sum(got * expected, axis=0))
        np.testing.assert_allclose(got * signs, expected, atol=1e-4)
