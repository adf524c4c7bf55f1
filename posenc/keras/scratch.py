"""Teaching versions of the formulas, in Keras 3 (``keras.ops``): a few lines each, no checks.

The chapters show these functions side by side with :mod:`posenc.torch.scratch` before they use
the package; ``tests/test_scratch.py`` asserts that each one equals its ``posenc.keras``
counterpart. Use the package in real code: these skip the argument checks and the dtype
handling that the package's versions have.
"""

from __future__ import annotations

import math

from keras import ops


# Chapter 1


def self_attention(x, w_q, w_k, w_v, causal=False):
    """One head of self-attention, softmax(x W_q (x W_k)^T / sqrt(d_k)) x W_v, on (..., n, d)."""
    q, k, v = ops.matmul(x, w_q), ops.matmul(x, w_k), ops.matmul(x, w_v)
    scores = ops.matmul(q, ops.swapaxes(k, -1, -2)) / q.shape[-1] ** 0.5   # (..., n, n)
    if causal:                                                  # token i sees tokens j <= i only
        n = ops.shape(scores)[-1]
        future = ops.triu(ops.ones((n, n), dtype="bool"), 1)
        scores = ops.where(future, float("-inf"), scores)
    return ops.matmul(ops.softmax(scores, axis=-1), v)


def permutation_gap(attend, x, perm):
    """Largest |attend(x[perm]) - attend(x)[perm]| over the rows (seq axis -2) of x."""
    return ops.max(ops.abs(attend(ops.take(x, perm, axis=-2)) - ops.take(attend(x), perm, axis=-2)))


# Chapter 2


def sinusoidal(positions, dim, base=10000.0, dtype="float64"):
    """PE[p, 2i] = sin(p w_i), PE[p, 2i+1] = cos(p w_i), w_i = base^(-2i/dim); angles in dtype."""
    inv_freq = ops.power(base, -ops.arange(0, dim, 2, dtype=dtype) / dim)   # (dim/2,)
    angles = ops.cast(positions, dtype)[:, None] * inv_freq                  # (n, dim/2)
    pe = ops.stack((ops.sin(angles), ops.cos(angles)), axis=-1)              # (n, dim/2, 2)
    return ops.cast(ops.reshape(pe, (-1, dim)), "float32")


def shift_matrix(k, dim, base=10000.0):
    """M_k, the (dim, dim) block rotation with PE(p + k) = M_k PE(p) (column vectors)."""
    angle = k * ops.power(base, -ops.arange(0, dim, 2, dtype="float64") / dim)
    c, s = ops.cos(angle), ops.sin(angle)
    off = ops.reshape(ops.stack((s, ops.zeros_like(s)), axis=-1), (dim,))[:-1]
    return ops.diag(ops.repeat(c, 2)) + ops.diag(off, 1) - ops.diag(off, -1)


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


# Chapter 4


def coordinate_encoding(coords, dim, scale=2 * 3.141592653589793, base=10000.0):
    """DETR's sine embedding: the sinusoid of each scaled coordinate, blocks concatenated."""
    width = dim // coords.shape[-1]                              # channels per coordinate
    inv_freq = base ** (-ops.arange(0, width, 2, dtype="float32") / width)
    angles = ops.expand_dims(ops.cast(coords, "float32") * scale, -1) * inv_freq
    pe = ops.stack((ops.sin(angles), ops.cos(angles)), axis=-1)  # sin, cos interleaved
    return ops.reshape(pe, (*coords.shape[:-1], dim))            # (..., k * width)


def laplacian_positions(adjacency, k):
    """The k eigenvectors of I - D^-1/2 A D^-1/2 after the trivial one (a connected graph)."""
    d = ops.rsqrt(ops.sum(adjacency, axis=-1))                   # D^-1/2 as a vector
    lap = ops.eye(adjacency.shape[0]) - d[:, None] * adjacency * d[None, :]
    eigenvalues, eigenvectors = ops.eigh(lap)                    # ascending eigenvalues
    return eigenvectors[:, 1:k + 1]                              # skip eigenvalue 0


# Chapter 5


def shaw_relative_index(q_len, k_len, max_distance):
    """clip(j - i, -k, k) + k for queries i at the last q_len of the k_len key positions."""
    i = ops.arange(k_len - q_len, k_len)[:, None]               # query positions
    j = ops.arange(k_len)[None, :]                              # key positions
    return ops.clip(j - i, -max_distance, max_distance) + max_distance


