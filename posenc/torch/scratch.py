"""Teaching versions of the formulas, in PyTorch: a few lines each, no checks, no caching.

The chapters show these functions side by side with :mod:`posenc.keras.scratch` before they use
the package; ``tests/test_scratch.py`` asserts that each one equals its ``posenc.torch``
counterpart. Use the package in real code: these skip the argument checks, the float64 angles
and the caches that the package's versions have.
"""

from __future__ import annotations

import torch


# Chapter 4

def coordinate_encoding(coords, dim, scale=2 * torch.pi, base=10000.0):
    """DETR's sine embedding: the sinusoid of each scaled coordinate, blocks concatenated."""
    width = dim // coords.shape[-1]                              # channels per coordinate
    inv_freq = base ** (-torch.arange(0, width, 2, dtype=torch.float64) / width)
    angles = (coords.double() * scale)[..., None] * inv_freq     # (..., k, width / 2)
    pe = torch.stack((angles.sin(), angles.cos()), dim=-1)      # sin, cos interleaved
    return pe.flatten(-3).float()                               # (..., k * width)


def laplacian_positions(adjacency, k):
    """The k eigenvectors of I - D^-1/2 A D^-1/2 after the trivial one (a connected graph)."""
    d = adjacency.sum(dim=-1).rsqrt()                           # D^-1/2 as a vector
    lap = torch.eye(len(adjacency)) - d[:, None] * adjacency * d[None, :]
    eigenvalues, eigenvectors = torch.linalg.eigh(lap)          # ascending eigenvalues
    return eigenvectors[:, 1:k + 1]                             # skip eigenvalue 0
