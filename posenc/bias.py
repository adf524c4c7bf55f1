"""Attention biases (NumPy): ALiBi's slopes, T5's buckets, Swin's relative index.

A bias scheme adds ``B[h, i, j]`` to the attention logits of head ``h``,
query ``i`` and key ``j``; the faces return it as a float32 tensor of shape
``(1, heads, q_len, k_len)``, which works as a float ``attn_mask`` of
``torch.nn.functional.scaled_dot_product_attention`` and as the ``bias`` of
``keras.ops.dot_product_attention``. Queries are the last ``q_len`` of the
``k_len`` positions (decoding with a cache): query row ``r`` sits at position
``i = k_len - q_len + r``, and the relative position of key ``j`` is
``j - i`` (negative for the past).

Everything here depends on integers only (head counts, lengths, window
sizes): the faces turn ALiBi's slopes and Swin's index into constants once,
and compute T5's buckets with their own ops (checked equal to these).
A Swin table is resized to a new window as a ``(2H-1) x (2W-1)`` grid of
offsets per head, by the faces' ``resize_table_2d`` (the interpolation
matrices of :mod:`posenc.learned`). The family's argument rules (``check_*``)
are here, next to the formulas; the shared primitives are in :mod:`posenc._checks`.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from posenc import positions
from posenc._checks import (
    _error,
    check_bool,
    check_integer_dtype,
    check_lengths,
    check_positive_int,
)
# A fresh T5 or Swin bias table has the learned tables' standard deviation.
from posenc.learned import TABLE_INIT_STD

__all__ = [
    "alibi_slopes",
    "relative_positions",
    "alibi_bias",
    "alibi_row",
    "t5_buckets",
    "t5_bucket_map",
    "swin_relative_index",
    "swin_table_size",
    "TABLE_INIT_STD",
]


# --------------------------------------------------------------------------- argument rules

def check_num_heads(num_heads, *, what: str = "") -> int:
    """The number of attention heads, a positive integer."""
    return check_positive_int("num_heads", num_heads, what=what,
                              fix="pass the attention layer's head count, e.g. num_heads=8")


def check_t5_buckets(bidirectional, num_buckets, max_distance, *,
                     what: str = "") -> tuple[bool, int, int]:
    """T5's bucketing: an even ``num_buckets`` when bidirectional (half for each direction),
    at least two buckets per direction, and a ``max_distance`` beyond the exact ones."""
    bidirectional = check_bool("bidirectional", bidirectional, what=what)
    num_buckets = check_positive_int("num_buckets", num_buckets, what=what,
                                     fix="T5 uses num_buckets=32")
    if bidirectional and num_buckets % 2:
        raise _error(what, f"num_buckets must be even when bidirectional=True (half of the "
                           f"buckets for each direction), got num_buckets={num_buckets}",
                     f"use num_buckets={num_buckets + 1} or {num_buckets - 1}, or "
                     "bidirectional=False for a decoder")
    per_direction = num_buckets // 2 if bidirectional else num_buckets
    if per_direction < 2:
        least = 4 if bidirectional else 2
        raise _error(what, f"num_buckets must be at least {least} (bidirectional="
                           f"{bidirectional}: an exact and a logarithmic bucket per direction), "
                           f"got num_buckets={num_buckets}", "T5 uses num_buckets=32")
    max_exact = per_direction // 2
    if (isinstance(max_distance, bool) or not isinstance(max_distance, numbers.Integral)
            or max_distance <= max_exact):
        raise _error(what, f"max_distance must be an integer greater than the {max_exact} "
                           f"exact distances (num_buckets={num_buckets}, bidirectional="
                           f"{bidirectional}), got max_distance={max_distance!r}",
                     f"T5 uses max_distance=128; any value above {max_exact} works")
    return bidirectional, num_buckets, int(max_distance)


def check_window(window_size, *, name: str = "window_size", what: str = "") -> tuple[int, int]:
    """A window: a positive int ``n`` (an ``n x n`` window) or a ``(height, width)`` pair."""
    pair = window_size
    if isinstance(window_size, numbers.Integral) and not isinstance(window_size, bool):
        pair = (window_size, window_size)
    ok = (isinstance(pair, (tuple, list)) and len(pair) == 2
          and all(isinstance(v, numbers.Integral) and not isinstance(v, bool) and v > 0
                  for v in pair))
    if not ok:
        raise _error(what, f"{name} must be a positive integer or a (height, width) pair of "
                           f"positive integers, got {name}={window_size!r}",
                     "a window holds at least one patch; Swin uses 7")
    return int(pair[0]), int(pair[1])


def check_window_lengths(q_len, k_len, window_hw, *, what: str = "") -> None:
    """A window's bias is ``(H*W, H*W)``: ``q_len`` and ``k_len`` must both be ``H*W``."""
    size = window_hw[0] * window_hw[1]
    if q_len != size or k_len != size:
        raise _error(what, f"q_len and k_len must both be window_h * window_w = {size} (window "
                           f"{window_hw[0]}x{window_hw[1]}), got q_len={q_len!r}, "
                           f"k_len={k_len!r}",
                     f"pass q_len={size}, or build the layer for your window (resize a trained "
                     "table with .resized(new_window))")


