"""Positions in real batches: padding, packing and caches (the framework-free part).

A batch of prompts of different lengths is padded (on the left for decoding, on
the right for an encoder), and a training row may pack several documents. The
positions a scheme reads must then count the real tokens of each sequence, not
the slots of the row:

* padding (``attention_mask``, 1 real / 0 pad): the position of a token is the
  number of real tokens before it in its row, ``cumsum(mask) - 1`` (the
  *cumsum rule*); pads get position 0 and are never attended;
* packing (``document_ids``): the position restarts in each document, and no
  token attends to another document (the *document mask*); a reset without the
  mask still lets documents see each other;
* caches: the next position of each row is the number of its real tokens so far
  (a per-row offset), and the cache remembers which keys are padding.

This module holds the rules as NumPy references (:func:`mask_positions`,
:func:`document_positions`, :func:`batch_mask`, :func:`roberta_position_ids`),
the argument checks both faces share, and the bookkeeping of an attention-sink
cache (:func:`sink_plan`, :func:`sink_entries`, StreamingLLM). The faces' ``posenc/torch/batches.py``
and ``posenc/keras/batches.py`` compute the same in each framework, and their
``MultiHeadAttention`` and ``Transformer`` take ``attention_mask=`` and
``document_ids=``.

Data-dependent checks (a mask that is not 0/1) behave the same in both faces:
they read an eager tensor on the CPU only, and are skipped on an accelerator and
inside a traced function (``torch.compile``, ``jax.jit``, ``tf.function``), where
reading values would force a device sync or break the trace.
"""

from __future__ import annotations

import numpy as np

from posenc._checks import _error, check_int, check_integer_dtype, check_rank

__all__ = ["mask_positions", "document_positions", "batch_mask", "roberta_position_ids",
           "sink_plan", "sink_entries", "check_attention_mask", "check_mask_values", "check_document_ids",
           "check_cache_rows"]


# --------------------------------------------------------------------------- checks

def check_attention_mask(shape, dtype: str, tokens_shape, *, cached: int = 0,
                         name: str = "attention_mask", what: str = "") -> bool:
    """``attention_mask`` is ``(batch, seq)`` over the call's tokens, or, with a cache of
    ``cached`` positions, ``(batch, cached + seq)`` over the cached and new ones (Hugging
    Face's convention). Returns ``True`` when it covers the cached positions too.
    """
    shape, tokens_shape = tuple(shape), tuple(tokens_shape)
    batch, seq = tokens_shape[0], tokens_shape[1]
    fix = ("pass (batch, seq) ones for real tokens and zeros for padding, one per token"
           + (f" (or (batch, {cached} + seq) covering the cached ones too)" if cached else ""))
    check_rank(name, shape, 2, what=what, fix=fix)
    if dtype not in ("bool",) and "int" not in dtype and "float" not in dtype:
        raise _error(what, f"{name} must be 0/1 integers, booleans or floats, got dtype "
                           f"{dtype}", fix)
    known = all(s is not None for s in (*shape, batch, seq))
    if not known:
        return False
    if shape[0] != batch or shape[1] not in (seq, cached + seq):
        got = f"{name}.shape={shape} for tokens of shape {tokens_shape}"
        if cached:
            got += f" and a cache of {cached} positions"
        raise _error(what, f"{name} must have one entry per token, shape ({batch}, {seq})"
                           + (f" or ({batch}, {cached + seq})" if cached else "")
                           + f", got {got}", fix)
    return bool(cached) and shape[1] == cached + seq


def check_mask_values(values, *, name: str = "attention_mask", what: str = "") -> None:
    """Every entry 0 or 1 (``values`` ``None``: unknown inside a trace, passes)."""
    if values is None:
        return
    values = np.asarray(values)
    bad = values[(values != 0) & (values != 1)]
    if bad.size:
        raise _error(what, f"{name} must hold 1 for real tokens and 0 for padding, got the "
                           f"value {bad.reshape(-1)[0].item()!r}",
                     f"pass ({name} > 0) as integers, or build it from the tokenizer's mask")


