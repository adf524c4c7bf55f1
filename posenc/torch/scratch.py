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
    """One head of self-attention on x of shape (..., n, d):
    softmax(x W_q (x W_k)^T / sqrt(d_k)) x W_v."""
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5       # (..., n, n)
    if causal:                                  # token i sees tokens j <= i only
        n = scores.shape[-1]
        future = torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def permutation_gap(attend, x, perm):
    """Largest |attend(x[perm]) - attend(x)[perm]| over the rows (seq axis -2) of x."""
    return (attend(x[..., perm, :]) - attend(x)[..., perm, :]).abs().max()


# Chapter 2


def sinusoidal(positions, dim, base=10000.0, dtype=torch.float64):
    """PE[p, 2i] = sin(p w_i), PE[p, 2i+1] = cos(p w_i), w_i = base^(-2i/dim).

    The angles p w_i are computed in dtype and the result is rounded to float32.
    """
    inv_freq = base ** (-torch.arange(0, dim, 2, dtype=dtype) / dim)   # (dim/2,)
    angles = positions.to(dtype)[:, None] * inv_freq                    # (n, dim/2)
    pe = torch.stack((angles.sin(), angles.cos()), dim=-1)              # (n, dim/2, 2)
    return pe.reshape(len(positions), dim).to(torch.float32)


def shift_matrix(k, dim, base=10000.0):
    """M_k, the (dim, dim) block rotation with PE(p + k) = M_k PE(p), column vectors."""
    angle = k * base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    c, s = angle.cos(), angle.sin()
    # block i is [[c_i, s_i], [-s_i, c_i]] on rows and columns 2i, 2i+1: c_i twice on
    # the diagonal, s_i above it at (2i, 2i+1), -s_i below it, zeros between blocks
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


def hybrid(x, scale, offset, base=10000.0):
    """Add scale * PE(p) + offset[p], p = 0 .. seq-1, to x of shape (batch, seq, dim)."""
    n, dim = x.shape[-2], x.shape[-1]
    return x + scale * sinusoidal(torch.arange(n), dim, base).to(x.device) + offset[:n]


def low_rank(x, left, right):
    """Add rows 0 .. seq-1 of the table left @ right, (max_len, r) @ (r, dim), to x."""
    return x + left[: x.shape[-2]] @ right


def dropout(p, keep, rate):
    """Zero p where keep is False and scale the rest by 1 / (1 - rate); keep of shape
    (..., 1, dim) drops whole channels (channel dropout)."""
    return torch.where(keep, p / (1 - rate), torch.zeros_like(p))


def gaussian_noise(p, noise, std):
    """p plus std times a draw of standard normal noise shaped like p."""
    return p + std * noise


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


def continuous_time(t, dim, time_scale=1.0, base=10000.0):
    """The sinusoid of chapter 2 at the real positions t / time_scale, for t of shape (n,)."""
    return sinusoidal(t / time_scale, dim, base)


def time2vec(t, frequency, phase):
    """[w_0 t + b_0, sin(w_1 t + b_1), ..., sin(w_(d-1) t + b_(d-1))] for t of shape (...)."""
    angles = t[..., None] * frequency + phase
    return torch.cat((angles[..., :1], angles[..., 1:].sin()), dim=-1)


def tree_code(paths, dim, max_depth, base=10000.0):
    """Level l's block of dim / max_depth channels holds PE(c_l), zeros past the node's depth;
    paths (n, max_depth) of child indices from the root, padded with -1."""
    width = dim // max_depth
    blocks = [sinusoidal(paths[:, l].clamp(min=0), width, base) * (paths[:, l, None] >= 0)
              for l in range(max_depth)]
    return torch.cat(blocks, dim=-1)


def tree_learned(paths, level_tables):
    """Sum over the levels l the node reaches of level_tables[l, c_l], (depth, children, dim)."""
    levels = torch.arange(paths.shape[-1])
    rows = level_tables[levels, paths.clamp(min=0)]            # (n, depth, dim)
    return (rows * (paths >= 0)[..., None]).sum(dim=-2)


def modality_positions(modality_ids):
    """One running counter per modality: each token's position among the earlier tokens of
    its own modality."""
    counters, positions = {}, []
    for m in modality_ids.tolist():
        positions.append(counters.get(m, 0))
        counters[m] = positions[-1] + 1
    return torch.tensor(positions)


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


# Chapter 7


