"""Controls for the lab's explanations: changes to a trained model that test one cause.

:func:`clamp_t5_buckets` tests the explanation that T5's bias fails past the training length
because the buckets of the distances never seen in training keep their initial values: it
copies, in every layer, the bias of the bucket of the largest trained distance into every
bucket past it, so that a longer distance reads the bias of the longest one trained (what a
relative bias clipped at the training length would do). If the model then extrapolates, the
untrained buckets were the cause.

:func:`redraw_token_embedding` removes the amplitude confound between the token embeddings
and an added encoding: the lab draws token embeddings with a standard deviation of 0.02, while
the unit-amplitude sinusoid has an RMS of ``1/sqrt(2)`` (35 times louder), so at the start a
pre-norm model sees mostly the positions. Redrawn with :data:`MATCHED_STD`, the characters
start as loud as the sinusoid. That leaves a learned position table (also drawn with 0.02)
35 times quieter than the characters, the confound reversed for it:
:func:`redraw_position_table` draws the table with the same standard deviation, so that in the
comparison of a learned table with the sinusoid both codes and the characters start equally
loud.

:func:`hybrid_scale` reads the trained scale of a hybrid encoding (``scale * sinusoid +
learned offset``), which says how loud training made the fixed part.
"""

from __future__ import annotations

import sys

import numpy as np

from posenc._checks import _error, check_positive_int

__all__ = ["t5_bias_layers", "trained_t5_bucket", "clamp_t5_buckets", "MATCHED_STD",
           "redraw_token_embedding", "redraw_position_table", "hybrid_scale"]

#: The RMS of a unit-amplitude sinusoidal encoding, ``1/sqrt(2)``: token embeddings drawn with
#: this standard deviation are as loud as it.
MATCHED_STD = float(1 / np.sqrt(2))


def _is_keras(model) -> bool:
    keras = sys.modules.get("keras")
    return keras is not None and isinstance(model, keras.layers.Layer)


def t5_bias_layers(model) -> list:
    """The T5 bias layers (``relative_attention_bias`` tables) of a lab Transformer of either
    framework, in order."""
    children = model._flatten_layers() if _is_keras(model) else model.modules()
    return [layer for layer in children if hasattr(layer, "relative_attention_bias")
            and hasattr(layer, "num_buckets")]


def trained_t5_bucket(layer, trained_distance: int) -> int:
    """The bucket of the largest distance seen in training (a key ``trained_distance``
    positions before its query) in a causal T5 bias layer.

    Example:
        >>> class Layer:
        ...     bidirectional, num_buckets, max_distance = False, 32, 128
        >>> trained_t5_bucket(Layer(), 63), trained_t5_bucket(Layer(), 511)
        (26, 31)
    """
    from posenc.bias import t5_buckets

    trained_distance = check_positive_int("trained_distance", trained_distance,
                                          what="clamp_t5_buckets")
    if layer.bidirectional:
        raise _error("clamp_t5_buckets", "the T5 bias must be causal (bidirectional=False), "
                     "got bidirectional=True", "clamp the lab's causal Transformer")
    return int(t5_buckets(np.array([-trained_distance]), bidirectional=False,
                          num_buckets=layer.num_buckets, max_distance=layer.max_distance)[0])


def clamp_t5_buckets(model, trained_distance: int) -> list:
    """Copy, in every T5 bias layer of ``model``, the bias of the bucket of
    ``trained_distance`` into every later bucket (in place).

    Args:
        model: a lab Transformer with ``position="t5"`` (PyTorch or Keras), causal.
        trained_distance: the largest key-to-query distance of training (the training window
            minus one).

    Returns:
        The bucket copied from, per layer (the buckets past it now equal it).
    """
    layers = t5_bias_layers(model)
    if not layers:
        raise _error("clamp_t5_buckets", "model has no T5 bias layer",
                     "pass a Transformer built with position='t5'")
    kept, keras_model = [], _is_keras(model)
    for layer in layers:
        bucket = trained_t5_bucket(layer, trained_distance)
        weight = layer.relative_attention_bias
        if not keras_model:                                 # PyTorch
            import torch

            with torch.no_grad():
                weight[bucket + 1:] = weight[bucket].clone()
        else:                                               # Keras
            import keras

            table = np.array(keras.ops.convert_to_numpy(weight))
            table[bucket + 1:] = table[bucket]
            weight.assign(table)
        kept.append(bucket)
    return kept


def redraw_token_embedding(model, std: float, seed: int) -> None:
    """Draw ``model``'s token embedding again from ``N(0, std**2)`` (NumPy, from ``seed``, so
    that both frameworks get the same table), in place.

    Args:
        model: a lab Transformer (PyTorch or Keras).
        std: the standard deviation, above 0 (:data:`MATCHED_STD`: as loud as the sinusoid).
        seed: a non-negative int.
    """
    from posenc._checks import check_float, check_int

    std = check_float("std", std, above=0.0, what="redraw_token_embedding")
    seed = check_int("seed", seed, minimum=0, what="redraw_token_embedding")
    weight = model.token_embedding
    table = np.random.default_rng(seed).normal(0.0, std, size=tuple(weight.shape))
    if not _is_keras(model):                                # PyTorch
        import torch

        with torch.no_grad():
            weight.copy_(torch.from_numpy(table).to(weight.dtype))
    else:
        weight.assign(table.astype("float32"))


def redraw_position_table(model, std: float, seed: int) -> None:
    """Draw the learned position table of ``model`` (``position="learned"``) again from
    ``N(0, std**2)`` (NumPy, from ``seed + 1``, a stream apart from
    :func:`redraw_token_embedding`'s, and the same in both frameworks), in place.

    Args:
        model: a lab Transformer with a learned table (PyTorch or Keras).
        std: the standard deviation, above 0 (:data:`MATCHED_STD`: as loud as the sinusoid).
        seed: a non-negative int.
    """
    from posenc._checks import check_float, check_int

    std = check_float("std", std, above=0.0, what="redraw_position_table")
    seed = check_int("seed", seed, minimum=0, what="redraw_position_table")
    encoding = model.position_encoding
    if encoding is None or not hasattr(encoding, "table"):
        raise _error("redraw_position_table", f"model has no learned position table (position="
                     f"{getattr(model, 'position', None)!r})",
                     "pass a Transformer built with position='learned'")
    weight = encoding.table
    table = np.random.default_rng(seed + 1).normal(0.0, std, size=tuple(weight.shape))
    if not _is_keras(model):                                # PyTorch
        import torch

        with torch.no_grad():
            weight.copy_(torch.from_numpy(table).to(weight.dtype))
    else:
        weight.assign(table.astype("float32"))


def hybrid_scale(model):
    """The trainable ``scale`` of the hybrid encoding of a lab Transformer (PyTorch or Keras),
    a float; ``None`` when the model has no hybrid encoding."""
    from posenc.keras.learned import HybridEncoding as KerasHybrid
    from posenc.torch.learned import HybridEncoding as TorchHybrid

    if _is_keras(model):
        import keras

        for layer in model._flatten_layers():
            if isinstance(layer, KerasHybrid):
                return float(keras.ops.convert_to_numpy(layer.scale))
        return None
    for module in model.modules():
        if isinstance(module, TorchHybrid):
            return float(module.scale.detach().float())
    return None
