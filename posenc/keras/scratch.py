"""Teaching versions of the formulas, in Keras 3 (``keras.ops``): a few lines each, no checks.

The chapters show these functions side by side with :mod:`posenc.torch.scratch` before they use
the package; ``tests/test_scratch.py`` asserts that each one equals its ``posenc.keras``
counterpart. Use the package in real code: these skip the argument checks and the float64
angles that the package's versions have.
"""

from __future__ import annotations

from keras import ops


# Chapter 3


def learned(x, table):
    """Add the learned rows table[0 .. seq-1] to x of shape (batch, seq, dim)."""
    return ops.add(x, table[: x.shape[-2]])


def resize_linear(table, new_length):
    """Stretch a (length, dim) table to new_length rows by linear interpolation."""
    length = table.shape[0]
    u = (ops.arange(new_length, dtype="float32") + 0.5) * length / new_length - 0.5
    u = ops.clip(u, 0, length - 1)
    lo = ops.cast(ops.floor(u), "int32")
    hi = ops.minimum(lo + 1, length - 1)
    w = (u - ops.cast(lo, "float32"))[:, None]
    return (1 - w) * ops.take(table, lo, axis=0) + w * ops.take(table, hi, axis=0)
