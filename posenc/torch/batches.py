"""Positions in real batches: padding, packing and caches (PyTorch face).

The rules of :mod:`posenc.batches` in PyTorch: :func:`mask_positions` (the cumsum rule
of a padded row), :func:`document_positions` (positions that restart in each packed
document), :func:`batch_mask` (who may attend whom), :func:`positional_bias` (ALiBi's and
T5's biases at per-token positions, ``(batch, heads, q, k)``), :func:`roberta_position_ids`
(RoBERTa's offset table rows), and for caches :func:`rerotate_keys`, :func:`sink_cache`
(StreamingLLM's attention sinks, keys re-rotated when the window slides) and
:func:`rerotate_cache` (the keys of a cache moved to the frequencies of another length:
LongRoPE's switch of factors). ``MultiHeadAttention`` and ``Transformer`` call these when
they get ``attention_mask=`` or ``document_ids=``.
"""

from __future__ import annotations

import numpy as np
import torch

from posenc import batches as rules
from posenc._checks import _error
from posenc.attention import LayerCache, future_keys
from posenc.torch._util import can_inspect, dtype_of
from posenc.torch.bias import ALiBiBias, T5RelativeBias, t5_buckets
from posenc.torch.rotary import apply_rope

__all__ = ["mask_positions", "document_positions", "batch_mask", "positional_bias",
           "roberta_position_ids", "rerotate_keys", "sink_cache", "rerotate_cache"]


def _tensor(x):
    return x if torch.is_tensor(x) else torch.as_tensor(x)


def _values(t):
    """``t``'s values for a data-dependent check: only an eager CPU tensor is read, else
    ``None`` (the check is skipped on an accelerator and inside ``torch.compile``)."""
    return t.detach().numpy() if can_inspect(t) else None


def mask_positions(attention_mask, *, offset=None) -> torch.Tensor:
    """The cumsum rule: each token's position is the number of real tokens before it.

    ``cumsum(mask) - 1`` along each row, pads at position 0 (never attended), plus
    ``offset`` per row (the real tokens a cache holds already). Left and right padding
    give each sequence the positions ``0, 1, ...`` it has alone, which ``arange(seq)`` does
    not (a left-padded prompt would start at the number of its pads).

    Args:
        attention_mask: ``(batch, seq)``, 1 (or ``True``) for real tokens, 0 for padding.
        offset: optional int ``(batch,)`` tensor: the first position of each row.

    Returns:
        int64 tensor ``(batch, seq)``.

    Example:
        >>> mask_positions(torch.tensor([[0, 0, 1, 1], [1, 1, 1, 0]]))
        tensor([[0, 0, 0, 1],
                [0, 1, 2, 0]])

    References:
        Hugging Face Transformers, ``generation/utils.py`` (version 5.23): the positions
        of a left-padded batch are ``attention_mask.cumsum(-1) - 1``.
    """
    mask = _tensor(attention_mask).long()
    positions = torch.where(mask > 0, mask.cumsum(-1) - 1, 0)
    if offset is not None:
        positions = positions + _tensor(offset).long().reshape(-1, 1) * (mask > 0)
    return positions


def document_positions(document_ids, *, attention_mask=None) -> torch.Tensor:
    """Positions that restart in each packed document (tokens with one id form a document).

    The position of a token is the number of real tokens of its document before it, so a
    document packed after others reads the positions it has alone. Resetting positions is
    half of packing: the attention must also stop at the document's edge
    (:func:`batch_mask` with ``document_ids``).

    Args:
        document_ids: int ``(batch, seq)``.
        attention_mask: optional ``(batch, seq)`` padding mask (pads at position 0).

    Returns:
        int64 tensor ``(batch, seq)``.

    Example:
        >>> document_positions(torch.tensor([[0, 0, 0, 1, 1, 2]]))
        tensor([[0, 1, 2, 0, 1, 0]])

    References:
        Krell et al., "Efficient Sequence Packing without Cross-contamination", 2021.
    """
    docs = _tensor(document_ids)
    seq = docs.shape[-1]
    mask = (torch.ones(docs.shape, dtype=torch.bool, device=docs.device) if attention_mask is None
            else _tensor(attention_mask).to(docs.device) > 0)
    earlier = torch.ones(seq, seq, dtype=torch.bool, device=docs.device).tril()
    same = (docs[:, :, None] == docs[:, None, :]) & earlier & mask[:, None, :]
    return torch.where(mask, same.sum(-1) - 1, 0)


