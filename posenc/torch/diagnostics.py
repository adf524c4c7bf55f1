"""Diagnostics in PyTorch: hidden states, attention maps, and a gradient monitor on hooks.

The analysis is NumPy (:mod:`posenc.diagnostics`); this module collects what it needs from a
``torch.nn.Module``: the hidden states of every layer, the attention weights of every layer
and head, and the gradient norms of the positional parameters against the rest of the model,
recorded through tensor hooks while the model trains. The Keras twin is
:mod:`posenc.keras.diagnostics`.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from posenc._checks import check_bool, check_monitored_weights
from posenc.diagnostics import GRADIENT_RATIO_RANGE, GradientLog

__all__ = ["hidden_states", "attention_maps", "GradientMonitor"]


def _numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy()


@torch.no_grad()
def hidden_states(model: nn.Module, tokens) -> list[np.ndarray]:
    """Every layer's hidden states of ``model`` on ``tokens``, as float32 NumPy arrays.

    Calls ``model(tokens, return_hidden=True)`` in evaluation mode (no dropout) without
    gradients, and restores the model's training mode after.

    Args:
        model: a model whose call accepts ``return_hidden=True`` and returns
            ``(logits, hidden)``, ``hidden`` a list of ``(batch, seq, dim)`` tensors (the lab's
            ``Transformer``: the embedding output, then each block's).
        tokens: int tensor ``(batch, seq)`` (moved to the model's device).

    Returns:
        list of ``(batch, seq, dim)`` float32 arrays, one per layer.

    Example:
        >>> class Tiny(nn.Module):
        ...     def forward(self, tokens, return_hidden=False):
        ...         h = tokens[..., None].float().repeat(1, 1, 3)
        ...         return (h, [h, 2 * h]) if return_hidden else h
        >>> [h.shape for h in hidden_states(Tiny(), torch.zeros(2, 5, dtype=torch.long))]
        [(2, 5, 3), (2, 5, 3)]
    """
    return [_numpy(h) for h in _call(model, tokens, return_hidden=True)]


@torch.no_grad()
def attention_maps(model: nn.Module, tokens) -> list[np.ndarray]:
    """Every layer's attention weights of ``model`` on ``tokens``: ``(batch, heads, q, k)`` each.

    Calls ``model(tokens, return_attention=True)`` in evaluation mode, like
    :func:`hidden_states`.
    """
    return [_numpy(a) for a in _call(model, tokens, return_attention=True)]


def _call(model, tokens, **flag):
    was_training = model.training
    model.eval()
    try:
        first = next(iter(model.parameters()), None)
        tokens = torch.as_tensor(tokens)
        if first is not None:
            tokens = tokens.to(first.device)
        _, extra = model(tokens, **flag)
    finally:
        model.train(was_training)
    return list(extra)


class GradientMonitor:
    """Record, through hooks, the gradient norm of a model's positional weights and of the rest.

    Each trainable parameter gets a tensor hook (``Tensor.register_hook``) that adds the squared
    norm of the gradient flowing into it during ``backward()``. Call :meth:`step` once per
    optimiser step (after ``backward()``) to close the step's record in :attr:`log`, a
    :class:`posenc.diagnostics.GradientLog`; or let the monitor do it (``auto_step=True``,
    the default): the next forward pass of the model in training mode closes the record that
    the previous ``backward()`` filled, so an existing training loop needs no change, and
    :meth:`remove` closes the last one. A positional parameter that the graph never reaches
    (a detached or unused table) gets no gradient and counts as zero, which is exactly what the
    monitor exists to catch. Gradients accumulated over several ``backward()`` calls before a
    :meth:`step` add up, as in the optimiser.

    Args:
        model: the ``nn.Module`` being trained.
        position_weights: the positional parameters (an iterable of parameters). Default:
            ``model.position_weights()`` (the lab's ``Transformer`` has it).
        auto_step: close a step at the next training-mode forward pass. Default ``True``.

    Example:
        >>> model = nn.Sequential(nn.Embedding(8, 4), nn.Linear(4, 2))
        >>> monitor = GradientMonitor(model, position_weights=[model[0].weight])
        >>> model(torch.tensor([1, 2])).sum().backward()
        >>> monitor.step()
        >>> monitor.log.steps, monitor.log.position_count, monitor.log.rest_count
        (1, 32, 10)
        >>> monitor.remove()
    """

    def __init__(self, model: nn.Module, position_weights=None, *, auto_step: bool = True):
        if position_weights is None:
            position_weights = model.position_weights()
        position = list(position_weights)
        trainable = [p for p in model.parameters() if p.requires_grad]
        ids = {id(p) for p in trainable}
        check_monitored_weights([id(p) in ids for p in position], "position_weights",
                                what="GradientMonitor")
        position_ids = {id(p) for p in position}
        self.position_weights = position
        self.rest_weights = [p for p in trainable if id(p) not in position_ids]
        self.log = GradientLog()
        self._sums = {"position": 0.0, "rest": 0.0}
        self._handles = [p.register_hook(self._adder("position")) for p in position]
        self._handles += [p.register_hook(self._adder("rest")) for p in self.rest_weights]
        self._pending = False
        if check_bool("auto_step", auto_step, what="GradientMonitor"):
            self._handles.append(model.register_forward_pre_hook(self._before_forward))

    def _before_forward(self, module, args):
        if module.training and self._pending:
            self.step()

    def _adder(self, group):
        def add(grad):
            self._sums[group] += float(grad.detach().float().pow(2).sum())
            self._pending = True
            return None

        return add

    def step(self) -> None:
        """Close the current step: append its two norms to :attr:`log` and start a new one."""
        self.log.add(math.sqrt(self._sums["position"]), math.sqrt(self._sums["rest"]),
                     sum(p.numel() for p in self.position_weights),
                     sum(p.numel() for p in self.rest_weights))
        self._sums = {"position": 0.0, "rest": 0.0}
        self._pending = False

    @property
    def ratios(self) -> np.ndarray:
        """The per-weight RMS gradient ratio of every recorded step."""
        return self.log.ratios

    def health(self, healthy=GRADIENT_RATIO_RANGE) -> str:
        """``"healthy"``, ``"starved"``, ``"dominant"`` or ``"none"`` (see ``gradient_health``)."""
        return self.log.health(healthy)

    def remove(self) -> None:
        """Close a step that a ``backward()`` filled, then remove the hooks (the log stays)."""
        if self._pending:
            self.step()
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()

