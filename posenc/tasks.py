"""A small task that needs positions: the lag task's data, in NumPy.

The *lag task*: given a sequence of random tokens, predict at every position ``p`` the token
that came ``lag`` places earlier, ``tokens[p - lag]``. One layer of causal attention solves it
only if the query at ``p`` can find the key at ``p - lag``, which is a statement about
positions; token embeddings alone cannot express it. Positions ``p < lag`` have no target.

This module is framework-free: it draws the token batches from a seed with NumPy, so that
:mod:`posenc.torch.tasks` and :mod:`posenc.keras.tasks` train on identical data. The tools that
read a trained position table (``similarity``, ``mean_by_offset``, ``distance_share``) are in
:mod:`posenc.diagnostics`.
"""

from __future__ import annotations

import numpy as np

from posenc._checks import _error, check_float, check_int, check_positive_int

__all__ = [
    "lag_tokens",
    "lag_targets",
]


def lag_tokens(num_sequences: int, length: int, *, vocab: int, seed: int = 0) -> np.ndarray:
    """Random token sequences for the lag task, the same for a given seed on every machine.

    Args:
        num_sequences: number of sequences (rows), a positive int. A training run of ``steps``
            batches of ``batch_size`` uses ``steps * batch_size`` rows, in order.
        length: tokens per sequence, a positive int.
        vocab: vocabulary size; tokens are uniform in ``0 .. vocab-1``.
        seed: non-negative int for ``numpy.random.default_rng``. Default ``0``.

    Returns:
        int64 array ``(num_sequences, length)``.

    Example:
        >>> lag_tokens(2, 5, vocab=16, seed=0).shape
        (2, 5)
        >>> bool((lag_tokens(3, 4, vocab=8, seed=1) == lag_tokens(3, 4, vocab=8, seed=1)).all())
        True
    """
    num_sequences = check_positive_int("num_sequences", num_sequences)
    length = check_positive_int("length", length, fix="Pass the number of tokens per sequence.")
    vocab = check_positive_int("vocab", vocab)
    rng = np.random.default_rng(check_int("seed", seed, minimum=0, what="lag_tokens"))
    return rng.integers(0, vocab, size=(num_sequences, length), dtype=np.int64)


def lag_targets(tokens, lag: int) -> tuple[np.ndarray, np.ndarray]:
    """Targets and weights for the lag task: ``targets[:, p] = tokens[:, p - lag]``.

    Positions ``p < lag`` have no target: their target is 0 and their weight 0, so a loss
    weighted by ``weights`` (Keras' ``sample_weight``) counts only the positions that have one.

    Args:
        tokens: int array ``(batch, length)``.
        lag: positive int smaller than ``length``.

    Returns:
        ``(targets, weights)``: an int64 array and a float32 array, both ``(batch, length)``.

    Example:
        >>> targets, weights = lag_targets(np.array([[5, 6, 7, 8]]), 2)
        >>> targets.tolist(), weights.tolist()
        ([[0, 0, 5, 6]], [[0.0, 0.0, 1.0, 1.0]])
    """
    tokens = np.asarray(tokens)
    if tokens.ndim != 2:
        raise ValueError(f"tokens must be (batch, length), got tokens.shape={tokens.shape}.")
    lag, _ = check_lag(lag, tokens.shape[1])
    targets = np.zeros_like(tokens, dtype=np.int64)
    targets[:, lag:] = tokens[:, :-lag]
    weights = np.zeros(tokens.shape, dtype=np.float32)
    weights[:, lag:] = 1.0
    return targets, weights


def check_lag_attention(attention, rope, *, what: str = "LagModel") -> None:
    """A ``LagModel`` takes its own ``attention`` layer or a ``rope``, not both.

    ``rope`` rotates the queries and keys of the built-in attention; a layer passed as
    ``attention`` has its own queries and keys, which the model cannot reach.
    """
    if attention is not None and rope is not None:
        raise _error(what, f"attention and rope cannot be combined, got "
                           f"attention={type(attention).__name__} and "
                           f"rope={type(rope).__name__}: rope rotates the built-in attention's "
                           "queries and keys",
                     "leave attention=None to use rope, or give the rotation to the attention "
                     "layer itself")


def check_token_targets(tokens, targets, *, what: str = "") -> tuple[np.ndarray, np.ndarray]:
    """``tokens`` and ``targets`` as int64 arrays of one ``(num_sequences, length)`` shape."""
    tokens, targets = np.asarray(tokens), np.asarray(targets)
    if tokens.ndim != 2 or tokens.shape != targets.shape:
        raise _error(what, f"tokens and targets must both be (num_sequences, length), got "
                           f"tokens.shape={tokens.shape} and targets.shape={targets.shape}",
                     "give one target token per input token")
    return tokens.astype(np.int64), targets.astype(np.int64)


# --------------------------------------------------------------------------- argument rules


def check_lag(lag, length, *, what: str = "") -> tuple[int, int]:
    """``lag`` and ``length`` together, ``1 <= lag < length``; returns both as ints."""
    length = check_positive_int("length", length, what=what,
                                fix="pass the number of tokens per sequence")
    lag = check_positive_int("lag", lag, what=what,
                             fix="the target at position p is tokens[p - lag]")
    if lag >= length:
        raise _error(what, f"lag must be smaller than length (positions p < lag have no target), "
                           f"got lag={lag} for length={length}",
                     f"use a lag of at most {length - 1} or longer sequences")
    return lag, length


def check_lag_model(vocab, dim, embed_std, dropout, *, what: str = "LagModel"
                    ) -> tuple[int, int, float, float]:
    """The arguments of ``LagModel``, checked the same way in both faces."""
    vocab = check_positive_int("vocab", vocab, what=what)
    dim = check_positive_int("dim", dim, what=what)
    embed_std = check_float("embed_std", embed_std, above=0.0, what=what,
                            meaning="the token table is drawn from N(0, embed_std^2)",
                            fix="zero token embeddings cannot tell the tokens apart; use 1.0")
    dropout = check_float("dropout", dropout, at_least=0.0, below=1.0, what=what,
                          meaning="the probability of zeroing an entry",
                          fix="use a small value such as 0.1, or 0 to switch it off")
    return vocab, dim, embed_std, dropout


def check_lr(lr, *, what: str = "") -> float:
    """A positive, finite learning rate."""
    return check_float("lr", lr, above=0.0, what=what,
                       fix="Adam's usual range is 1e-4 .. 1e-2")


def check_unique_weight(key: str, found, *, what: str = "lag_weights") -> None:
    """A ``LagModel``'s weights are named by their part and their own name, one layout in both
    faces: two weights of one part with the same name (a stack of layers) would collide."""
    if key in found:
        raise _error(what, f"two weights of the model are both named {key!r} (the layer "
                           f"given as {key.split('/')[0]} holds several layers with the same "
                           "weight names)",
                     "copy the layers of such a stack one by one with "
                     "posenc.interop.copy_weights")
