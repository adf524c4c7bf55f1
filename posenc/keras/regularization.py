"""Regularised positional encodings (Keras face).

Training-time noise on the encoding ``P`` itself, so a model cannot lean on one
exact position code: element dropout, whole-channel dropout and additive
Gaussian noise, plus :class:`RegularizedEncoding`, which wraps any absolute
encoding layer and returns ``x + regularised P``. All of them are the exact
identity unless called with ``training=True`` (as ``fit`` does), and preserve
the expected value of ``P`` in training.
"""

from __future__ import annotations

import keras
from keras import ops

from posenc._checks import check_rate, check_seed
from posenc.keras._util import AdditiveEncoding, dtype_of
from posenc.regularization import (
    PARTS,
    channel_mask_shape,
    check_encoding,
    check_regularized,
    check_std,
    check_wrappable,
    part_seeds,
)

__all__ = ["EncodingDropout", "ChannelDropout", "GaussianNoise", "RegularizedEncoding"]


def _check_encoding(encoding, what: str) -> None:
    """``encoding`` is a floating-point tensor ``P`` of shape ``(..., seq, dim)``."""
    is_tensor = hasattr(encoding, "shape") and hasattr(encoding, "dtype")
    check_encoding(tuple(encoding.shape) if is_tensor else None,
                   dtype_of(encoding) if is_tensor else "", got=type(encoding).__name__,
                   what=what)


class _Regularizer(keras.layers.Layer):
    """Shared plumbing: a validated seed, a ``SeedGenerator``, weightless."""

    def __init__(self, seed, what: str, **kwargs):
        super().__init__(**kwargs)
        self.seed = check_seed(seed, what=what)
        self.seed_generator = keras.random.SeedGenerator(self.seed)
        self.built = True

    def compute_output_shape(self, input_shape):
        return input_shape


@keras.saving.register_keras_serializable(package="posenc")
class EncodingDropout(_Regularizer):
    """Inverted dropout on the entries of a positional encoding.

    Srivastava et al. (2014) zero each unit with probability ``rate`` during
    training and scale the survivors by ``1 / (1 - rate)``, so the expected
    value is unchanged and inference needs no rescaling. Applied to ``P``
    rather than to ``x + P``, it removes random parts of the position code
    while the token content passes through untouched.

    Args:
        rate: float in ``[0, 1)``, the probability of zeroing an entry.
        seed: optional int for a reproducible ``keras.random.SeedGenerator``.

    Call arguments:
        encoding: ``(..., seq, dim)`` tensor ``P``.
        training: bool; only ``True`` drops anything. Keras sets it inside
            ``fit``.

    Returns:
        Tensor of the shape of ``encoding``; ``encoding`` itself unless
        training with ``rate > 0``.

    Example:
        >>> drop = EncodingDropout(0.1, seed=0)
        >>> tuple(drop(keras.ops.ones((2, 4, 8)), training=True).shape)
        (2, 4, 8)

    References:
        Srivastava et al., "Dropout: A Simple Way to Prevent Neural Networks
        from Overfitting", JMLR 15, 2014.
    """

    def __init__(self, rate: float, *, seed: int | None = None, **kwargs):
        super().__init__(seed, "EncodingDropout", **kwargs)
        self.rate = check_rate("rate", rate, what="EncodingDropout")

    def call(self, encoding, training=None):
        _check_encoding(encoding, "EncodingDropout")
        if not training or self.rate == 0.0:
            return encoding
        return keras.random.dropout(encoding, self.rate, seed=self.seed_generator)

    def get_config(self):
        config = super().get_config()
        config.update({"rate": self.rate, "seed": self.seed})
        return config