def rope_inv_freq(head_dim, base=10000.0):
    """RoPE's frequencies theta_i = base^(-2i/head_dim), i = 0 .. head_dim/2 - 1, in float32."""
    return 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)


def rope_matrix(position, inv_freq):
    """R(m), the (d, d) block-diagonal matrix of 2x2 rotations by m theta_i on pairs (2i, 2i+1)."""
    angle = position * inv_freq                                 # (d/2,)
    cos, sin = angle.cos(), angle.sin()
    blocks = torch.stack((cos, -sin, sin, cos), dim=-1).reshape(-1, 2, 2)
    n = len(inv_freq)                                           # place block i at rows 2i, 2i+1
    return torch.einsum("ij,iab->iajb", torch.eye(n), blocks).reshape(2 * n, 2 * n)


def rope_complex(x, positions, inv_freq):
    """Interleaved RoPE: each pair (x_2i, x_2i+1) as a complex number times e^(i m theta_i)."""
    z = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))   # (..., seq, d/2)
    angle = torch.outer(positions.float(), inv_freq)                     # (seq, d/2)
    return torch.view_as_real(z * torch.polar(torch.ones_like(angle), angle)).flatten(-2)


def rope_half(x, positions, inv_freq):
    """Half-layout RoPE: rotate each pair (x_i, x_i+d/2) by m theta_i with a 2x2 rotation."""
    angle = torch.outer(positions.float(), inv_freq)                     # (seq, d/2)
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x.float().chunk(2, dim=-1)                                  # the two halves
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


# Chapter 15 (multimodal RoPE, on rope_half's rotation)


def mrope_axes(sections, interleaved=False):
    """The axis (0 t, 1 h, 2 w) each pair reads: blocks of pairs, or t, h, w in turn."""
    if not interleaved:
        return torch.repeat_interleave(torch.arange(3), torch.tensor(sections))
    i = torch.arange(sum(sections))
    axes = torch.zeros_like(i)
    axes[(i % 3 == 1) & (i < 3 * sections[1])] = 1
    axes[(i % 3 == 2) & (i < 3 * sections[2])] = 2
    return axes


