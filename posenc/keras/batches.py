"""Positions in real batches: padding, packing and caches (Keras face).

Mirrors ``posenc/torch/batches.py`` name for name, with ``keras.ops`` only:
:func:`mask_positions` (the cumsum rule of a padded row), :func:`document_positions`
(positions that restart in each packed document), :func:`batch_mask` (who may attend
whom), :func:`positional_bias` (ALiBi's and T5's biases at per-token positions),
:func:`roberta_position_ids`, and for caches :func:`rerotate_keys`, :func:`sink_cache`
(attention sinks) and :func:`rerotate_cache` (LongRoPE's switch of factors). The rules
are those of :mod:`posenc.batches`.
"""

from __future__ import annotations

import numpy as np
from keras import ops

from posenc import batches as rules
from posenc._checks import _error
from posenc.attention import LayerCache, future_keys
from posenc.keras._util import can_inspect, dtype_of
from posenc.keras.bias import ALiBiBias, T5RelativeBias, t5_buckets
from posenc.keras.rotary import apply_rope

__all__ = ["mask_positions", "document_positions", "batch_mask", "positional_bias",
           "roberta_position_ids", "rerotate_keys", "sink_cache", "rerotate_cache"]


def _tensor(x):
    return ops.convert_to_tensor(x)


def _values(t):
    """``t``'s values for a data-dependent check: only an eager CPU tensor is read, else
    ``None`` (the check is skipped on an accelerator and inside ``jax.jit`` or
    ``tf.function``)."""
    return ops.convert_to_numpy(t) if can_inspect(t) else None


def _real(mask):
    """``mask > 0`` as booleans, whatever its dtype."""
    mask = _tensor(mask)
    return mask if dtype_of(mask) == "bool" else ops.greater(mask, 0)


def mask_positions(attention_mask, *, offset=None):
    """The cumsum rule: each token's position is the number of real tokens before it.

    ``cumsum(mask) - 1`` along each row, pads at position 0 (never attended), plus
    ``offset`` per row (the real tokens a cache holds already). Left and right padding
    give each sequence the positions ``0, 1, ...`` it has alone, which ``arange(seq)`` does
    not (a left-padded prompt would start at the number of its pads).

    Args:
        attention_mask: ``(batch, seq)``, 1 (or ``True``) for real tokens, 0 for padding.
        offset: optional int ``(batch,)`` tensor: the first position of each row.

    Returns:
        int32 tensor ``(batch, seq)``.

    Example:
        >>> p = mask_positions(np.array([[0, 0, 1, 1], [1, 1, 1, 0]]))
        >>> ops.convert_to_numpy(p).tolist()
        [[0, 0, 0, 1], [0, 1, 2, 0]]

    References:
        Hugging Face Transformers, ``generation/utils.py`` (version 5.23): the positions
        of a left-padded batch are ``attention_mask.cumsum(-1) - 1``.
    """
    real = _real(attention_mask)
    mask = ops.cast(real, "int32")
    positions = ops.where(real, ops.cumsum(mask, axis=-1) - 1, 0)
    if offset is not None:
        positions = positions + ops.reshape(ops.cast(_tensor(offset), "int32"), (-1, 1)) * mask
    return positions


def document_positions(document_ids, *, attention_mask=None):
    """Positions that restart in each packed document (tokens with one id form a document).

    The position of a token is the number of real tokens of its document before it, so a
    document packed after others reads the positions it has alone. Resetting positions is
    half of packing: the attention must also stop at the document's edge
    (:func:`batch_mask` with ``document_ids``).

    Args:
        document_ids: int ``(batch, seq)``.
        attention_mask: optional ``(batch, seq)`` padding mask (pads at position 0).

    Returns:
        int32 tensor ``(batch, seq)``.

    Example:
        >>> p = document_positions(np.array([[0, 0, 0, 1, 1, 2]]))
        >>> ops.convert_to_numpy(p).tolist()
        [[0, 1, 2, 0, 1, 0]]

    References:
        Krell et al., "Efficient Sequence Packing without Cross-contamination", 2021.
    """
    docs = _tensor(document_ids)
    seq = docs.shape[-1]
    mask = ops.ones(ops.shape(docs), "bool") if attention_mask is None else _real(attention_mask)
    earlier = ops.cast(ops.tril(ops.ones((seq, seq), "int32")), "bool")
    same = (ops.equal(docs[:, :, None], docs[:, None, :]) & earlier[None]
            & mask[:, None, :])
    return ops.where(mask, ops.sum(ops.cast(same, "int32"), axis=-1) - 1, 0)


