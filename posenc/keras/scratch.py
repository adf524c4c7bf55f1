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
    """One head of self-attention on x of shape (..., n, d):
    softmax(x W_q (x W_k)^T / sqrt(d_k)) x W_v."""
    q, k, v = ops.matmul(x, w_q), ops.matmul(x, w_k), ops.matmul(x, w_v)
    scores = ops.matmul(q, ops.swapaxes(k, -1, -2)) / q.shape[-1] ** 0.5  # (..., n, n)
    if causal:                                  # token i sees tokens j <= i only
        n = ops.shape(scores)[-1]
        future = ops.arange(n)[None, :] > ops.arange(n)[:, None]
        scores = ops.where(future, float("-inf"), scores)
    return ops.matmul(ops.softmax(scores, axis=-1), v)


def permutation_gap(attend, x, perm):
    """Largest |attend(x[perm]) - attend(x)[perm]| over the rows (seq axis -2) of x."""
    permuted_first = attend(ops.take(x, perm, axis=-2))
    permuted_after = ops.take(attend(x), perm, axis=-2)
    return ops.max(ops.abs(permuted_first - permuted_after))


# Chapter 2


def sinusoidal(positions, dim, base=10000.0, dtype="float64"):
    """PE[p, 2i] = sin(p w_i), PE[p, 2i+1] = cos(p w_i), w_i = base^(-2i/dim).

    The angles p w_i are computed in dtype and the result is rounded to float32.

    On the JAX backend the angles are float32 whatever dtype says: JAX has no float64
    unless jax_enable_x64 is set, and keras.ops.sin and keras.ops.cos return float32
    there even for a float64 input (Keras 3.15). Without jax_enable_x64,
    posenc.keras.sinusoidal computes the table on the host, in NumPy, instead.
    """
    inv_freq = ops.power(base, -ops.arange(0, dim, 2, dtype=dtype) / dim)  # (dim/2,)
    angles = ops.cast(positions, dtype)[:, None] * inv_freq                # (n, dim/2)
    pe = ops.stack((ops.sin(angles), ops.cos(angles)), axis=-1)        # (n, dim/2, 2)
    return ops.cast(ops.reshape(pe, (-1, dim)), "float32")


def shift_matrix(k, dim, base=10000.0):
    """M_k, the (dim, dim) block rotation with PE(p + k) = M_k PE(p), column vectors."""
    angle = k * ops.power(base, -ops.arange(0, dim, 2, dtype="float64") / dim)
    c, s = ops.cos(angle), ops.sin(angle)
    # block i is [[c_i, s_i], [-s_i, c_i]] on rows and columns 2i, 2i+1: c_i twice on
    # the diagonal, s_i above it at (2i, 2i+1), -s_i below it, zeros between blocks
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


def hybrid(x, scale, offset, base=10000.0):
    """Add scale * PE(p) + offset[p], p = 0 .. seq-1, to x of shape (batch, seq, dim)."""
    n, dim = x.shape[-2], x.shape[-1]
    return ops.add(x, scale * sinusoidal(ops.arange(n), dim, base) + offset[:n])


def low_rank(x, left, right):
    """Add rows 0 .. seq-1 of the table left @ right, (max_len, r) @ (r, dim), to x."""
    return ops.add(x, ops.matmul(left[: x.shape[-2]], right))


def dropout(p, keep, rate):
    """Zero p where keep is False and scale the rest by 1 / (1 - rate); keep of shape
    (..., 1, dim) drops whole channels (channel dropout)."""
    return ops.where(keep, p / (1 - rate), ops.zeros_like(p))


def gaussian_noise(p, noise, std):
    """p plus std times a draw of standard normal noise shaped like p."""
    return p + std * noise


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


def continuous_time(t, dim, time_scale=1.0, base=10000.0):
    """The sinusoid of chapter 2 at the real positions t / time_scale, for t of shape (n,)."""
    return sinusoidal(ops.cast(t, "float64") / time_scale, dim, base)


def time2vec(t, frequency, phase):
    """[w_0 t + b_0, sin(w_1 t + b_1), ..., sin(w_(d-1) t + b_(d-1))] for t of shape (...)."""
    angles = ops.expand_dims(t, -1) * frequency + phase
    return ops.concatenate((angles[..., :1], ops.sin(angles[..., 1:])), axis=-1)


