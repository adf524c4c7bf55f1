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

from posenc._checks import check_bool
from posenc.diagnostics import check_monitored_weights
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
    """Record the gradient norm of a model's positional weights and of the rest, per step.

    A record holds the two norms of the gradients one optimiser step applies. Three ways to
    close a record, from the most to the least automatic:

    * ``optimizer=``: the monitor hooks the optimiser (``register_step_pre_hook``) and records,
      just before each ``optimizer.step()``, the accumulated ``.grad`` of every parameter:
      with gradient accumulation (several ``backward()`` calls per step) one record per
      optimiser step, of the summed gradients, as the optimiser sees them.
    * ``auto_step=True`` (the default, without ``optimizer``): each trainable parameter gets a
      tensor hook (``Tensor.register_hook``) that adds the squared norm of the gradient of a
      ``backward()``; the next forward pass of the model in training mode closes the record,
      so an existing loop needs no change. That is one record per ``backward()``: with
      gradient accumulation it records micro-batches, so pass ``optimizer=`` there.
    * :meth:`step`, called by hand after the last ``backward()`` of a step (and before
      ``zero_grad``), records the accumulated ``.grad``.

    A positional parameter that the graph never reaches (a detached or unused table) gets no
    gradient and counts as zero, which is exactly what the monitor exists to catch. The log is
    :attr:`log`, a :class:`posenc.diagnostics.GradientLog`; :meth:`remove` closes a pending
    record and removes the hooks.

    Args:
        model: the ``nn.Module`` being trained.
        position_weights: the positional parameters (an iterable of parameters). Default:
            ``model.position_weights()`` (the lab's ``Transformer`` has it).
        optimizer: the ``torch.optim.Optimizer`` whose steps close the records. Default
            ``None``.
        auto_step: without ``optimizer``, close a record at the next training-mode forward
            pass. Default ``True``.

    Example:
        >>> model = nn.Sequential(nn.Embedding(8, 4), nn.Linear(4, 2))
        >>> opt = torch.optim.SGD(model.parameters(), lr=0.1)
        >>> monitor = GradientMonitor(model, position_weights=[model[0].weight], optimizer=opt)
        >>> for _ in range(4):                      # four micro-batches, one optimiser step
        ...     model(torch.tensor([1, 2])).sum().backward()
        >>> opt.step()
        >>> monitor.log.steps, monitor.log.position_count, monitor.log.rest_count
        (1, 32, 10)
        >>> monitor.remove()
    """

    def __init__(self, model: nn.Module, position_weights=None, *, optimizer=None,
                 auto_step: bool = True):
        what = "GradientMonitor"
        if position_weights is None:
            position_weights = model.position_weights()
        position = list(position_weights)
        trainable = [p for p in model.parameters() if p.requires_grad]
        ids = {id(p) for p in trainable}
        check_monitored_weights([id(p) in ids for p in position], "position_weights",
                                what=what)
        auto_step = check_bool("auto_step", auto_step, what=what)
        position_ids = {id(p) for p in position}
        self.position_weights = position
        self.rest_weights = [p for p in trainable if id(p) not in position_ids]
        self.log = GradientLog()
        self._sums = {"position": 0.0, "rest": 0.0}
        self._pending = False
        self._handles = []
        if optimizer is not None:
            self._handles.append(optimizer.register_step_pre_hook(
                lambda *args, **kwargs: self.step()))
        elif auto_step:
            self._handles += [p.register_hook(self._adder("position")) for p in position]
            self._handles += [p.register_hook(self._adder("rest")) for p in self.rest_weights]
            self._handles.append(model.register_forward_pre_hook(self._before_forward))

    def _before_forward(self, module, args):
        if module.training and self._pending:
            self._close(self._sums["position"], self._sums["rest"])

    def _adder(self, group):
        def add(grad):   # summed on the gradient's device; read back once per record
            self._sums[group] = self._sums[group] + grad.detach().float().pow(2).sum()
            self._pending = True
            return None

        return add

    def _close(self, position, rest) -> None:
        self.log.add(math.sqrt(float(position)), math.sqrt(float(rest)),
                     sum(p.numel() for p in self.position_weights),
                     sum(p.numel() for p in self.rest_weights))
        self._sums = {"position": 0.0, "rest": 0.0}
        self._pending = False

    def step(self) -> None:
        """Record the norms of the accumulated ``.grad`` of the parameters (what the optimiser
        is about to apply; ``None`` counts as zero) and start a new record."""

        def squares(params):
            return sum((p.grad.detach().float().pow(2).sum() for p in params
                        if p.grad is not None), 0.0)

        self._close(squares(self.position_weights), squares(self.rest_weights))

    @property
    def ratios(self) -> np.ndarray:
        """The per-weight RMS gradient ratio of every recorded step."""
        return self.log.ratios

    def health(self, healthy=GRADIENT_RATIO_RANGE) -> str:
        """``"healthy"``, ``"starved"``, ``"dominant"`` or ``"none"`` (see ``gradient_health``)."""
        return self.log.health(healthy)

    def remove(self) -> None:
        """Close a record that a ``backward()`` filled, then remove the hooks (the log stays)."""
        if self._pending:
            self._close(self._sums["position"], self._sums["rest"])
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()

