"""Attention biases (Keras face): ALiBi, T5's relative buckets, Swin's 2D relative bias.

Each scheme gives an additive float32 bias of shape ``(1, heads, q_len,
k_len)`` for the logits of every head; pass it as the ``bias`` of
``keras.ops.dot_product_attention`` (whose tensors are
``(batch, seq, heads, head_dim)``). The queries are the last ``q_len`` of the
``k_len`` positions (decoding with a cache). The three layers share one call,
``layer(q_len, k_len=None)`` with Python ints (``k_len`` defaults to
``q_len``), and return float32 whatever the dtype policy: an attention layer
casts the bias to its compute dtype. They are built with ``autocast=False``.

The framework-free parts (slopes, bucket and index maps, the family's
argument rules) are in ``posenc/bias.py``. The
PyTorch face mirrors this module name for name.
"""

from __future__ import annotations

from functools import partial

import keras
import numpy as np
from keras import ops

from posenc import bias as numpy_bias
from posenc._checks import (
    check_bool,
    check_lengths,
)
from posenc.bias import (
    TABLE_INIT_STD,
    check_num_heads,
    check_swin_table,
    check_t5_buckets,
    check_window,
    check_window_lengths,
)
from posenc.keras._util import as_indices
from posenc.positions import relative_positions
from posenc.keras.learned import _as_table, resize_table_2d

__all__ = [
    "alibi_slopes",
    "alibi_bias",
    "ALiBiBias",
    "t5_buckets",
    "T5RelativeBias",
    "swin_relative_index",
    "resize_swin_bias_table",
    "SwinRelativeBias",
]


def _lengths(q_len, k_len, what: str) -> tuple[int, int]:
    """``(q_len, k_len)`` checked, ``k_len`` defaulting to ``q_len``."""
    return check_lengths(q_len, q_len if k_len is None else k_len, what=what)


class _AttentionBias(keras.layers.Layer):
    """Base of the bias layers: ``layer(q_len, k_len=None)`` with Python ints.

    Keras accepts only tensors as positional arguments of a layer, so the
    lengths are passed on as keywords: ``bias(5, 9)`` reads as in PyTorch.
    """

    def __call__(self, q_len=None, k_len=None, **kwargs):
        return super().__call__(q_len=q_len, k_len=k_len, **kwargs)


# --------------------------------------------------------------------------- ALiBi

def alibi_slopes(num_heads: int):
    """ALiBi's per-head slopes (Press et al.), float32 ``(num_heads,)``.

    The geometric sequence ``2^(-8/n), 2^(-16/n), ..., 2^-8`` for a power of
    two ``n``; otherwise the recipe of the authors' code (the slopes of the
    closest lower power of two, then, appended, every other slope of the next
    one, so the slopes no longer decrease). See :func:`posenc.bias.alibi_slopes`.

    Args:
        num_heads: positive int.

    Returns:
        float32 tensor ``(num_heads,)``.

    Example:
        >>> keras.ops.convert_to_numpy(alibi_slopes(8) * 256)
        array([128.,  64.,  32.,  16.,   8.,   4.,   2.,   1.], dtype=float32)

    References:
        Press et al., "Train Short, Test Long: Attention with Linear Biases
        Enables Input Length Extrapolation", ICLR 2022, section 3.
    """
    return ops.convert_to_tensor(numpy_bias.alibi_slopes(num_heads).astype(np.float32))