def tree_code(paths, dim, max_depth, base=10000.0):
    """Level l's block of dim / max_depth channels holds PE(c_l), zeros past the node's depth;
    paths (n, max_depth) of child indices from the root, padded with -1."""
    width = dim // max_depth
    blocks = [sinusoidal(ops.maximum(paths[:, l], 0), width, base)
              * ops.cast(paths[:, l, None] >= 0, "float32") for l in range(max_depth)]
    return ops.concatenate(blocks, axis=-1)


def tree_learned(paths, level_tables):
    """Sum over the levels l the node reaches of level_tables[l, c_l], (depth, children, dim)."""
    rows = ops.stack([ops.take(level_tables[l], ops.maximum(paths[:, l], 0), axis=0)
                      for l in range(paths.shape[-1])], axis=1)       # (n, depth, dim)
    return ops.sum(rows * ops.cast(paths >= 0, rows.dtype)[..., None], axis=-2)


def modality_positions(modality_ids):
    """One running counter per modality: each token's position among the earlier tokens of
    its own modality."""
    counters, positions = {}, []
    for m in ops.convert_to_numpy(modality_ids).tolist():
        positions.append(counters.get(m, 0))
        counters[m] = positions[-1] + 1
    return ops.convert_to_tensor(positions)


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


# Chapter 7


def rope_inv_freq(head_dim, base=10000.0):
    """RoPE's frequencies theta_i = base^(-2i/head_dim), i = 0 .. head_dim/2 - 1, in float32."""
    return 1.0 / base ** (ops.arange(0, head_dim, 2, dtype="float32") / head_dim)


def rope_matrix(position, inv_freq):
    """R(m), the (d, d) block-diagonal matrix of 2x2 rotations by m theta_i on pairs (2i, 2i+1)."""
    angle = position * inv_freq                                 # (d/2,)
    cos, sin = ops.cos(angle), ops.sin(angle)
    blocks = ops.reshape(ops.stack((cos, -sin, sin, cos), axis=-1), (-1, 2, 2))
    n = inv_freq.shape[0]                                       # place block i at rows 2i, 2i+1
    return ops.reshape(ops.einsum("ij,iab->iajb", ops.eye(n), blocks), (2 * n, 2 * n))


def rope_complex(x, positions, inv_freq):
    """Interleaved RoPE: each pair (x_2i, x_2i+1) as a complex number times e^(i m theta_i)."""
    x = ops.cast(x, "float32")
    z = ops.view_as_complex(ops.reshape(x, (*x.shape[:-1], -1, 2)))      # (..., seq, d/2)
    angle = ops.outer(ops.cast(positions, "float32"), inv_freq)          # (seq, d/2)
    rotation = ops.view_as_complex(ops.stack((ops.cos(angle), ops.sin(angle)), axis=-1))
    return ops.reshape(ops.view_as_real(z * rotation), x.shape)


def rope_half(x, positions, inv_freq):
    """Half-layout RoPE: rotate each pair (x_i, x_i+d/2) by m theta_i with a 2x2 rotation."""
    angle = ops.outer(ops.cast(positions, "float32"), inv_freq)          # (seq, d/2)
    cos, sin = ops.cos(angle), ops.sin(angle)
    x1, x2 = ops.split(ops.cast(x, "float32"), 2, axis=-1)              # the two halves
    return ops.concatenate((x1 * cos - x2 * sin, x1 * sin + x2 * cos), axis=-1)


# Chapter 15 (multimodal RoPE, on rope_half's rotation)


def mrope_axes(sections, interleaved=False):
    """The axis (0 t, 1 h, 2 w) each pair reads: blocks of pairs, or t, h, w in turn."""
    if not interleaved:
        return ops.concatenate([ops.full((s,), a, "int32") for a, s in enumerate(sections)])
    i = ops.arange(sum(sections))
    height = ops.logical_and(i % 3 == 1, i < 3 * sections[1])
    width = ops.logical_and(i % 3 == 2, i < 3 * sections[2])
    return ops.where(height, 1, ops.where(width, 2, 0))


def mrope_half(x, positions, inv_freq, axes):
    """M-RoPE, half layout: pair i turns by positions[axes[i]] * inv_freq[i]; positions (3, seq)."""
    angle = ops.transpose(ops.take(ops.cast(positions, "float32"), axes, axis=0)) * inv_freq
    cos, sin = ops.cos(angle), ops.sin(angle)                             # (seq, d/2)
    x1, x2 = ops.split(ops.cast(x, "float32"), 2, axis=-1)              # the two halves
    return ops.concatenate((x1 * cos - x2 * sin, x1 * sin + x2 * cos), axis=-1)