def check_document_ids(shape, dtype: str, tokens_shape, *, name: str = "document_ids",
                       what: str = "") -> None:
    """``document_ids`` are integers ``(batch, seq)``, one per token."""
    shape = tuple(shape)
    check_rank(name, shape, 2, what=what,
               fix="pass (batch, seq) integers, one document id per token")
    check_integer_dtype(name, dtype, what=what)
    if all(s is not None for s in (*shape, *tokens_shape)) and shape != tuple(tokens_shape):
        raise _error(what, f"{name} must have one id per token, shape {tuple(tokens_shape)}, "
                           f"got {name}.shape={shape}", "pass one document id per token")


def check_cache_rows(cache_rows, batch, *, what: str = "") -> None:
    """A cache that holds rows (``cache_rows`` not ``None``) continues the same batch."""
    if cache_rows is not None and batch is not None and cache_rows != batch:
        raise _error(what, f"the cache holds {cache_rows} rows, got tokens of batch {batch}",
                     "continue the batch the cache was filled with, or start a new cache")


def check_documents_without_cache(document_ids, cache, *, what: str = "") -> None:
    """Packing (``document_ids``) is for full passes (training), not for cached decoding."""
    if document_ids is not None and cache is not None:
        raise _error(what, "document_ids are for a full pass over packed rows, got "
                           "document_ids with a cache",
                     "decode each document with its own cache (or its own row, left-padded, "
                     "with attention_mask)")


# --------------------------------------------------------------------------- the rules (NumPy)

def mask_positions(attention_mask, *, offset=None) -> np.ndarray:
    """The cumsum rule: the position of each token is the number of real tokens before it.

    ``cumsum(mask) - 1`` along the row, pads at position 0 (they are never attended, so any
    valid row of a table will do), plus ``offset`` per row (the real tokens cached before).

    Example:
        >>> mask_positions([[0, 0, 1, 1, 1], [1, 1, 1, 1, 0]])
        array([[0, 0, 0, 1, 2],
               [0, 1, 2, 3, 0]])
    """
    mask = np.asarray(attention_mask).astype(np.int64)
    positions = np.where(mask > 0, np.cumsum(mask, axis=-1) - 1, 0)
    if offset is not None:
        positions = positions + np.asarray(offset, np.int64).reshape(-1, 1) * (mask > 0)
    return positions


def document_positions(document_ids, *, attention_mask=None) -> np.ndarray:
    """Positions that restart in each document: the real tokens of the same document before
    each token (tokens with equal ids form one document).

    Example:
        >>> document_positions([[0, 0, 0, 1, 1, 2]])
        array([[0, 1, 2, 0, 1, 0]])
    """
    docs = np.asarray(document_ids)
    mask = np.ones(docs.shape, bool) if attention_mask is None else np.asarray(attention_mask) > 0
    seq = docs.shape[-1]
    earlier = np.tril(np.ones((seq, seq), bool))                     # j <= i
    same = (docs[:, :, None] == docs[:, None, :]) & earlier & mask[:, None, :]
    return np.where(mask, same.sum(-1) - 1, 0)


def batch_mask(attention_mask=None, document_ids=None, *, causal: bool = False,
               q_len: int | None = None, k_len: int | None = None) -> np.ndarray:
    """``(batch, q_len, k_len)`` booleans: query ``i`` may attend key ``j``.

    The keys are real (``attention_mask``), of the query's document (``document_ids``) and,
    with ``causal``, not after the query; the queries are the last ``q_len`` of the
    ``k_len`` positions (decoding with a cache).

    Example:
        >>> batch_mask([[0, 1, 1]], causal=True).astype(int)
        array([[[0, 0, 0],
                [0, 1, 0],
                [0, 1, 1]]])
    """
    given = attention_mask if attention_mask is not None else document_ids
    k_len = np.asarray(given).shape[-1] if k_len is None else k_len
    q_len = k_len if q_len is None else q_len
    allowed = np.ones((1, q_len, k_len), bool)
    if attention_mask is not None:
        allowed = allowed & (np.asarray(attention_mask) > 0)[:, None, :]
    if document_ids is not None:
        docs = np.asarray(document_ids)
        allowed = allowed & (docs[:, -q_len:, None] == docs[:, None, :])
    if causal:
        allowed = allowed & ~(np.arange(k_len)[None, :] > np.arange(k_len - q_len, k_len)[:, None])
    return allowed