def alibi_bias(num_heads: int, q_len: int, k_len: int, *, causal: bool = True):
    """ALiBi's linear bias ``-slope_h * (i - j)``: float32 ``(num_heads, q_len, k_len)``.

    Press et al. add no position to the embeddings; each head penalises a key
    in proportion to its distance from the query, with its own slope
    (:func:`alibi_slopes`). The queries are the last ``q_len`` of the
    ``k_len`` positions (query row ``r`` is position ``k_len - q_len + r``),
    so a decoder with a cache passes ``q_len=1``.

    With ``causal=True`` (the paper's language models) the future entries
    ``j > i`` hold ``-inf``: the bias is also the causal mask, and
    ``softmax(scores + bias)`` gives them weight 0. With ``causal=False`` the
    bias is symmetric, ``-slope_h * |i - j|`` (an encoder).

    Args:
        num_heads: positive int.
        q_len: number of queries, ``0 <= q_len <= k_len``.
        k_len: number of keys.
        causal: ``True`` (default) or ``False``.

    Returns:
        float32 tensor ``(num_heads, q_len, k_len)``; add a leading axis for
        the ``(1, heads, q_len, k_len)`` bias of ``dot_product_attention``.

    Example:
        >>> keras.ops.convert_to_numpy(alibi_bias(1, 2, 3))
        array([[[-0.00390625,  0.        ,        -inf],
                [-0.0078125 , -0.00390625,  0.        ]]], dtype=float32)

    References:
        Press et al., "Train Short, Test Long: Attention with Linear Biases
        Enables Input Length Extrapolation", ICLR 2022.
    """
    return ops.convert_to_tensor(numpy_bias.alibi_bias(num_heads, q_len, k_len, causal=causal))


@keras.saving.register_keras_serializable(package="posenc")
class ALiBiBias(_AttentionBias):
    """ALiBi as a layer: the bias of :func:`alibi_bias`, cached and sliced.

    No weights: the slopes are fixed (the ``slopes`` attribute). The bias
    depends on ``j - i`` only, so the layer keeps two float32 NumPy caches. A
    full pass (``q_len == k_len``) caches the square ``(num_heads, L, L)``
    bias of the longest such pass, ``L``, the size of the bias it returns
    anyway; every block with ``k_len <= L`` is then a slice of it. Any other
    block (decoding: a few queries over more keys than ``L``) is gathered
    from one row per head, the bias of every offset up to the longest length
    ``S`` seen (rounded up to a power of two, at least 16;
    :func:`posenc.bias.alibi_row`, ``(num_heads, 2S - 1)``): one decoding
    query costs ``num_heads * k_len`` numbers, never a square. The block
    enters the graph as a constant, so the layer works eagerly, inside
    ``tf.function`` and under ``jit_compile``.

    Args:
        num_heads: positive int.
        causal: ``True`` (default): future keys get ``-inf``; ``False``:
            the symmetric ``-slope * |i - j|``.

    Call arguments:
        q_len: number of queries (the last ``q_len`` of the ``k_len`` positions).
        k_len: number of keys; defaults to ``q_len``.

    Returns:
        float32 tensor ``(1, num_heads, q_len, k_len)``.

    Example:
        >>> alibi = ALiBiBias(8)
        >>> q = k = v = keras.random.normal((2, 5, 8, 16))   # (batch, seq, heads, head_dim)
        >>> out = keras.ops.dot_product_attention(q, k, v, bias=alibi(5))
        >>> tuple(alibi(1, 6).shape)   # one new token, five cached
        (1, 8, 1, 6)

    References:
        Press et al., "Train Short, Test Long: Attention with Linear Biases
        Enables Input Length Extrapolation", ICLR 2022.
    """

    def __init__(self, num_heads: int, *, causal: bool = True, **kwargs):
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        what = "ALiBiBias"
        self.num_heads = check_num_heads(num_heads, what=what)
        self.causal = check_bool("causal", causal, what=what)
        self.slopes = alibi_slopes(self.num_heads)
        self._cache = np.zeros((self.num_heads, 0), np.float32)
        self._square = np.zeros((self.num_heads, 0, 0), np.float32)
        self.built = True

    def call(self, q_len: int, k_len: int | None = None):
        q_len, k_len = _lengths(q_len, k_len, type(self).__name__)
        square = self._square.shape[-1]
        if square < k_len and q_len == k_len:
            self._square, square = self._block(k_len, k_len), k_len
        if k_len <= square:      # the queries are the last q_len of k_len positions: a slice
            return ops.convert_to_tensor(self._square[None, :, k_len - q_len:k_len, :k_len])
        return ops.convert_to_tensor(self._block(q_len, k_len)[None])

    def _block(self, q_len: int, k_len: int) -> np.ndarray:
        """The ``(num_heads, q_len, k_len)`` bias gathered from the row cache."""
        size = (self._cache.shape[-1] + 1) // 2                  # offsets -(size-1) .. size-1
        if size < k_len:
            size = max(16, 1 << (k_len - 1).bit_length())
            self._cache = numpy_bias.alibi_row(self.num_heads, size, causal=self.causal)
        return self._cache[:, relative_positions(q_len, k_len) + (size - 1)]

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads, "causal": self.causal})
        return config


