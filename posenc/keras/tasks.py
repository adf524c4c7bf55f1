"""The lag task in Keras 3: a one-layer model, its loss, ``model.fit``, accuracy by position.

The data come from :mod:`posenc.tasks` (NumPy, from a seed), so :mod:`posenc.torch.tasks`
trains on exactly the same batches; :func:`lag_weights` and :func:`load_lag_weights` move a
model's weights between the faces. :func:`fit_tokens` and :func:`token_accuracy`, on which
:func:`train_lag` and :func:`accuracy_by_position` are built, train and score the same model on
any other token-to-token task.
"""

from __future__ import annotations

import math

import keras
import numpy as np
from keras import ops

from posenc import tasks
from posenc.tasks import (check_lag, check_lag_attention, check_lag_model, check_lr,
                          check_token_targets, check_unique_weight)
from posenc._checks import check_positive_int
from posenc.keras.diagnostics import _dense_gradients

__all__ = ["LagModel", "lag_loss", "fit_tokens", "train_lag", "token_accuracy",
           "accuracy_by_position", "lag_weights", "load_lag_weights"]

_KERNELS = ("query", "key", "value", "readout")


class _DenseAdam(keras.optimizers.Adam):
    """Keras' Adam on dense gradients (see :func:`_dense_gradients`): PyTorch's Adam update."""

    def __init__(self, *args, name: str = "adam", **kwargs):
        super().__init__(*args, name=name, **kwargs)

    def _clip_gradients(self, grads):
        return super()._clip_gradients(_dense_gradients(grads))


