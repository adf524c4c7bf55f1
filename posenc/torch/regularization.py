"""Regularised positional encodings (PyTorch face).

Training-time noise on the encoding ``P`` itself, so a model cannot lean on one
exact position code: element dropout, whole-channel dropout and additive
Gaussian noise, plus :class:`RegularizedEncoding`, which wraps any absolute
encoding and returns ``x + regularised P``. All of them are the exact identity
in evaluation mode (``module.eval()``) and preserve the expected value of ``P``
in training mode.
"""

from __future__ import annotations

import torch
from torch import nn

from posenc._checks import check_rate, check_seed
from posenc.regularization import (
    PARTS,
    channel_mask_shape,
    check_encoding,
    check_regularized,
    check_std,
    check_wrappable,
    part_seeds,
)
from posenc.torch._util import AdditiveEncoding, SeededDraws, dtype_of

__all__ = ["EncodingDropout", "ChannelDropout", "GaussianNoise", "RegularizedEncoding"]


class _Regularizer(SeededDraws, nn.Module):
    """Shared plumbing: a seed and one ``torch.Generator`` per device."""

    def __init__(self, seed, what: str):
        super().__init__()
        self.seed = check_seed(seed, what=what)
        self._generators: dict[str, torch.Generator] = {}


def _check_encoding(encoding, what: str) -> None:
    """``encoding`` is a floating-point tensor ``P`` of shape ``(..., seq, dim)``."""
    is_tensor = torch.is_tensor(encoding)
    check_encoding(tuple(encoding.shape) if is_tensor else None,
                   dtype_of(encoding) if is_tensor else "", got=type(encoding).__name__,
                   what=what)


class EncodingDropout(_Regularizer):
    """Inverted dropout on the entries of a positional encoding.

    Srivastava et al. (2014) zero each unit with probability ``rate`` during
    training and scale the survivors by ``1 / (1 - rate)``, so the expected
    value is unchanged and evaluation needs no rescaling. Applied to ``P``
    rather than to ``x + P``, it removes random parts of the position code
    while the token content passes through untouched.

    Args:
        rate: float in ``[0, 1)``, the probability of zeroing an entry.
        seed: optional int; with a seed the masks are reproducible (one
            ``torch.Generator`` per device), without one they come from
            PyTorch's global generator.

    Call arguments:
        encoding: ``(..., seq, dim)`` tensor ``P``; any dtype.

    Returns:
        Tensor of the shape and dtype of ``encoding``; ``encoding`` itself in
        evaluation mode or when ``rate == 0``.

    Example:
        >>> drop = EncodingDropout(0.1, seed=0)
        >>> drop(torch.ones(2, 4, 8)).shape
        torch.Size([2, 4, 8])

    References:
        Srivastava et al., "Dropout: A Simple Way to Prevent Neural Networks
        from Overfitting", JMLR 15, 2014.
    """

    def __init__(self, rate: float, *, seed: int | None = None):
        super().__init__(seed, "EncodingDropout")
        self.rate = check_rate("rate", rate, what="EncodingDropout")

    def extra_repr(self) -> str:
        return f"rate={self.rate}, seed={self.seed}"

    def forward(self, encoding: torch.Tensor) -> torch.Tensor:
        _check_encoding(encoding, "EncodingDropout")
        if not self.training or self.rate == 0.0:
            return encoding
        keep = self._uniform(encoding.shape, encoding.device) >= self.rate
        return torch.where(keep, encoding / (1.0 - self.rate), torch.zeros_like(encoding))


