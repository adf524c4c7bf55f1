"""NumPy float64 reference implementations the tests compare both faces against.

Written straight from the papers' formulas, independently of ``posenc``.
"""

from __future__ import annotations

import numpy as np


def sinusoidal(positions, dim: int, base: float = 10000.0, layout: str = "interleaved"):
    """Vaswani et al. (2017), section 3.5, in float64: ``(*positions.shape, dim)``.

    A Python ``int`` n means ``0 .. n-1``; NumPy scalars and arrays are positions.
    """
    pos = np.arange(positions) if type(positions) is int else np.asarray(positions)
    pos = pos.astype(np.float64)
    out = np.empty((*pos.shape, dim))
    for i in range(dim // 2):
        angle = pos / base ** (2 * i / dim)
        if layout == "interleaved":
            out[..., 2 * i], out[..., 2 * i + 1] = np.sin(angle), np.cos(angle)
        else:
            out[..., i], out[..., dim // 2 + i] = np.sin(angle), np.cos(angle)
    return out


def sinusoidal_2d(height: int, width: int, dim: int, base: float = 10000.0,
                  layout: str = "interleaved"):
    """Row-major grid: the first half encodes the row, the second the column."""
    out = np.empty((height * width, dim))
    for r in range(height):
        for c in range(width):
            out[r * width + c, : dim // 2] = sinusoidal([r], dim // 2, base, layout)[0]
            out[r * width + c, dim // 2:] = sinusoidal([c], dim // 2, base, layout)[0]
    return out


def naive_float32_sinusoidal(positions, dim: int, base: float = 10000.0):
    """The interleaved encoding computed the naive way, all in float32."""
    pos = np.asarray(positions, dtype=np.float32)
    inv_freq = (np.float32(base) ** (-np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim)))
    angles = pos[..., None] * inv_freq.astype(np.float32)
    out = np.stack((np.sin(angles), np.cos(angles)), axis=-1)
    return out.reshape(*pos.shape, dim).astype(np.float32)


def shift_matrix(k: float, dim: int, base: float = 10000.0, layout: str = "interleaved"):
    """The block rotation ``M_k`` with ``PE(p + k) = M_k @ PE(p)`` for every ``p``.

    For the pair ``(sin(p w), cos(p w))`` the angle-sum identities give
    ``[[cos kw, sin kw], [-sin kw, cos kw]]``.
    """
    m = np.zeros((dim, dim))
    half = dim // 2
    for i in range(half):
        w = base ** (-2 * i / dim)
        s_idx, c_idx = (2 * i, 2 * i + 1) if layout == "interleaved" else (i, half + i)
        m[s_idx, s_idx], m[s_idx, c_idx] = np.cos(k * w), np.sin(k * w)
        m[c_idx, s_idx], m[c_idx, c_idx] = -np.sin(k * w), np.cos(k * w)
    return m


def sinusoidal_dot(delta, dim: int, base: float = 10000.0):
    """``PE(p) . PE(q)`` for ``p - q = delta``: ``sum_i cos(delta w_i)``."""
    w = base ** (-np.arange(0, dim, 2) / dim)
    return np.cos(np.asarray(delta, dtype=np.float64)[..., None] * w).sum(-1)


def learned(table, positions):
    """``table[positions]`` in float64."""
    return np.asarray(table, dtype=np.float64)[np.asarray(positions)]


def hybrid(scale, offset, positions, base: float = 10000.0, layout: str = "interleaved"):
    """``scale * sinusoidal(p) + offset[p]`` in float64."""
    offset = np.asarray(offset, dtype=np.float64)
    return (float(scale) * sinusoidal(np.asarray(positions), offset.shape[1], base, layout)
            + offset[np.asarray(positions)])


def interpolate_linear_1d(table, new_length: int):
    """Linear resampling of the rows, half-pixel centres, edge rows repeated.

    A loop over output rows, written from the definition, independent of
    ``posenc.learned``.
    """
    table = np.asarray(table, dtype=np.float64)
    old = table.shape[0]
    out = np.empty((new_length, *table.shape[1:]))
    for j in range(new_length):
        x = min(max((j + 0.5) * old / new_length - 0.5, 0.0), old - 1.0)
        lo = int(np.floor(x))
        hi = min(lo + 1, old - 1)
        out[j] = (1 - (x - lo)) * table[lo] + (x - lo) * table[hi]
    return out


def rope(x, positions, inv_freq, layout: str = "half"):
    """RoPE as Su et al. write it, with complex numbers, in float64: each pair of the first
    ``2 * len(inv_freq)`` features times ``exp(i * position * inv_freq)``; ``layout="half"``
    pairs ``j`` with ``j + n``, ``"interleaved"`` ``2j`` with ``2j + 1``."""
    n = len(inv_freq)
    angles = np.asarray(positions, np.float64)[..., None] * np.float64(inv_freq)
    if layout == "half":
        z = x[..., :n] + 1j * x[..., n:2 * n]
    else:
        z = x[..., 0:2 * n:2] + 1j * x[..., 1:2 * n:2]
    z = z * np.exp(1j * angles)
    out = x.astype(np.float64).copy()
    if layout == "half":
        out[..., :n], out[..., n:2 * n] = z.real, z.imag
    else:
        out[..., 0:2 * n:2], out[..., 1:2 * n:2] = z.real, z.imag
    return out