class LagModel(keras.Model):
    """Embedding, position encoding, dropout, one causal single-head attention layer, readout.

    ``h = dropout(position(s * embed(tokens)))`` with ``s = sqrt(dim)`` when ``embed_scale``
    (Vaswani et al., section 3.4) and ``s = 1`` otherwise; then one causal attention layer
    (``softmax(q k^T / sqrt(dim)) v``, no output projection) and a linear readout to
    ``vocab`` logits. Dropout acts on the sum of embedding and encoding, as in Vaswani et al.,
    section 5.4. With ``position=None`` the model has no encoding at all: only the causal mask
    tells the positions apart. A ``rope`` rotates the queries and keys before the scores
    (rotary embeddings). An ``attention`` layer takes the place of that attention layer, so that
    a relative scheme (``ShawRelativeAttention``, an attention with a bias) trains on the same
    task with the same code. The PyTorch twin is :class:`posenc.torch.tasks.LagModel`.

    Args:
        position: any posenc encoding layer that maps ``(batch, seq, dim)`` embeddings to
            embeddings with the code added (``LearnedEncoding``, ``SinusoidalEncoding``,
            ``HybridEncoding``, ...), or ``None`` for none.
        vocab: number of token ids (keyword-only).
        dim: model width (keyword-only).
        embed_scale: multiply the token embeddings by ``sqrt(dim)``. Default ``False``.
        dropout: dropout rate on ``embedding + encoding`` during training. Default ``0.0``.
        embed_std: standard deviation of the initial token table (a normal distribution).
            Default ``1.0``.
        rope: a layer that maps queries and keys ``(batch, 1, seq, dim)`` to rotated ones,
            ``rope(q, k) -> (q, k)`` (a ``RotaryEmbedding(dim)``), or ``None``. It has no
            weights, so it can be swapped after training (a scaled ``RotaryEmbedding``).
            Default ``None``.
        attention: a causal self-attention layer mapping ``(batch, seq, dim)`` to
            ``(batch, seq, dim)`` (``ShawRelativeAttention(dim, 1, k, causal=True)``, ...)
            used instead of the built-in single-head attention, which is then not created;
            or ``None`` for the built-in one. It cannot be combined with ``rope``. Default
            ``None``.
        **kwargs: other ``keras.Model`` arguments (``name``).

    Call arguments:
        tokens: int tensor ``(batch, seq)``.
        training: whether dropout is active (Keras sets it in ``fit``).

    Returns:
        Logits ``(batch, seq, vocab)``.

    Example:
        >>> from posenc.keras import LearnedEncoding, ShawRelativeAttention
        >>> model = LagModel(LearnedEncoding(16, 8), vocab=10, dim=8)
        >>> tuple(model(np.zeros((2, 16), dtype="int32")).shape)
        (2, 16, 10)
        >>> relative = LagModel(None, vocab=10, dim=8,
        ...                     attention=ShawRelativeAttention(8, 1, 2, causal=True))
        >>> tuple(relative(np.zeros((2, 16), dtype="int32")).shape)
        (2, 16, 10)
    """

    def __init__(self, position, *, vocab: int, dim: int, embed_scale: bool = False,
                 dropout: float = 0.0, embed_std: float = 1.0, rope=None, attention=None,
                 **kwargs):
        super().__init__(**kwargs)
        self.vocab, self.dim, self.embed_std, rate = check_lag_model(
            vocab, dim, embed_std, dropout)
        check_lag_attention(attention, rope)
        self.embed_scale = bool(embed_scale)
        self.embed = keras.layers.Embedding(
            self.vocab, self.dim, name="embed",
            embeddings_initializer=keras.initializers.RandomNormal(stddev=self.embed_std))
        self.position = position
        self.dropout = keras.layers.Dropout(rate, name="dropout")
        self.attention = attention
        if attention is None:
            self.query = keras.layers.Dense(self.dim, use_bias=False, name="query")
            self.key = keras.layers.Dense(self.dim, use_bias=False, name="key")
            self.value = keras.layers.Dense(self.dim, use_bias=False, name="value")
        self.readout = keras.layers.Dense(self.vocab, name="readout")
        self.rope = rope

    def call(self, tokens, training=None):
        h = self.embed(tokens)
        if self.embed_scale:
            h = h * math.sqrt(self.dim)
        if self.position is not None:
            h = self.position(h)
        h = self.dropout(h, training=training)
        if self.attention is not None:
            return self.readout(self.attention(h, training=training))
        q, k, v = self.query(h), self.key(h), self.value(h)
        if self.rope is not None:                               # one head: (batch, 1, seq, dim)
            q, k = (t[:, 0] for t in self.rope(q[:, None], k[:, None]))
        scores = ops.matmul(q, ops.swapaxes(k, -1, -2)) / math.sqrt(self.dim)
        seq = ops.shape(scores)[-1]
        causal = ops.tril(ops.ones((seq, seq), dtype="bool"))     # key j <= query i
        scores = ops.where(causal, scores, ops.full_like(scores, -1e9))
        return self.readout(ops.matmul(ops.softmax(scores, axis=-1), v))


def _built(model: LagModel, length: int) -> LagModel:
    if not model.built:
        model(np.zeros((1, length), dtype="int32"))
    return model


def lag_loss(model: LagModel, tokens, *, lag: int):
    """Mean cross-entropy of the predictions of ``tokens[:, p - lag]`` at positions ``p >= lag``.

    Args:
        model: a :class:`LagModel` (or any layer mapping tokens to ``(batch, seq, vocab)``).
        tokens: int tensor or array ``(batch, length)``.
        lag: positive int smaller than ``length`` (keyword-only).

    Returns:
        A scalar tensor (nats per prediction).
    """
    tokens = ops.convert_to_tensor(tokens)
    lag, _ = check_lag(lag, tokens.shape[-1])
    logits = model(tokens)[:, lag:]
    losses = keras.losses.sparse_categorical_crossentropy(tokens[:, :-lag], logits,
                                                          from_logits=True)
    return ops.mean(losses)


class _StepLosses(keras.callbacks.Callback):
    """Keras logs a running mean over the epoch; this recovers each batch's own loss."""

    def on_epoch_begin(self, epoch, logs=None):
        self.means = []

    def on_train_batch_end(self, batch, logs=None):
        self.means.append(float(logs["loss"]))