def mrope_half(x, positions, inv_freq, axes):
    """M-RoPE, half layout: pair i turns by positions[axes[i]] * inv_freq[i]; positions (3, seq)."""
    angle = positions.float()[axes].T * inv_freq                          # (seq, d/2)
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x.float().chunk(2, dim=-1)                                  # the two halves
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


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
    ramp = ((torch.arange(head_dim // 2) - low) / max(high - low, 1e-3)).clamp(0, 1)
    return inv_freq * (1 - ramp) + inv_freq / factor * ramp, 0.1 * math.log(factor) + 1.0


def llama3_inv_freq(head_dim, base, factor, original_max_len, low_freq_factor=1.0,
                    high_freq_factor=4.0):
    """Llama 3: keep wavelengths < L / high_freq_factor, divide those > L / low_freq_factor."""
    inv_freq = rope_inv_freq(head_dim, base)
    turns = original_max_len * inv_freq / (2 * math.pi)         # turns within the context L
    keep = ((turns - low_freq_factor) / (high_freq_factor - low_freq_factor)).clamp(0, 1)
    return inv_freq * keep + inv_freq / factor * (1 - keep)


# Chapter 9


def attention(x, w_q, w_k, w_v, w_o, heads, rotate=None, bias=None, relative=None,
              causal=False):
    """Multi-head self-attention on (batch, n, dim); a scheme enters by rotate, bias or relative."""
    b, n, d = x.shape
    q, k, v = ((x @ w).view(b, n, heads, d // heads).transpose(1, 2) for w in (w_q, w_k, w_v))
    if rotate is not None:                                      # route 2: R_i q_i, R_j k_j
        q, k = rotate(q, k)
    scores = q @ k.transpose(-1, -2)                            # (b, heads, n, n)
    if relative is not None:                                    # route 4: + q_i . a^K_ij
        scores = scores + torch.einsum("bhid,ijd->bhij", q, relative[0])
    scores = scores / (d // heads) ** 0.5
    if bias is not None:                                        # route 3: + B[h, i, j]
        scores = scores + bias
    if causal:                                                  # key j after query i: -inf
        future = torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    p = torch.softmax(scores, dim=-1)
    z = p @ v
    if relative is not None:                                    # route 4: + sum_j p_ij a^V_ij
        z = z + torch.einsum("bhij,ijd->bhid", p, relative[1])
    return z.transpose(1, 2).reshape(b, n, d) @ w_o


# Chapter 10


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


# Chapter 17


def window_mask(q_len, k_len, window):
    """(q_len, k_len) booleans, True where the key is masked: in the future, or ``window`` or
    more positions back; the queries are the last q_len of the k_len positions."""
    i = torch.arange(k_len - q_len, k_len)[:, None]
    j = torch.arange(k_len)[None, :]
    return (j > i) | (i - j >= window)


def temperature(positions, floor_scale=8192.0, attn_scale=0.1):
    """Llama 4's scale of a NoPE layer's queries: 1 + attn_scale * log1p(floor((p + 1) / F))."""
    return 1.0 + attn_scale * torch.log1p(torch.floor((positions.float() + 1.0) / floor_scale))


def rope_pairs(x, positions, inv_freq, factor=1.0):
    """RoPE on interleaved pairs (x_2i, x_2i+1), its cos and sin times ``factor`` (YaRN's)."""
    angle = positions[:, None].float() * inv_freq[None, :]
    cos, sin = factor * torch.cos(angle), factor * torch.sin(angle)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)


def latent_weights(x, positions, w_q, w_down, norm_scale, w_up, inv_freq, factor, scale, heads,
                   nope, rank, eps=1e-6):
    """Causal attention weights of multi-head latent attention with decoupled RoPE: a score
    from the latent (no position) plus one from the rotated slice and the shared rotated key."""
    b, n, _ = x.shape
    q = (x @ w_q).view(b, n, heads, -1).transpose(1, 2)            # (b, h, n, nope + rope)
    down = x @ w_down                                              # (b, n, rank + rope)
    c = down[..., :rank]
    c = c * torch.rsqrt(c.pow(2).mean(-1, keepdim=True) + eps) * norm_scale   # the latent
    k_pass = (c @ w_up).view(b, n, heads, -1).transpose(1, 2)[..., :nope]
    k_rot = rope_pairs(down[..., rank:], positions, inv_freq, factor)[:, None]  # one for all heads
    q_rot = rope_pairs(q[..., nope:], positions, inv_freq, factor)
    logits = (q[..., :nope] @ k_pass.transpose(-1, -2) + q_rot @ k_rot.transpose(-1, -2)) * scale
    future = torch.ones(n, n, dtype=torch.bool).triu(1)
    return torch.softmax(logits.masked_fill(future, float("-inf")), dim=-1)
# Chapter 16


def patch_grid(height, width, ref_grid=None):
    """Row and column of each patch, row-major (float64), scaled onto ref_grid when given."""
    rows = torch.arange(height, dtype=torch.float64).repeat_interleave(width)
    cols = torch.arange(width, dtype=torch.float64).repeat(height)
    if ref_grid is not None:                                  # EVA-02: span the trained range
        rows, cols = rows * ref_grid[0] / height, cols * ref_grid[1] / width
    return rows, cols


def axial_rope(x, height, width, prefix_tokens=0, base=10000.0, ref_grid=None):
    """Axial 2D RoPE, interleaved pairs: the first d/4 pairs turn with the row, the next
    d/4 with the column; the first prefix_tokens tokens (CLS, registers) stay as they are."""
    d = x.shape[-1]
    inv_freq = 1.0 / base ** (torch.arange(d // 4, dtype=torch.float64) / (d // 4))
    rows, cols = patch_grid(height, width, ref_grid)
    angle = torch.cat((torch.outer(rows, inv_freq), torch.outer(cols, inv_freq)), -1)
    z = torch.view_as_complex(x[..., prefix_tokens:, :].double().unflatten(-1, (-1, 2)))
    turned = torch.view_as_real(z * torch.polar(torch.ones_like(angle), angle)).flatten(-2)
    return torch.cat((x[..., :prefix_tokens, :].double(), turned), -2)


def mixed_rope(x, height, width, freqs):
    """RoPE-Mixed, interleaved pairs: pair j of head h turns by column * fx[h, j] + row * fy[h, j];
    freqs is (2, heads, d/2) and x (batch, heads, height * width, d)."""
    rows, cols = patch_grid(height, width)
    fx, fy = freqs.double()
    angle = cols[:, None] * fx[:, None, :] + rows[:, None] * fy[:, None, :]   # (heads, seq, d/2)
    z = torch.view_as_complex(x.double().unflatten(-1, (-1, 2)))
    return torch.view_as_real(z * torch.polar(torch.ones_like(angle), angle)).flatten(-2)
