"""Shaw et al.'s relative position representations (framework-free): the index maps.

Shaw et al. (2018) give every pair of a query ``i`` and a key ``j`` two learned
vectors, ``a^K_ij`` in the logits and ``a^V_ij`` in the values, read from two
tables of ``2k + 1`` rows at the row ``clip(j - i, -k, k) + k`` (``k`` is the
clipping distance ``max_distance``). Queries are the last ``q_len`` of the
``k_len`` positions (decoding with a cache), so query row ``r`` sits at
position ``k_len - q_len + r``.

Everything here is an index map written once and used by both faces: the
functions take positions (NumPy arrays, or the tensors of either face) and the
framework's ``clip``, and use only ``+``, ``-``, indexing and that ``clip``. The
registry :data:`SHAW_METHODS` names the ways of computing the attention. The
argument rules of the family (``check_*``) are here too, built with the
message builder of :mod:`posenc._checks`.
"""

from __future__ import annotations

import numpy as np

from posenc._checks import _error, check_int, check_lengths, check_positive_int, check_rank
from posenc.positions import pair_offsets, query_positions

__all__ = ["SHAW_METHODS", "SKEW_BLOCK_ELEMENTS", "query_blocks", "query_positions",
           "relative_index", "bucket_boundaries", "window_index", "window_block",
           "band_columns", "band_offsets", "MASKED_LOGIT", "shaw_relative_index"]

#: method name -> what it materialises. Both faces implement every entry and give the
#: same numbers (within float32 rounding).
SHAW_METHODS = {
    "naive": "gathers the (q_len, k_len, head_dim) tensors a^K and a^V, then contracts them "
             "with the queries and the attention weights",
    "skew": "multiplies the queries by the key table, (..., q_len, 2k+1), gathers that into "
            "the (q_len, k_len) logits, and sums the attention weights into 2k+1 distance "
            "buckets before multiplying by the value table; queries in blocks",
}

#: The skew method works on blocks of queries so that each ``(block, k_len)`` temporary
#: holds at most ``batch * SKEW_BLOCK_ELEMENTS`` numbers (heads * block * k_len <= this).
SKEW_BLOCK_ELEMENTS = 1 << 22

#: The logit of a key outside a query's window: finite, so that the padding rows of a block,
#: which see no key, get uniform weights (dropped afterwards) instead of NaN.
MASKED_LOGIT = -1e30

#: Added to and subtracted from the query position for the two clipped buckets'
#: outer boundaries (any number beyond every sequence length would do).
_FAR = 1 << 30


# --------------------------------------------------------------------------- argument rules

def check_max_distance(max_distance, *, what: str = "") -> int:
    """Shaw et al.'s clipping distance ``k``, an integer ``>= 0``."""
    return check_int("max_distance", max_distance, minimum=0, what=what,
                     fix="it is the clipping distance k of the relative positions; Shaw et "
                         "al. found k >= 2 enough (k = 0 leaves no position information)")


def _check_q_len(q_len: int, k_len: int, *, what: str) -> None:
    if q_len > k_len:
        raise _error(what, f"q_len must be at most k_len (the queries are the last q_len of the "
                           f"k_len key positions), got q_len={q_len}, k_len={k_len}",
                     f"pass k_len >= {q_len}: the cached keys plus the new ones")


def check_heads(dim, num_heads, *, what: str = "", name: str = "num_heads") -> tuple[int, int]:
    """``dim`` and ``num_heads`` (called ``name``) positive integers, ``dim`` a multiple of
    ``num_heads``."""
    dim = check_positive_int("dim", dim, what=what)
    num_heads = check_positive_int(name, num_heads, what=what,
                                   fix="use at least one attention head")
    if dim % num_heads:
        divisors = [h for h in range(1, dim + 1) if dim % h == 0]
        near = sorted(divisors, key=lambda h: (abs(h - num_heads), h))[:2]
        raise _error(what, f"{name} must divide dim (each head gets dim // {name} "
                           f"features), got dim={dim} and {name}={num_heads}",
                     f"use {name}={f' or {name}='.join(str(h) for h in sorted(near))}, "
                     f"or a dim that is a multiple of {num_heads}")
    return dim, num_heads


def check_window_radius(window, *, what: str = "") -> int:
    """The number of positions a query sees on each side, an integer ``>= 0``."""
    return check_int("window", window, minimum=0, what=what,
                     fix="window counts the keys each query sees on each side, so a negative "
                         "window is empty; window=0 sees only the query's own position")