@keras.saving.register_keras_serializable(package="posenc")
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
        seed: optional int for a reproducible ``keras.random.SeedGenerator``.

    Call arguments:
        encoding: ``(..., seq, dim)`` tensor ``P``; every leading index (the
            example) draws its own mask. A ``(seq, dim)`` encoding draws one.
        training: bool; only ``True`` drops anything.

    Returns:
        Tensor of the shape of ``encoding``; ``encoding`` itself unless
        training with ``rate > 0``.

    Example:
        >>> drop = ChannelDropout(0.5, seed=0)
        >>> tuple(drop(keras.ops.ones((2, 4, 8)), training=True).shape)
        (2, 4, 8)

    References:
        Tompson et al., "Efficient Object Localization Using Convolutional
        Networks", CVPR 2015 (spatial dropout).
    """

    def __init__(self, rate: float, *, seed: int | None = None, **kwargs):
        super().__init__(seed, "ChannelDropout", **kwargs)
        self.rate = check_rate("rate", rate, what="ChannelDropout")

    def call(self, encoding, training=None):
        _check_encoding(encoding, "ChannelDropout")
        if not training or self.rate == 0.0:
            return encoding
        # None means "the input's size on this axis" (also when it is dynamic).
        noise_shape = channel_mask_shape((None,) * len(encoding.shape))
        return keras.random.dropout(encoding, self.rate, noise_shape=noise_shape,
                                    seed=self.seed_generator)

    def get_config(self):
        config = super().get_config()
        config.update({"rate": self.rate, "seed": self.seed})
        return config


@keras.saving.register_keras_serializable(package="posenc")
class GaussianNoise(_Regularizer):
    """Adds zero-mean Gaussian noise to a positional encoding during training.

    ``P + std * N(0, 1)``: the code of a position becomes a small cloud rather
    than a point, so attention cannot rely on exact position codes. CAPE
    (Likhomanenko et al., 2021) pursues the same goal by perturbing the
    positions themselves (random global shifts, local shifts and scalings)
    before a sinusoidal encoding; noise on the encoding is the simplest member
    of that family and works for learned tables too. The noise is drawn in
    float32 and then cast to the encoding's dtype.

    Args:
        std: float ``>= 0``, the noise standard deviation (compare it with the
            scale of ``P``: 1 for sinusoids, about 0.02 for a fresh learned table).
        seed: optional int for a reproducible ``keras.random.SeedGenerator``.

    Call arguments:
        encoding: ``(..., seq, dim)`` tensor ``P``.
        training: bool; only ``True`` adds noise.

    Returns:
        Tensor of the shape of ``encoding``; ``encoding`` itself unless
        training with ``std > 0``.

    Example:
        >>> noise = GaussianNoise(0.1, seed=0)
        >>> tuple(noise(keras.ops.zeros((2, 4, 8)), training=True).shape)
        (2, 4, 8)

    References:
        Likhomanenko et al., "CAPE: Encoding Relative Positions with
        Continuous Augmented Positional Embeddings", NeurIPS 2021.
    """

    def __init__(self, std: float, *, seed: int | None = None, **kwargs):
        super().__init__(seed, "GaussianNoise", **kwargs)
        self.std = check_std("std", std, what="GaussianNoise")

    def call(self, encoding, training=None):
        _check_encoding(encoding, "GaussianNoise")
        if not training or self.std == 0.0:
            return encoding
        noise = keras.random.normal(ops.shape(encoding), stddev=self.std, dtype="float32",
                                    seed=self.seed_generator)
        return encoding + ops.cast(noise, encoding.dtype)

    def get_config(self):
        config = super().get_config()
        config.update({"std": self.std, "seed": self.seed})
        return config


@keras.saving.register_keras_serializable(package="posenc")
class RegularizedEncoding(AdditiveEncoding):
    """Wraps an absolute encoding layer and regularises its ``P`` during training.

    ``call(x, training=True)`` returns ``x + R(P)`` where
    ``P = encoding.encoding(positions)`` and ``R`` applies, in this order,
    :class:`GaussianNoise` (``noise_std``), :class:`EncodingDropout`
    (``dropout``) and :class:`ChannelDropout` (``channel_dropout``); those set
    to 0 are skipped. ``P`` is broadcast to the shape of ``x`` first, so every
    example draws its own masks and noise, and it stays float32 until the final
    cast to the compute dtype. Without ``training`` the result equals the
    wrapped layer's own ``call(x, positions)`` exactly. Each part preserves
    the expected value of ``P`` (Srivastava et al., 2014; Tompson et al., 2015);
    CAPE (Likhomanenko et al., 2021) motivates noise as an augmentation of the
    position signal.

    Args:
        encoding: an absolute layer with an ``encoding(positions)`` method
            returning ``P`` (e.g. ``SinusoidalEncoding``); its weights stay
            trainable and are saved with this layer.
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
        training: bool; only ``True`` regularises.

    Returns:
        Tensor of the shape of ``x`` in the layer's compute dtype.

    Example:
        >>> from posenc.keras.sinusoidal import SinusoidalEncoding
        >>> enc = RegularizedEncoding(SinusoidalEncoding(16), dropout=0.1, seed=0)
        >>> tuple(enc(keras.ops.zeros((2, 5, 16)), training=True).shape)
        (2, 5, 16)

    References:
        Srivastava et al., "Dropout: A Simple Way to Prevent Neural Networks
        from Overfitting", JMLR 15, 2014.
        Tompson et al., "Efficient Object Localization Using Convolutional
        Networks", CVPR 2015.
        Likhomanenko et al., "CAPE: Encoding Relative Positions with
        Continuous Augmented Positional Embeddings", NeurIPS 2021.
    """

    def __init__(self, encoding, *, dropout: float = 0.0, channel_dropout: float = 0.0,
                 noise_std: float = 0.0, seed: int | None = None, **kwargs):
        # Float inputs (positions) are not cast to a mixed compute dtype, and the
        # wrapped layer's weights are read in their own dtype: P stays float32.
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        what = "RegularizedEncoding"
        check_wrappable(isinstance(encoding, keras.layers.Layer) and callable(
                            getattr(encoding, "encoding", None)),
                        type(encoding).__name__, kind="an absolute positional encoding", what=what)
        dropout, channel_dropout, noise_std, self.seed = check_regularized(
            dropout, channel_dropout, noise_std, seed, what=what)
        seeds = dict(zip(PARTS, part_seeds(self.seed)))
        self.inner = encoding
        # The parts work on the float32 P, whatever the global policy.
        self.noise = GaussianNoise(noise_std, seed=seeds["noise"], dtype="float32")
        self.dropout = EncodingDropout(dropout, seed=seeds["dropout"], dtype="float32")
        self.channel_dropout = ChannelDropout(channel_dropout, seed=seeds["channel_dropout"],
                                              dtype="float32")
        if encoding.built:
            self.built = True

    def build(self, input_shape):
        if not self.inner.built:
            self.inner.build(input_shape)
        self.built = True

    @property
    def dim(self):
        """The wrapped encoding's ``dim`` (``None`` if it has none: then any width passes)."""
        dim = getattr(self.inner, "dim", None)
        return dim if isinstance(dim, int) and not isinstance(dim, bool) else None

    def _active(self) -> bool:
        return self.noise.std > 0 or self.dropout.rate > 0 or self.channel_dropout.rate > 0

    def encoding(self, positions):
        """The clean encoding ``P`` of the wrapped layer (no regularisation)."""
        return self.inner.encoding(positions)

    def call(self, x, positions=None, training=None):
        positions = self._positions_for(x, positions)
        if positions is None:
            return ops.cast(x, self.compute_dtype)
        pe = self.encoding(positions)
        if training and self._active():
            pe = ops.broadcast_to(ops.cast(pe, "float32"), ops.shape(x))
            for part in PARTS:
                pe = getattr(self, part)(pe, training=True)
        return self._add(x, pe)

    def get_config(self):
        config = super().get_config()
        config.update({
            "encoding": keras.saving.serialize_keras_object(self.inner),
            "dropout": self.dropout.rate,
            "channel_dropout": self.channel_dropout.rate,
            "noise_std": self.noise.std,
            "seed": self.seed,
        })
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoding"] = keras.saving.deserialize_keras_object(config["encoding"])
        return cls(**config)
