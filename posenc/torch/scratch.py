"""Teaching versions of the formulas, in PyTorch: a few lines each, no checks, no caching.

The chapters show these functions side by side with :mod:`posenc.keras.scratch` before they use
the package; ``tests/test_scratch.py`` asserts that each one equals its ``posenc.torch``
counterpart. Use the package in real code: these skip the argument checks, the
autocast and device handling and the caches that the package's versions have.
"""

from __future__ import annotations

import math

import torch


# Chapter 1


def self_attention(x, w_q, w_k, w_v, causal=False):
    """One head of self-attention, softmax(x W_q (x W_k)^T / sqrt(d_k)) x W_v, on (..., n, d)."""
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5       # (..., n, n)
    if causal:                                                  # token i sees tokens j <= i only
        future = torch.ones(scores.shape[-2:], dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def permutation_gap(attend, x, perm):
    """Largest |attend(x[perm]) - attend(x)[perm]| over the rows (seq axis -2) of x."""
    return (attend(x[..., perm, :]) - attend(x)[..., perm, :]).abs().max()


# Chapter 2


def sinusoidal(positions, dim, base=10000.0, dtype=torch.float64):
    """PE[p, 2i] = sin(p w_i), PE[p, 2i+1] = cos(p w_i), w_i = base^(-2i/dim); angles in dtype."""
    inv_freq = base ** (-torch.arange(0, dim, 2, dtype=dtype) / dim)   # (dim/2,)
    angles = positions.to(dtype)[:, None] * inv_freq                    # (n, dim/2)
    pe = torch.stack((angles.sin(), angles.cos()), dim=-1)              # (n, dim/2, 2)
    return pe.reshape(len(positions), dim).to(torch.float32)


def shift_matrix(k, dim, base=10000.0):
    """M_k, the (dim, dim) block rotation with PE(p + k) = M_k PE(p) (column vectors)."""
    angle = k * base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    c, s = angle.cos(), angle.sin()
    off = torch.stack((s, torch.zeros_like(s)), dim=-1).reshape(dim)[:-1]
    return torch.diag(c.repeat_interleave(2)) + torch.diag(off, 1) - torch.diag(off, -1)


# Chapter 3


def learned(x, table):
    """Add the learned rows table[0 .. seq-1] to x of shape (batch, seq, dim)."""
    return x + table[: x.shape[-2]]


def resize_linear(table, new_length):
    """Stretch a (length, dim) table to new_length rows by linear interpolation."""
    length = table.shape[0]
    u = (torch.arange(new_length) + 0.5) * length / new_length - 0.5  # old coordinate
    u = u.clamp(0, length - 1)
    lo = u.floor().long()
    hi = (lo + 1).clamp(max=length - 1)
    w = (u - lo)[:, None]
    return (1 - w) * table[lo] + w * table[hi]


# Chapter 4


def coordinate_encoding(coords, dim, scale=2 * torch.pi, base=10000.0):
    """DETR's sine embedding: the sinusoid of each scaled coordinate, blocks concatenated."""
    width = dim // coords.shape[-1]                              # channels per coordinate
    inv_freq = base ** (-torch.arange(0, width, 2, dtype=torch.float64) / width)
    angles = (coords.double() * scale)[..., None] * inv_freq     # (..., k, width / 2)
    pe = torch.stack((angles.sin(), angles.cos()), dim=-1)      # sin, cos interleaved
    return pe.flatten(-3).float()                               # (..., k * width)


def laplacian_positions(adjacency, k):
    """The k eigenvectors of I - D^-1/2 A D^-1/2 after the trivial one (a connected graph)."""
    d = adjacency.sum(dim=-1).rsqrt()                           # D^-1/2 as a vector
    lap = torch.eye(len(adjacency)) - d[:, None] * adjacency * d[None, :]
    eigenvalues, eigenvectors = torch.linalg.eigh(lap)          # ascending eigenvalues
    return eigenvectors[:, 1:k + 1]                             # skip eigenvalue 0


# Chapter 5


def shaw_relative_index(q_len, k_len, max_distance):
    """clip(j - i, -k, k) + k for queries i at the last q_len of the k_len key positions."""
    i = torch.arange(k_len - q_len, k_len)[:, None]             # query positions
    j = torch.arange(k_len)[None, :]                            # key positions
    return (j - i).clamp(-max_distance, max_distance) + max_distance


def shaw_attention(q, k, v, key_table, value_table, max_distance, causal=False, mask=None):
    """Shaw et al.'s attention, naively: two (q_len, k_len, head_dim) gathers; mask True = seen."""
    q_len, k_len = q.shape[-2], k.shape[-2]
    idx = shaw_relative_index(q_len, k_len, max_distance).to(q.device)
    a_k, a_v = key_table[idx], value_table[idx]                 # (q_len, k_len, head_dim) each
    scores = q @ k.transpose(-1, -2) + torch.einsum("...id,ijd->...ij", q, a_k)
    scores = scores / q.shape[-1] ** 0.5
    if causal:                                                  # keys after the query: -inf
        future = torch.ones(q_len, k_len, dtype=torch.bool, device=q.device).triu(k_len - q_len + 1)
        scores = scores.masked_fill(future, float("-inf"))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return w @ v + torch.einsum("...ij,ijd->...id", w, a_v)


def shaw_logits_gather(q, key_table, max_distance, k_len):
    """The logits q_i . a^K_ij from q @ key_table^T, only (q_len, 2k+1), then one gather."""
    idx = shaw_relative_index(q.shape[-2], k_len, max_distance).to(q.device)
    rel = q @ key_table.T                                       # (..., q_len, 2k + 1)
    return torch.gather(rel, -1, idx.expand(*rel.shape[:-1], k_len))


def t5_buckets(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    """T5's bucket of key_pos - query_pos: exact for small distances, log-spaced up to max."""
    n, offset = num_buckets, 0
    if bidirectional:                                           # half the buckets per side
        n //= 2
        offset = (relative_position > 0).long() * n
        distance = relative_position.abs()
    else:                                                       # keys after the query: 0
        distance = (-relative_position).clamp(min=0)
    exact = n // 2                                              # buckets 0 .. exact-1: exact
    log_ratio = (distance.clamp(min=1) / exact).log() / math.log(max_distance / exact)
    log_bucket = (exact + (log_ratio * (n - exact)).long()).clamp(max=n - 1)
    return offset + torch.where(distance < exact, distance, log_bucket)


# Chapter 6


def swin_relative_index(window_h, window_w):
    """Swin's (H*W, H*W) index (dy + H - 1) * (2W - 1) + dx + W - 1 into a (2H-1)(2W-1) table."""
    rows, cols = torch.meshgrid(torch.arange(window_h), torch.arange(window_w), indexing="ij")
    coords = torch.stack((rows.flatten(), cols.flatten()))      # (2, H*W), row-major
    dy, dx = coords[:, :, None] - coords[:, None, :]            # query minus key, (H*W, H*W)
    return (dy + window_h - 1) * (2 * window_w - 1) + (dx + window_w - 1)


def alibi_slopes(num_heads):
    """Press et al.'s slopes 2^(-8k/n), k = 1..n, n the largest power of two <= num_heads."""
    n = 2 ** (num_heads.bit_length() - 1)                       # closest lower power of two
    slopes = 2.0 ** (-8.0 * torch.arange(1, n + 1) / n)
    extra = 2.0 ** (-4.0 * (2 * torch.arange(num_heads - n) + 1) / n)  # odd k of 2n heads
    return torch.cat((slopes, extra))


def alibi_bias(num_heads, q_len, k_len, causal=True):
    """(heads, q_len, k_len) bias -slope * (i - j), |i - j| if not causal; queries last q_len."""
    i = torch.arange(k_len - q_len, k_len)[:, None]             # query positions
    distance = (i - torch.arange(k_len)).float()                # i - j
    if not causal:
        distance = distance.abs()
    return -alibi_slopes(num_heads)[:, None, None] * distance


# The lab (chapter 10)


def perplexity(logits, targets):
    """exp of the mean cross-entropy of next-token logits (batch, seq, vocab) against targets."""
    ce = torch.nn.functional.cross_entropy(logits.flatten(0, -2), targets.flatten())
    return torch.exp(ce)


# Chapter 11


def cosine_similarity(table):
    """(positions, positions) cosines between the rows of a (positions, dim) table."""
    unit = table / table.norm(dim=-1, keepdim=True)
    return unit @ unit.T


def ridge_regression(x, y, ridge=1.0):
    """Weights and intercept of (xc^T xc + ridge I) w = xc^T yc, xc and yc centred."""
    x_mean, y_mean = x.mean(0), y.mean()
    xc = x - x_mean
    gram = xc.T @ xc + ridge * torch.eye(x.shape[1], dtype=x.dtype)
    w = torch.linalg.solve(gram, xc.T @ (y - y_mean))
    return w, y_mean - x_mean @ w