def batch_mask(attention_mask=None, document_ids=None, *, causal: bool = False,
               q_len=None, k_len=None) -> torch.Tensor:
    """``(batch, q_len, k_len)`` booleans: query ``i`` may attend key ``j``.

    A key is attended when it is real (``attention_mask``), of the query's document
    (``document_ids``) and, with ``causal``, not after the query. The queries are the last
    ``q_len`` of the ``k_len`` keys (decoding with a cache); both default to the masks'
    length.

    Args:
        attention_mask: optional ``(batch, k_len)`` padding mask of the keys.
        document_ids: optional int ``(batch, k_len)``.
        causal: hide the keys after each query. Default ``False``.
        q_len, k_len: the numbers of queries and keys.

    Returns:
        bool tensor ``(batch or 1, q_len, k_len)``.

    Example:
        >>> batch_mask(torch.tensor([[0, 1, 1]]), causal=True).int()
        tensor([[[0, 0, 0],
                 [0, 1, 0],
                 [0, 1, 1]]], dtype=torch.int32)

    References:
        Krell et al., "Efficient Sequence Packing without Cross-contamination", 2021.
    """
    given = attention_mask if attention_mask is not None else document_ids
    device = None if given is None else _tensor(given).device
    k_len = _tensor(given).shape[-1] if k_len is None else int(k_len)
    q_len = k_len if q_len is None else int(q_len)
    allowed = torch.ones(1, q_len, k_len, dtype=torch.bool, device=device)
    if attention_mask is not None:
        allowed = allowed & (_tensor(attention_mask).to(device) > 0)[:, None, :]
    if document_ids is not None:
        docs = _tensor(document_ids).to(device)
        allowed = allowed & (docs[:, k_len - q_len:, None] == docs[:, None, :])
    if causal:
        allowed = allowed & ~future_keys(q_len, k_len, lambda n: torch.arange(n, device=device))
    return allowed


def positional_bias(layer, q_positions, k_positions) -> torch.Tensor:
    """A bias layer's logits bias at per-token positions: float32 ``(batch, heads, q, k)``.

    ALiBi's ``-slope * |p_j - p_i|`` and T5's ``table[bucket(p_j - p_i)]`` are functions of
    the relative position of the two tokens' *real* positions, so in a padded or packed
    row they must read ``p`` (:func:`mask_positions`, :func:`document_positions`), not the
    slots: the same bias as the sequence alone. A layer with its own ``bias_at(q_positions,
    k_positions)`` method is asked for it; Swin's grid bias does not depend on the row.

    Args:
        layer: an :class:`ALiBiBias`, a :class:`T5RelativeBias`, or a layer with
            ``bias_at``.
        q_positions: int ``(batch, q)``.
        k_positions: int ``(batch, k)``.

    Returns:
        float32 tensor ``(batch, heads, q, k)`` (future keys not masked: :func:`batch_mask`
        masks them).

    Example:
        >>> p = mask_positions(torch.tensor([[0, 1, 1]]))
        >>> positional_bias(ALiBiBias(2), p, p)[0, 0]
        tensor([[ 0.0000,  0.0000, -0.0625],
                [ 0.0000,  0.0000, -0.0625],
                [-0.0625, -0.0625,  0.0000]])

    References:
        Press et al., "Train Short, Test Long", ICLR 2022; Raffel et al., JMLR 2020.
    """
    rel = _tensor(k_positions).long()[:, None, :] - _tensor(q_positions).long()[:, :, None]
    if hasattr(layer, "bias_at"):
        return layer.bias_at(q_positions, k_positions)
    if isinstance(layer, ALiBiBias):
        return layer.slopes.float()[None, :, None, None] * (-rel.abs())[:, None].float()
    if isinstance(layer, T5RelativeBias):
        buckets = t5_buckets(rel.to(layer.relative_attention_bias.device),
                             bidirectional=layer.bidirectional, num_buckets=layer.num_buckets,
                             max_distance=layer.max_distance)
        return layer.relative_attention_bias.float()[buckets].permute(0, 3, 1, 2)
    raise _error("positional_bias", f"{type(layer).__name__} has no bias at per-token "
                                    "positions", "give the layer a bias_at(q_positions, "
                                                 "k_positions) method")


