"""Diagnostics in Keras 3: hidden states, attention maps, and a gradient monitor.

The analysis is NumPy (:mod:`posenc.diagnostics`); this module collects what it needs from a
Keras model. :func:`hidden_states` and :func:`attention_maps` use only the model's call and
``keras.ops``, so they run on every backend. Gradients are not part of ``keras.ops``: Keras
has no hook on a variable's gradient, and ``model.fit`` computes its gradients inside the
backend's own ``train_step``. So :class:`GradientMonitor` computes them in a custom training
step with the backend's autodiff: ``tf.GradientTape`` on TensorFlow, ``torch.autograd`` on
PyTorch, and ``jax.value_and_grad`` on JAX (through a stateless call of the model: the
variables read traced values inside a ``keras.StatelessScope``). The PyTorch twin is :mod:`posenc.torch.diagnostics`, which records the same norms
through hooks.
"""

from __future__ import annotations

import math

import keras
import numpy as np
from keras import ops

from posenc._checks import check_bool, check_choice
from posenc.diagnostics import check_monitored_weights
from posenc.diagnostics import GRADIENT_RATIO_RANGE, GradientLog

__all__ = ["hidden_states", "attention_maps", "GradientMonitor"]

#: The Keras backends on which :class:`GradientMonitor` can compute gradients.
GRADIENT_BACKENDS = ("tensorflow", "torch", "jax")


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


def _dense_gradients(grads) -> list:
    """Every gradient as one dense tensor (TensorFlow's ``tf.IndexedSlices`` summed per row).

    On TensorFlow an embedding's gradient is a ``tf.IndexedSlices`` with one slice per token
    of the batch, and Keras' optimisers then update slice by slice: Adam builds a repeated
    row's second moment from the sum of the repeats' squares instead of the square of their
    sum, and leaves the rows absent from the batch untouched (a "lazy" Adam). A row repeated
    four times then moves twice as far as under PyTorch's Adam
    (``tests/test_tasks.py::test_keras_adam_updates_a_repeated_embedding_row_as_pytorch``).
    Summing the slices first gives the dense update that PyTorch makes. Other backends
    already give dense gradients.
    """
    if keras.backend.backend() != "tensorflow":
        return list(grads)
    import tensorflow as tf

    return [None if g is None else tf.convert_to_tensor(g) for g in grads]


