"""Index maps that several families share (framework-free), each written once.

* ``j - i``, the relative position of key ``j`` to query ``i``, where the queries
  are the last ``q_len`` of the ``k_len`` positions (decoding with a cache):
  ALiBi's and T5's biases, Shaw's tables, the causal mask and the diagnostics
  that average a matrix by offset all read it (:func:`relative_positions`,
  :func:`pair_offsets`, :func:`query_positions`).
* The channel permutation between the two sinusoidal layouts
  (:func:`layout_permutation`).
* Where a resized grid's samples sit on the old grid (:func:`source_coordinates`),
  used by table resizing and by the sinusoid of a grid trained at another size.

The maps that run on tensors take the framework's ``arange`` as an argument
(``np.arange``, ``torch.arange`` with a device, ``keras.ops.arange`` with a
dtype), as :mod:`posenc.shaw` does, and use only ``+``, ``-`` and indexing
with ``None``: one function serves NumPy arrays and the tensors of both faces.
"""

from __future__ import annotations

import numpy as np

from posenc._checks import check_even_dim, check_layout

__all__ = ["query_positions", "pair_offsets", "relative_positions", "layout_permutation",
           "source_coordinates"]


def query_positions(q_len, k_len, arange=np.arange):
    """Absolute positions of the queries, ``k_len - q_len .. k_len - 1``.

    Example:
        >>> query_positions(2, 5)
        array([3, 4])
    """
    return arange(q_len) + (k_len - q_len)


def pair_offsets(queries, keys):
    """``j - i`` for every pair of a query position ``i`` and a key position ``j``.

    Args:
        queries: ``(q_len,)`` positions (an array or a tensor).
        keys: ``(k_len,)`` positions of the same kind.

    Returns:
        ``(q_len, k_len)``: row ``r`` holds ``keys - queries[r]``.

    Example:
        >>> pair_offsets(np.array([1, 2]), np.arange(3))
        array([[-1,  0,  1],
               [-2, -1,  0]])
    """
    return keys[None, :] - queries[:, None]


def relative_positions(q_len, k_len, arange=np.arange):
    """``j - i`` for the last ``q_len`` of ``k_len`` positions: ``(q_len, k_len)`` integers.

    Negative for the past, ``0`` on the query's own position, positive for the
    future. ``arange`` is the framework's (its dtype and device are the result's).

    Example:
        >>> relative_positions(2, 4)
        array([[-2, -1,  0,  1],
               [-3, -2, -1,  0]])
    """
    return pair_offsets(query_positions(q_len, k_len, arange), arange(k_len))


def layout_permutation(dim: int, *, src: str = "interleaved", dst: str = "concat") -> np.ndarray:
    """Channel permutation that turns a ``src``-layout encoding into a ``dst``-layout one.

    Both layouts hold the same numbers, ``sin(p w_i)`` and ``cos(p w_i)`` for
    ``i = 0 .. dim/2 - 1``; only the channel order differs. ``"interleaved"``
    puts the pair ``i`` at channels ``2i, 2i+1``; ``"concat"`` puts the sine at
    channel ``i`` and the cosine at channel ``dim/2 + i``. (RoPE's ``"half"``
    layout is the channel order of ``"concat"``.)

    Args:
        dim: even feature dimension.
        src: layout of the encoding you have, ``"interleaved"`` or ``"concat"``.
            Default ``"interleaved"``.
        dst: layout you want. Default ``"concat"``.

    Returns:
        int64 array ``perm`` of shape ``(dim,)`` with
        ``encoding_dst == encoding_src[..., perm]``. The same ``perm`` converts
        a weight that reads the encoding, so that it computes the same output
        from the other layout: ``W_dst = W_src[:, perm]`` for a PyTorch
        ``(out, in)`` weight, ``kernel_dst = kernel_src[perm]`` for a Keras
        ``(in, out)`` kernel. ``np.argsort(perm)`` is the permutation back.

    Example:
        >>> layout_permutation(6)
        array([0, 2, 4, 1, 3, 5])
        >>> layout_permutation(6, src="concat", dst="interleaved")
        array([0, 3, 1, 4, 2, 5])
        >>> rng = np.random.default_rng(0)
        >>> x_src, w_src = rng.normal(size=(3, 6)), rng.normal(size=(4, 6))  # w: (out, in)
        >>> perm = layout_permutation(6)
        >>> bool(np.allclose(x_src[:, perm] @ w_src[:, perm].T, x_src @ w_src.T))
        True
    """
    dim = check_even_dim(dim)
    check_layout(src)
    check_layout(dst)
    half = dim // 2
    pair = np.arange(half)
    # where each (sin_i, cos_i) lives in each layout
    where = {
        "interleaved": (2 * pair, 2 * pair + 1),
        "concat": (pair, half + pair),
    }
    perm = np.empty(dim, dtype=np.int64)
    dst_sin, dst_cos = where[dst]
    src_sin, src_cos = where[src]
    perm[dst_sin] = src_sin
    perm[dst_cos] = src_cos
    return perm


def source_coordinates(old: int, new: int) -> np.ndarray:
    """Where the ``new`` output samples sit on the ``old`` input grid (float64).

    Output sample ``j`` sits at input coordinate ``(j + 0.5) * old / new - 0.5``:
    half-pixel centres, ``align_corners=False``. ``old == new`` gives ``0 .. new-1``
    exactly.

    Example:
        >>> source_coordinates(2, 4)
        array([-0.25,  0.25,  0.75,  1.25])
    """
    return (np.arange(new) + 0.5) * (old / new) - 0.5