def roberta_position_ids(input_ids, padding_idx: int, *, past_length=0) -> torch.Tensor:
    """RoBERTa's position ids: real tokens count from ``padding_idx + 1``, pads read row
    ``padding_idx`` (Hugging Face's ``create_position_ids_from_input_ids``).

    RoBERTa's learned table has ``max_len + padding_idx + 1`` rows and its first real token
    reads row ``padding_idx + 1`` (2 for ``padding_idx=1``): reading it with
    ``arange(seq)`` shifts every token by two rows of the table it was trained with.

    Args:
        input_ids: int ``(batch, seq)``.
        padding_idx: the pad token's id (1 for RoBERTa), also the pads' table row.
        past_length: real tokens before (decoding): an int, or an int ``(batch,)`` tensor
            of each row's real tokens in the cache (a left-padded batch: Hugging Face's
            ``past_key_values_length`` is the cache's slot count, which counts the cached
            pads); default 0.

    Returns:
        int64 tensor ``(batch, seq)``.

    Example:
        >>> roberta_position_ids(torch.tensor([[0, 31414, 232, 2, 1, 1]]), 1)
        tensor([[2, 3, 4, 5, 1, 1]])

    References:
        Liu et al., "RoBERTa: A Robustly Optimized BERT Pretraining Approach", 2019.
    """
    ids = _tensor(input_ids)
    real = (ids != padding_idx).long()
    past = _tensor(past_length).long().to(ids.device)
    past = past.reshape(-1, 1) if past.dim() else past
    return (real.cumsum(-1) + past) * real + int(padding_idx)


def rerotate_keys(keys, shift, inv_freq, *, layout: str = "half") -> torch.Tensor:
    """Move RoPE-rotated keys by ``shift`` positions: ``R(shift) R(p) k = R(p + shift) k``.

    Rotations of one plane compose by adding their angles, so keys cached at positions
    ``p`` become the keys at ``p + shift`` without the tokens that made them; a cache that
    evicts keys (:func:`sink_cache`) or changes frequencies (:func:`rerotate_cache`) uses
    this instead of recomputing.

    Args:
        keys: ``(..., seq, head_dim)`` keys rotated with ``inv_freq``.
        shift: an int, or an int tensor ``(seq,)`` or ``(batch, seq)``.
        inv_freq: the ``(head_dim // 2,)`` frequencies they were rotated with.
        layout: ``"half"`` (default) or ``"interleaved"``.

    Returns:
        Tensor of the shape and dtype of ``keys``.

    Example:
        >>> from posenc.torch import rope_frequencies
        >>> inv_freq, _ = rope_frequencies(8)
        >>> k = torch.randn(1, 1, 4, 8)
        >>> moved = rerotate_keys(apply_rope(k, torch.arange(4), inv_freq), -2, inv_freq)
        >>> torch.allclose(moved, apply_rope(k, torch.arange(-2, 2), inv_freq), atol=1e-5)
        True

    References:
        Xiao et al., "Efficient Streaming Language Models with Attention Sinks", ICLR 2024.
    """
    seq = keys.shape[-2]
    if isinstance(shift, int):
        shift = torch.full((seq,), shift, device=keys.device)
    return apply_rope(keys, _tensor(shift).to(keys.device), inv_freq, layout=layout)


class _SinkLayerCache(LayerCache):
    """A layer's cache that keeps ``sink`` first keys and ``window`` recent ones. Each key is
    stored as it was rotated when it entered (``entered``: its place then) and turned once,
    at every step, by its whole shift to its place now (:func:`posenc.batches.sink_entries`),
    so it carries two roundings however long it stays."""

    def __init__(self, sink: int, window: int, rotary):
        super().__init__()
        self.sink, self.window, self.rotary = sink, window, rotary
        self.evicted = 0
        self.entered = None

    def append(self, keys, values, concatenate):
        start = self.length
        keys, values = super().append(keys, values, concatenate)   # as rotated at entry
        self.entered, shift = rules.sink_entries(self.entered, start, self.length)
        full_keys = keys                               # this step attends them all ...
        if self.rotary is not None and shift.any():    # ... each turned to its place now
            full_keys = rerotate_keys(keys, torch.as_tensor(shift, device=keys.device),
                                      torch.as_tensor(self.rotary._inv_freq),
                                      layout=self.rotary.layout)
        evicted, _ = rules.sink_plan(self.length, self.sink, self.window)
        if evicted:
            kept = self.sink + evicted
            self.keys = concatenate((keys[..., :self.sink, :], keys[..., kept:, :]))
            self.values = concatenate((values[..., :self.sink, :], values[..., kept:, :]))
            self.entered = np.concatenate([self.entered[:self.sink], self.entered[kept:]])
            self.evicted += evicted
        return full_keys, values


