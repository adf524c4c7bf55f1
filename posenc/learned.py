"""Resampling matrices for learned position tables (NumPy, float64).

A learned table ``(length, dim)`` trained at one length is stretched to
another by interpolating along the position axis. Interpolation along one axis
is linear in the table, so it is a matrix ``M`` of shape ``(new, old)`` and the
resampled table is ``M @ table``; a 2D grid of ViT patch positions is resampled
by one matrix per axis (separable interpolation). Both faces apply the matrices
built here, so PyTorch and Keras give the same numbers and the formulas live in
one place.

The conventions are PyTorch's ``torch.nn.functional.interpolate`` with
``align_corners=False``: output sample ``j`` sits at input coordinate
``(j + 0.5) * old / new - 0.5`` (half-pixel centres). Without antialiasing
(``resize_table``, and ``resize_table_2d(..., antialias=False)``), samples
outside the table repeat its edge rows and the cubic kernel has ``a = -0.75``.
With antialiasing (``resize_table_2d``'s default, as timm's
``resample_abs_pos_embed``, which calls ``interpolate(..., antialias=True)``),
the kernel is widened by ``old / new`` when shrinking so that every input row
contributes, the cubic kernel has ``a = -0.5``, and the weights of each output
row are those of the taps inside the table, renormalised to sum to 1.

This module also holds the learned family's other framework-free parts: the
initial scale of a table, what a table module suggests when a sequence does
not fit, the truncated SVD behind ``LowRankEncoding.from_table``, and the
family's argument rules (``check_*``), which both faces call so that they raise
the same errors.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from posenc._checks import (
    _error,
    check_bool,
    check_choice,
    check_float,
    check_hw,
    check_int,
    check_positive_int,
    check_rank,
)
from posenc.positions import source_coordinates

__all__ = [
    "CUBIC_A",
    "CUBIC_A_ANTIALIAS",
    "source_coordinates",
    "low_rank_factors",
    "TABLE_INIT_STD",
    "MODES_1D",
    "MODES_2D",
    "interpolation_matrix",
    "table_resize_matrix",
    "grid_resize_matrices",
]

#: Standard deviation of a freshly initialised learned table (BERT, GPT-2, ViT).
TABLE_INIT_STD = 0.02

#: The cubic convolution parameter of PyTorch's bicubic resize without antialiasing.
CUBIC_A = -0.75

#: The cubic convolution parameter of PyTorch's (and PIL's) antialiased bicubic resize.
CUBIC_A_ANTIALIAS = -0.5


# ---------------------------------------------------------------------------
# The family's argument rules.


def check_init_std(init_std, *, what: str = "") -> float:
    """The standard deviation of a fresh table, a finite number > 0."""
    return check_float("init_std", init_std, above=0.0, what=what,
                       fix="BERT and ViT use 0.02")


def check_scale(scale, *, what: str = "") -> float:
    """The initial scale of ``HybridEncoding``'s sinusoid, a finite number."""
    return check_float("scale", scale, what=what,
                       fix="the usual value is 1.0 (the sinusoid as it is)")


def check_extension(max_len: int, new_max_len, *, what: str = "") -> int:
    """``LearnedEncoding.extended`` keeps every trained row, so it only grows a table."""
    new_max_len = check_positive_int("new_max_len", new_max_len, what=what)
    if new_max_len < max_len:
        raise _error(what, f"new_max_len must be at least max_len={max_len} (every trained "
                           f"row is kept), got new_max_len={new_max_len}",
                     f"to shorten the table, resample it with enc.resized({new_max_len}) or "
                     f"keep its first rows with LearnedEncoding.from_table("
                     f"enc.table[:{new_max_len}])")
    return new_max_len


def check_low_rank(max_len, dim, rank, *, what: str = "") -> tuple[int, int, int]:
    """``1 <= rank <= min(max_len, dim)``."""
    max_len = check_positive_int("max_len", max_len, what=what)
    dim = check_positive_int("dim", dim, what=what)
    full = min(max_len, dim)
    if isinstance(rank, bool) or not isinstance(rank, numbers.Integral):
        raise _error(what, f"rank must be an integer, got rank={rank!r}")
    rank = int(rank)
    if rank < 1:
        raise _error(what, f"rank must be at least 1, got rank={rank}",
                     f"use a rank from 1 to min(max_len, dim)={full}")
    if rank > full:
        raise _error(what, f"rank={rank} exceeds min(max_len, dim)={full}; a rank of {full} "
                           "already represents every (max_len, dim) table, so more only adds "
                           "parameters", f"use rank <= {full}")
    return max_len, dim, rank