# --------------------------------------------------------------------------- T5

def _cast(x, kind: str):
    return ops.cast(x, "float32" if kind == "float" else "int32")


#: The ops of :func:`posenc.bias.t5_bucket_map` in Keras.
_OPS = {"log": ops.log, "where": ops.where, "minimum": ops.minimum, "cast": _cast}


def t5_buckets(relative_position, *, bidirectional: bool = True, num_buckets: int = 32,
               max_distance: int = 128):
    """T5's bucket of each relative position ``key_pos - query_pos`` (int32, same shape).

    Small distances get a bucket each, larger ones logarithmically wider
    buckets up to ``max_distance``, beyond which all share the last bucket.
    Bidirectional (encoder): half the buckets for each direction, keys after
    the query offset by ``num_buckets // 2``. Causal (decoder): every future
    key shares bucket 0 with distance 0. Equal to T5's bucketing; see
    :func:`posenc.bias.t5_buckets`.

    Args:
        relative_position: int tensor, ``key_pos - query_pos``.
        bidirectional: ``True`` (encoder, default) or ``False`` (decoder).
        num_buckets: number of buckets; even when bidirectional. Default 32.
        max_distance: distance from which all share the last bucket. Default 128.

    Returns:
        int32 tensor of the shape of ``relative_position``.

    Example:
        >>> rel = keras.ops.convert_to_tensor([-200, -20, -3, 0, 3, 20])
        >>> keras.ops.convert_to_numpy(t5_buckets(rel))
        array([15, 10,  3,  0, 19, 26], dtype=int32)

    References:
        Raffel et al., "Exploring the Limits of Transfer Learning with a Unified
        Text-to-Text Transformer", JMLR 2020, section 2.1.
    """
    what = "t5_buckets"
    bidirectional, num_buckets, max_distance = check_t5_buckets(
        bidirectional, num_buckets, max_distance, what=what)
    rel = as_indices(relative_position, name="relative_position", what=what)
    return numpy_bias.t5_bucket_map(rel, bidirectional=bidirectional, num_buckets=num_buckets,
                                    max_distance=max_distance, **_OPS)


