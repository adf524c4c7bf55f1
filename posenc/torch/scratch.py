"""Teaching versions of the formulas, in PyTorch: a few lines each, no checks, no caching.

The chapters show these functions side by side with :mod:`posenc.keras.scratch` before they use
the package; ``tests/test_scratch.py`` asserts that each one equals its ``posenc.torch``
counterpart. Use the package in real code: these skip the argument checks, the float64 angles
and the caches that the package's versions have.
"""

from __future__ import annotations

import torch


# Chapter 3


def learned(x, table):
    """Add the learned rows table[0 .. seq-1] to x of shape (batch, seq, dim)."""
    return x + table[: x.shape[-2]]


def resize_linear(table, new_length):
    """Stretch a (length, dim) table to new_length rows by linear interpolation."""
    length = table.shape[0]
    u = (torch.arange(new_length) + 0.5) * length / new_length - 0.5  # old coordinate
    u = u.clamp(0, length - 1)
    lo = u.floor().long()
    hi = (lo + 1).clamp(max=length - 1)
    w = (u - lo)[:, None]
    return (1 - w) * table[lo] + w * table[hi]
