"""Framework-free formulas shared by both faces.

Everything here is NumPy in float64: the tables that do not depend on the data
(frequencies, slopes, index maps). Each face converts them to its own tensors,
so a formula lives in exactly one place.
"""

from __future__ import annotations

import numpy as np

from posenc._checks import check_base, check_even_dim, check_hw, check_positive_int
from posenc.positions import source_coordinates


def sinusoidal_inv_freq(dim: int, base: float = 10000.0) -> np.ndarray:
    """Angular frequencies of the sinusoidal encoding, shape ``(dim // 2,)``.

    ``inv_freq[i] = base ** (-2 i / dim)``: the wavelengths ``2 pi / inv_freq``
    form a geometric progression from ``2 pi`` to almost ``base * 2 pi``
    (Vaswani et al., 2017, section 3.5).

    Args:
        dim: even feature dimension.
        base: the wavelength base, 10000 in the paper.

    Example:
        >>> sinusoidal_inv_freq(4)
        array([1.  , 0.01])
    """
    dim = check_even_dim(dim)
    base = check_base(base)
    return base ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)


def wavelengths(dim: int, base: float = 10000.0) -> np.ndarray:
    """Wavelengths ``2 pi / inv_freq`` of the sinusoidal channel pairs, in positions."""
    return 2.0 * np.pi / sinusoidal_inv_freq(dim, base)


def grid_coordinates(height: int, width: int, trained_hw=None) -> tuple[np.ndarray, np.ndarray]:
    """Row and column coordinates of the cells of a row-major ``height x width`` grid.

    Without ``trained_hw`` the coordinates are the integers ``0 .. height-1``
    and ``0 .. width-1`` (int64). With ``trained_hw = (h0, w0)`` the grid is an
    ``h0 x w0`` grid stretched to ``height x width``: cell ``(i, j)`` sits at
    ``((i + 0.5) * h0 / height - 0.5, (j + 0.5) * w0 / width - 0.5)`` on it
    (float64), the points where ``align_corners=False`` interpolation (as in
    ``resize_table_2d``) samples a trained table.

    Args:
        height: rows of the grid.
        width: columns of the grid.
        trained_hw: optional ``(h0, w0)``, the grid the coordinates refer to.

    Returns:
        ``(rows, cols)``: arrays of shape ``(height * width,)``.

    Example:
        >>> grid_coordinates(2, 2, trained_hw=(1, 1))[0]
        array([-0.25, -0.25,  0.25,  0.25])
    """
    height = check_positive_int("height", height)
    width = check_positive_int("width", width)
    if trained_hw is None:
        rows, cols = np.arange(height), np.arange(width)
    else:
        h0, w0 = check_hw("trained_hw", trained_hw, what="sinusoidal_2d")
        rows, cols = source_coordinates(h0, height), source_coordinates(w0, width)
    return np.repeat(rows, width), np.tile(cols, height)
