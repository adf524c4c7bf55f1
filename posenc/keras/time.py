"""Continuous time (Keras face).

Timestamps that are not ``0, 1, 2, ...`` (irregular sampling):
:class:`ContinuousTimeEncoding` (the sinusoid of scaled real-valued times) and
:class:`Time2Vec` (one linear and ``dim - 1`` learned periodic features). The
argument rule is in ``posenc/time.py``.

The encodings are absolute: a layer whose ``call`` returns ``x + P``,
its ``encoding(...)`` ``P`` alone in float32. The layers are built with
``autocast=False``: under a mixed policy, float inputs are not rounded to the
compute dtype and ``P`` is computed in float32, then cast to the compute dtype.
The PyTorch face mirrors this module name for name.
"""

from __future__ import annotations

import keras
from keras import ops

from posenc._checks import (
    check_base,
    check_embeddings,
    check_even_dim,
    check_layout,
    check_positive_int,
)
from posenc.keras._util import AdditiveEncoding, as_positions, on_host, wide_dtype
from posenc.keras.sinusoidal import sinusoidal
from posenc.time import check_time_scale

__all__ = [
    "ContinuousTimeEncoding",
    "Time2Vec",
]


class _TimeEncoding(AdditiveEncoding):
    """Base of the encodings of timestamps: ``call(x, timestamps)`` is ``x + P(timestamps)``."""

    def call(self, x, timestamps):
        check_embeddings(x.shape, self.dim, what=self._what())
        timestamps = ops.convert_to_tensor(timestamps)
        self._per_token("timestamps", timestamps, x, each="time")
        return self._add(x, self.encoding(timestamps))

    def _timestamps(self, timestamps):
        """Numeric timestamps as a tensor (an int n: ``0 .. n-1``)."""
        return as_positions(timestamps, name="timestamps", what=self._what())


@keras.saving.register_keras_serializable(package="posenc")
class ContinuousTimeEncoding(_TimeEncoding):
    """Sinusoidal encoding of real-valued timestamps (irregular sampling).

    The sinusoid of Vaswani et al. (2017) is defined for any real position, so
    an event at time ``t`` can be encoded as ``sinusoidal(t / time_scale)``
    instead of by its index: gaps of different lengths give different codes,
    which an index cannot express for irregularly sampled series, event
    streams or clinical records. The relative property survives: shifting
    every timestamp by ``c`` multiplies each sine/cosine pair of every token by
    the same rotation of angle ``c * w_i / time_scale``, so attention can read
    elapsed time from ``P(t1) . P(t2)``. Angles are computed in float64
    (float32 on JAX without x64), so timestamps in the millions keep their
    fractional part. Weightless.

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
        Tensor of the shape of ``x`` in the layer's compute dtype.

    Example:
        >>> enc = ContinuousTimeEncoding(16, time_scale=0.5)
        >>> t = keras.ops.convert_to_tensor([[0.0, 0.3, 2.7], [0.0, 1.0, 1.1]])
        >>> tuple(enc(keras.ops.zeros((2, 3, 16)), t).shape)
        (2, 3, 16)

    References:
        Vaswani et al., "Attention Is All You Need", NeurIPS 2017, section 3.5.
        Kazemi et al., "Time2Vec: Learning a Vector Representation of Time",
        arXiv:1907.05321, 2019 (see :class:`Time2Vec` for a learned variant).
    """

    def __init__(self, dim: int, *, time_scale: float = 1.0, base: float = 10000.0,
                 layout: str = "interleaved", **kwargs):
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        what = "ContinuousTimeEncoding"
        self.dim = check_even_dim(dim, what=what)
        self.time_scale = check_time_scale(time_scale, what=what)
        self.layout = check_layout(layout, what=what)
        self.base = check_base(base, what=what)
        self.built = True

    def encoding(self, timestamps):
        """``P`` (float32) of shape ``(*timestamps.shape, dim)``."""
        host = on_host(self._timestamps(timestamps))  # JAX without x64: float64 in NumPy
        t = (host[0] if host is not None
             else ops.cast(self._timestamps(timestamps), wide_dtype())) / self.time_scale
        return ops.cast(sinusoidal(t, self.dim, base=self.base, layout=self.layout), "float32")

    def get_config(self):
        config = super().get_config()
        config.update({"dim": self.dim, "time_scale": self.time_scale, "base": self.base,
                       "layout": self.layout})
        return config


@keras.saving.register_keras_serializable(package="posenc")
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
        Tensor of the shape of ``x`` in the layer's compute dtype.

    Weights:
        frequency: ``(dim,)``, the ``w_i``; initialised ``N(0, 1)``.
        phase: ``(dim,)``, the ``b_i``; initialised ``N(0, 1)``.

    Example:
        >>> t2v = Time2Vec(8)
        >>> t = keras.ops.convert_to_tensor([0.0, 0.5, 3.0])
        >>> tuple(t2v(keras.ops.zeros((2, 3, 8)), t).shape)
        (2, 3, 8)

    References:
        Kazemi et al., "Time2Vec: Learning a Vector Representation of Time",
        arXiv:1907.05321, 2019.
    """

    def __init__(self, dim: int, **kwargs):
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        self.dim = check_positive_int("dim", dim, what="Time2Vec")
        init = keras.initializers.RandomNormal(stddev=1.0)
        self.frequency = self.add_weight(name="frequency", shape=(self.dim,), initializer=init)
        self.phase = self.add_weight(name="phase", shape=(self.dim,), initializer=init)
        self.built = True

    def encoding(self, timestamps):
        """``P`` (float32) of shape ``(*timestamps.shape, dim)``."""
        t = ops.cast(self._timestamps(timestamps), "float32")
        angles = (ops.expand_dims(t, -1) * ops.cast(self.frequency, "float32")
                  + ops.cast(self.phase, "float32"))
        return ops.concatenate((angles[..., :1], ops.sin(angles[..., 1:])), axis=-1)

    def get_config(self):
        config = super().get_config()
        config.update({"dim": self.dim})
        return config
