"""The lag task in PyTorch: a one-layer model, its loss, a training loop, accuracy by position.

The data come from :mod:`posenc.tasks` (NumPy, from a seed), so :mod:`posenc.keras.tasks`
trains on exactly the same batches; :func:`lag_weights` and :func:`load_lag_weights` move a
model's weights between the faces. :func:`fit_tokens` and :func:`token_accuracy`, on which
:func:`train_lag` and :func:`accuracy_by_position` are built, train and score the same model on
any other token-to-token task.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from posenc import tasks
from posenc.tasks import (check_lag, check_lag_attention, check_lag_model, check_lr,
                          check_token_targets, check_unique_weight)
from posenc._checks import check_positive_int

__all__ = ["LagModel", "lag_loss", "fit_tokens", "train_lag", "token_accuracy",
           "accuracy_by_position", "lag_weights", "load_lag_weights"]


class LagModel(nn.Module):
    """Embedding, position encoding, dropout, one causal single-head attention layer, readout.

    ``h = dropout(position(s * embed(tokens)))`` with ``s = sqrt(dim)`` when ``embed_scale``
    (Vaswani et al., section 3.4) and ``s = 1`` otherwise; then one causal attention layer
    (``softmax(q k^T / sqrt(dim)) v``, no output projection) and a linear readout to
    ``vocab`` logits. Dropout acts on the sum of embedding and encoding, as in Vaswani et al.,
    section 5.4. With ``position=None`` the model has no encoding at all: only the causal mask
    tells the positions apart. A ``rope`` rotates the queries and keys before the scores
    (rotary embeddings). An ``attention`` layer takes the place of that attention layer, so that
    a relative scheme (``ShawRelativeAttention``, an attention with a bias) trains on the same
    task with the same code. The Keras twin is :class:`posenc.keras.tasks.LagModel`.

    Args:
        position: any posenc encoding module that maps ``(batch, seq, dim)`` embeddings to
            embeddings with the code added (``LearnedEncoding``, ``SinusoidalEncoding``,
            ``HybridEncoding``, ...), or ``None`` for none.
        vocab: number of token ids (keyword-only).
        dim: model width (keyword-only).
        embed_scale: multiply the token embeddings by ``sqrt(dim)``. Default ``False``.
        dropout: dropout rate on ``embedding + encoding`` during training. Default ``0.0``.
        embed_std: standard deviation of the initial token table. Default ``1.0``
            (``nn.Embedding``'s own).
        rope: a module that maps queries and keys ``(batch, 1, seq, dim)`` to rotated ones,
            ``rope(q, k) -> (q, k)`` (a ``RotaryEmbedding(dim)``), or ``None``. It has no
            weights, so it can be swapped after training (a scaled ``RotaryEmbedding``).
            Default ``None``.
        attention: a causal self-attention module mapping ``(batch, seq, dim)`` to
            ``(batch, seq, dim)`` (``ShawRelativeAttention(dim, 1, k, causal=True)``, ...)
            used instead of the built-in single-head attention, which is then not created;
            or ``None`` for the built-in one. It cannot be combined with ``rope``. Default
            ``None``.

    Call arguments:
        tokens: int tensor ``(batch, seq)``.

    Returns:
        Logits ``(batch, seq, vocab)``.

    Example:
        >>> from posenc.torch import LearnedEncoding, ShawRelativeAttention
        >>> model = LagModel(LearnedEncoding(16, 8), vocab=10, dim=8)
        >>> model(torch.zeros(2, 16, dtype=torch.long)).shape
        torch.Size([2, 16, 10])
        >>> relative = LagModel(None, vocab=10, dim=8,
        ...                     attention=ShawRelativeAttention(8, 1, 2, causal=True))
        >>> relative(torch.zeros(2, 16, dtype=torch.long)).shape
        torch.Size([2, 16, 10])
    """

    def __init__(self, position: nn.Module | None, *, vocab: int, dim: int,
                 embed_scale: bool = False, dropout: float = 0.0, embed_std: float = 1.0,
                 rope: nn.Module | None = None, attention: nn.Module | None = None):
        super().__init__()
        self.vocab, self.dim, self.embed_std, rate = check_lag_model(
            vocab, dim, embed_std, dropout)
        check_lag_attention(attention, rope)
        self.embed_scale = bool(embed_scale)
        self.embed = nn.Embedding(self.vocab, self.dim)
        nn.init.normal_(self.embed.weight, std=self.embed_std)
        self.position = position
        self.dropout = nn.Dropout(rate)
        self.attention = attention
        if attention is None:
            self.query = nn.Linear(self.dim, self.dim, bias=False)
            self.key = nn.Linear(self.dim, self.dim, bias=False)
            self.value = nn.Linear(self.dim, self.dim, bias=False)
        self.readout = nn.Linear(self.dim, self.vocab)
        self.rope = rope

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens)
        if self.embed_scale:
            h = h * math.sqrt(self.dim)
        if self.position is not None:
            h = self.position(h)
        h = self.dropout(h)
        if self.attention is not None:
            return self.readout(self.attention(h))
        q, k = self.query(h), self.key(h)
        if self.rope is not None:                               # one head: (batch, 1, seq, dim)
            q, k = (t[:, 0] for t in self.rope(q[:, None], k[:, None]))
        h = F.scaled_dot_product_attention(q, k, self.value(h), is_causal=True)
        return self.readout(h)


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def lag_loss(model: nn.Module, tokens, *, lag: int) -> torch.Tensor:
    """Mean cross-entropy of the predictions of ``tokens[:, p - lag]`` at positions ``p >= lag``.

    Args:
        model: a :class:`LagModel` (or any module mapping tokens to ``(batch, seq, vocab)``).
        tokens: int tensor or array ``(batch, length)``.
        lag: positive int smaller than ``length`` (keyword-only).

    Returns:
        A scalar tensor (nats per prediction).
    """
    tokens = torch.as_tensor(tokens, device=_device(model))
    lag, _ = check_lag(lag, tokens.shape[-1])
    logits = model(tokens)[:, lag:]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, :-lag].reshape(-1))


def fit_tokens(model: nn.Module, tokens, targets, *, weights=None, batch_size: int = 64,
               lr: float = 3e-3) -> np.ndarray:
    """Train ``model`` with Adam to predict ``targets`` from ``tokens``; returns each step's loss.

    One pass over the rows in order, ``batch_size`` at a time; the loss of a batch is the
    cross-entropy at every position, averaged with ``weights`` (a position of weight 0 has no
    target). :func:`train_lag` is this loop on the lag task's data; the Keras face's
    :func:`posenc.keras.tasks.fit_tokens` is ``model.fit`` on the same batches.

    Args:
        model: a :class:`LagModel` (or any module mapping tokens to ``(batch, seq, vocab)``
            with a ``vocab`` attribute), on the device to train on.
        tokens: int array ``(num_sequences, length)``.
        targets: int array ``(num_sequences, length)``, the token to predict at each position.
        weights: float array ``(num_sequences, length)`` or ``None`` for all ones
            (keyword-only). Default ``None``.
        batch_size: sequences per step. Default ``64``.
        lr: Adam's learning rate (``eps=1e-8``, PyTorch's default). Default ``3e-3``.

    Returns:
        float64 array ``(steps,)`` with ``steps = ceil(num_sequences / batch_size)``, the
        training loss before each step.
    """
    batch_size = check_positive_int("batch_size", batch_size)
    lr = check_lr(lr)
    device = _device(model)
    tokens, targets = (torch.as_tensor(np.asarray(a), device=device)
                       for a in check_token_targets(tokens, targets))
    weights = (torch.ones(tokens.shape, device=device) if weights is None
               else torch.as_tensor(np.asarray(weights, dtype=np.float32), device=device))
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    batches = list(zip(tokens.split(batch_size), targets.split(batch_size),
                       weights.split(batch_size)))
    losses = torch.empty(len(batches))
    for step, (x, y, w) in enumerate(batches):
        logits = model(x)
        each = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1),
                               reduction="none")
        loss = (each * w.reshape(-1)).sum() / w.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses[step] = loss.detach()
    return losses.double().numpy()


def train_lag(model: nn.Module, *, lag: int, length: int, steps: int, batch_size: int = 64,
              lr: float = 3e-3, seed: int = 0) -> np.ndarray:
    """Train ``model`` on the lag task with Adam; returns the loss of every step.

    Batch ``i`` is rows ``i * batch_size .. (i + 1) * batch_size - 1`` of
    ``posenc.tasks.lag_tokens(steps * batch_size, length, vocab=model.vocab, seed=seed)``,
    so the Keras face's :func:`posenc.keras.tasks.train_lag` sees the same batches.

    Args:
        model: a :class:`LagModel`, on the device to train on.
        lag, length: the task (keyword-only): predict ``tokens[p - lag]`` in sequences of
            ``length`` tokens.
        steps: number of optimiser steps.
        batch_size: sequences per step. Default ``64``.
        lr: Adam's learning rate (``eps=1e-8``, PyTorch's default). Default ``3e-3``.
        seed: seed of the data. Default ``0``.

    Returns:
        float64 array ``(steps,)``, the training loss before each step.
    """
    lag, length = check_lag(lag, length)
    steps = check_positive_int("steps", steps)
    batch_size = check_positive_int("batch_size", batch_size)
    lr = check_lr(lr)
    tokens = tasks.lag_tokens(steps * batch_size, length, vocab=model.vocab, seed=seed)
    targets, weights = tasks.lag_targets(tokens, lag)
    return fit_tokens(model, tokens, targets, weights=weights, batch_size=batch_size, lr=lr)


@torch.no_grad()
def token_accuracy(model: nn.Module, tokens, targets) -> np.ndarray:
    """Share of the sequences whose most likely token is the target, at each position.

    Args:
        model: a :class:`LagModel` (or any module mapping tokens to ``(batch, seq, vocab)``);
            it is put in evaluation mode.
        tokens: int array ``(num_sequences, length)``.
        targets: int array ``(num_sequences, length)``.

    Returns:
        float64 array ``(length,)``.
    """
    device = _device(model)
    tokens, targets = (torch.as_tensor(np.asarray(a), device=device)
                       for a in check_token_targets(tokens, targets))
    model.eval()
    return (model(tokens).argmax(-1) == targets).double().mean(0).cpu().numpy()


def accuracy_by_position(model: nn.Module, *, lag: int, length: int,
                         num_sequences: int = 1024, seed: int = 123) -> np.ndarray:
    """Share of correct predictions of ``tokens[p - lag]`` at each position ``p >= lag``.

    Args:
        model: a :class:`LagModel`; it is put in evaluation mode.
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


