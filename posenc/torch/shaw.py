"""Shaw et al.'s relative attention (PyTorch face): relative keys and values, windowed attention.

The index maps (which table row each query-key pair reads, the distance
buckets of the skew method, the keys of a window) are ``posenc/shaw.py``;
the family's argument rules there too.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import nn

from posenc._checks import check_bool, check_choice, check_embeddings, check_rank, check_rate
from posenc.learned import TABLE_INIT_STD
from posenc.shaw import (
    MASKED_LOGIT,
    SHAW_METHODS,
    check_attention,
    check_heads,
    check_max_distance,
    check_relative_table,
    check_window_radius,
    band_columns,
    band_offsets,
    bucket_boundaries,
    query_blocks,
    query_positions,
    relative_index,
    window_block,
    window_index,
)
from posenc.shaw import shaw_relative_index as _shaw_relative_index

__all__ = [
    "shaw_relative_index",
    "shaw_attention",
    "windowed_attention",
    "ShawRelativeAttention",
]


def shaw_relative_index(q_len: int, k_len: int, max_distance: int) -> torch.Tensor:
    """Row of Shaw et al.'s relative tables read by each (query, key) pair.

    Entry ``[r, j]`` is ``clip(j - i, -k, k) + k`` with ``k = max_distance`` and
    ``i = k_len - q_len + r``: the queries are the last ``q_len`` of the
    ``k_len`` positions, as when decoding with a cache. Distances beyond ``k``
    share the first or the last row (Shaw et al.'s clipping).

    Args:
        q_len: number of queries, ``0 <= q_len <= k_len``.
        k_len: number of keys.
        max_distance: the clipping distance ``k >= 0``.

    Returns:
        int64 tensor ``(q_len, k_len)`` with values in ``0 .. 2k``.

    Example:
        >>> shaw_relative_index(3, 3, 1)
        tensor([[1, 2, 2],
                [0, 1, 2],
                [0, 0, 1]])

    References:
        Shaw et al., "Self-Attention with Relative Position Representations",
        NAACL 2018, section 3.2.
    """
    return torch.as_tensor(_shaw_relative_index(q_len, k_len, max_distance))


# --------------------------------------------------------------------------- the attention core
# In float32 with autocast off, whatever the input dtype; the result is cast back.

def _arange_like(x):
    """The ``arange`` of the index maps, for positions next to the tensor ``x`` (its device)."""
    return functools.partial(torch.arange, device=x.device)


def _softmax(logits, queries, keys, causal: bool):
    """Logits -> weights; ``causal`` hides the keys after each query."""
    if causal:
        logits = logits.masked_fill(keys[None, :] > queries[:, None], float("-inf"))
    return torch.softmax(logits, dim=-1)


def _naive(q, k, v, key_table, value_table, max_distance: int, causal: bool, drop, keep: bool):
    """Materialises a^K and a^V, ``(q_len, k_len, head_dim)`` each."""
    q = q * q.shape[-1] ** -0.5
    arange = _arange_like(q)
    queries, keys = query_positions(q.shape[-2], k.shape[-2], arange), arange(k.shape[-2])
    index = relative_index(queries, keys, max_distance, torch.clamp)
    logits = q @ k.transpose(-1, -2)
    if key_table is not None:
        logits = logits + torch.einsum("bhqd,qkd->bhqk", q, key_table[index])
    weights = _softmax(logits, queries, keys, causal)
    dropped = weights if drop is None else drop(weights)
    out = dropped @ v
    if value_table is not None:
        out = out + torch.einsum("bhqk,qkd->bhqd", dropped, value_table[index])
    return out, weights if keep else None


def _skew(q, k, v, key_table, value_table, max_distance: int, causal: bool, drop, keep: bool):
    """Never materialises a^K or a^V; works on blocks of queries."""
    arange = _arange_like(q)
    q_len, k_len = q.shape[-2], k.shape[-2]
    queries, keys = query_positions(q_len, k_len, arange), arange(k_len)
    outs, kept = [], []
    for start, stop in query_blocks(q_len, k_len, q.shape[1]):
        block, at = q[..., start:stop, :] * q.shape[-1] ** -0.5, queries[start:stop]
        logits = block @ k.transpose(-1, -2)
        if key_table is not None:
            by_distance = block @ key_table.transpose(0, 1)           # (..., block, 2k+1)
            index = relative_index(at, keys, max_distance, torch.clamp)
            logits = logits + torch.gather(by_distance, -1,
                                           index.expand(*by_distance.shape[:-2], *index.shape))
        weights = _softmax(logits, at, keys, causal)
        if keep:
            kept.append(weights)
        weights = weights if drop is None else drop(weights)
        out = weights @ v
        if value_table is not None:
            ends = bucket_boundaries(at, k_len, max_distance, torch.clamp, arange)  # (block, 2k+2)
            running = torch.cumsum(weights, dim=-1)
            ends = ends.expand(*running.shape[:-2], *ends.shape)
            summed = torch.gather(running, -1, ends.clamp(min=0)) * (ends >= 0)
            out = out + (summed[..., 1:] - summed[..., :-1]) @ value_table
        outs.append(out)
    out = outs[0] if len(outs) == 1 else torch.cat(outs, dim=-2)
    return out, (None if not keep else kept[0] if len(kept) == 1 else torch.cat(kept, dim=-2))


_METHODS = {"naive": _naive, "skew": _skew}
assert set(_METHODS) == set(SHAW_METHODS)


def _tables(tables, rows: int, head_dim: int, distance: str, what: str, device):
    """Check each ``(name, table)`` pair; the tables as float32 on ``device`` (or ``None``)."""
    out = []
    for name, table in tables:
        if table is not None:
            table = table if torch.is_tensor(table) else torch.as_tensor(table)
            check_relative_table(name, table.shape, rows, head_dim, what=what, distance=distance)
            table = table.to(device=device, dtype=torch.float32)
        out.append(table)
    return out


def shaw_attention(q, k, v, key_table, value_table, max_distance: int, *, causal: bool = False,
                   method: str = "skew", dropout: float = 0.0, return_weights: bool = False):
    """Softmax attention with Shaw et al.'s relative key and value representations.

    For the query at position ``i`` and the key at position ``j``,

    ``e_ij = q_i . (k_j + a^K_ij) / sqrt(head_dim)``,
    ``z_i = sum_j softmax_j(e_ij) (v_j + a^V_ij)``,

    with ``a^K_ij = key_table[clip(j - i, -k, k) + k]`` and likewise ``a^V``
    (:func:`shaw_relative_index`). The queries are the last ``q_len`` of the
    ``k_len`` positions, so a decoder that caches its keys and values passes
    its new queries and every key so far. ``causal=True`` hides the keys after
    each query.

    ``method="naive"`` gathers the relative tensors a^K and a^V, ``(q_len,
    k_len, head_dim)`` each: ``q_len * k_len * head_dim`` numbers, 1 GiB in
    float32 for 2048 positions and ``head_dim = 64``. ``method="skew"`` never
    does: for the keys it multiplies the queries by the key table, ``(...,
    q_len, 2k + 1)``, and gathers those products into the ``(q_len, k_len)``
    logits (Huang et al.'s Music Transformer, which has relative keys only);
    for the values (the same split, which Shaw et al., section 3.3, note
    serves eq. 3 too) it sums each query's attention weights into the
    ``2k + 1`` clipped distance buckets (from running sums over the keys, this
    package's own bucketing) and multiplies the ``(..., q_len, 2k + 1)`` sums by
    the value table.
    It works on blocks of queries (:func:`posenc.shaw.query_blocks`) so that
    no temporary grows with ``q_len * k_len``. Both give the same numbers
    within float32 rounding.

    The key term ``q_i . a^K_ij / sqrt(head_dim)`` is an additive bias on the
    logits, so attention with relative keys only can run through a fused
    kernel (``torch.nn.functional.scaled_dot_product_attention`` with that
    bias as a float ``attn_mask``); the value term ``sum_j softmax_j a^V_ij``
    changes the output itself, which no such kernel allows.

    Everything is computed in float32 with autocast off; the result has
    ``q``'s dtype.

    Args:
        q: ``(batch, heads, q_len, head_dim)`` queries.
        k: ``(batch, heads, k_len, head_dim)`` keys, ``k_len >= q_len``.
        v: ``(batch, heads, k_len, head_dim)`` values.
        key_table: ``(2 * max_distance + 1, head_dim)`` rows ``a^K`` for the
            relative positions ``-k .. k``, or ``None`` for no relative keys.
        value_table: the same for ``a^V``, or ``None`` for no relative values
            (Shaw et al.'s Table 3 compares keys only, values only and both).
        max_distance: the clipping distance ``k >= 0``; ``k = 0`` gives every
            pair the same row, which shifts the logits of a query by one
            constant (a no-op for the softmax) and adds ``value_table[0]`` to
            every output: attention without positions.
        causal: hide the keys after each query. Default ``False``.
        method: ``"skew"`` (default) or ``"naive"``
            (:data:`posenc.shaw.SHAW_METHODS`).
        dropout: dropout rate of the attention weights, applied whenever it is above 0
            (pass 0 in evaluation, as for ``scaled_dot_product_attention``'s
            ``dropout_p``). Default 0.
        return_weights: also return the ``(batch, heads, q_len, k_len)`` attention
            weights (float32, before dropout). Default ``False``.

    Returns:
        Tensor ``(batch, heads, q_len, head_dim)`` of ``q``'s dtype; with
        ``return_weights=True``, ``(output, weights)``.

    Example:
        >>> q = k = v = torch.randn(1, 2, 5, 4)
        >>> tables = torch.randn(2, 3, 4)
        >>> out = shaw_attention(q, k, v, tables[0], tables[1], 1)
        >>> out.shape
        torch.Size([1, 2, 5, 4])
        >>> torch.allclose(out, shaw_attention(q, k, v, tables[0], tables[1], 1,
        ...                                    method="naive"), atol=1e-5)
        True

    References:
        Shaw et al., "Self-Attention with Relative Position Representations",
        NAACL 2018.
        Huang et al., "Music Transformer: Generating Music with Long-Term
        Structure", ICLR 2019, section 3.4.1.
    """
    what = "shaw_attention"
    max_distance = check_max_distance(max_distance, what=what)
    causal = check_bool("causal", causal, what=what)
    method = check_choice("method", method, SHAW_METHODS, what=what)
    dropout = check_rate("dropout", dropout, what=what)
    return_weights = check_bool("return_weights", return_weights, what=what)
    check_attention(q.shape, k.shape, v.shape, what=what)
    tables = _tables((("key_table", key_table), ("value_table", value_table)),
                     2 * max_distance + 1, q.shape[-1], "max_distance", what, q.device)
    drop = (lambda w: F.dropout(w, dropout)) if dropout > 0 else None
    return relative_attention(q, k, v, *tables, max_distance, causal=causal, method=method,
                              drop=drop, return_weights=return_weights)


def relative_attention(q, k, v, key_table, value_table, max_distance: int, *, causal: bool,
                       method: str = "skew", drop=None, return_weights: bool = False):
    """The core of :func:`shaw_attention`, without its checks: for the layers that checked
    their arguments once (:class:`ShawRelativeAttention`, ``MultiHeadAttention``'s
    ``"shaw"`` route).

    Args:
        q, k, v, key_table, value_table, max_distance, causal, method, return_weights:
            as in :func:`shaw_attention` (the tables may be ``None``).
        drop: ``None``, or the function that drops attention weights (the layer's dropout).

    Returns:
        as :func:`shaw_attention`.
    """
    if q.shape[-2] == 0:
        out = q.new_zeros(q.shape)
        return (out, q.new_zeros(*q.shape[:-1], k.shape[-2]).float()) if return_weights else out
    tables = [None if t is None else t.float() for t in (key_table, value_table)]
    with torch.autocast(device_type=q.device.type, enabled=False):
        out, weights = _METHODS[method](q.float(), k.float(), v.float(), *tables, max_distance,
                                        causal, drop, return_weights)
    return (out.to(q.dtype), weights) if return_weights else out.to(q.dtype)


def relative_tables(layer, max_distance: int, head_dim: int) -> None:
    """Give ``layer`` Shaw et al.'s two learned tables, ``key_table`` and ``value_table``
    (``(2 * max_distance + 1, head_dim)`` each), to be drawn by the layer's
    ``reset_parameters`` with :func:`reset_relative_tables`: the one setup of
    :class:`ShawRelativeAttention` and ``MultiHeadAttention(position="shaw")``."""
    rows = 2 * max_distance + 1
    layer.key_table = nn.Parameter(torch.empty(rows, head_dim))
    layer.value_table = nn.Parameter(torch.empty(rows, head_dim))


def reset_relative_tables(layer) -> None:
    """Draw ``layer``'s ``key_table`` and ``value_table`` again from N(0, 0.02^2)."""
    nn.init.normal_(layer.key_table, std=TABLE_INIT_STD)
    nn.init.normal_(layer.value_table, std=TABLE_INIT_STD)


def windowed_attention(q, k, v, window: int, *, key_table=None, value_table=None,
                       causal: bool = False) -> torch.Tensor:
    """Attention in which each query sees only the keys within ``window`` positions.

    The query at position ``i`` attends to the keys ``j`` with
    ``|j - i| <= window`` (``i - window <= j <= i`` when ``causal``), with
    Shaw et al.'s relative representations read from tables of one row per
    relative position ``-window .. window``: the same numbers as
    :func:`shaw_attention` with ``max_distance=window`` and every other key
    masked out. The queries go in blocks of ``B = max(2 * window, 16)``
    (:func:`posenc.shaw.window_block`), each against the ``B + 2 * window`` keys
    around it in one batched matrix product; the band of each query is then
    gathered from those ``(B, B + 2 * window)`` logits. The cost grows with
    ``q_len * window``, not ``q_len * k_len``, with no loop over positions, and
    the relative logits are simply ``q @ key_table.T``. Queries
    are the last ``q_len`` of the ``k_len`` positions.

    Computed in float32 with autocast off; the result has ``q``'s dtype.

    Args:
        q: ``(batch, heads, q_len, head_dim)`` queries.
        k: ``(batch, heads, k_len, head_dim)`` keys, ``k_len >= q_len``.
        v: ``(batch, heads, k_len, head_dim)`` values.
        window: how many positions each query sees on each side, ``>= 0``.
        key_table: optional ``(2 * window + 1, head_dim)`` relative keys.
            Default ``None``: no relative keys.
        value_table: optional ``(2 * window + 1, head_dim)`` relative values.
            Default ``None``.
        causal: see only the window's past half and the query itself.
            Default ``False``.

    Returns:
        Tensor ``(batch, heads, q_len, head_dim)`` of ``q``'s dtype.

    Example:
        >>> q = k = v = torch.randn(1, 2, 6, 4)
        >>> windowed_attention(q, k, v, 2, key_table=torch.randn(5, 4)).shape
        torch.Size([1, 2, 6, 4])

    References:
        Shaw et al., "Self-Attention with Relative Position Representations",
        NAACL 2018.
        Beltagy et al., "Longformer: The Long-Document Transformer",
        arXiv:2004.05150, 2020 (sliding-window attention).
    """
    what = "windowed_attention"
    window = check_window_radius(window, what=what)
    causal = check_bool("causal", causal, what=what)
    q_len, _ = check_attention(q.shape, k.shape, v.shape, what=what)
    key_table, value_table = _tables((("key_table", key_table), ("value_table", value_table)),
                                     2 * window + 1, q.shape[-1], "window", what, q.device)
    if q_len == 0:
        return q.new_zeros(q.shape)
    with torch.autocast(device_type=q.device.type, enabled=False):
        out = _windowed(q.float(), k.float(), v.float(), key_table, value_table, window, causal)
    return out.to(q.dtype)


def _windowed(q, k, v, key_table, value_table, window: int, causal: bool):
    """Blocks of ``B`` queries against their ``B + 2 * window`` keys, then the band."""
    q_len, start = q.shape[-2], max(0, k.shape[-2] - q.shape[-2] - window)
    k, v = k[..., start:, :], v[..., start:, :]        # keys before the first window: unused
    k_len, block, span = k.shape[-2], window_block(window), 2 * window + 1
    blocks = -(-k_len // block)
    arange = _arange_like(q)

    def key_blocks(t):  # (..., blocks, block + 2 * window, head_dim), from position -window
        t = F.pad(t, (0, 0, window, (blocks + 1) * block - window - k_len))
        t = t.unflatten(-2, (blocks + 1, block))
        return torch.cat((t[..., :-1, :, :], t[..., 1:, :, :]), dim=-2)[..., :block + span - 1, :]

    # query row p of the padded sequence is the query at position p (its keys' coordinates)
    qb = F.pad(q, (0, 0, k_len - q_len, blocks * block - k_len)).unflatten(-2, (blocks, block))
    qb = qb * q.shape[-1] ** -0.5
    logits = qb @ key_blocks(k).transpose(-1, -2)                     # (..., B, B + 2w)
    columns = band_columns(block, window, arange)
    logits = torch.gather(logits, -1, columns.expand(*logits.shape[:-1], span))
    if key_table is not None:
        logits = logits + qb @ key_table.transpose(0, 1)
    positions = arange(blocks * block)
    seen = window_index(positions, window, arange)
    visible = (seen >= 0) & (seen < k_len)
    if causal:
        visible = visible & (seen <= positions[:, None])
    logits = logits.masked_fill(~visible.unflatten(0, (blocks, block)), MASKED_LOGIT)
    weights = torch.softmax(logits, dim=-1)                            # (..., B, 2w + 1)
    offsets = band_offsets(block, window, arange)
    spread = torch.gather(weights, -1, offsets.clamp(0, span - 1).expand(
        *weights.shape[:-1], offsets.shape[-1])) * ((offsets >= 0) & (offsets < span))
    out = spread @ key_blocks(v)
    if value_table is not None:
        out = out + weights @ value_table
    return out.flatten(-3, -2)[..., k_len - q_len:k_len, :]


# --------------------------------------------------------------------------- the module

class ShawRelativeAttention(nn.Module):
    """Multi-head self-attention with Shaw et al.'s relative position representations.

    Projects ``x`` to queries, keys and values, splits them into ``num_heads``
    heads of ``dim // num_heads`` features, runs :func:`shaw_attention` with
    one learned key table and one learned value table shared by every head
    (Shaw et al.'s section 3.3 option; their base models learned tables per head
    and their big models per layer), and projects the heads back to ``dim``. No absolute
    position is added anywhere: the model sees only the clipped distances
    ``j - i``. The key projection has no bias: it would add ``q_i . b`` to
    every logit of a row, which the softmax ignores.

    Args:
        dim: model width; must equal ``x.shape[-1]``.
        num_heads: number of heads; must divide ``dim``.
        max_distance: the clipping distance ``k >= 0`` (tables of ``2k + 1``
            rows).
        causal: each position attends only to itself and the ones before it.
            Default ``False``.
        method: ``"skew"`` (default) or ``"naive"``; the same numbers, see
            :func:`shaw_attention`.

    Call arguments:
        x: ``(batch, seq, dim)`` embeddings.

    Returns:
        Tensor of the shape and dtype of ``x``; computed in float32 with autocast
        off whatever ``x``'s dtype (low-precision logits move the softmax).

    Weights:
        query_kernel, key_kernel, value_kernel, output_kernel: ``(dim, dim)``,
        applied as ``x @ kernel``; Glorot-uniform.
        query_bias, value_bias, output_bias: ``(dim,)``; zeros.
        key_table, value_table: ``(2 * max_distance + 1, dim // num_heads)``;
        normal with standard deviation 0.02.

    Example:
        >>> attn = ShawRelativeAttention(16, 2, 4, causal=True)
        >>> attn(torch.randn(3, 10, 16)).shape
        torch.Size([3, 10, 16])

    References:
        Shaw et al., "Self-Attention with Relative Position Representations",
        NAACL 2018.
    """

    def __init__(self, dim: int, num_heads: int, max_distance: int, *, causal: bool = False,
                 method: str = "skew"):
        super().__init__()
        what = "ShawRelativeAttention"
        self.dim, self.num_heads = check_heads(dim, num_heads, what=what)
        self.max_distance = check_max_distance(max_distance, what=what)
        self.causal = check_bool("causal", causal, what=what)
        self.method = check_choice("method", method, SHAW_METHODS, what=what)
        self.head_dim = self.dim // self.num_heads
        for name in ("query", "key", "value", "output"):
            setattr(self, f"{name}_kernel", nn.Parameter(torch.empty(self.dim, self.dim)))
        for name in ("query", "value", "output"):
            setattr(self, f"{name}_bias", nn.Parameter(torch.empty(self.dim)))
        relative_tables(self, self.max_distance, self.head_dim)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot-uniform kernels, zero biases, tables from N(0, 0.02^2)."""
        for name in ("query", "key", "value", "output"):
            nn.init.xavier_uniform_(getattr(self, f"{name}_kernel"))
        for name in ("query", "value", "output"):
            nn.init.zeros_(getattr(self, f"{name}_bias"))
        reset_relative_tables(self)

    def _heads(self, x, kernel, bias=None):
        """``x @ kernel (+ bias)`` in float32, split into ``(batch, heads, seq, head_dim)``."""
        y = x @ kernel.float()
        if bias is not None:
            y = y + bias.float()
        return y.unflatten(-1, (self.num_heads, self.head_dim)).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        what = type(self).__name__
        check_embeddings(x.shape, self.dim, what=what)
        check_rank("x", x.shape, 3, what=what, fix="pass (batch, seq, dim) embeddings")
        if x.shape[-2] == 0:
            return x
        with torch.autocast(device_type=x.device.type, enabled=False):
            h = x.float()
            q = self._heads(h, self.query_kernel, self.query_bias)
            k = self._heads(h, self.key_kernel)
            v = self._heads(h, self.value_kernel, self.value_bias)
            z = relative_attention(q, k, v, self.key_table, self.value_table,
                                   self.max_distance, causal=self.causal, method=self.method)
            z = z.transpose(1, 2).flatten(-2)
            out = z @ self.output_kernel.float() + self.output_bias.float()
        return out.to(x.dtype)

    def extra_repr(self) -> str:
        return (f"dim={self.dim}, num_heads={self.num_heads}, max_distance={self.max_distance}, "
                f"causal={self.causal}, method={self.method!r}")