def check_attention(q_shape, k_shape, v_shape, *, what: str = "") -> tuple[int, int]:
    """``q``, ``k``, ``v`` are ``(batch, heads, seq, head_dim)``, with one batch, one set of
    heads, one ``head_dim`` and ``q_len <= k_len``; returns ``(q_len, k_len)``
    (``None`` where unknown)."""
    layout = "(batch, heads, seq, head_dim)"
    for name, shape in (("q", q_shape), ("k", k_shape), ("v", v_shape)):
        check_rank(name, shape, 4, what=what, fix=f"lay attention tensors out as {layout}")
    q_shape, k_shape, v_shape = tuple(q_shape), tuple(k_shape), tuple(v_shape)

    def same(a, b):
        return a is None or b is None or a == b

    agree = (all(same(q_shape[a], k_shape[a]) for a in (0, 1, 3))
             and all(same(k_shape[a], v_shape[a]) for a in (0, 1, 2)))
    if not agree or not same(q_shape[3], v_shape[3]):
        raise _error(what, f"q, k and v must be {layout} with the same batch, heads and "
                           f"head_dim, and k and v the same seq, got q.shape={q_shape}, "
                           f"k.shape={k_shape}, v.shape={v_shape}")
    q_len, k_len = q_shape[2], k_shape[2]
    if q_len is not None and k_len is not None:
        _check_q_len(q_len, k_len, what=what)
    return q_len, k_len


def check_relative_table(name: str, shape, rows: int, head_dim, *, what: str = "",
                         distance: str = "max_distance") -> None:
    """A relative table is ``(rows, head_dim)``, ``rows = 2 * distance + 1``."""
    shape = tuple(shape)
    if len(shape) != 2 or shape[0] != rows or (head_dim is not None and shape[1] is not None
                                               and shape[1] != head_dim):
        k = (rows - 1) // 2
        raise _error(what, f"{name} must have shape (2 * {distance} + 1, head_dim) = "
                           f"({rows}, {head_dim}) for {distance}={k}, got {name}.shape={shape}",
                     f"build the table with one row per relative position -{k} .. {k}, or "
                     f"pass the {distance} it was built for")


# --------------------------------------------------------------------------- index maps