def check_grid_rows(rows: int, old_hw, prefix_tokens: int, *, what: str = "") -> None:
    """A ViT table has ``prefix_tokens + old_h * old_w`` rows."""
    old_h, old_w = old_hw
    expected = prefix_tokens + old_h * old_w
    if rows != expected:
        fits = []
        if rows >= old_h * old_w:
            fits.append(f"prefix_tokens={rows - old_h * old_w} would fit "
                        f"old_hw=({old_h}, {old_w})")
        side = math.isqrt(max(rows - prefix_tokens, 0))
        if side > 0 and side * side == rows - prefix_tokens:
            fits.append(f"old_hw=({side}, {side}) would fit prefix_tokens={prefix_tokens}")
        raise _error(what, f"the table has {rows} rows but prefix_tokens={prefix_tokens} plus "
                           f"old_hw=({old_h}, {old_w}) make {expected}",
                     "pass the grid the table was trained on, and as prefix_tokens the number "
                     "of leading rows that are not on it (1 for a CLS token)"
                     + (f": {'; '.join(fits)}" if fits else ""))


def _nearest(old: int, new: int) -> np.ndarray:
    # Half-pixel nearest neighbour: torch's mode="nearest-exact".
    src = np.floor((np.arange(new) + 0.5) * (old / new)).astype(np.int64)
    matrix = np.zeros((new, old))
    matrix[np.arange(new), np.minimum(src, old - 1)] = 1.0
    return matrix


def _linear(old: int, new: int) -> np.ndarray:
    src = np.maximum(source_coordinates(old, new), 0.0)
    left = np.minimum(np.floor(src).astype(np.int64), old - 1)
    right = np.minimum(left + 1, old - 1)
    frac = src - left
    matrix = np.zeros((new, old))
    rows = np.arange(new)
    np.add.at(matrix, (rows, left), 1.0 - frac)
    np.add.at(matrix, (rows, right), frac)
    return matrix


def _cubic_weights(t: np.ndarray, a: float = CUBIC_A) -> np.ndarray:
    """Keys' cubic convolution weights of the four taps at ``-1, 0, 1, 2``."""

    def near(x):  # |x| <= 1
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a

    return np.stack((far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)), axis=-1)


def _cubic(old: int, new: int) -> np.ndarray:
    src = source_coordinates(old, new)
    base = np.floor(src)
    weights = _cubic_weights(src - base)  # (new, 4)
    taps = np.clip(base.astype(np.int64)[:, None] + np.arange(-1, 3), 0, old - 1)
    matrix = np.zeros((new, old))
    np.add.at(matrix, (np.repeat(np.arange(new), 4), taps.ravel()), weights.ravel())
    return matrix


def _triangle(x: np.ndarray) -> np.ndarray:
    return np.maximum(1.0 - np.abs(x), 0.0)


def _keys(x: np.ndarray, a: float = CUBIC_A_ANTIALIAS) -> np.ndarray:
    """Keys' cubic convolution kernel at ``x`` (zero for ``|x| >= 2``)."""
    x = np.abs(x)
    near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    far = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
    return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))


# The antialiased kernels and their half-widths in input samples (before widening).
_ANTIALIASED = {"linear": (_triangle, 1.0), "cubic": (_keys, 2.0)}


def _antialiased(old: int, new: int, kernel: str) -> np.ndarray:
    """``interpolate(..., antialias=True)``: the kernel widened by ``old / new`` when shrinking.

    Output sample ``j`` is centred at ``c = (j + 0.5) * old / new`` in edge
    coordinates; input sample ``i`` (centred at ``i + 0.5``) gets the weight
    ``kernel((i + 0.5 - c) / stretch)`` with ``stretch = max(old / new, 1)``,
    over the taps ``i`` inside the table within ``half_width * stretch`` of
    ``c``; the weights of a row are divided by their sum.
    """
    function, half_width = _ANTIALIASED[kernel]
    scale = old / new
    stretch = max(scale, 1.0)
    support = half_width * stretch
    matrix = np.zeros((new, old))
    for j in range(new):
        centre = (j + 0.5) * scale
        # int() truncates, as PyTorch's cast does; both bounds are then clipped to the table.
        low = max(int(centre - support + 0.5), 0)
        high = min(int(centre + support + 0.5), old)
        weights = function((np.arange(low, high) - centre + 0.5) / stretch)
        total = weights.sum()
        matrix[j, low:high] = weights / total if total != 0.0 else weights
    return matrix