# Chapter 8


def ntk_inv_freq(head_dim, base, factor):
    """NTK-aware frequencies: base raised to base * factor^(d/(d-2)); the slowest pair / factor."""
    return rope_inv_freq(head_dim, base * factor ** (head_dim / (head_dim - 2)))


def dynamic_inv_freq(head_dim, base, factor, seq_len, original_max_len):
    """Dynamic NTK: the NTK rule for the scale factor * seq_len / L - (factor - 1), once seq_len > L."""
    scale = factor * max(seq_len, original_max_len) / original_max_len - (factor - 1)
    return rope_inv_freq(head_dim, base * scale ** (head_dim / (head_dim - 2)))


def yarn_inv_freq(head_dim, base, factor, original_max_len, beta_fast=32.0, beta_slow=1.0):
    """YaRN: keep pairs that turn > beta_fast times in L, divide those < beta_slow by factor."""
    inv_freq = rope_inv_freq(head_dim, base)

    def index(turns):                                           # the i with L theta_i = 2 pi turns
        return head_dim * math.log(original_max_len / (2 * math.pi * turns)) / (2 * math.log(base))

    low = max(math.floor(index(beta_fast)), 0)
    high = min(math.ceil(index(beta_slow)), head_dim - 1)
    ramp = ops.clip((ops.arange(head_dim // 2, dtype="float32") - low) / max(high - low, 1e-3),
                    0, 1)
    return inv_freq * (1 - ramp) + inv_freq / factor * ramp, 0.1 * math.log(factor) + 1.0


def llama3_inv_freq(head_dim, base, factor, original_max_len, low_freq_factor=1.0,
                    high_freq_factor=4.0):
    """Llama 3: keep wavelengths < L / high_freq_factor, divide those > L / low_freq_factor."""
    inv_freq = rope_inv_freq(head_dim, base)
    turns = original_max_len * inv_freq / (2 * math.pi)         # turns within the context L
    keep = ops.clip((turns - low_freq_factor) / (high_freq_factor - low_freq_factor), 0, 1)
    return inv_freq * keep + inv_freq / factor * (1 - keep)


# Chapter 9


def attention(x, w_q, w_k, w_v, w_o, heads, rotate=None, bias=None, relative=None,
              causal=False):
    """Multi-head self-attention on (batch, n, dim); a scheme enters by rotate, bias or relative."""
    b, n, d = x.shape
    q, k, v = (ops.transpose(ops.reshape(ops.matmul(x, w), (b, n, heads, d // heads)),
                             (0, 2, 1, 3)) for w in (w_q, w_k, w_v))
    if rotate is not None:                                      # route 2: R_i q_i, R_j k_j
        q, k = rotate(q, k)
    scores = ops.matmul(q, ops.swapaxes(k, -1, -2))             # (b, heads, n, n)
    if relative is not None:                                    # route 4: + q_i . a^K_ij
        scores = scores + ops.einsum("bhid,ijd->bhij", q, relative[0])
    scores = scores / (d // heads) ** 0.5
    if bias is not None:                                        # route 3: + B[h, i, j]
        scores = scores + bias
    if causal:                                                  # key j after query i: -inf
        future = ops.arange(n)[None, :] > ops.arange(n)[:, None]
        scores = ops.where(future, float("-inf"), scores)
    p = ops.softmax(scores, axis=-1)
    z = ops.matmul(p, v)
    if relative is not None:                                    # route 4: + sum_j p_ij a^V_ij
        z = z + ops.einsum("bhij,ijd->bhid", p, relative[1])
    return ops.matmul(ops.reshape(ops.transpose(z, (0, 2, 1, 3)), (b, n, d)), w_o)


# Chapter 10


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


# Chapter 17


def window_mask(q_len, k_len, window):
    """(q_len, k_len) booleans, True where the key is masked: in the future, or ``window`` or
    more positions back; the queries are the last q_len of the k_len positions."""
    i = ops.arange(k_len - q_len, k_len)[:, None]
    j = ops.arange(k_len)[None, :]
    return ops.logical_or(j > i, i - j >= window)


def temperature(positions, floor_scale=8192.0, attn_scale=0.1):
    """Llama 4's scale of a NoPE layer's queries: 1 + attn_scale * log1p(floor((p + 1) / F))."""
    p = ops.cast(positions, "float32")
    return 1.0 + attn_scale * ops.log1p(ops.floor((p + 1.0) / floor_scale))


def rope_pairs(x, positions, inv_freq, factor=1.0):
    """RoPE on interleaved pairs (x_2i, x_2i+1), its cos and sin times ``factor`` (YaRN's)."""
    angle = ops.cast(positions, "float32")[:, None] * ops.cast(inv_freq, "float32")[None, :]
    cos, sin = factor * ops.cos(angle), factor * ops.sin(angle)
    a, b = x[..., 0::2], x[..., 1::2]
    out = ops.stack((a * cos - b * sin, a * sin + b * cos), axis=-1)
    return ops.reshape(out, ops.shape(x))


def latent_weights(x, positions, w_q, w_down, norm_scale, w_up, inv_freq, factor, scale, heads,
                   nope, rank, eps=1e-6):
    """Causal attention weights of multi-head latent attention with decoupled RoPE: a score
    from the latent (no position) plus one from the rotated slice and the shared rotated key."""
    b, n = ops.shape(x)[0], ops.shape(x)[1]
    q = ops.transpose(ops.reshape(ops.matmul(x, w_q), (b, n, heads, -1)), (0, 2, 1, 3))
    down = ops.matmul(x, w_down)                                   # (b, n, rank + rope)
    c = down[..., :rank]
    c = c * ops.rsqrt(ops.mean(c * c, axis=-1, keepdims=True) + eps) * norm_scale  # the latent
    k_pass = ops.transpose(ops.reshape(ops.matmul(c, w_up), (b, n, heads, -1)),
                           (0, 2, 1, 3))[..., :nope]
    k_rot = rope_pairs(down[..., rank:], positions, inv_freq, factor)[:, None]  # one for all heads
    q_rot = rope_pairs(q[..., nope:], positions, inv_freq, factor)
    logits = (ops.matmul(q[..., :nope], ops.swapaxes(k_pass, -1, -2))
              + ops.matmul(q_rot, ops.swapaxes(k_rot, -1, -2))) * scale
    future = ops.arange(n)[None, :] > ops.arange(n)[:, None]
    return ops.softmax(ops.where(future, float("-inf"), logits), axis=-1)
# Chapter 16


def patch_grid(height, width, ref_grid=None):
    """Row and column of each patch, row-major (float32), scaled onto ref_grid when given."""
    rows = ops.repeat(ops.arange(height, dtype="float32"), width)
    cols = ops.tile(ops.arange(width, dtype="float32"), height)
    if ref_grid is not None:                                  # EVA-02: span the trained range
        rows, cols = rows * (ref_grid[0] / height), cols * (ref_grid[1] / width)
    return rows, cols


def _turn_pairs(x, angle):
    """Each pair (x_2j, x_2j+1) turned by angle[..., j] with a 2x2 rotation."""
    x1, x2 = x[..., 0::2], x[..., 1::2]
    cos, sin = ops.cos(angle), ops.sin(angle)
    return ops.reshape(ops.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), axis=-1),
                       ops.shape(x))


def axial_rope(x, height, width, prefix_tokens=0, base=10000.0, ref_grid=None):
    """Axial 2D RoPE, interleaved pairs: the first d/4 pairs turn with the row, the next
    d/4 with the column; the first prefix_tokens tokens (CLS, registers) stay as they are."""
    d = x.shape[-1]
    inv_freq = 1.0 / base ** (ops.arange(d // 4, dtype="float32") / (d // 4))
    rows, cols = patch_grid(height, width, ref_grid)
    angle = ops.concatenate((ops.outer(rows, inv_freq), ops.outer(cols, inv_freq)), axis=-1)
    x = ops.cast(x, "float32")
    return ops.concatenate((x[..., :prefix_tokens, :],
                            _turn_pairs(x[..., prefix_tokens:, :], angle)), axis=-2)


def mixed_rope(x, height, width, freqs):
    """RoPE-Mixed, interleaved pairs: pair j of head h turns by column * fx[h, j] + row * fy[h, j];
    freqs is (2, heads, d/2) and x (batch, heads, height * width, d)."""
    rows, cols = patch_grid(height, width)
    fx, fy = ops.cast(freqs[0], "float32"), ops.cast(freqs[1], "float32")
    angle = cols[:, None] * fx[:, None, :] + rows[:, None] * fy[:, None, :]   # (heads, seq, d/2)
    return _turn_pairs(ops.cast(x, "float32"), angle)