class ChannelDropout(_Regularizer):
    """Drops whole channels of a positional encoding, the same ones at every position.

    The spatial dropout of Tompson et al. (2015) zeroes whole feature maps
    instead of single activations, because neighbouring activations are
    strongly correlated and dropping one alone hides nothing. The channels of
    a position code are correlated along the sequence in the same way (a
    sinusoid pair is smooth in the position), so here one mask of shape
    ``(..., 1, dim)`` per example is shared by all positions: a dropped channel
    is gone from the whole sequence. In a sinusoidal code a channel is the sine
    or the cosine of one frequency, half of a sine/cosine pair: the two halves
    are dropped independently, so a frequency is lost entirely only when both
    are (probability ``rate ** 2``). Survivors are scaled by ``1 / (1 - rate)``.

    Args:
        rate: float in ``[0, 1)``, the probability of dropping a channel.
        seed: optional int for reproducible masks.

    Call arguments:
        encoding: ``(..., seq, dim)`` tensor ``P``; every leading index (the
            example) draws its own mask. A ``(seq, dim)`` encoding draws one.

    Returns:
        Tensor of the shape and dtype of ``encoding``; ``encoding`` itself in
        evaluation mode or when ``rate == 0``.

    Example:
        >>> drop = ChannelDropout(0.5, seed=0)
        >>> out = drop(torch.ones(2, 4, 8))
        >>> bool((out == out[:, :1]).all())  # the same channels at every position
        True

    References:
        Tompson et al., "Efficient Object Localization Using Convolutional
        Networks", CVPR 2015 (spatial dropout).
    """

    def __init__(self, rate: float, *, seed: int | None = None):
        super().__init__(seed, "ChannelDropout")
        self.rate = check_rate("rate", rate, what="ChannelDropout")

    def extra_repr(self) -> str:
        return f"rate={self.rate}, seed={self.seed}"

    def forward(self, encoding: torch.Tensor) -> torch.Tensor:
        _check_encoding(encoding, "ChannelDropout")
        if not self.training or self.rate == 0.0:
            return encoding
        keep = self._uniform(channel_mask_shape(encoding.shape), encoding.device) >= self.rate
        return torch.where(keep, encoding / (1.0 - self.rate), torch.zeros_like(encoding))


class GaussianNoise(_Regularizer):
    """Adds zero-mean Gaussian noise to a positional encoding during training.

    ``P + std * N(0, 1)``: the code of a position becomes a small cloud rather
    than a point, so attention cannot rely on exact position codes. CAPE
    (Likhomanenko et al., 2021) pursues the same goal by perturbing the
    positions themselves (random global shifts, local shifts and scalings)
    before a sinusoidal encoding; noise on the encoding is the simplest member
    of that family and works for learned tables too. The noise is drawn in
    float32 and then cast, so every dtype sees the same draws.

    Args:
        std: float ``>= 0``, the noise standard deviation (compare it with the
            scale of ``P``: 1 for sinusoids, about 0.02 for a fresh learned table).
        seed: optional int for reproducible noise.

    Call arguments:
        encoding: ``(..., seq, dim)`` tensor ``P``.

    Returns:
        Tensor of the shape and dtype of ``encoding``; ``encoding`` itself in
        evaluation mode or when ``std == 0``.

    Example:
        >>> noise = GaussianNoise(0.1, seed=0)
        >>> noise(torch.zeros(2, 4, 8)).shape
        torch.Size([2, 4, 8])

    References:
        Likhomanenko et al., "CAPE: Encoding Relative Positions with
        Continuous Augmented Positional Embeddings", NeurIPS 2021.
    """

    def __init__(self, std: float, *, seed: int | None = None):
        super().__init__(seed, "GaussianNoise")
        self.std = check_std("std", std, what="GaussianNoise")

    def extra_repr(self) -> str:
        return f"std={self.std}, seed={self.seed}"

    def forward(self, encoding: torch.Tensor) -> torch.Tensor:
        _check_encoding(encoding, "GaussianNoise")
        if not self.training or self.std == 0.0:
            return encoding
        noise = torch.randn(encoding.shape, generator=self._generator(encoding.device),
                            device=encoding.device)
        return encoding + (self.std * noise).to(encoding.dtype)


