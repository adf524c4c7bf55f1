"""NumPy helpers for the properties the book proves about sinusoidal encodings.

Nothing here is needed to *use* an encoding; these are the objects the proofs
talk about: the block rotation that shifts a sinusoidal encoding by ``k``
positions, the channel permutation between the two layouts, and the closed
forms of the dot product and distance between two encodings. Everything is
float64 NumPy, so the checks do not depend on a framework's precision.
"""

from __future__ import annotations

import numpy as np

from posenc._checks import (
    _error,
    check_base,
    check_even_dim,
    check_int,
    check_layout,
    check_positive_int,
)
from posenc.positions import layout_permutation
from posenc.sinusoidal import sinusoidal_inv_freq

__all__ = [
    "layout_permutation",
    "shift_matrix",
    "sinusoidal_dot",
    "sinusoidal_distance",
    "first_confusable_offset",
]


def check_finite(name: str, values, *, what: str = "") -> None:
    """Every number of ``values`` (a float64 array) is finite."""
    if not np.all(np.isfinite(values)):
        raise _error(what, f"{name} must be finite, got {name}={values!r}")


def shift_matrix(k, dim: int, *, base: float = 10000.0, layout: str = "interleaved") -> np.ndarray:
    """The linear map that moves a sinusoidal encoding ``k`` positions along.

    ``sinusoidal(p + k) == shift_matrix(k) @ sinusoidal(p)`` for every
    position ``p``: by the angle-addition formulas each pair
    ``(sin(p w_i), cos(p w_i))`` is rotated by the angle ``k w_i``, so the
    matrix is block diagonal with the ``2 x 2`` blocks
    ``[[cos(k w_i), sin(k w_i)], [-sin(k w_i), cos(k w_i)]]`` (on channels
    ``2i, 2i+1`` for ``"interleaved"``, on ``i, dim/2 + i`` for ``"concat"``).
    It depends on ``k`` but not on ``p``, it is orthogonal, and
    ``shift_matrix(-k) == shift_matrix(k).T`` (Vaswani et al., 2017, section
    3.5, state the linearity; this is the matrix).

    Args:
        k: offset in positions, a number or an array of any shape (integers
            or floats).
        dim: even feature dimension.
        base: wavelength base. Default ``10000.0``.
        layout: ``"interleaved"`` or ``"concat"``, as in ``sinusoidal``.
            Default ``"interleaved"``.

    Returns:
        float64 array of shape ``(*k.shape, dim, dim)`` (``(dim, dim)`` for a
        scalar ``k``).

    Example:
        >>> m = shift_matrix(3, 4)
        >>> m.shape
        (4, 4)
        >>> bool(np.allclose(m @ m.T, np.eye(4)))
        True
    """
    dim = check_even_dim(dim)
    check_layout(layout)
    k = np.asarray(k, dtype=np.float64)
    check_finite("k", k, what="shift_matrix")
    inv_freq = sinusoidal_inv_freq(dim, base)
    angle = k[..., None] * inv_freq  # (*k.shape, dim/2)
    c, s = np.cos(angle), np.sin(angle)
    out = np.zeros((*k.shape, dim, dim), dtype=np.float64)
    even = np.arange(0, dim, 2)
    odd = even + 1
    # new sin = sin * cos(kw) + cos * sin(kw);  new cos = cos * cos(kw) - sin * sin(kw)
    out[..., even, even] = c
    out[..., even, odd] = s
    out[..., odd, even] = -s
    out[..., odd, odd] = c
    if layout != "interleaved":
        perm = layout_permutation(dim, src="interleaved", dst=layout)
        out = out[..., perm, :][..., :, perm]
    return out


def sinusoidal_dot(offsets, dim: int, *, base: float = 10000.0) -> np.ndarray:
    """Dot product ``sinusoidal(p) . sinusoidal(p + offset)``, which does not depend on ``p``.

    Each pair contributes ``sin(a) sin(b) + cos(a) cos(b) = cos(b - a)``, so the
    dot product is ``sum_i cos(offset * w_i)``: a function of the offset alone,
    even in it (``offset`` and ``-offset`` give the same value), equal to
    ``dim / 2`` at offset 0. The layout does not matter (a permutation of the
    channels leaves dot products unchanged).

    Args:
        offsets: offsets in positions, a number or an array of any shape.
        dim: even feature dimension.
        base: wavelength base. Default ``10000.0``.

    Returns:
        float64 array with the shape of ``offsets``.

    Example:
        >>> float(sinusoidal_dot(0, 8))
        4.0
    """
    offsets = np.asarray(offsets, dtype=np.float64)
    inv_freq = sinusoidal_inv_freq(dim, base)
    return np.cos(offsets[..., None] * inv_freq).sum(axis=-1)


def sinusoidal_distance(offsets, dim: int, *, base: float = 10000.0) -> np.ndarray:
    """Euclidean distance ``|sinusoidal(p + offset) - sinusoidal(p)|``, independent of ``p``.

    Every encoding has squared norm ``dim / 2``, so the squared distance is
    ``dim - 2 * sinusoidal_dot(offset)``.

    Args:
        offsets: the offsets ``k`` (in positions): a number, or an array of
            offsets of any shape.
        dim: even feature dimension of the encoding.
        base: its wavelength base. Default ``10000.0``.

    Returns:
        The distances, a float64 array shaped like ``offsets``.

    Example:
        >>> float(sinusoidal_distance(0, 8))
        0.0
    """
    dim = check_even_dim(dim)
    squared = dim - 2.0 * sinusoidal_dot(offsets, dim, base=base)
    return np.sqrt(np.maximum(squared, 0.0))


def first_confusable_offset(dim: int, *, base: float = 10000.0, max_offset: int = 100_000,
                            chunk: int = 8192) -> int | None:
    """Smallest offset whose encoding is closer to position 0 than position 1's is.

    Searches the integer offsets ``2 .. max_offset`` for the first ``d`` with
    ``|PE(p + d) - PE(p)| < |PE(p + 1) - PE(p)|`` (the same for every ``p``,
    see :func:`sinusoidal_distance`): a far position that a distance-based
    reader would mistake for a neighbour.

    Args:
        dim: even feature dimension.
        base: wavelength base. Default ``10000.0``.
        max_offset: largest offset searched, at least 2. Default ``100_000``.
        chunk: offsets evaluated per step (memory ``chunk * dim / 2`` floats).

    Returns:
        The offset as an ``int``, or ``None`` if there is none up to
        ``max_offset``.

    Example:
        >>> first_confusable_offset(2, base=10000.0, max_offset=10)  # one pair, wavelength 2 pi
        6
    """
    dim = check_even_dim(dim)
    check_base(base)
    max_offset = check_int("max_offset", max_offset, minimum=2, what="first_confusable_offset")
    chunk = check_positive_int("chunk", chunk)
    neighbour = float(sinusoidal_distance(1, dim, base=base))
    for start in range(2, int(max_offset) + 1, chunk):
        offsets = np.arange(start, min(start + chunk, int(max_offset) + 1))
        closer = np.flatnonzero(sinusoidal_distance(offsets, dim, base=base) < neighbour)
        if closer.size:
            return int(offsets[closer[0]])
    return None
