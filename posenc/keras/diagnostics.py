"""Diagnostics in Keras 3: hidden states, attention maps, and a gradient monitor.

The analysis is NumPy (:mod:`posenc.diagnostics`); this module collects what it needs from a
Keras model. :func:`hidden_states` and :func:`attention_maps` use only the model's call and
``keras.ops``, so they run on every backend. Gradients are not part of ``keras.ops``: Keras
has no hook on a variable's gradient, and ``model.fit`` computes its gradients inside the
backend's own ``train_step``. So :class:`GradientMonitor` computes them in a custom training
step with the backend's autodiff, ``tf.GradientTape`` on TensorFlow and ``torch.autograd`` on
PyTorch (the JAX backend, whose gradients need a stateless call of the model, is not
supported). The PyTorch twin is :mod:`posenc.torch.diagnostics`, which records the same norms
through hooks.
"""

from __future__ import annotations

import math

import keras
import numpy as np
from keras import ops

from posenc._checks import check_choice, check_monitored_weights
from posenc.diagnostics import GRADIENT_RATIO_RANGE, GradientLog

__all__ = ["hidden_states", "attention_maps", "GradientMonitor"]

#: The Keras backends on which :class:`GradientMonitor` can compute gradients.
GRADIENT_BACKENDS = ("tensorflow", "torch")


def _numpy(t) -> np.ndarray:
    return np.asarray(ops.convert_to_numpy(ops.cast(t, "float32")))


def hidden_states(model, tokens) -> list[np.ndarray]:
    """Every layer's hidden states of ``model`` on ``tokens``, as float32 NumPy arrays.

    Calls ``model(tokens, return_hidden=True, training=False)`` (no dropout).

    Args:
        model: a Keras model whose call accepts ``return_hidden=True`` and returns
            ``(logits, hidden)``, ``hidden`` a list of ``(batch, seq, dim)`` tensors (the lab's
            ``Transformer``: the embedding output, then each block's).
        tokens: int array ``(batch, seq)``.

    Returns:
        list of ``(batch, seq, dim)`` float32 arrays, one per layer.

    Example:
        >>> class Tiny(keras.Model):
        ...     def call(self, tokens, return_hidden=False, training=False):
        ...         h = ops.repeat(ops.cast(tokens, "float32")[..., None], 3, axis=-1)
        ...         return (h, [h, 2 * h]) if return_hidden else h
        >>> [h.shape for h in hidden_states(Tiny(), np.zeros((2, 5), "int32"))]
        [(2, 5, 3), (2, 5, 3)]
    """
    _, hidden = model(tokens, return_hidden=True, training=False)
    return [_numpy(h) for h in hidden]


def attention_maps(model, tokens) -> list[np.ndarray]:
    """Every layer's attention weights of ``model`` on ``tokens``: ``(batch, heads, q, k)`` each.

    Calls ``model(tokens, return_attention=True, training=False)``, like :func:`hidden_states`.
    """
    _, attention = model(tokens, return_attention=True, training=False)
    return [_numpy(a) for a in attention]


class GradientMonitor:
    """Record the gradient norm of a model's positional weights and of the rest, per step.

    Keras has no gradient hooks, so the monitor computes the gradients itself: call
    :meth:`gradients` with a function that returns the loss, apply what it returns with the
    optimiser, and the step's two norms are in :attr:`log` (a
    :class:`posenc.diagnostics.GradientLog`). A positional weight that the loss does not reach
    gets a zero gradient (``None`` from the backend becomes zeros), and counts as zero in the
    norms: a starved table shows up as a ratio of 0.

    Args:
        model: the Keras model being trained (built).
        position_weights: the positional variables. Default: ``model.position_weights()`` (the
            lab's ``Transformer`` has it).

    Example:
        >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2),
        ...                           keras.layers.Dense(1)])
        >>> monitor = GradientMonitor(model, position_weights=[model.layers[0].kernel])
        >>> x = np.ones((3, 4), "float32")
        >>> grads = monitor.gradients(lambda: ops.mean(model(x) ** 2))
        >>> keras.optimizers.SGD(0.1).apply(grads, model.trainable_variables)
        >>> monitor.log.steps, monitor.log.position_count, monitor.log.rest_count
        (1, 8, 5)
    """

    def __init__(self, model, position_weights=None):
        self.backend = check_choice("keras backend", keras.backend.backend(), GRADIENT_BACKENDS,
                                    what="GradientMonitor",
                                    fix="run it with KERAS_BACKEND=tensorflow or torch")
        if position_weights is None:
            position_weights = model.position_weights()
        position = list(position_weights)
        trainable = list(model.trainable_variables)
        ids = {id(v) for v in trainable}
        check_monitored_weights([id(v) in ids for v in position], "position_weights",
                                what="GradientMonitor")
        position_ids = {id(v) for v in position}
        self.model = model
        self.is_position = [id(v) in position_ids for v in trainable]
        self.log = GradientLog()

    def gradients(self, loss_fn) -> list:
        """Gradients of ``loss_fn()`` for ``model.trainable_variables``; records their norms.

        Args:
            loss_fn: a function without arguments that calls the model and returns a scalar
                loss.

        Returns:
            a list of tensors aligned with ``model.trainable_variables`` (zeros where the loss
            does not reach a variable), ready for ``optimizer.apply(grads, variables)``.
        """
        variables = list(self.model.trainable_variables)
        if self.backend == "tensorflow":
            import tensorflow as tf

            with tf.GradientTape() as tape:
                loss = loss_fn()
            # an embedding's gradient is IndexedSlices, whose repeated rows must be summed
            # before the norm is taken: make every gradient dense
            grads = [None if g is None else tf.convert_to_tensor(g)
                     for g in tape.gradient(loss, variables)]
        else:
            import torch

            loss = loss_fn()
            grads = torch.autograd.grad(loss, [v.value for v in variables], allow_unused=True)
        grads = [ops.zeros(v.shape, v.dtype) if g is None else g
                 for g, v in zip(grads, variables)]
        sums = {True: 0.0, False: 0.0}
        counts = {True: 0, False: 0}
        for g, is_position in zip(grads, self.is_position):
            sums[is_position] += float(ops.convert_to_numpy(ops.sum(ops.square(
                ops.cast(g, "float32")))))
            counts[is_position] += int(np.prod(g.shape))
        self.log.add(math.sqrt(sums[True]), math.sqrt(sums[False]), counts[True], counts[False])
        return grads

    @property
    def ratios(self) -> np.ndarray:
        """The per-weight RMS gradient ratio of every recorded step."""
        return self.log.ratios

    def health(self, healthy=GRADIENT_RATIO_RANGE) -> str:
        """``"healthy"``, ``"starved"``, ``"dominant"`` or ``"none"`` (see ``gradient_health``)."""
        return self.log.health(healthy)