class RegularizedEncoding(AdditiveEncoding):
    """Wraps an absolute encoding and regularises its ``P`` during training.

    ``forward(x)`` returns ``x + R(P)`` where ``P = encoding.encoding(positions)``
    and ``R`` applies, in this order, :class:`GaussianNoise` (``noise_std``),
    :class:`EncodingDropout` (``dropout``) and :class:`ChannelDropout`
    (``channel_dropout``); those set to 0 are skipped. ``P`` is broadcast to
    the shape of ``x`` first, so every example draws its own masks and noise.
    In evaluation mode ``R`` is the identity and the result equals the wrapped
    module's own ``forward(x, positions)`` exactly. Each part preserves the
    expected value of ``P`` (Srivastava et al., 2014; Tompson et al., 2015);
    CAPE (Likhomanenko et al., 2021) motivates noise as an augmentation of
    the position signal.

    Args:
        encoding: an absolute module with an ``encoding(positions)`` method
            returning ``P`` (e.g. ``SinusoidalEncoding``); its parameters
            stay trainable and appear under ``inner.`` in the state dict.
        dropout: float in ``[0, 1)``, element dropout rate. Default ``0.0``.
        channel_dropout: float in ``[0, 1)``, whole-channel dropout rate.
            Default ``0.0``.
        noise_std: float ``>= 0``, Gaussian noise standard deviation.
            Default ``0.0``.
        seed: optional int; the three parts use ``seed``, ``seed + 1`` and
            ``seed + 2``.

    Call arguments:
        x: ``(batch, seq, dim)`` (any leading shape) embeddings.
        positions: optional ``(seq,)`` or ``(batch, seq)`` positions, passed
            to the wrapped encoding; default ``0 .. seq-1``.

    Returns:
        Tensor of the shape and dtype of ``x``.

    Example:
        >>> from posenc.torch.sinusoidal import SinusoidalEncoding
        >>> enc = RegularizedEncoding(SinusoidalEncoding(16), dropout=0.1, seed=0)
        >>> enc(torch.zeros(2, 5, 16)).shape
        torch.Size([2, 5, 16])

    References:
        Srivastava et al., "Dropout: A Simple Way to Prevent Neural Networks
        from Overfitting", JMLR 15, 2014.
        Tompson et al., "Efficient Object Localization Using Convolutional
        Networks", CVPR 2015.
        Likhomanenko et al., "CAPE: Encoding Relative Positions with
        Continuous Augmented Positional Embeddings", NeurIPS 2021.
    """

    def __init__(self, encoding: nn.Module, *, dropout: float = 0.0,
                 channel_dropout: float = 0.0, noise_std: float = 0.0,
                 seed: int | None = None):
        super().__init__()
        what = "RegularizedEncoding"
        check_wrappable(isinstance(encoding, nn.Module) and callable(getattr(encoding, "encoding",
                                                                             None)),
                        type(encoding).__name__, kind="an absolute positional encoding", what=what)
        dropout, channel_dropout, noise_std, seed = check_regularized(
            dropout, channel_dropout, noise_std, seed, what=what)
        seeds = dict(zip(PARTS, part_seeds(seed)))
        self.inner = encoding
        self.noise = GaussianNoise(noise_std, seed=seeds["noise"])
        self.dropout = EncodingDropout(dropout, seed=seeds["dropout"])
        self.channel_dropout = ChannelDropout(channel_dropout, seed=seeds["channel_dropout"])

    def extra_repr(self) -> str:
        return (f"dropout={self.dropout.rate}, channel_dropout={self.channel_dropout.rate}, "
                f"noise_std={self.noise.std}")

    @property
    def dim(self):
        """The wrapped encoding's ``dim`` (``None`` if it has none: then any width passes)."""
        dim = getattr(self.inner, "dim", None)
        return dim if isinstance(dim, int) and not isinstance(dim, bool) else None

    def _active(self) -> bool:
        return self.noise.std > 0 or self.dropout.rate > 0 or self.channel_dropout.rate > 0

    def encoding(self, positions) -> torch.Tensor:
        """The clean encoding ``P`` of the wrapped module (no regularisation)."""
        return self.inner.encoding(positions)

    def forward(self, x: torch.Tensor, positions=None) -> torch.Tensor:
        positions = self._positions_for(x, positions)
        if positions is None:
            return x
        pe = self.encoding(positions)
        if self.training and self._active():
            pe = pe.to(x.device).expand(torch.broadcast_shapes(pe.shape, x.shape))
            for part in PARTS:
                pe = getattr(self, part)(pe)
        return self._add(x, pe)
