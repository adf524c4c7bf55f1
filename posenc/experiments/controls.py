"""Controls for the lab's explanations: changes to a trained model that test one cause.

:func:`clamp_t5_buckets` tests the explanation that T5's bias fails past the training length
because the buckets of the distances never seen in training keep their initial values: it
copies, in every layer, the bias of the bucket of the largest trained distance into every
bucket past it, so that a longer distance reads the bias of the longest one trained (what a
relative bias clipped at the training length would do). If the model then extrapolates, the
untrained buckets were the cause.
"""

from __future__ import annotations

import numpy as np

from posenc._checks import _error, check_positive_int

__all__ = ["t5_bias_layers", "trained_t5_bucket", "clamp_t5_buckets"]


def t5_bias_layers(model) -> list:
    """The T5 bias layers (``relative_attention_bias`` tables) of a lab Transformer of either
    framework, in order."""
    children = model.modules() if hasattr(model, "modules") else model._flatten_layers()
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
    kept = []
    for layer in layers:
        bucket = trained_t5_bucket(layer, trained_distance)
        weight = layer.relative_attention_bias
        if hasattr(weight, "detach"):                       # PyTorch
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