def check_swin_table(shape, window_hw, *, what: str = "") -> None:
    """A Swin bias table is ``((2H-1) * (2W-1), num_heads)`` for an ``H x W`` window."""
    rows = (2 * window_hw[0] - 1) * (2 * window_hw[1] - 1)
    if len(shape) != 2 or shape[0] != rows:
        raise _error(what, f"table must be ((2*{window_hw[0]}-1) * (2*{window_hw[1]}-1), "
                           f"num_heads) = ({rows}, num_heads) for the window "
                           f"{window_hw[0]}x{window_hw[1]}, got table.shape={tuple(shape)}",
                     "pass the window the table was trained for as old_window")


# --------------------------------------------------------------------------- formulas


def alibi_slopes(num_heads: int) -> np.ndarray:
    """Press et al.'s head slopes: ``(num_heads,)`` float64.

    For ``n`` a power of two the slopes are the geometric sequence
    ``2^(-8/n), 2^(-16/n), ..., 2^-8``: eight heads get ``1/2, 1/4, ..., 1/256``.
    Otherwise the recipe of the authors' code (the paper trains only powers of
    two): the slopes of the closest lower power of two ``m``, then, appended,
    every other slope of ``2m`` (its first, third, ...) until there are ``n``.
    The first appended slope is steeper than every one before it and the
    others lie halfway (in the logarithm) between consecutive first ones, so
    the slopes do not decrease: head ``m`` (counting from 0) is the steepest.

    Args:
        num_heads: positive int.

    Returns:
        float64 NumPy array of shape ``(num_heads,)``; decreasing only when
        ``num_heads`` is a power of two.

    Example:
        >>> alibi_slopes(4)
        array([0.25      , 0.0625    , 0.015625  , 0.00390625])
        >>> alibi_slopes(6).round(4)
        array([0.25  , 0.0625, 0.0156, 0.0039, 0.5   , 0.125 ])

    References:
        Press et al., "Train Short, Test Long: Attention with Linear Biases
        Enables Input Length Extrapolation", ICLR 2022, section 3.
    """
    num_heads = check_num_heads(num_heads, what="alibi_slopes")

    def geometric(n: int) -> np.ndarray:
        return 2.0 ** (-8.0 * np.arange(1, n + 1) / n)

    lower = 2 ** int(math.floor(math.log2(num_heads)))
    if lower == num_heads:
        return geometric(num_heads)
    return np.concatenate((geometric(lower), geometric(2 * lower)[0::2][:num_heads - lower]))


def relative_positions(q_len: int, k_len: int) -> np.ndarray:
    """``j - i`` for the last ``q_len`` of ``k_len`` positions: ``(q_len, k_len)`` int64.

    Example:
        >>> relative_positions(2, 4)
        array([[-2, -1,  0,  1],
               [-3, -2, -1,  0]])
    """
    q_len, k_len = check_lengths(q_len, k_len, what="relative_positions")
    return positions.relative_positions(q_len, k_len)