def sink_cache(model, *, sink: int = 4, window: int = 1020):
    """A cache for ``model`` that keeps the first ``sink`` tokens and the last ``window``
    (StreamingLLM's attention sinks), for endless decoding in a fixed memory.

    Each query attends the ``sink`` first keys and the ``window`` most recent ones, itself
    included, at their places in the cache (a new token sits at ``sink + window - 1`` at
    most); when the window slides, the recent keys move to lower places: each is kept as it
    was rotated when it entered and turned once, at every step, by its whole shift since
    then (:func:`rerotate_keys`; RoPE only: a bias scheme reads ``cache.length`` and needs
    nothing), never turned again and again, whose roundings would add up in bfloat16.
    Unpadded batches only.

    Args:
        model: a causal ``Transformer``.
        sink: first tokens kept (the "attention sinks"); default 4.
        window: recent tokens each query attends, itself included; default 1020.

    Returns:
        a :class:`posenc.attention.Cache` whose layers evict.

    Example:
        >>> from posenc.torch import Transformer
        >>> model = Transformer(50, depth=1, position="rope")
        >>> cache = sink_cache(model, sink=2, window=6)
        >>> _ = [model(torch.tensor([[t]]), cache=cache) for t in range(12)]
        >>> cache.length   # two sinks and five recent keys, room for the next token
        7

    References:
        Xiao et al., "Efficient Streaming Language Models with Attention Sinks", ICLR 2024,
        section 3.2.
    """
    rules.sink_plan(0, sink, window)
    cache = model.new_cache()
    cache.layers = [_SinkLayerCache(sink, window, block.attention.rotary)
                    for block in model.blocks]
    return cache


def rerotate_cache(model, cache, *, from_length: int, to_length: int):
    """Move every cached key from the RoPE frequencies of a ``from_length``-long sequence to
    those of ``to_length`` (LongRoPE's switch of factors, dynamic NTK's growing base).

    The frequencies of a length-dependent scaling change as the sequence grows (LongRoPE:
    ``short_factor`` up to ``original_max_position_embeddings``, ``long_factor`` past it);
    a cache keeps the keys as they were rotated, so decoding past the switch mixes
    frequencies. Each key at position ``p`` is turned by ``p * (inv_to - inv_from)``. For a
    one-layer model this equals a fresh pass; deeper layers' keys also depend on the
    earlier layers' outputs, which were computed with the old frequencies: there, encode
    all the tokens again, the new one included (a new cache, a length past the switch),
    to match a fresh pass exactly.

    Args:
        model: a ``Transformer`` with ``position="rope"``.
        cache: its :class:`posenc.attention.Cache`.
        from_length, to_length: the sequence lengths whose frequencies the keys have and
            should have.

    Returns:
        ``cache``, changed in place.

    Example:
        >>> from posenc.torch import Transformer
        >>> model = Transformer(50, depth=1, position="rope")
        >>> cache = model.new_cache()
        >>> _ = model(torch.tensor([[1, 2, 3]]), cache=cache)
        >>> rerotate_cache(model, cache, from_length=3, to_length=4).length
        3

    References:
        Ding et al., "LongRoPE: Extending LLM Context Window Beyond 2 Million Tokens",
        ICML 2024.
    """
    for block, layer in zip(model.blocks, cache.layers):
        rotary = block.attention.rotary
        if rotary is None or layer.keys is None or not rotary.dynamic:
            continue
        old, _ = rotary._setup.frequencies(int(from_length))
        new, _ = rotary._setup.frequencies(int(to_length))
        delta = torch.as_tensor(new - old, dtype=torch.float64).float()
        positions = (layer.positions if layer.positions is not None
                     else torch.arange(layer.length, device=layer.keys.device))
        layer.keys = apply_rope(layer.keys, positions, delta, layout=rotary.layout)
    return cache


# --------------------------------------------------------------------------- the layers' state