class GradientMonitor:
    """Record the gradient norm of a model's positional weights and of the rest, per step.

    Keras has no gradient hooks, so the monitor computes the gradients itself: call
    :meth:`gradients` with a function that returns the loss, apply what it returns with the
    optimiser, and the step's two norms are in :attr:`log` (a
    :class:`posenc.diagnostics.GradientLog`). With ``auto_step=True`` (the default) each call
    is one record. With gradient accumulation (several calls whose gradients are summed into
    one optimiser step), pass ``auto_step=False``: the monitor sums the gradients of the
    calls, and :meth:`step` records the norms of that sum, once per optimiser step. A
    positional weight that the loss does not reach gets a zero gradient (``None`` from the
    backend becomes zeros), and counts as zero in the norms: a starved table shows up as a
    ratio of 0. Runs on the TensorFlow, PyTorch and JAX backends (eagerly).

    Args:
        model: the Keras model being trained (built).
        position_weights: the positional variables. Default: ``model.position_weights()`` (the
            lab's ``Transformer`` has it).
        auto_step: close a record at each :meth:`gradients` call. Default ``True``.

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

    def __init__(self, model, position_weights=None, *, auto_step: bool = True):
        what = "GradientMonitor"
        self.backend = check_choice("keras backend", keras.backend.backend(), GRADIENT_BACKENDS,
                                    what=what,
                                    fix="run it with KERAS_BACKEND=tensorflow, torch or jax")
        if position_weights is None:
            position_weights = model.position_weights()
        position = list(position_weights)
        trainable = list(model.trainable_variables)
        ids = {id(v) for v in trainable}
        check_monitored_weights([id(v) in ids for v in position], "position_weights",
                                what=what)
        self.auto_step = check_bool("auto_step", auto_step, what=what)
        position_ids = {id(v) for v in position}
        self.model = model
        self.is_position = [id(v) in position_ids for v in trainable]
        self.log = GradientLog()
        self.last_loss: float | None = None   # the loss of the last gradients() call
        self._summed = None

    def _backend_gradients(self, loss_fn, variables) -> list:
        if self.backend == "tensorflow":
            import tensorflow as tf

            with tf.GradientTape() as tape:
                loss = loss_fn()
            self.last_loss = float(ops.convert_to_numpy(loss))
            # an embedding's gradient is IndexedSlices, whose repeated rows must be summed
            # before the norm is taken: make every gradient dense
            return _dense_gradients(tape.gradient(loss, variables))
        if self.backend == "torch":
            import torch

            loss = loss_fn()
            self.last_loss = float(loss.detach())
            return list(torch.autograd.grad(loss, [v.value for v in variables],
                                            allow_unused=True))
        import jax

        others = [v for v in self.model.variables if all(v is not w for w in variables)]

        def stateless(values):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))) as scope:
                loss = loss_fn()
            return loss, [scope.get_current_value(v) for v in others]

        (loss, updates), grads = jax.value_and_grad(stateless, has_aux=True)(
            [v.value for v in variables])
        self.last_loss = float(loss)
        for v, value in zip(others, updates):   # e.g. the dropout layers' seed states
            if value is not None:
                v.assign(value)
        return list(grads)

    def gradients(self, loss_fn) -> list:
        """Gradients of ``loss_fn()`` for ``model.trainable_variables``; records their norms
        (``auto_step=True``) or adds them to the step's sum (``auto_step=False``).

        Args:
            loss_fn: a function without arguments that calls the model and returns a scalar
                loss.

        Returns:
            a list of tensors aligned with ``model.trainable_variables`` (zeros where the loss
            does not reach a variable), ready for ``optimizer.apply(grads, variables)``. The
            loss itself is kept as a float in :attr:`last_loss` (on JAX, ``loss_fn`` runs
            traced, so its tensors cannot be read outside).
        """
        variables = list(self.model.trainable_variables)
        grads = self._backend_gradients(loss_fn, variables)
        grads = [ops.zeros(v.shape, v.dtype) if g is None else g
                 for g, v in zip(grads, variables)]
        squares = [ops.sum(ops.square(ops.cast(g, "float32"))) for g in grads]
        if self.auto_step:
            self._record(squares, grads)
        else:
            self._summed = (grads if self._summed is None else
                            [a + ops.cast(g, a.dtype) for a, g in zip(self._summed, grads)])
        return grads

    def step(self) -> None:
        """Record the norms of the gradients summed since the last record (``auto_step=False``:
        one record per optimiser step) and start a new sum."""
        summed = self._summed or [ops.zeros(v.shape, v.dtype)
                                  for v in self.model.trainable_variables]
        self._record([ops.sum(ops.square(ops.cast(g, "float32"))) for g in summed], summed)
        self._summed = None

    def _record(self, squares, grads) -> None:
        sums = {True: 0.0, False: 0.0}
        counts = {True: 0, False: 0}
        for square, g, is_position in zip(squares, grads, self.is_position):
            sums[is_position] = sums[is_position] + square
            counts[is_position] += int(np.prod(g.shape))
        position, rest = (float(ops.convert_to_numpy(sums[k])) for k in (True, False))
        self.log.add(math.sqrt(position), math.sqrt(rest), counts[True], counts[False])

    @property
    def ratios(self) -> np.ndarray:
        """The per-weight RMS gradient ratio of every recorded step."""
        return self.log.ratios

    def health(self, healthy=GRADIENT_RATIO_RANGE) -> str:
        """``"healthy"``, ``"starved"``, ``"dominant"`` or ``"none"`` (see ``gradient_health``)."""
        return self.log.health(healthy)
