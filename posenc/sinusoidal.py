"""Framework-free formulas shared by both faces.

Everything here is NumPy in float64: the tables that do not depend on the data
(frequencies, slopes, index maps). Each face converts them to its own tensors,
so a formula lives in exactly one place.
"""

from __future__ import annotations

import numpy as np

from posenc._checks import (
    _error,
    check_base,
    check_even_dim,
    check_float,
    check_hw,
    check_positive_int,
)
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


# --------------------------------------------------------------------------- blocks of sinusoids
# Trees (one block per level) and coordinates (one per coordinate, DETR) concatenate
# sinusoids of dim // blocks channels each.

def _block_width(dim: int, blocks: int, name: str, unit: str, *, what: str) -> int:
    """Channels per block, ``dim // blocks``, when ``blocks`` sinusoids are concatenated:
    ``dim`` must be a multiple of ``2 * blocks``."""
    step = 2 * blocks
    if dim % step:
        lower, upper = dim - dim % step, dim - dim % step + step
        hint = f"dim={upper}" + (f" or dim={lower}" if lower else "")
        reason = (f"{dim} is not divisible by {name}={blocks}" if dim % blocks
                  else f"dim // {name} = {dim // blocks} is odd")
        raise _error(what, f"each of the {name}={blocks} {unit} gets dim // {name} "
                           f"channels of sine/cosine pairs, so dim must be a multiple of "
                           f"2 * {name} = {step}; got dim={dim} ({reason})", f"use {hint}")
    return dim // blocks


def check_coordinates(shape, *, what: str = "") -> int:
    """``coords`` are ``(..., k)`` with ``k >= 1`` coordinates on the last axis; returns ``k``."""
    shape = tuple(shape)
    if len(shape) < 1:
        raise _error(what, "coords must be (..., k), got a scalar",
                     "use coords[..., None] for a single coordinate")
    if shape[-1] is None or shape[-1] < 1:
        raise _error(what, f"coords must be (..., k) with at least one coordinate on the last "
                           f"axis, got coords.shape={shape}",
                     "pass e.g. (y, x) pairs or (x, y, w, h) boxes")
    return int(shape[-1])


def check_coordinate_width(dim, num_coords: int, *, what: str = "") -> int:
    """Channels per coordinate, ``dim // k``; it must be even."""
    dim = check_positive_int("dim", dim, what=what)
    return _block_width(dim, num_coords, "k", "coordinates", what=what)


def check_coordinate_scale(scale, num_coords: int, *, what: str = "") -> tuple[float, ...]:
    """One finite factor ``> 0`` per coordinate (a single number is used for all)."""
    values = list(scale) if isinstance(scale, (list, tuple)) else [scale]
    if len(values) == 1:
        values = values * num_coords
    if len(values) != num_coords:
        raise _error(what, f"scale must be one number or one per coordinate, got "
                           f"{len(values)} values for k={num_coords} coordinates "
                           f"(scale={scale!r})",
                     f"pass a single number or a sequence of {num_coords}")
    return tuple(check_float("scale", v, above=0.0, meaning="coordinates are multiplied by it",
                             what=what,
                             fix="use 2 * pi for coordinates normalised to [0, 1] (DETR), or "
                                 "1 / unit for coordinates in a unit such as seconds or pixels")
                 for v in values)