def roberta_position_ids(input_ids, padding_idx: int, *, past_length=0) -> np.ndarray:
    """RoBERTa's positions: real tokens count from ``padding_idx + 1``, pads get
    ``padding_idx`` (the table row that never trains), as Hugging Face's
    ``create_position_ids_from_input_ids``. The table has ``max_len + padding_idx + 1`` rows.
    ``past_length``, an int or one count per row ``(batch,)``, is the number of real tokens
    a cache holds already (Hugging Face passes the cache's slot count, shared by the rows,
    which is right only for rows without cached pads).

    Example:
        >>> roberta_position_ids([[0, 5, 6, 1, 1]], padding_idx=1)
        array([[2, 3, 4, 1, 1]])
    """
    ids = np.asarray(input_ids)
    real = (ids != padding_idx).astype(np.int64)
    past = np.asarray(past_length, dtype=np.int64)
    past = past.reshape(-1, 1) if past.ndim else past
    return (np.cumsum(real, axis=-1) + past) * real + padding_idx


# --------------------------------------------------------------------------- attention sinks

def sink_plan(length: int, sink: int, window: int, *, what: str = "sink_cache"):
    """What an attention-sink cache keeps once a step has attended its ``length`` keys
    (StreamingLLM).

    Each query attends the first ``sink`` keys and the ``window`` most recent ones, itself
    included; after the step the cache keeps the sinks and the last ``window - 1`` keys, so
    that the next token, at place ``sink + window - 1``, completes the window. Positions
    are places in the cache: a kept key at place ``p`` moves to ``p - evicted`` (its
    rotation changes by ``-evicted``).

    Returns:
        ``(evicted, shift)``: the number of keys dropped after the sinks (0: nothing to do)
        and the change of position of the kept recent keys (``-evicted``).

    Example:
        >>> sink_plan(10, 2, 6)
        (3, -3)
    """
    sink = check_int("sink", sink, minimum=0, what=what, fix="keep 4 sink tokens, as "
                     "StreamingLLM does")
    window = check_int("window", window, minimum=1, what=what,
                       fix="keep at least one recent token")
    evicted = max(0, length - sink - window + 1)
    return evicted, -evicted


def sink_entries(entered, start: int, length: int):
    """Where each key of an attention-sink cache entered it, and how far it has moved since.

    The cache keeps every key as it was rotated when it entered, at the place it took then,
    and turns it, at each step, once by its whole shift to its place now: turning the kept
    keys by ``-evicted`` at every slide instead would round each key once per turn, and in
    bfloat16 a key that stays a window long would drift further than its own size.

    Args:
        entered: ``(start,)`` ints, the cached keys' places at entry (``None``: empty cache).
        start, length: the cache's length before and after this step's keys.

    Returns:
        ``(entered, shift)``: ``(length,)`` ints each, the places at entry, the new keys'
        being ``start .. length - 1``, and ``place now - place at entry`` (0 or negative).

    Example:
        >>> entered, shift = sink_entries(np.array([0, 1, 5, 6]), 4, 5)
        >>> entered.tolist(), shift.tolist()
        ([0, 1, 5, 6, 4], [0, 0, -3, -3, 0])
    """
    new = np.arange(start, length)
    entered = new if entered is None else np.concatenate([np.asarray(entered), new])
    return entered, np.arange(length) - entered