# One entry per 1D kernel; the 2D modes apply the same kernel along each axis.
_KERNELS = {"nearest": _nearest, "linear": _linear, "cubic": _cubic}
MODES_1D = ("linear", "nearest", "cubic")
MODES_2D = ("bicubic", "bilinear", "nearest")
_AXIS_KERNEL = {"linear": "linear", "bilinear": "linear", "cubic": "cubic",
                "bicubic": "cubic", "nearest": "nearest"}


def _mode_fix(mode, other: tuple, other_name: str) -> str:
    """A hint when ``mode`` belongs to the other resizing function."""
    return (f"{mode!r} is a mode of {other_name}, the modes here are the ones above"
            if isinstance(mode, str) and mode in other else "")


def interpolation_matrix(old: int, new: int, mode: str = "linear", *,
                         antialias: bool = False) -> np.ndarray:
    """The ``(new, old)`` float64 matrix that resamples ``old`` samples to ``new``.

    Row ``j`` holds the weights of output sample ``j``, centred at input
    coordinate ``(j + 0.5) * old / new - 0.5`` (``align_corners=False``), so
    ``interpolation_matrix(old, new) @ table`` equals PyTorch's
    ``F.interpolate(table.T[None], size=new, mode="linear")[0].T``. Every row
    sums to 1, and ``old == new`` gives the identity matrix exactly.

    Args:
        old: input length, a positive int.
        new: output length, a positive int.
        mode: the kernel along this axis: ``"linear"`` (default; also accepts
            ``"bilinear"``, its 2D name), ``"cubic"`` (also ``"bicubic"``:
            Keys' cubic convolution with ``a = -0.75``, as plain PyTorch bicubic) or
            ``"nearest"`` (the nearest half-pixel centre, PyTorch's
            ``"nearest-exact"``).
        antialias: ``False`` (default) or ``True``: PyTorch's
            ``interpolate(..., antialias=True)`` for the linear and cubic
            kernels (a kernel widened by ``old / new`` when shrinking, the
            cubic with ``a = -0.5``, weights renormalised at the edges), which
            timm's ``resample_abs_pos_embed`` uses. ``"nearest"`` has no
            antialiased form and ignores it.

    Returns:
        float64 NumPy array of shape ``(new, old)``.

    Example:
        >>> interpolation_matrix(2, 4)
        array([[1.  , 0.  ],
               [0.75, 0.25],
               [0.25, 0.75],
               [0.  , 1.  ]])

    References:
        Keys, "Cubic convolution interpolation for digital image processing",
        IEEE Trans. ASSP 29(6), 1981.
    """
    old = check_positive_int("old", old, what="interpolation_matrix")
    new = check_positive_int("new", new, what="interpolation_matrix")
    check_choice("mode", mode, _AXIS_KERNEL, what="interpolation_matrix")
    antialias = check_bool("antialias", antialias, what="interpolation_matrix")
    if old == new:
        return np.eye(new)
    kernel = _AXIS_KERNEL[mode]
    if antialias and kernel in _ANTIALIASED:
        return _antialiased(old, new, kernel)
    return _KERNELS[kernel](old, new)


def table_resize_matrix(shape, new_length, mode: str = "linear") -> np.ndarray:
    """Check the arguments of ``resize_table`` and return its ``(new, old)`` matrix.

    Args:
        shape: the table's shape, which must be ``(length, dim)``.
        new_length: the new number of rows.
        mode: one of :data:`MODES_1D`.

    Returns:
        float64 NumPy array of shape ``(new_length, length)``.
    """
    what = "resize_table"
    shape = tuple(shape)
    check_rank("table", shape, 2, what=what,
               fix="a table is (length, dim); for a ViT grid of positions use resize_table_2d")
    new_length = check_positive_int("new_length", new_length, what=what,
                                    fix="resize_table needs at least one row")
    check_choice("mode", mode, MODES_1D, what=what,
                 fix=_mode_fix(mode, MODES_2D, "resize_table_2d"))
    check_positive_int("length", shape[0], what=what,
                       fix="the table has no rows, so there is nothing to resample")
    return interpolation_matrix(shape[0], new_length, mode)