def alibi_bias(num_heads: int, q_len: int, k_len: int, *, causal: bool = True) -> np.ndarray:
    """ALiBi's bias ``-slope_h * (i - j)``: ``(num_heads, q_len, k_len)`` float32.

    Computed as ``float32(slope) * float32(j - i)``, the product the faces
    compute, so the three agree bit for bit. With ``causal=True`` the future
    entries (``j > i``) hold ``-inf``: the bias is also the causal mask. With
    ``causal=False``, ``-slope_h * |i - j|`` everywhere (an encoder).

    Example:
        >>> alibi_bias(1, 2, 3)[0]
        array([[-0.00390625,  0.        ,        -inf],
               [-0.0078125 , -0.00390625,  0.        ]], dtype=float32)
    """
    what = "alibi_bias"
    num_heads = check_num_heads(num_heads, what=what)
    q_len, k_len = check_lengths(q_len, k_len, what=what)
    causal = check_bool("causal", causal, what=what)
    rel = relative_positions(q_len, k_len)
    slopes = alibi_slopes(num_heads).astype(np.float32)[:, None, None]
    if not causal:
        return slopes * -np.abs(rel).astype(np.float32)
    return np.where(rel > 0, np.float32(-np.inf), slopes * rel.astype(np.float32))


def alibi_row(num_heads: int, size: int, *, causal: bool = True) -> np.ndarray:
    """ALiBi's bias of every offset ``j - i`` from ``-(size - 1)`` to ``size - 1``:
    ``(num_heads, 2 * size - 1)`` float32.

    The bias depends on ``j - i`` only, so this one row per head holds every
    ``(q_len, k_len)`` block with ``k_len <= size``:
    ``alibi_bias(h, q_len, k_len)[:, r, j] == alibi_row(h, size)[:, j - i + size - 1]``
    (``i = k_len - q_len + r``), bit for bit, since the entries are
    :func:`alibi_bias`'s own. The layers cache it instead of a square.

    Example:
        >>> alibi_row(1, 2)
        array([[-0.00390625,  0.        ,        -inf]], dtype=float32)
    """
    past = alibi_bias(num_heads, 1, size, causal=causal)[:, 0]     # offsets -(size-1) .. 0
    future = np.full_like(past[:, 1:], -np.inf) if causal else past[:, -2::-1]
    return np.concatenate((past, future), axis=1)


def t5_buckets(relative_position, *, bidirectional: bool = True, num_buckets: int = 32,
               max_distance: int = 128) -> np.ndarray:
    """T5's bucket of each relative position ``key_pos - query_pos`` (int64, same shape).

    Bidirectional (an encoder): half the buckets for keys before the query,
    half for keys after it (those are offset by ``num_buckets // 2``). Causal
    (``bidirectional=False``, a decoder): every bucket for the past, and every
    future key shares bucket 0 with distance 0 (the causal mask hides them).
    In each direction the first ``max_exact = buckets_per_direction // 2``
    distances get a bucket each; larger distances share buckets whose width
    grows logarithmically up to ``max_distance``, and every distance from
    there on lands in the last bucket. The logarithm is taken in float32, as
    T5 does, so the buckets equal T5's.

    Args:
        relative_position: int array, ``key_pos - query_pos``.
        bidirectional: ``True`` (encoder, default) or ``False`` (decoder).
        num_buckets: number of buckets; even when bidirectional. Default 32.
        max_distance: distance from which all share the last bucket. Default 128.

    Returns:
        int64 NumPy array of the shape of ``relative_position``.

    Example:
        >>> t5_buckets(np.array([-200, -20, -3, 0, 3, 20]))
        array([15, 10,  3,  0, 19, 26])

    References:
        Raffel et al., "Exploring the Limits of Transfer Learning with a Unified
        Text-to-Text Transformer", JMLR 2020, section 2.1.
    """
    bidirectional, num_buckets, max_distance = check_t5_buckets(
        bidirectional, num_buckets, max_distance, what="t5_buckets")
    rel = np.asarray(relative_position)
    check_integer_dtype("relative_position", str(rel.dtype), what="t5_buckets")
    return t5_bucket_map(rel.astype(np.int64), bidirectional=bidirectional,
                         num_buckets=num_buckets, max_distance=max_distance, **NUMPY_OPS)