@keras.saving.register_keras_serializable(package="posenc")
class T5RelativeBias(_AttentionBias):
    """T5's learned relative position bias: one scalar per head and bucket.

    Raffel et al. replace position embeddings by a bias on the logits:
    ``B[h, i, j] = table[t5_buckets(j - i), h]``, learned, shared by the
    layers of a stack (T5 computes it in the first layer and reuses it).
    Encoders use ``bidirectional=True``; decoders ``bidirectional=False``
    with a causal mask of their own (the bias does not mask the future).

    Args:
        num_heads: positive int.
        bidirectional: ``True`` (encoder, default) or ``False`` (decoder).
        num_buckets: number of buckets; even when bidirectional. Default 32.
        max_distance: distance from which all share the last bucket. Default 128.

    Call arguments:
        q_len: number of queries (the last ``q_len`` of the ``k_len`` positions).
        k_len: number of keys; defaults to ``q_len``.

    Returns:
        float32 tensor ``(1, num_heads, q_len, k_len)``.

    Weights:
        relative_attention_bias: ``(num_buckets, num_heads)``, initialised
        ``N(0, 0.02^2)``.

    Example:
        >>> bias = T5RelativeBias(4, bidirectional=False)
        >>> tuple(bias(1, 10).shape)   # one new token, nine cached
        (1, 4, 1, 10)

    References:
        Raffel et al., "Exploring the Limits of Transfer Learning with a Unified
        Text-to-Text Transformer", JMLR 2020, section 2.1.
    """

    def __init__(self, num_heads: int, *, bidirectional: bool = True, num_buckets: int = 32,
                 max_distance: int = 128, **kwargs):
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        what = "T5RelativeBias"
        self.num_heads = check_num_heads(num_heads, what=what)
        self.bidirectional, self.num_buckets, self.max_distance = check_t5_buckets(
            bidirectional, num_buckets, max_distance, what=what)
        self.relative_attention_bias = self.add_weight(
            name="relative_attention_bias", shape=(self.num_buckets, self.num_heads),
            initializer=keras.initializers.RandomNormal(stddev=TABLE_INIT_STD))
        self.built = True

    def call(self, q_len: int, k_len: int | None = None):
        q_len, k_len = _lengths(q_len, k_len, type(self).__name__)
        if q_len == 0 or k_len == 0:      # JAX's take drops an axis of an empty gather
            return ops.zeros((1, self.num_heads, q_len, k_len), "float32")
        # j - i runs over -(k_len - 1) .. q_len - 1: bucket those q_len + k_len - 1 values
        # once, then read each head's row at j - i + k_len - 1 (no per-entry logarithm).
        span = max(k_len, 1) - 1                             # k_len = 0: nothing to read
        distances = ops.arange(-span, q_len, dtype="int32")
        buckets = t5_buckets(distances, bidirectional=self.bidirectional,
                             num_buckets=self.num_buckets, max_distance=self.max_distance)
        table = ops.cast(self.relative_attention_bias, "float32")
        per_head = ops.transpose(ops.take(table, buckets, axis=0))   # (heads, q_len + k_len - 1)
        rel = relative_positions(q_len, k_len, partial(ops.arange, dtype="int32"))
        return ops.expand_dims(ops.take(per_head, rel + span, axis=1), 0)

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads, "bidirectional": self.bidirectional,
                       "num_buckets": self.num_buckets, "max_distance": self.max_distance})
        return config


# --------------------------------------------------------------------------- Swin

def swin_relative_index(window_h: int, window_w: int):
    """Swin's index of the bias-table row of each pair of patches: int32 ``(H*W, H*W)``.

    Two patches ``(dy, dx)`` apart in a row-major ``H x W`` window read row
    ``(dy + H - 1) * (2W - 1) + (dx + W - 1)`` of a ``(2H-1) * (2W-1)`` table;
    see :func:`posenc.bias.swin_relative_index`.

    Args:
        window_h: window height in patches.
        window_w: window width in patches.

    Returns:
        int32 tensor ``(window_h * window_w, window_h * window_w)``.

    Example:
        >>> keras.ops.convert_to_numpy(swin_relative_index(2, 2))
        array([[4, 3, 1, 0],
               [5, 4, 2, 1],
               [7, 6, 4, 3],
               [8, 7, 5, 4]], dtype=int32)

    References:
        Liu et al., "Swin Transformer: Hierarchical Vision Transformer using
        Shifted Windows", ICCV 2021, section 3.2.
    """
    return ops.convert_to_tensor(
        numpy_bias.swin_relative_index(window_h, window_w).astype(np.int32))


def resize_swin_bias_table(table, old_window, new_window, *, mode: str = "bicubic"):
    """Resample a Swin bias table to a new window size (fine-tuning at another window).

    The table ``((2H-1) * (2W-1), num_heads)`` is a ``(2H-1) x (2W-1)`` grid of
    offsets per head; it is interpolated to ``(2H'-1) x (2W'-1)`` like a ViT
    grid (:func:`resize_table_2d` with ``antialias=False``: bicubic, ``a = -0.75``,
    ``align_corners=False``, as Swin's released checkpoints are adapted).

    Args:
        table: float tensor ``((2H-1) * (2W-1), num_heads)``.
        old_window: int or ``(H, W)``, the window the table was trained for.
        new_window: int or ``(H', W')``.
        mode: ``"bicubic"`` (default), ``"bilinear"`` or ``"nearest"``.

    Returns:
        Tensor ``((2H'-1) * (2W'-1), num_heads)`` of ``table``'s dtype.

    Example:
        >>> tuple(resize_swin_bias_table(keras.random.normal((13 * 13, 3)), 7, 12).shape)
        (529, 3)

    References:
        Liu et al., "Swin Transformer: Hierarchical Vision Transformer using
        Shifted Windows", ICCV 2021, section 3.2 and appendix A2.
    """
    what = "resize_swin_bias_table"
    old_h, old_w = check_window(old_window, name="old_window", what=what)
    new_h, new_w = check_window(new_window, name="new_window", what=what)
    table = _as_table(table, what)
    check_swin_table(tuple(table.shape), (old_h, old_w), what=what)
    return resize_table_2d(table, (2 * old_h - 1, 2 * old_w - 1),
                           (2 * new_h - 1, 2 * new_w - 1), mode=mode, antialias=False)