def lag_weights(model: LagModel) -> dict[str, np.ndarray]:
    """The weights of a :class:`LagModel` as float32 NumPy arrays, in one layout for both faces.

    Keys: ``embed`` ``(vocab, dim)``; ``query``, ``key``, ``value`` ``(dim, dim)`` and
    ``readout`` ``(dim, vocab)`` as ``(in, out)`` kernels; ``readout_bias`` ``(vocab,)``;
    ``position/NAME`` for each weight of the position encoding (``position/table``, ...); and,
    for a model with its own ``attention``, ``attention/NAME`` for each of its weights in
    place of ``query``, ``key`` and ``value`` (posenc's attention layers keep one layout in
    both faces, ``(in, out)`` kernels).
    """
    out = {"embed": model.embed.weight}
    for name in _kernels(model):
        out[name] = getattr(model, name).weight.T
    out.update(_named(model))
    return {k: v.detach().float().cpu().numpy().copy() for k, v in out.items()}


def _kernels(model: LagModel) -> tuple[str, ...]:
    return ("readout",) if model.attention is not None else ("query", "key", "value", "readout")


def _named(model: LagModel) -> dict:
    """``readout_bias`` and the ``position/NAME`` and ``attention/NAME`` weights."""
    out = {"readout_bias": model.readout.bias}
    for part in ("position", "attention"):
        module = getattr(model, part)
        if module is not None:
            for name, p in module.named_parameters():
                key = f"{part}/{name.split('.')[-1]}"
                check_unique_weight(key, out, what="lag_weights")
                out[key] = p
    return out


def load_lag_weights(model: LagModel, weights: dict) -> LagModel:
    """Set a :class:`LagModel`'s weights from :func:`lag_weights` of either face; returns it.

    Raises:
        ValueError: when the names or shapes differ (a different position encoding, vocab or
            width).
    """
    mine = lag_weights(model)
    if set(mine) != set(weights):
        raise ValueError(f"load_lag_weights: the weights do not match: the model has "
                         f"{sorted(mine)}, got {sorted(weights)}; build both models with the "
                         "same position encoding, vocab and dim.")
    params = {"embed": model.embed.weight, **_named(model)}
    for name in _kernels(model):
        params[name] = getattr(model, name).weight
    with torch.no_grad():
        for name, p in params.items():
            value = np.asarray(weights[name], dtype=np.float32)
            if mine[name].shape != value.shape:
                raise ValueError(f"load_lag_weights: {name!r} has shape {mine[name].shape} in "
                                 f"the model, got {value.shape}.")
            if name in ("query", "key", "value", "readout"):
                value = value.T
            p.copy_(torch.as_tensor(value))
    return model