def fit_tokens(model: LagModel, tokens, targets, *, weights=None, batch_size: int = 64,
               lr: float = 3e-3) -> np.ndarray:
    """Compile ``model`` with Adam and ``model.fit`` it to predict ``targets``; returns each loss.

    One epoch over the rows in order (``shuffle=False``), ``batch_size`` at a time, with
    ``weights`` as ``sample_weight`` (a position of weight 0 has no target): the same batches
    as :func:`posenc.torch.tasks.fit_tokens`. The weights are rescaled by their mean, so the
    loss is the weighted mean per position, as in the PyTorch face, whenever every batch holds
    the same total weight (the lag task's case).

    Args:
        model: a :class:`LagModel` (or any model mapping tokens to ``(batch, seq, vocab)``).
        tokens: int array ``(num_sequences, length)``.
        targets: int array ``(num_sequences, length)``, the token to predict at each position.
        weights: float array ``(num_sequences, length)`` or ``None`` for all ones
            (keyword-only). Default ``None``.
        batch_size: sequences per step. Default ``64``.
        lr: Adam's learning rate (``epsilon=1e-8`` and dense gradients, as PyTorch's Adam).
            Default ``3e-3``.

    Returns:
        float64 array ``(steps,)`` with ``steps = ceil(num_sequences / batch_size)``, the loss
        of every step (recovered from the running mean that ``fit`` logs).
    """
    batch_size = check_positive_int("batch_size", batch_size)
    lr = check_lr(lr)
    tokens, targets = check_token_targets(tokens, targets)
    if weights is not None:
        # sample_weight averages over all positions; rescale so the loss is per prediction
        weights = np.asarray(weights, dtype=np.float32)
        weights = weights / weights.mean()
    _built(model, tokens.shape[1]).compile(
        optimizer=_DenseAdam(learning_rate=lr, epsilon=1e-8),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    record = _StepLosses()
    model.fit(tokens.astype("int32"), targets.astype("int32"), sample_weight=weights,
              batch_size=batch_size, epochs=1, shuffle=False, verbose=0, callbacks=[record])
    means = np.asarray(record.means, dtype=np.float64)
    sizes = np.minimum(batch_size, len(tokens) - batch_size * np.arange(len(means)))
    seen = np.cumsum(sizes)                     # fit's mean is over samples, not batches
    total = seen * means
    return (total - np.concatenate(([0.0], total[:-1]))) / sizes


def train_lag(model: LagModel, *, lag: int, length: int, steps: int, batch_size: int = 64,
              lr: float = 3e-3, seed: int = 0) -> np.ndarray:
    """Compile ``model`` with Adam and ``model.fit`` it on the lag task; returns each step's loss.

    The data are ``posenc.tasks.lag_tokens(steps * batch_size, length, vocab=model.vocab,
    seed=seed)`` in order (``shuffle=False``), one epoch of ``steps`` batches, with the targets
    and weights of :func:`posenc.tasks.lag_targets` (``sample_weight`` masks the positions
    ``p < lag``): the same batches as :func:`posenc.torch.tasks.train_lag`.

    Args:
        model: a :class:`LagModel`.
        lag, length: the task (keyword-only): predict ``tokens[p - lag]`` in sequences of
            ``length`` tokens.
        steps: number of optimiser steps.
        batch_size: sequences per step. Default ``64``.
        lr: Adam's learning rate (``epsilon=1e-8``, as PyTorch). Default ``3e-3``.
        seed: seed of the data. Default ``0``.

    Returns:
        float64 array ``(steps,)``, the loss of every step (recovered from the running mean
        that ``fit`` logs).
    """
    lag, length = check_lag(lag, length)
    steps = check_positive_int("steps", steps)
    batch_size = check_positive_int("batch_size", batch_size)
    lr = check_lr(lr)
    tokens = tasks.lag_tokens(steps * batch_size, length, vocab=model.vocab, seed=seed)
    targets, weights = tasks.lag_targets(tokens, lag)
    return fit_tokens(model, tokens, targets, weights=weights, batch_size=batch_size, lr=lr)


def token_accuracy(model: LagModel, tokens, targets) -> np.ndarray:
    """Share of the sequences whose most likely token is the target, at each position.

    Args:
        model: a :class:`LagModel` (or any model mapping tokens to ``(batch, seq, vocab)``);
            called with ``training=False``.
        tokens: int array ``(num_sequences, length)``.
        targets: int array ``(num_sequences, length)``.

    Returns:
        float64 array ``(length,)``.
    """
    tokens, targets = check_token_targets(tokens, targets)
    logits = ops.convert_to_numpy(model(tokens.astype("int32"), training=False))
    return (logits.argmax(-1) == targets).mean(0, dtype=np.float64)


def accuracy_by_position(model: LagModel, *, lag: int, length: int,
                         num_sequences: int = 1024, seed: int = 123) -> np.ndarray:
    """Share of correct predictions of ``tokens[p - lag]`` at each position ``p >= lag``.

    Args:
        model: a :class:`LagModel` (called with ``training=False``).
        lag, length: the task (keyword-only); ``length`` may exceed the training length
            when the encoding allows it.
        num_sequences: evaluation sequences. Default ``1024``.
        seed: seed of the evaluation data (not the training seed). Default ``123``.

    Returns:
        float64 array ``(length - lag,)``; entry ``i`` is position ``lag + i``.
    """
    lag, length = check_lag(lag, length)
    tokens = tasks.lag_tokens(num_sequences, length, vocab=model.vocab, seed=seed)
    targets, _ = tasks.lag_targets(tokens, lag)
    return token_accuracy(model, tokens, targets)[lag:]


def _params(model: LagModel) -> dict:
    params = {"embed": model.embed.embeddings, "readout_bias": model.readout.bias}
    for name in _KERNELS if model.attention is None else ("readout",):
        params[name] = getattr(model, name).kernel
    for part in ("position", "attention"):
        layer = getattr(model, part)
        if layer is not None:
            for w in layer.weights:
                key = f"{part}/{w.path.split('/')[-1]}"
                check_unique_weight(key, params, what="lag_weights")
                params[key] = w
    return params


def lag_weights(model: LagModel) -> dict[str, np.ndarray]:
    """The weights of a built :class:`LagModel` as float32 NumPy arrays (one layout, both faces).

    Keys: ``embed`` ``(vocab, dim)``; ``query``, ``key``, ``value`` ``(dim, dim)`` and
    ``readout`` ``(dim, vocab)`` as ``(in, out)`` kernels; ``readout_bias`` ``(vocab,)``;
    ``position/NAME`` for each weight of the position encoding (``position/table``, ...); and,
    for a model with its own ``attention``, ``attention/NAME`` for each of its weights in
    place of ``query``, ``key`` and ``value``.
    """
    if not model.built:
        raise ValueError("lag_weights: the model is not built; call it once on tokens first.")
    return {k: np.array(ops.convert_to_numpy(w), dtype=np.float32)
            for k, w in _params(model).items()}


def load_lag_weights(model: LagModel, weights: dict) -> LagModel:
    """Set a :class:`LagModel`'s weights from :func:`lag_weights` of either face; returns it.

    An unbuilt model is built first (its length is taken from a position table when it has
    one, else 2).

    Raises:
        ValueError: when the names or shapes differ (a different position encoding, vocab or
            width).
    """
    table = weights.get("position/table", weights.get("position/offset"))
    _built(model, 2 if table is None else int(np.shape(table)[0]))
    params = _params(model)
    if set(params) != set(weights):
        raise ValueError(f"load_lag_weights: the weights do not match: the model has "
                         f"{sorted(params)}, got {sorted(weights)}; build both models with the "
                         "same position encoding, vocab and dim.")
    for name, w in params.items():
        value = np.asarray(weights[name], dtype=np.float32)
        if tuple(w.shape) != value.shape:
            raise ValueError(f"load_lag_weights: {name!r} has shape {tuple(w.shape)} in the "
                             f"model, got {value.shape}.")
        w.assign(value)
    return model