def _truncated_at_two_std(shape, dtype=None):
    """Keras' TruncatedNormal of std TABLE_INIT_STD, clipped at 2 std: on some backends its
    draws can fall a little past the bound, which the docstring promises."""
    draw = keras.initializers.TruncatedNormal(stddev=TABLE_INIT_STD)(shape, dtype=dtype)
    return keras.ops.clip(draw, -2 * TABLE_INIT_STD, 2 * TABLE_INIT_STD)


@keras.saving.register_keras_serializable(package="posenc")
class SwinRelativeBias(_AttentionBias):
    """Swin's learned 2D relative position bias for window attention.

    Liu et al. add ``B[h, a, b] = table[index[a, b], h]`` to the logits of the
    ``H*W`` patches of a window, ``index`` being :func:`swin_relative_index`:
    one learned scalar per head and 2D offset, ``(2H-1) * (2W-1)`` of them.
    :meth:`resized` adapts a trained table to another window.

    Args:
        num_heads: positive int.
        window_size: int ``n`` (an ``n x n`` window) or ``(H, W)``.

    Call arguments:
        q_len: ``H * W``, the patches of a window.
        k_len: ``H * W``; defaults to ``q_len``.

    Returns:
        float32 tensor ``(1, num_heads, H * W, H * W)``.

    Weights:
        relative_position_bias_table: ``((2H-1) * (2W-1), num_heads)``,
        initialised with a normal of std 0.02 truncated at 2 std (0.04). Swin
        calls timm's ``trunc_normal_(std=.02)``, whose bounds (-2, 2) are absolute,
        so its draws are in effect not truncated.

    Attributes:
        relative_position_index: int32 ``(H*W, H*W)``, :func:`swin_relative_index`
        (a constant, not saved).

    Example:
        >>> swin = SwinRelativeBias(3, 7)
        >>> tuple(swin(49).shape)
        (1, 3, 49, 49)

    References:
        Liu et al., "Swin Transformer: Hierarchical Vision Transformer using
        Shifted Windows", ICCV 2021, section 3.2.
    """

    def __init__(self, num_heads: int, window_size, **kwargs):
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        what = "SwinRelativeBias"
        self.num_heads = check_num_heads(num_heads, what=what)
        self.window_size = check_window(window_size, what=what)
        self.relative_position_bias_table = self.add_weight(
            name="relative_position_bias_table",
            shape=(numpy_bias.swin_table_size(*self.window_size), self.num_heads),
            initializer=_truncated_at_two_std)
        self.relative_position_index = swin_relative_index(*self.window_size)
        self.built = True

    def call(self, q_len: int, k_len: int | None = None):
        check_window_lengths(q_len, q_len if k_len is None else k_len, self.window_size,
                             what=type(self).__name__)
        table = ops.cast(self.relative_position_bias_table, "float32")
        bias = ops.take(table, self.relative_position_index, axis=0)
        return ops.expand_dims(ops.transpose(bias, (2, 0, 1)), 0)

    def resized(self, new_window, *, mode: str = "bicubic") -> "SwinRelativeBias":
        """A new layer for ``new_window`` with the table resampled
        (:func:`resize_swin_bias_table`)."""
        table = resize_swin_bias_table(self.relative_position_bias_table, self.window_size,
                                       new_window, mode=mode)
        config = {**self.get_config(), "window_size": new_window}
        config.pop("name", None)
        out = type(self).from_config(config)
        out.relative_position_bias_table.assign(
            ops.cast(table, out.relative_position_bias_table.dtype))
        return out

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads, "window_size": list(self.window_size)})
        return config
