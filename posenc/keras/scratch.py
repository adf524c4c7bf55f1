"""Teaching versions of the formulas, in Keras 3 (``keras.ops``): a few lines each, no checks.

The chapters show these functions side by side with :mod:`posenc.torch.scratch` before they use
the package; ``tests/test_scratch.py`` asserts that each one equals its ``posenc.keras``
counterpart. Use the package in real code: these skip the argument checks and the float64
angles that the package's versions have.
"""

from __future__ import annotations

from keras import ops


# Chapter 4

def coordinate_encoding(coords, dim, scale=2 * 3.141592653589793, base=10000.0):
    """DETR's sine embedding: the sinusoid of each scaled coordinate, blocks concatenated."""
    width = dim // coords.shape[-1]                              # channels per coordinate
    inv_freq = base ** (-ops.arange(0, width, 2, dtype="float32") / width)
    angles = ops.expand_dims(ops.cast(coords, "float32") * scale, -1) * inv_freq
    pe = ops.stack((ops.sin(angles), ops.cos(angles)), axis=-1)  # sin, cos interleaved
    return ops.reshape(pe, (*coords.shape[:-1], dim))            # (..., k * width)


def laplacian_positions(adjacency, k):
    """The k eigenvectors of I - D^-1/2 A D^-1/2 after the trivial one (a connected graph)."""
    d = ops.rsqrt(ops.sum(adjacency, axis=-1))                   # D^-1/2 as a vector
    lap = ops.eye(adjacency.shape[0]) - d[:, None] * adjacency * d[None, :]
    eigenvalues, eigenvectors = ops.eigh(lap)                    # ascending eigenvalues
    return eigenvectors[:, 1:k + 1]                              # skip eigenvalue 0