def _numpy_cast(x, kind: str):
    return x.astype(np.float32 if kind == "float" else np.int64)


#: The ops :func:`t5_bucket_map` needs, for NumPy (the faces pass their own).
NUMPY_OPS = {"log": np.log, "where": np.where, "minimum": np.minimum, "cast": _numpy_cast}


def t5_bucket_map(rel, *, bidirectional: bool, num_buckets: int, max_distance: int,
                  log, where, minimum, cast):
    """T5's bucketing of checked arguments, written once for NumPy and both faces.

    ``rel`` is an integer array or tensor of ``key_pos - query_pos``; the
    framework's ops are passed in: ``log``, ``where(cond, a, b)``,
    ``minimum(a, b)`` and ``cast(x, kind)``, which turns ``x`` into float32
    (``kind="float"``) or into the face's index dtype (``kind="int"``).
    Besides them only ``+``, ``-``, ``*``, ``//`` and comparisons are used. The
    logarithm is taken in float32 with float32 constants, as T5 does, so every
    framework gives T5's buckets. :func:`t5_buckets` checks its arguments and
    calls this.

    Example:
        >>> t5_bucket_map(np.array([-20, 3]), bidirectional=True, num_buckets=32,
        ...               max_distance=128, **NUMPY_OPS)
        array([10, 19])
    """
    if bidirectional:
        num_buckets //= 2
        offset = cast(rel > 0, "int") * num_buckets          # keys after the query
        distance = where(rel < 0, -rel, rel)
    else:
        offset = 0
        distance = -minimum(rel, 0)                         # the future shares bucket 0
    max_exact = num_buckets // 2
    scaled = (log(cast(where(distance > 1, distance, 1), "float") / np.float32(max_exact))
              / np.float32(math.log(max_distance / max_exact))
              * np.float32(num_buckets - max_exact))
    large = minimum(cast(scaled, "int") + max_exact, num_buckets - 1)
    return offset + where(distance < max_exact, distance, large)


def swin_relative_index(window_h: int, window_w: int) -> np.ndarray:
    """Swin's index of the bias table entry of each pair of patches: ``(H*W, H*W)`` int64.

    Patches ``a`` and ``b`` of a row-major ``H x W`` window are ``(dy, dx)``
    apart with ``dy`` in ``-(H-1) .. H-1`` and ``dx`` in ``-(W-1) .. W-1``;
    shifted to ``0 .. 2H-2`` and ``0 .. 2W-2``, the pair reads row
    ``(dy + H - 1) * (2W - 1) + (dx + W - 1)`` of a ``(2H-1) * (2W-1)`` table.
    The row offset must be scaled by ``2W - 1``, the number of ``dx`` values:
    without it, different offsets share an index.

    Example:
        >>> swin_relative_index(2, 2)
        array([[4, 3, 1, 0],
               [5, 4, 2, 1],
               [7, 6, 4, 3],
               [8, 7, 5, 4]])

    References:
        Liu et al., "Swin Transformer: Hierarchical Vision Transformer using
        Shifted Windows", ICCV 2021, section 3.2.
    """
    window_h, window_w = check_window((window_h, window_w), name="(window_h, window_w)",
                                      what="swin_relative_index")
    rows, cols = np.divmod(np.arange(window_h * window_w), window_w)
    dy = rows[:, None] - rows[None, :] + window_h - 1
    dx = cols[:, None] - cols[None, :] + window_w - 1
    return dy * (2 * window_w - 1) + dx


def swin_table_size(window_h: int, window_w: int) -> int:
    """Rows of a Swin bias table for an ``H x W`` window: ``(2H-1) * (2W-1)``."""
    return (2 * window_h - 1) * (2 * window_w - 1)