def shaw_attention(q, k, v, key_table, value_table, max_distance, causal=False, mask=None):
    """Shaw et al.'s attention, naively: two (q_len, k_len, head_dim) gathers; mask True = seen."""
    q_len, k_len = q.shape[-2], k.shape[-2]
    idx = shaw_relative_index(q_len, k_len, max_distance)
    a_k, a_v = ops.take(key_table, idx, axis=0), ops.take(value_table, idx, axis=0)
    scores = ops.matmul(q, ops.swapaxes(k, -1, -2)) + ops.einsum("...id,ijd->...ij", q, a_k)
    scores = scores / q.shape[-1] ** 0.5
    if causal:                                                  # keys after the query: -inf
        future = ops.triu(ops.ones((q_len, k_len), dtype="bool"), k_len - q_len + 1)
        scores = ops.where(future, float("-inf"), scores)
    if mask is not None:
        scores = ops.where(mask, scores, float("-inf"))
    w = ops.softmax(scores, axis=-1)
    return ops.matmul(w, v) + ops.einsum("...ij,ijd->...id", w, a_v)


def shaw_logits_gather(q, key_table, max_distance, k_len):
    """The logits q_i . a^K_ij from q @ key_table^T, only (q_len, 2k+1), then one gather."""
    idx = shaw_relative_index(q.shape[-2], k_len, max_distance)
    rel = ops.matmul(q, ops.transpose(key_table))               # (..., q_len, 2k + 1)
    idx = ops.broadcast_to(idx, (*rel.shape[:-1], k_len))
    return ops.take_along_axis(rel, idx, axis=-1)


def t5_buckets(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    """T5's bucket of key_pos - query_pos: exact for small distances, log-spaced up to max."""
    relative_position, n, offset = ops.cast(relative_position, "int32"), num_buckets, 0
    if bidirectional:                                           # half the buckets per side
        n //= 2
        offset = ops.cast(relative_position > 0, "int32") * n
        distance = ops.abs(relative_position)
    else:                                                       # keys after the query: 0
        distance = ops.maximum(-relative_position, 0)
    exact = n // 2                                              # buckets 0 .. exact-1: exact
    ratio = ops.cast(ops.maximum(distance, 1), "float32") / exact
    log_ratio = ops.log(ratio) / math.log(max_distance / exact)
    log_bucket = ops.minimum(exact + ops.cast(log_ratio * (n - exact), "int32"), n - 1)
    return offset + ops.where(distance < exact, distance, log_bucket)


# Chapter 6


def swin_relative_index(window_h, window_w):
    """Swin's (H*W, H*W) index (dy + H - 1) * (2W - 1) + dx + W - 1 into a (2H-1)(2W-1) table."""
    rows, cols = ops.meshgrid(ops.arange(window_h), ops.arange(window_w), indexing="ij")
    coords = ops.stack((ops.reshape(rows, (-1,)), ops.reshape(cols, (-1,))))   # (2, H*W)
    rel = coords[:, :, None] - coords[:, None, :]                # query minus key
    return (rel[0] + window_h - 1) * (2 * window_w - 1) + (rel[1] + window_w - 1)


def alibi_slopes(num_heads):
    """Press et al.'s slopes 2^(-8k/n), k = 1..n, n the largest power of two <= num_heads."""
    n = 2 ** (num_heads.bit_length() - 1)                       # closest lower power of two
    slopes = 2.0 ** (-8.0 * ops.arange(1, n + 1, dtype="float32") / n)
    odd = 2 * ops.arange(num_heads - n, dtype="float32") + 1    # odd k of 2n heads
    return ops.concatenate((slopes, 2.0 ** (-4.0 * odd / n)))


def alibi_bias(num_heads, q_len, k_len, causal=True):
    """(heads, q_len, k_len) bias -slope * (i - j), |i - j| if not causal; queries last q_len."""
    i = ops.arange(k_len - q_len, k_len)[:, None]               # query positions
    distance = ops.cast(i - ops.arange(k_len), "float32")       # i - j
    if not causal:
        distance = ops.abs(distance)
    return -alibi_slopes(num_heads)[:, None, None] * distance


# The lab (chapter 10)


def perplexity(logits, targets):
    """exp of the mean cross-entropy of next-token logits (batch, seq, vocab) against targets."""
    ce = ops.sparse_categorical_crossentropy(targets, logits, from_logits=True)
    return ops.exp(ops.mean(ce))


# Chapter 11


def cosine_similarity(table):
    """(positions, positions) cosines between the rows of a (positions, dim) table."""
    unit = table / ops.norm(table, axis=-1, keepdims=True)
    return unit @ ops.transpose(unit)


def ridge_regression(x, y, ridge=1.0):
    """Weights and intercept of (xc^T xc + ridge I) w = xc^T yc, xc and yc centred."""
    x_mean, y_mean = ops.mean(x, axis=0), ops.mean(y)
    xc = x - x_mean
    gram = ops.transpose(xc) @ xc + ridge * ops.eye(x.shape[1], dtype=x.dtype)
    w = ops.solve(gram, ops.transpose(xc) @ (y - y_mean)[:, None])[:, 0]   # (dim,)
    return w, y_mean - ops.sum(x_mean * w)