def batch_mask(attention_mask=None, document_ids=None, *, causal: bool = False,
               q_len=None, k_len=None):
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
        >>> m = batch_mask(np.array([[0, 1, 1]]), causal=True)
        >>> ops.convert_to_numpy(m).astype(int).tolist()
        [[[0, 0, 0], [0, 1, 0], [0, 1, 1]]]

    References:
        Krell et al., "Efficient Sequence Packing without Cross-contamination", 2021.
    """
    given = attention_mask if attention_mask is not None else document_ids
    k_len = _tensor(given).shape[-1] if k_len is None else int(k_len)
    q_len = k_len if q_len is None else int(q_len)
    allowed = ops.ones((1, q_len, k_len), "bool")
    if attention_mask is not None:
        allowed = allowed & _real(attention_mask)[:, None, :]
    if document_ids is not None:
        docs = _tensor(document_ids)
        allowed = allowed & ops.equal(docs[:, k_len - q_len:, None], docs[:, None, :])
    if causal:
        future = future_keys(q_len, k_len, lambda n: ops.arange(n, dtype="int32"))
        allowed = allowed & ops.logical_not(future)[None]
    return allowed


def positional_bias(layer, q_positions, k_positions):
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
        >>> p = mask_positions(np.array([[0, 1, 1]]))
        >>> b = positional_bias(ALiBiBias(2), p, p)
        >>> ops.convert_to_numpy(b)[0, 0].tolist()
        [[0.0, 0.0, -0.0625], [0.0, 0.0, -0.0625], [-0.0625, -0.0625, 0.0]]

    References:
        Press et al., "Train Short, Test Long", ICLR 2022; Raffel et al., JMLR 2020.
    """
    rel = (ops.cast(_tensor(k_positions), "int32")[:, None, :]
           - ops.cast(_tensor(q_positions), "int32")[:, :, None])
    if hasattr(layer, "bias_at"):
        return layer.bias_at(q_positions, k_positions)
    if isinstance(layer, ALiBiBias):
        slopes = ops.cast(layer.slopes, "float32")
        return slopes[None, :, None, None] * ops.cast(-ops.abs(rel), "float32")[:, None]
    if isinstance(layer, T5RelativeBias):
        buckets = t5_buckets(rel, bidirectional=layer.bidirectional,
                             num_buckets=layer.num_buckets, max_distance=layer.max_distance)
        table = ops.cast(layer.relative_attention_bias, "float32")
        return ops.transpose(ops.take(table, buckets, axis=0), (0, 3, 1, 2))
    raise _error("positional_bias", f"{type(layer).__name__} has no bias at per-token "
                                    "positions", "give the layer a bias_at(q_positions, "
                                                 "k_positions) method")


