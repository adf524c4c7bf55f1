"""Continuous time (PyTorch face).

Timestamps that are not ``0, 1, 2, ...`` (irregular sampling):
:class:`ContinuousTimeEncoding` (the sinusoid of scaled real-valued times) and
:class:`Time2Vec` (one linear and ``dim - 1`` learned periodic features). The
argument rule is in ``posenc/time.py``.

The encodings are absolute: a module whose ``forward`` returns ``x + P``,
its ``encoding(...)`` ``P`` alone in float32. The Keras face
mirrors this module name for name.
"""

from __future__ import annotations

import torch
from torch import nn

from posenc._checks import (
    check_base,
    check_embeddings,
    check_even_dim,
    check_layout,
    check_positive_int,
)
from posenc.time import check_time_scale
from posenc.torch._util import AdditiveEncoding, as_positions, wide_dtype
from posenc.torch.sinusoidal import sinusoidal

__all__ = [
    "ContinuousTimeEncoding",
    "Time2Vec",
]


class _TimeEncoding(AdditiveEncoding):
    """Base of the encodings of timestamps: ``forward(x, timestamps)`` is ``x + P(timestamps)``."""

    def forward(self, x: torch.Tensor, timestamps) -> torch.Tensor:
        check_embeddings(x.shape, self.dim, what=self._what())
        timestamps = torch.as_tensor(timestamps, device=x.device)
        self._per_token("timestamps", timestamps, x, each="time")
        return self._add(x, self.encoding(timestamps))

    def _timestamps(self, timestamps) -> torch.Tensor:
        """Numeric timestamps as a tensor (an int n: ``0 .. n-1``)."""
        return as_positions(timestamps, name="timestamps", what=self._what())


class ContinuousTimeEncoding(_TimeEncoding):
    """Sinusoidal encoding of real-valued timestamps (irregular sampling).

    The sinusoid of Vaswani et al. (2017) is defined for any real position, so
    an event at time ``t`` can be encoded as ``sinusoidal(t / time_scale)``
    instead of by its index: gaps of different lengths give different codes,
    which an index cannot express for irregularly sampled series, event
    streams or clinical records. The relative property survives: shifting
    every timestamp by ``c`` multiplies each sine/cosine pair of every token by
    the same rotation of angle ``c * w_i / time_scale``, so attention can read
    elapsed time from ``P(t1) . P(t2)``. Angles are computed in float64, so
    timestamps in the millions keep their fractional part.

    Args:
        dim: even feature dimension; must equal ``x.shape[-1]``.
        time_scale: positive float, the unit of time: timestamps are divided by
            it (choose about the shortest gap that should be distinguishable).
            Default ``1.0``.
        base: wavelength base. Default ``10000.0``.
        layout: ``"interleaved"`` or ``"concat"``. Default ``"interleaved"``.

    Call arguments:
        x: ``(batch, seq, dim)`` embeddings.
        timestamps: ``(batch, seq)`` or ``(seq,)`` times (float or int).

    Returns:
        Tensor of the shape and dtype of ``x``.

    Example:
        >>> enc = ContinuousTimeEncoding(16, time_scale=0.5)
        >>> t = torch.tensor([[0.0, 0.3, 2.7], [0.0, 1.0, 1.1]])
        >>> enc(torch.zeros(2, 3, 16), t).shape
        torch.Size([2, 3, 16])

    References:
        Vaswani et al., "Attention Is All You Need", NeurIPS 2017, section 3.5.
        Kazemi et al., "Time2Vec: Learning a Vector Representation of Time",
        arXiv:1907.05321, 2019 (see :class:`Time2Vec` for a learned variant).
    """

    def __init__(self, dim: int, *, time_scale: float = 1.0, base: float = 10000.0,
                 layout: str = "interleaved"):
        super().__init__()
        what = "ContinuousTimeEncoding"
        self.dim = check_even_dim(dim, what=what)
        self.time_scale = check_time_scale(time_scale, what=what)
        self.layout = check_layout(layout, what=what)
        self.base = check_base(base, what=what)

    def extra_repr(self) -> str:
        return (f"dim={self.dim}, time_scale={self.time_scale}, base={self.base}, "
                f"layout={self.layout!r}")

    def encoding(self, timestamps) -> torch.Tensor:
        """``P`` (float32) of shape ``(*timestamps.shape, dim)``."""
        t = self._timestamps(timestamps)
        t = t.to(wide_dtype(t.device)) / self.time_scale
        return sinusoidal(t, self.dim, base=self.base, layout=self.layout).float()


class Time2Vec(_TimeEncoding):
    """Time2Vec: one linear and ``dim - 1`` learned periodic features of time.

    Kazemi et al. (2019) represent a time ``t`` by ``t2v(t)[0] = w_0 t + b_0``
    (the non-periodic trend) and ``t2v(t)[i] = sin(w_i t + b_i)`` for
    ``i >= 1``, with learned frequencies ``w`` and phases ``b``: a learned
    analogue of the fixed sinusoid, able to discover the periods in the data
    (days, weeks). The paper concatenates ``t2v(t)`` to the features; here it
    is added to ``x`` like every absolute encoding (project or concatenate
    yourself if you prefer). The linear channel is unbounded, so feed
    timestamps on a scale of about one (e.g. in units of a typical gap),
    relative to the start of the sequence.

    Args:
        dim: feature dimension (``>= 1``); must equal ``x.shape[-1]``.

    Call arguments:
        x: ``(batch, seq, dim)`` embeddings.
        timestamps: ``(batch, seq)`` or ``(seq,)`` times (float or int), best
            on a scale of about one (the linear channel grows with them).

    Returns:
        Tensor of the shape and dtype of ``x``.

    Weights:
        frequency: ``(dim,)``, the ``w_i``; initialised ``N(0, 1)``.
        phase: ``(dim,)``, the ``b_i``; initialised ``N(0, 1)``.

    Example:
        >>> t2v = Time2Vec(8)
        >>> t2v(torch.zeros(2, 3, 8), torch.tensor([0.0, 0.5, 3.0])).shape
        torch.Size([2, 3, 8])

    References:
        Kazemi et al., "Time2Vec: Learning a Vector Representation of Time",
        arXiv:1907.05321, 2019.
    """

    def __init__(self, dim: int):
        super().__init__()
        self.dim = check_positive_int("dim", dim, what="Time2Vec")
        self.frequency = nn.Parameter(torch.empty(self.dim))
        self.phase = nn.Parameter(torch.empty(self.dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.frequency)
        nn.init.normal_(self.phase)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"

    def encoding(self, timestamps) -> torch.Tensor:
        """``P`` (float32) of shape ``(*timestamps.shape, dim)``."""
        t = self._timestamps(timestamps).to(self.frequency.device)
        with torch.autocast(device_type=t.device.type, enabled=False):
            angles = t.float()[..., None] * self.frequency.float() + self.phase.float()
            return torch.cat((angles[..., :1], torch.sin(angles[..., 1:])), dim=-1)