def grid_resize_matrices(shape, old_hw, new_hw, prefix_tokens: int = 0,
                         mode: str = "bicubic", *,
                         antialias: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Check the arguments of ``resize_table_2d`` and return its two matrices.

    Args:
        shape: the table's shape, which must be
            ``(prefix_tokens + old_h * old_w, dim)``.
        old_hw: ``(old_h, old_w)``, the grid the table was trained on.
        new_hw: ``(new_h, new_w)``, the grid wanted.
        prefix_tokens: number of leading rows that are not on the grid (CLS,
            distillation or register tokens).
        mode: one of :data:`MODES_2D`.
        antialias: ``True`` (default, as timm) or ``False``; see
            :func:`interpolation_matrix`.

    Returns:
        ``(rows, cols)``: float64 arrays of shapes ``(new_h, old_h)`` and
        ``(new_w, old_w)``; the new grid is ``rows @ grid @ cols.T`` per channel.
    """
    what = "resize_table_2d"
    shape = tuple(shape)
    check_rank("table", shape, 2, what=what,
               fix="a table is (prefix_tokens + height * width, dim); flatten the grid "
                   "row-major first")
    old_h, old_w = check_hw("old_hw", old_hw, what=what)
    new_h, new_w = check_hw("new_hw", new_hw, what=what)
    prefix_tokens = check_int("prefix_tokens", prefix_tokens, minimum=0, what=what)
    check_choice("mode", mode, MODES_2D, what=what,
                 fix=_mode_fix(mode, MODES_1D, "resize_table"))
    antialias = check_bool("antialias", antialias, what=what)
    check_grid_rows(shape[0], (old_h, old_w), prefix_tokens, what=what)
    return (interpolation_matrix(old_h, new_h, _AXIS_KERNEL[mode], antialias=antialias),
            interpolation_matrix(old_w, new_w, _AXIS_KERNEL[mode], antialias=antialias))


# ---------------------------------------------------------------------------
# What a table module says when a sequence does not fit (``{need}``: the rows needed).

#: ``LearnedEncoding``: a longer table, or a stretched one.
LEARNED_TOO_SHORT = ("build it with a larger max_len, or stretch a trained table with "
                     "enc.resized({need}) (resize_table; resize_table_2d for a ViT grid) or "
                     "grow it with enc.extended({need})")

#: ``HybridEncoding``: a longer offset table, or a stretched one.
HYBRID_TOO_SHORT = ("build it with a larger max_len, or stretch a trained offset table with "
                    "resize_table(enc.offset, {need})")

#: ``LowRankEncoding``: a longer table.
LOW_RANK_TOO_SHORT = "build it with a larger max_len"


# ---------------------------------------------------------------------------
# The low-rank table.


def low_rank_init_std(rank: int, target: float = TABLE_INIT_STD) -> float:
    """Standard deviation of each factor so that ``left @ right`` has std ``target``.

    With independent ``N(0, s^2)`` entries, each entry of the product is a sum
    of ``rank`` terms of variance ``s^4``, so ``s = sqrt(target / sqrt(rank))``.
    """
    return math.sqrt(target / math.sqrt(rank))


def low_rank_factors(table: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """The best rank-``rank`` factors of a ``(max_len, dim)`` table, by truncated SVD.

    With ``table = U S V^T``, the best approximation of rank ``r`` (in the
    Frobenius and spectral norms; Eckart & Young, 1936) is ``U_r S_r V_r^T``.
    The singular values are split evenly between the factors,
    ``left = U_r sqrt(S_r)`` and ``right = sqrt(S_r) V_r^T``, so both have rows
    and columns of comparable scale; ``left @ right`` equals ``U_r S_r V_r^T``.
    Computed in float64.

    Args:
        table: ``(max_len, dim)`` array.
        rank: ``1 <= rank <= min(max_len, dim)``.

    Returns:
        ``(left, right)``: float64 arrays ``(max_len, rank)`` and ``(rank, dim)``.

    Example:
        >>> left, right = low_rank_factors(np.outer([1.0, 2.0], [3.0, 4.0]), 1)
        >>> np.round(left @ right, 6)
        array([[3., 4.],
               [6., 8.]])

    References:
        Eckart & Young, "The approximation of one matrix by another of lower
        rank", Psychometrika 1(3), 1936.
    """
    table = np.asarray(table, dtype=np.float64)
    check_rank("table", table.shape, 2, what="LowRankEncoding.from_table")
    check_low_rank(*table.shape, rank, what="LowRankEncoding.from_table")
    u, s, vt = np.linalg.svd(table, full_matrices=False)
    root = np.sqrt(s[:rank])
    return u[:, :rank] * root, root[:, None] * vt[:rank]