def query_blocks(q_len, k_len, heads) -> list[tuple]:
    """The ``(start, stop)`` query blocks of the skew method.

    Each block's ``(heads, block, k_len)`` temporaries hold at most
    :data:`SKEW_BLOCK_ELEMENTS` numbers per example, so the peak memory does not
    grow with ``q_len * k_len``. A length that is not known yet (``None``, a
    symbolic Keras shape) gives one block, ``[(0, q_len)]``.

    Example:
        >>> query_blocks(1024, 2048, 8)
        [(0, 256), (256, 512), (512, 768), (768, 1024)]
    """
    if not all(isinstance(n, int) for n in (q_len, k_len, heads)):
        return [(0, q_len)]
    size = max(1, SKEW_BLOCK_ELEMENTS // max(1, heads * k_len))
    return [(start, min(start + size, q_len)) for start in range(0, q_len, size)]


def relative_index(queries, keys, max_distance: int, clip):
    """Table row of each (query, key) pair: ``clip(j - i, -k, k) + k``.

    Args:
        queries: ``(q_len,)`` absolute query positions ``i``.
        keys: ``(k_len,)`` key positions ``j``.
        max_distance: the clipping distance ``k >= 0``.
        clip: the framework's ``clip(x, low, high)``.

    Returns:
        ``(q_len, k_len)`` integers in ``0 .. 2k``.

    Example:
        >>> relative_index(np.arange(3), np.arange(3), 1, np.clip)
        array([[1, 2, 2],
               [0, 1, 2],
               [0, 0, 1]])
    """
    return clip(pair_offsets(queries, keys), -max_distance, max_distance) + max_distance


def bucket_boundaries(queries, k_len, max_distance: int, clip, arange):
    """Where each distance bucket of each query ends, for the skew method's values.

    Bucket ``r`` of query ``i`` holds the keys ``j`` with
    ``clip(j - i, -k, k) + k == r``: all ``j <= i - k`` for ``r = 0``, the one key
    ``j = i + r - k`` for ``0 < r < 2k``, all ``j >= i + k`` for ``r = 2k``. With
    ``C`` the running sum of a row of attention weights over the keys (``C[-1] =
    0``), the weight bucket ``r`` receives is ``C[e[r + 1]] - C[e[r]]``, where
    ``e`` is this function's row: ``2k + 2`` key indices in ``-1 .. k_len - 1``,
    non-decreasing.

    Args:
        queries: ``(q_len,)`` absolute query positions.
        k_len: number of keys (an int, or a dynamic length).
        max_distance: the clipping distance ``k >= 0``.
        clip: the framework's ``clip(x, low, high)``.
        arange: the framework's ``arange``.

    Returns:
        ``(q_len, 2k + 2)`` integers.

    Example:
        >>> bucket_boundaries(np.arange(4), 4, 1, np.clip, np.arange)
        array([[-1, -1,  0,  3],
               [-1,  0,  1,  3],
               [-1,  1,  2,  3],
               [-1,  2,  3,  3]])
    """
    k = max_distance
    step = arange(2 * k + 2) - (k + 1)         # -k-1 .. k: the last key of each bucket - i
    # The first boundary (-k-1) moves to -_FAR and the last (k) to +_FAR, so that clipping
    # sends them to -1 and k_len - 1 whatever i is: the two clipped buckets.
    last = clip(step, k - 1, k) - (k - 1)      # 1 for the last entry, else 0
    first = -k - clip(step, -k - 1, -k)        # 1 for the first entry, else 0
    offsets = step + _FAR * (last - first)
    return clip(queries[:, None] + offsets[None, :], -1, k_len - 1)


def window_index(queries, window: int, arange):
    """Keys seen by each query of a window of ``window`` positions on each side.

    Column ``c`` of row ``i`` is the key ``i + c - window``, whose relative
    position ``j - i = c - window`` reads row ``c`` of a ``(2 * window + 1, ...)``
    table; keys outside ``0 .. k_len - 1`` are the caller's to mask.

    Example:
        >>> window_index(np.arange(3), 1, np.arange)
        array([[-1,  0,  1],
               [ 0,  1,  2],
               [ 1,  2,  3]])
    """
    return queries[:, None] + (arange(2 * window + 1) - window)[None, :]


def window_block(window: int) -> int:
    """Queries per block of windowed attention: ``max(2 * window, 16)``.

    Block ``m`` of ``B`` queries needs the ``B + 2 * window`` keys around it, which
    fit in two consecutive blocks of keys when ``B >= 2 * window``; the blocks'
    logits are one batched matrix product, ``(B, B + 2 * window)`` per block.

    Example:
        >>> window_block(32), window_block(2)
        (64, 16)
    """
    return max(2 * window, 16)


def band_columns(block: int, window: int, arange):
    """Where the window of each query of a block lies among the block's keys.

    Row ``r`` (query ``r`` of the block), column ``c`` (relative position
    ``c - window``) is the key column ``r + c`` of the block's ``block + 2 *
    window`` keys, which start ``window`` positions before the block.

    Example:
        >>> band_columns(3, 1, np.arange)
        array([[0, 1, 2],
               [1, 2, 3],
               [2, 3, 4]])
    """
    return arange(block)[:, None] + arange(2 * window + 1)[None, :]


def band_offsets(block: int, window: int, arange):
    """The inverse of :func:`band_columns`: for query ``r`` of a block and key column ``j``
    of its keys, the window column ``j - r`` (in ``0 .. 2 * window`` when the key is in
    the query's window).

    Example:
        >>> band_offsets(2, 1, np.arange)
        array([[ 0,  1,  2,  3],
               [-1,  0,  1,  2]])
    """
    return arange(block + 2 * window)[None, :] - arange(block)[:, None]


def shaw_relative_index(q_len: int, k_len: int, max_distance: int) -> np.ndarray:
    """Shaw et al.'s table rows ``clip(j - i, -k, k) + k`` as a NumPy int64 array.

    The queries are the last ``q_len`` of the ``k_len`` positions. The faces'
    functions of the same name return the same numbers as a tensor.

    Example:
        >>> shaw_relative_index(2, 4, 1)
        array([[0, 0, 1, 2],
               [0, 0, 0, 1]])
    """
    what = "shaw_relative_index"
    q_len, k_len = check_lengths(q_len, k_len, what=what)
    max_distance = check_max_distance(max_distance, what=what)
    return relative_index(query_positions(q_len, k_len, np.arange), np.arange(k_len),
                          max_distance, np.clip).astype(np.int64)