def roberta_position_ids(input_ids, padding_idx: int, *, past_length=0):
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
        int32 tensor ``(batch, seq)``.

    Example:
        >>> p = roberta_position_ids(np.array([[0, 31414, 232, 2, 1, 1]]), 1)
        >>> ops.convert_to_numpy(p).tolist()
        [[2, 3, 4, 5, 1, 1]]

    References:
        Liu et al., "RoBERTa: A Robustly Optimized BERT Pretraining Approach", 2019.
    """
    ids = _tensor(input_ids)
    real = ops.cast(ops.not_equal(ids, padding_idx), "int32")
    past = ops.cast(_tensor(past_length), "int32")
    past = ops.reshape(past, (-1, 1)) if len(past.shape) else past
    return (ops.cumsum(real, axis=-1) + past) * real + int(padding_idx)


def rerotate_keys(keys, shift, inv_freq, *, layout: str = "half"):
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
        >>> from posenc.keras import rope_frequencies
        >>> inv_freq, _ = rope_frequencies(8)
        >>> k = np.random.default_rng(0).normal(size=(1, 1, 4, 8)).astype("float32")
        >>> moved = rerotate_keys(apply_rope(k, np.arange(4), inv_freq), -2, inv_freq)
        >>> fresh = apply_rope(k, np.arange(-2, 2), inv_freq)
        >>> bool(np.allclose(ops.convert_to_numpy(moved), ops.convert_to_numpy(fresh), atol=1e-5))
        True

    References:
        Xiao et al., "Efficient Streaming Language Models with Attention Sinks", ICLR 2024.
    """
    seq = keys.shape[-2]
    if isinstance(shift, int):
        shift = np.full((seq,), shift, np.int32)
    return apply_rope(keys, _tensor(shift), inv_freq, layout=layout)


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
            full_keys = rerotate_keys(keys, shift.astype("int32"), self.rotary._inv_freq,
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
        >>> from posenc.keras import Transformer
        >>> model = Transformer(50, depth=1, position="rope")
        >>> cache = sink_cache(model, sink=2, window=6)
        >>> _ = [model(np.array([[t]]), cache=cache) for t in range(12)]
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
        >>> from posenc.keras import Transformer
        >>> model = Transformer(50, depth=1, position="rope")
        >>> cache = model.new_cache()
        >>> _ = model(np.array([[1, 2, 3]]), cache=cache)
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
        delta = (new - old).astype(np.float32)
        positions = (layer.positions if layer.positions is not None
                     else ops.arange(layer.length, dtype="int32"))
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


def state(batch, seq: int, attention_mask, document_ids, cache, causal: bool, *,
          what: str) -> BatchState:
    """Check the call's masks and build its :class:`BatchState` (``cache`` unchanged)."""
    rules.check_documents_without_cache(document_ids, cache, what=what)
    if isinstance(cache, _SinkLayerCache):
        raise _error(what, "an attention-sink cache holds unpadded rows, got attention_mask",
                     "decode each sequence in its own row without a mask")
    cached = 0 if cache is None else cache.length
    tokens_shape = (batch, seq)
    if cache is not None and cache.keys is not None:
        rules.check_cache_rows(cache.keys.shape[0], batch, what=what)
    prev = None
    if cached:
        prev = (cache.key_mask if cache.key_mask is not None
                else ops.ones((batch, cached), "bool"))
    if attention_mask is not None:
        attention_mask = _tensor(attention_mask)
        full = rules.check_attention_mask(tuple(attention_mask.shape), dtype_of(attention_mask),
                                          tokens_shape, cached=cached, what=what)
        rules.check_mask_values(_values(attention_mask), what=what)
        mask = _real(attention_mask)
        if full:
            prev, mask = prev & mask[:, :cached], mask[:, cached:]
    else:
        mask = ops.ones((batch, seq), "bool")
    if document_ids is not None:
        document_ids = _tensor(document_ids)
        rules.check_document_ids(tuple(document_ids.shape), dtype_of(document_ids), tokens_shape,
                                 what=what)
        positions = document_positions(document_ids, attention_mask=mask)
    else:
        offset = None if prev is None else ops.sum(ops.cast(prev, "int32"), axis=-1)
        positions = mask_positions(mask, offset=offset)
    if cached:
        old = (cache.positions if cache.positions is not None
               else ops.broadcast_to(ops.arange(cached, dtype="int32")[None], (batch, cached)))
        key_positions = ops.concatenate((ops.cast(old, "int32"), positions), axis=1)
        key_mask = ops.concatenate((prev, mask), axis=1)
    else:
        key_positions, key_mask = positions, mask
    allowed = batch_mask(key_mask, document_ids, causal=causal, q_len=seq, k_len=cached + seq)
    return BatchState(positions, key_positions, key_mask, allowed)


def masked_softmax(logits, allowed):
    """Softmax over the allowed keys; a query with none (a pad in a left-padded causal row)
    gets zero weights, not NaN."""
    some = ops.any(allowed, axis=-1, keepdims=True)
    logits = ops.where(allowed, logits, float("-inf"))
    logits = ops.where(some, logits, 0.0)
    return ops.softmax(logits, axis=-1) * ops.cast(some, "float32")


def relative_attention_at(q, k, v, key_table, value_table, max_distance: int, q_positions,
                          k_positions, allowed, drop=None):
    """Shaw et al.'s attention at per-token positions (float32): the relative keys and
    values of ``clip(p_j - p_i)``. Returns ``(output, weights)``."""
    rel = ops.clip(k_positions[:, None, :] - q_positions[:, :, None], -max_distance,
                   max_distance) + max_distance                           # (b, q, k)
    qf = ops.cast(q, "float32") * q.shape[-1] ** -0.5
    logits = ops.matmul(qf, ops.swapaxes(ops.cast(k, "float32"), -1, -2))
    by_distance = ops.matmul(qf, ops.transpose(ops.cast(key_table, "float32")))  # (b,h,q,R)
    index = ops.broadcast_to(rel[:, None], ops.shape(logits))
    logits = logits + ops.take_along_axis(by_distance, index, axis=-1)
    weights = masked_softmax(logits, allowed[:, None])
    dropped = weights if drop is None else drop(weights)
    out = ops.matmul(dropped, ops.cast(v, "float32"))
    one_hot = ops.one_hot(rel, 2 * max_distance + 1, dtype="float32")   # (b, q, k, R)
    summed = ops.einsum("bhqk,bqkr->bhqr", dropped, one_hot)
    out = out + ops.matmul(summed, ops.cast(value_table, "float32"))
    return out, weights