class BatchState:
    """What one attention call needs in a padded or packed batch (built by :func:`state`):
    ``positions`` of the queries ``(batch, seq)``, ``key_positions`` and ``key_mask``
    ``(batch, k_len)`` over the cached and new keys, ``allowed`` ``(batch, seq, k_len)``."""

    def __init__(self, positions, key_positions, key_mask, allowed):
        self.positions, self.key_positions = positions, key_positions
        self.key_mask, self.allowed = key_mask, allowed


def active(attention_mask, document_ids, cache) -> bool:
    """Whether a call runs on per-token positions (a mask, documents, or a padded cache)."""
    return (attention_mask is not None or document_ids is not None
            or (cache is not None and cache.key_mask is not None))


def state(batch: int, seq: int, attention_mask, document_ids, cache, causal: bool, device, *,
          what: str) -> BatchState:
    """Check the call's masks and build its :class:`BatchState` (``cache`` unchanged)."""
    rules.check_documents_without_cache(document_ids, cache, what=what)
    if isinstance(cache, _SinkLayerCache):
        raise _error(what, "an attention-sink cache holds unpadded rows, got attention_mask",
                     "decode each sequence in its own row without a mask")
    cached = 0 if cache is None else cache.length
    tokens_shape = (batch, seq)
    if cache is not None and cache.keys is not None:
        rules.check_cache_rows(int(cache.keys.shape[0]), batch, what=what)
    prev = None
    if cached:
        prev = (cache.key_mask if cache.key_mask is not None
                else torch.ones(batch, cached, dtype=torch.bool, device=device))
    if attention_mask is not None:
        attention_mask = _tensor(attention_mask).to(device)
        full = rules.check_attention_mask(tuple(attention_mask.shape), dtype_of(attention_mask),
                                          tokens_shape, cached=cached, what=what)
        rules.check_mask_values(_values(attention_mask), what=what)
        mask = attention_mask > 0
        if full:
            prev, mask = prev & mask[:, :cached], mask[:, cached:]
    else:
        mask = torch.ones(batch, seq, dtype=torch.bool, device=device)
    if document_ids is not None:
        document_ids = _tensor(document_ids).to(device)
        rules.check_document_ids(tuple(document_ids.shape), dtype_of(document_ids), tokens_shape,
                                 what=what)
        positions = document_positions(document_ids, attention_mask=mask)
    else:
        offset = None if prev is None else prev.long().sum(-1)
        positions = mask_positions(mask, offset=offset)
    if cached:
        old = (cache.positions if cache.positions is not None
               else torch.arange(cached, device=device).expand(batch, cached))
        key_positions, key_mask = torch.cat((old, positions), 1), torch.cat((prev, mask), 1)
    else:
        key_positions, key_mask = positions, mask
    allowed = batch_mask(key_mask, document_ids, causal=causal, q_len=seq,
                         k_len=cached + seq)
    return BatchState(positions, key_positions, key_mask, allowed)


def masked_softmax(logits, allowed):
    """Softmax over the allowed keys; a query with none (a pad in a left-padded causal row)
    gets zero weights, not NaN."""
    some = allowed.any(-1, keepdim=True)
    logits = logits.masked_fill(~allowed, float("-inf")).masked_fill(~some, 0.0)
    return torch.softmax(logits, dim=-1) * some


def relative_attention_at(q, k, v, key_table, value_table, max_distance: int, q_positions,
                          k_positions, allowed, drop=None):
    """Shaw et al.'s attention at per-token positions (float32): the relative keys and
    values of ``clip(p_j - p_i)``. Returns ``(output, weights)``."""
    rel = (k_positions[:, None, :] - q_positions[:, :, None]).clamp(-max_distance, max_distance)
    rel = (rel + max_distance)[:, None]                                   # (b, 1, q, k)
    with torch.autocast(device_type=q.device.type, enabled=False):
        qf = q.float() * q.shape[-1] ** -0.5
        logits = qf @ k.float().transpose(-1, -2)
        by_distance = qf @ key_table.float().T                            # (b, h, q, 2K+1)
        index = rel.expand(*logits.shape)
        logits = logits + torch.gather(by_distance, -1, index)
        weights = masked_softmax(logits, allowed[:, None])
        dropped = weights if drop is None else drop(weights)
        out = dropped @ v.float()
        summed = torch.zeros(*logits.shape[:-1], key_table.shape[0], device=q.device)
        out = out + summed.scatter_add(-1, index, dropped) @ value_table.float()
    return out.to(q.dtype), weights
