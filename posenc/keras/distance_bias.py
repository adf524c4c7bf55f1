"""Length-extrapolation schemes (Keras face): xPos, Kerple, Sandwich, FIRE, continuous biases.

:class:`XPosEmbedding` rotates queries and keys as RoPE does and scales them
by xPos's decay; it is called like :class:`~posenc.keras.RotaryEmbedding`,
``layer(q, k, offset=0, positions=None) -> (q_rot, k_rot)``. The bias layers
(:class:`KerpleBias`, :class:`SandwichBias`, :class:`FireBias`,
:class:`DynamicPositionBias`, :class:`ContinuousPositionBias`) share the call of
``posenc/keras/bias.py``, ``layer(q_len, k_len=None)`` with Python ints, and
return a float32 bias ``(1, heads, q_len, k_len)`` whatever the dtype policy
(they are built with ``autocast=False``). None of the biases masks the future:
a decoder adds its causal mask (the Transformer does).

The framework-free parts are in ``posenc/distance_bias.py``. The PyTorch face
mirrors this module name for name.
"""

from __future__ import annotations

import math
from functools import partial

import keras
import numpy as np
from keras import ops

from posenc import distance_bias as numpy_db
from posenc._checks import check_bool, check_int
from posenc.bias import check_num_heads, check_window_lengths
from posenc.distance_bias import (
    _KERPLE_INIT,
    KERPLE_EPS,
    SWINV2_GAIN,
    check_bias_positions,
    check_cpb_window,
    check_depth,
    check_fire_init,
    check_gamma,
    check_hidden_dim,
    check_kerple_kernel,
    check_sandwich_dim,
    check_scale_base,
)
from posenc.keras._util import as_indices, as_positions
from posenc.keras.bias import _AttentionBias, _lengths, swin_relative_index
from posenc.keras.rotary import apply_rope, rope_frequencies
from posenc.positions import relative_positions
from posenc.rotary import check_head_dim, check_rope_layout, check_rope_positions, check_rope_width

__all__ = [
    "XPosEmbedding",
    "KerpleBias",
    "SandwichBias",
    "FireBias",
    "DynamicPositionBias",
    "ContinuousPositionBias",
]


def _rel(q_len: int, k_len: int):
    """``j - i`` ``(q_len, k_len)`` int32, the queries the last ``q_len`` of ``k_len``."""
    return relative_positions(q_len, k_len, partial(ops.arange, dtype="int32"))


def _offsets(q_len: int, k_len: int):
    """Every ``j - i`` of the block, ``-(k_len-1) .. q_len-1``, and the shift ``k_len - 1``."""
    span = max(k_len, 1) - 1
    return ops.arange(-span, q_len, dtype="int32"), span


def _positions(q_positions, k_positions, what: str):
    """``bias_at``'s positions as int32 ``(batch, q)``, ``(batch, k)``, and their offsets
    ``j - i`` ``(batch, q, k)``."""
    q = as_indices(q_positions, name="q_positions", what=what)
    k = as_indices(k_positions, name="k_positions", what=what)
    check_bias_positions(tuple(q.shape), tuple(k.shape), what=what)
    return q, k, k[:, None, :] - q[:, :, None]


def _gather(row, rel, k_len: int):
    """``row`` ``(heads, 2 k_len - 1)``, the bias of each offset ``-(k_len - 1) .. k_len - 1``,
    read at the offsets ``rel`` ``(batch, q, k_len)``: ``(batch, heads, q, k_len)``. Real
    positions never lie further apart than the ``k_len`` slots of a row (the cumsum rule
    counts real tokens); the pads' offsets are clipped in (their entries are masked)."""
    span = k_len - 1
    index = ops.clip(rel + span, 0, 2 * span)
    return ops.transpose(ops.take(row, index, axis=1), (1, 0, 2, 3))


def _empty_bias(q, k, heads: int):
    """``(batch, heads, q, k)`` zeros when a length is 0 (JAX's ``take`` drops an axis of an
    empty gather), else ``None``."""
    if q.shape[1] == 0 or k.shape[1] == 0:
        return ops.zeros((q.shape[0], heads, q.shape[1], k.shape[1]), "float32")
    return None


def _linear_init(fan_in: int):
    """PyTorch's ``nn.Linear`` initialisation, ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``."""
    bound = 1.0 / math.sqrt(fan_in)
    return keras.initializers.RandomUniform(-bound, bound)


def _f32(w):
    return ops.cast(w, "float32")


class _Float32Weights:
    """Weights read in float32 even inside a mixed-precision caller's autocast scope (an
    attention layer under ``mixed_bfloat16``): the biases are computed in float32."""

    def _weight(self, **kwargs):
        return self.add_weight(autocast=False, **kwargs)


# --------------------------------------------------------------------------- xPos

@keras.saving.register_keras_serializable(package="posenc")
class XPosEmbedding(keras.layers.Layer):
    """xPos: RoPE whose queries and keys are also scaled, so scores decay with distance.

    Sun et al. rotate ``q`` and ``k`` as RoPE does (:func:`apply_rope`), then
    multiply pair ``i`` of the query at position ``n`` by
    ``zeta_i^((n - c) / scale_base)`` and of the key at position ``m`` by
    ``zeta_i^(-(m - c) / scale_base)``, ``zeta_i = (i / (d/2) + gamma) / (1 +
    gamma)`` (:func:`posenc.distance_bias.xpos_zeta`). The centre ``c`` cancels
    in a score, whose pair ``i`` is scaled by ``zeta_i^((n - m) / scale_base)``:
    the fast-turning pairs fade with distance. With ``center=None`` each call
    centres at ``seq // 2``, as rotary-embedding-torch's ``use_xpos=True``
    (which this equals, rotated queries and keys, for ``layout="interleaved"``).
    Decoding with a cache needs one centre for every call: pass an int
    ``center`` (the Transformer's ``position="xpos"`` uses ``max_len // 2``).
    The scale is computed in float32; ``zeta_0^(+-L / (2 scale_base))`` stays
    within float32 (and bfloat16) range up to ``L`` of about 70 ``scale_base``.

    Args:
        head_dim: features per head, even.
        base: RoPE's wavelength base; default 10000.0.
        scale_base: the length over which the decay acts; default 512.
        gamma: ``zeta``'s offset; default 0.4.
        layout: ``"interleaved"`` (default: pairs ``2i, 2i+1``, as the authors and
            rotary-embedding-torch) or ``"half"``.
        center: int or ``None`` (default: ``seq // 2`` of each call).

    Call arguments:
        q: ``(batch, heads, seq, head_dim)`` (any ``(..., seq, head_dim)``).
        k: the keys, of the same layout and ``seq``.
        offset: position of the first token; default 0.
        positions: optional int ``(seq,)`` or ``(batch, seq)``, used instead of
            ``offset + arange(seq)``.

    Returns:
        ``(q_rot, k_rot)`` of the shapes of ``q`` and ``k``, in the compute dtype.

    Example:
        >>> xpos = XPosEmbedding(64)
        >>> q = k = keras.random.normal((2, 8, 10, 64))
        >>> q_rot, k_rot = xpos(q, k)
        >>> tuple(q_rot.shape)
        (2, 8, 10, 64)

    References:
        Sun et al., "A Length-Extrapolatable Transformer", ACL 2023 (arXiv 2212.10554),
        section 3.2.
    """

    def __init__(self, head_dim: int, *, base: float = 10000.0, scale_base: float = 512.0,
                 gamma: float = 0.4, layout: str = "interleaved", center: int | None = None,
                 **kwargs):
        super().__init__(**kwargs)
        what = "XPosEmbedding"
        self.head_dim = check_head_dim(head_dim, what=what)
        self.scale_base = check_scale_base(scale_base, what=what)
        self.gamma = check_gamma(gamma, what=what)
        self.layout = check_rope_layout(layout, what=what)
        self.center = None if center is None else check_int(
            "center", center, minimum=0, what=what,
            fix="pass a non-negative position, e.g. half the longest sequence")
        self.base = float(base)
        inv_freq, _ = rope_frequencies(self.head_dim, base=base)
        self.inv_freq = inv_freq
        zeta = numpy_db.xpos_zeta(self.head_dim, self.gamma)
        self.zeta = ops.convert_to_tensor(zeta.astype(np.float32))
        self._log_zeta = np.log(zeta).astype(np.float32)
        self.built = True

    def call(self, q, k, offset: int = 0, positions=None):
        what = type(self).__name__
        for name, t in (("q", q), ("k", k)):
            check_rope_width(name, t.shape, self.head_dim, what=what)
        offset = check_int("offset", offset, minimum=0, what=what,
                           fix="pass the number of cached tokens before q")
        check_rope_positions((q.shape[-2],), k.shape, name="k", what=what)
        seq = q.shape[-2]
        if positions is None:
            positions = ops.arange(offset, offset + seq, dtype="int32")
        else:
            positions = as_positions(positions, what=what)
            check_rope_positions(positions.shape, q.shape, name="q", what=what)
        dtype = self.compute_dtype
        q, k = ops.cast(q, dtype), ops.cast(k, dtype)
        q_rot = apply_rope(q, positions, self.inv_freq, layout=self.layout)
        k_rot = apply_rope(k, positions, self.inv_freq, layout=self.layout)
        center = seq // 2 if self.center is None else self.center
        power = (ops.cast(positions, "float32") - float(center)) / self.scale_base
        exponent = ops.expand_dims(power, -1) * self._log_zeta            # (..., seq, d/2)
        scales = []
        for sign in (1.0, -1.0):      # the keys' scale as its own exp: no division
            scale = ops.exp(sign * exponent)
            scale = (ops.repeat(scale, 2, axis=-1) if self.layout == "interleaved"
                     else ops.concatenate((scale, scale), axis=-1))
            if len(positions.shape) == 2:                                 # (batch, seq)
                for _ in range(len(q.shape) - 3):
                    scale = ops.expand_dims(scale, 1)
            scales.append(scale)
        return (ops.cast(_f32(q_rot) * scales[0], dtype),
                ops.cast(_f32(k_rot) * scales[1], dtype))

    def compute_output_shape(self, q_shape, k_shape=None):
        return tuple(q_shape), tuple(q_shape if k_shape is None else k_shape)

    def get_config(self):
        config = super().get_config()
        config.update({"head_dim": self.head_dim, "base": self.base,
                       "scale_base": self.scale_base, "gamma": self.gamma,
                       "layout": self.layout, "center": self.center})
        return config


# --------------------------------------------------------------------------- Kerple

@keras.saving.register_keras_serializable(package="posenc")
class KerpleBias(_Float32Weights, _AttentionBias):
    """Kerple: a learned conditionally positive definite kernel of the distance, per head.

    Chi et al. add ``-r1 * log(1 + r2 * |i - j|)`` (``kernel="log"``) or
    ``-r1 * |i - j|^r2`` (``kernel="power"``) to the logits of each head, with
    learned ``r1, r2 > 0`` (and ``r2 <= 2`` for the power kernel, so that the
    kernel stays conditionally positive definite). As in the authors' code the
    constraint is kept by clamping: ``r1`` and ``r2`` are used as
    ``max(r, 0.01)`` (``r2`` also ``min(r2, 2)`` for ``"power"``). With
    ``r1 = 1, r2 = 1`` the power kernel is ALiBi's linear bias of slope 1.

    Args:
        num_heads: positive int.
        kernel: ``"log"`` (default) or ``"power"``.

    Call arguments:
        q_len: number of queries (the last ``q_len`` of the ``k_len`` positions).
        k_len: number of keys; defaults to ``q_len``.

    Returns:
        float32 tensor ``(1, num_heads, q_len, k_len)``, symmetric in ``i - j``
        (a decoder masks the future itself).

    Weights:
        r1, r2: ``(num_heads,)``, initialised as in the authors' code: for ``"log"``
        ``r1 ~ U(0, 2)``, ``r2 ~ U(0, 1)``; for ``"power"`` the coefficient
        ``r1 ~ U(0, 1)`` and the exponent ``r2 ~ U(0, 2)``.

    Example:
        >>> kerple = KerpleBias(8)
        >>> tuple(kerple(1, 6).shape)   # one new token, five cached
        (1, 8, 1, 6)

    References:
        Chi et al., "KERPLE: Kernelized Relative Positional Embedding for Length
        Extrapolation", NeurIPS 2022 (arXiv 2205.09921), section 4.
    """

    def __init__(self, num_heads: int, *, kernel: str = "log", **kwargs):
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        what = "KerpleBias"
        self.num_heads = check_num_heads(num_heads, what=what)
        self.kernel = check_kerple_kernel(kernel, what=what)
        high1, high2 = _KERPLE_INIT[self.kernel]
        self.r1 = self._weight(name="r1", shape=(self.num_heads,),
                               initializer=keras.initializers.RandomUniform(0.0, high1))
        self.r2 = self._weight(name="r2", shape=(self.num_heads,),
                               initializer=keras.initializers.RandomUniform(0.0, high2))
        self.built = True

    def call(self, q_len: int, k_len: int | None = None):
        q_len, k_len = _lengths(q_len, k_len, type(self).__name__)
        if q_len == 0 or k_len == 0:      # JAX's take drops an axis of an empty gather
            return ops.zeros((1, self.num_heads, q_len, k_len), "float32")
        offsets, span = _offsets(q_len, k_len)
        return ops.expand_dims(ops.take(self._row(offsets), _rel(q_len, k_len) + span, axis=1), 0)

    def _row(self, offsets):
        """The kernel at each offset: ``(heads, len(offsets))`` float32."""
        d = ops.expand_dims(ops.cast(ops.abs(offsets), "float32"), 0)
        r1 = ops.expand_dims(ops.maximum(_f32(self.r1), KERPLE_EPS), 1)
        if self.kernel == "log":
            r2 = ops.expand_dims(ops.maximum(_f32(self.r2), KERPLE_EPS), 1)
            return -r1 * ops.log1p(r2 * d)
        # d^r2 as exp(r2 log d), 0 at d = 0 (no log(0) in the gradient)
        r2 = ops.expand_dims(ops.clip(_f32(self.r2), KERPLE_EPS, 2.0), 1)
        power = ops.exp(r2 * ops.log(ops.maximum(d, 1.0)))
        return -r1 * ops.where(d > 0, power, ops.zeros_like(power))

    def bias_at(self, q_positions, k_positions):
        """The bias at per-token positions (a padded or packed batch, a padded cache):
        float32 ``(batch, heads, q, k)`` of ``|p_j - p_i|``."""
        q, k, rel = _positions(q_positions, k_positions, type(self).__name__)
        empty = _empty_bias(q, k, self.num_heads)
        if empty is not None:
            return empty
        n = k.shape[1]
        return _gather(self._row(_offsets(n, n)[0]), rel, n)

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads, "kernel": self.kernel})
        return config


# --------------------------------------------------------------------------- Sandwich

@keras.saving.register_keras_serializable(package="posenc")
class SandwichBias(_AttentionBias):
    """Sandwich: the inner product of sinusoidal embeddings as a bias, scaled per head.

    Chi et al. add ``(sum_{k=1}^{d'/2} cos((i - j) / 10000^(2k/d')) - d'/2) / (8h/H)``
    to the logits of head ``h = 1 .. H`` (:func:`posenc.distance_bias.sandwich_bias`):
    ``p_i . p_j`` of two ``d'``-wide sinusoidal embeddings, 0 on the diagonal and
    falling with the distance, steepest for the first head. No weights; the
    bias enters the graph as a constant.

    Args:
        num_heads: positive int.
        dim: ``d'``, the width of the sinusoidal embeddings, even (the head width
            in NeMo's implementation).

    Call arguments:
        q_len: number of queries (the last ``q_len`` of the ``k_len`` positions).
        k_len: number of keys; defaults to ``q_len``.

    Returns:
        float32 tensor ``(1, num_heads, q_len, k_len)``.

    Example:
        >>> sandwich = SandwichBias(8, 64)
        >>> tuple(sandwich(5, 9).shape)
        (1, 8, 5, 9)

    References:
        Chi et al., "Dissecting Transformer Length Extrapolation via the Lens of
        Receptive Field Analysis", ACL 2023 (arXiv 2212.10356), section 5.
    """

    def __init__(self, num_heads: int, dim: int, **kwargs):
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        what = "SandwichBias"
        self.num_heads = check_num_heads(num_heads, what=what)
        self.dim = check_sandwich_dim(dim, what=what)
        self.built = True

    def call(self, q_len: int, k_len: int | None = None):
        q_len, k_len = _lengths(q_len, k_len, type(self).__name__)
        bias = numpy_db.sandwich_bias(self.num_heads, self.dim, q_len, k_len)
        return ops.convert_to_tensor(bias[None])

    def bias_at(self, q_positions, k_positions):
        """The bias at per-token positions (a padded or packed batch, a padded cache):
        float32 ``(batch, heads, q, k)`` of ``p_j - p_i``, from the float64 row of every
        offset ``-(k - 1) .. k - 1``."""
        q, k, rel = _positions(q_positions, k_positions, type(self).__name__)
        empty = _empty_bias(q, k, self.num_heads)
        if empty is not None:
            return empty
        n = k.shape[1]
        row = numpy_db.sandwich_at(self.num_heads, self.dim, np.arange(-(n - 1), n))
        return _gather(ops.convert_to_tensor(row), rel, n)

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads, "dim": self.dim})
        return config


# --------------------------------------------------------------------------- FIRE

@keras.saving.register_keras_serializable(package="posenc")
class FireBias(_Float32Weights, _AttentionBias):
    """FIRE: an MLP of the progressively interpolated log distance, per head.

    Li et al. add ``f(psi(i - j) / psi(max(L, i)))`` to the logits, ``psi(x) =
    log(|c x| + 1)``, ``f`` an MLP ``1 -> hidden_dim -> num_heads`` with a ReLU,
    ``c`` and the threshold ``L`` learned. The output layer has no bias (the
    paper's code has one: a constant per head, which the softmax ignores). Dividing by ``psi(i)`` maps every
    query's distances into ``[0, 1]`` whatever the length; the threshold keeps
    short prefixes from being stretched. As in the paper's code, ``L`` is
    ``|threshold_multiplier| * threshold`` with the multiplier learned (from 1),
    and ``eps`` is added to the denominator. FIRE is for causal attention (the
    query ``i`` is the last position it sees); the future entries use
    ``|i - j|`` and are for the causal mask to hide.

    Args:
        num_heads: positive int.
        hidden_dim: the MLP's width; default 32.
        c: initial ``c``; default 0.1.
        threshold: initial ``L``; default 512.0.
        eps: added to ``psi(max(L, i))``; default 1e-6.

    Call arguments:
        q_len: number of queries (the last ``q_len`` of the ``k_len`` positions).
        k_len: number of keys; defaults to ``q_len``.

    Returns:
        float32 tensor ``(1, num_heads, q_len, k_len)``.

    Weights:
        hidden_kernel ``(1, hidden_dim)``, hidden_bias ``(hidden_dim,)``, output_kernel
        ``(hidden_dim, num_heads)`` (PyTorch's ``nn.Linear`` initialisation), c ``()`` and
        threshold_multiplier ``()`` (1.0).

    Example:
        >>> fire = FireBias(8)
        >>> tuple(fire(1, 20).shape)
        (1, 8, 1, 20)

    References:
        Li et al., "Functional Interpolation for Relative Positions Improves Long
        Context Transformers", ICLR 2024 (arXiv 2310.04418), section 3.
    """

    def __init__(self, num_heads: int, *, hidden_dim: int = 32, c: float = 0.1,
                 threshold: float = 512.0, eps: float = 1e-6, **kwargs):
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        what = "FireBias"
        self.num_heads = check_num_heads(num_heads, what=what)
        self.hidden_dim = check_hidden_dim(hidden_dim, what=what)
        self.c_init, self.threshold, self.eps = check_fire_init(c, threshold, eps, what=what)
        hidden = _linear_init(1)
        out = _linear_init(self.hidden_dim)
        self.hidden_kernel = self._weight(name="hidden_kernel", shape=(1, self.hidden_dim),
                                             initializer=hidden)
        self.hidden_bias = self._weight(name="hidden_bias", shape=(self.hidden_dim,),
                                           initializer=hidden)
        self.output_kernel = self._weight(name="output_kernel",
                                             shape=(self.hidden_dim, self.num_heads),
                                             initializer=out)
        self.c = self._weight(name="c", shape=(),
                                 initializer=keras.initializers.Constant(self.c_init))
        self.threshold_multiplier = self._weight(name="threshold_multiplier", shape=(),
                                                    initializer=keras.initializers.Constant(1.0))
        self.built = True

    def call(self, q_len: int, k_len: int | None = None):
        q_len, k_len = _lengths(q_len, k_len, type(self).__name__)
        query = ops.arange(k_len - q_len, k_len, dtype="int32")                # i
        return ops.expand_dims(self._bias(-_rel(q_len, k_len), query), 0)

    def _bias(self, distance, query):
        """The bias of the distances ``i - j`` ``(..., q, k)`` of queries at ``i``
        ``(..., q)``: ``(..., heads, q, k)`` float32."""
        distance, query = ops.cast(distance, "float32"), ops.cast(query, "float32")
        c = _f32(self.c)
        limit = ops.abs(_f32(self.threshold_multiplier) * self.threshold)
        numerator = ops.log(ops.abs(c * distance) + 1.0)
        denominator = ops.log(ops.abs(c * ops.maximum(query, limit)) + 1.0) + self.eps
        x = ops.expand_dims(numerator / ops.expand_dims(denominator, -1), -1)  # (..., q, k, 1)
        h = ops.relu(x * _f32(self.hidden_kernel)[0] + _f32(self.hidden_bias))
        return ops.moveaxis(ops.matmul(h, _f32(self.output_kernel)), -1, -3)

    def bias_at(self, q_positions, k_positions):
        """The bias at per-token positions (a padded or packed batch, a padded cache):
        float32 ``(batch, heads, q, k)``. FIRE is not a function of ``p_i - p_j`` alone: its
        interpolation divides by ``psi(max(L, p_i))``, the query's real position."""
        q, _, rel = _positions(q_positions, k_positions, type(self).__name__)
        return self._bias(-rel, q)

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads, "hidden_dim": self.hidden_dim,
                       "c": self.c_init, "threshold": self.threshold, "eps": self.eps})
        return config


# --------------------------------------------------------------------------- dynamic

@keras.saving.register_keras_serializable(package="posenc")
class DynamicPositionBias(_Float32Weights, _AttentionBias):
    """x-transformers' dynamic position bias: an MLP of the signed distance, per head.

    ``B[h, i, j] = MLP(i - j)[h]``: ``depth`` layers ``Linear -> SiLU`` of width
    ``hidden_dim`` (the first from 1 input), then ``Linear(hidden_dim, num_heads)``
    without a bias (x-transformers has one: a constant per head, which the softmax
    ignores).
    With ``log_distance=True`` the input is ``sign(x) log(1 + |x|)``. The MLP runs
    once per distance (``q_len + k_len - 1`` of them), not per entry, and reads
    any length: it is a continuous function of the distance, not a table.

    Args:
        num_heads: positive int.
        hidden_dim: the MLP's width; default 64.
        depth: number of hidden layers; default 2.
        log_distance: ``False`` (default) or ``True``.

    Call arguments:
        q_len: number of queries (the last ``q_len`` of the ``k_len`` positions).
        k_len: number of keys; defaults to ``q_len``.

    Returns:
        float32 tensor ``(1, num_heads, q_len, k_len)``.

    Weights:
        kernel_0 ``(1, hidden_dim)``, bias_0, kernel_1 ... ``(hidden_dim, hidden_dim)``,
        bias_1 ..., output_kernel ``(hidden_dim, num_heads)`` (PyTorch's ``nn.Linear``
        initialisation).

    Example:
        >>> bias = DynamicPositionBias(8, log_distance=True)
        >>> tuple(bias(4, 30).shape)
        (1, 8, 4, 30)

    References:
        Wang (lucidrains), x-transformers, ``DynamicPositionBias``; after Wang et al.,
        "CrossFormer", ICLR 2022, section 3.3.
    """

    def __init__(self, num_heads: int, *, hidden_dim: int = 64, depth: int = 2,
                 log_distance: bool = False, **kwargs):
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        what = "DynamicPositionBias"
        self.num_heads = check_num_heads(num_heads, what=what)
        self.hidden_dim = check_hidden_dim(hidden_dim, what=what)
        self.depth = check_depth(depth, what=what)
        self.log_distance = check_bool("log_distance", log_distance, what=what)
        for i in range(self.depth):
            fan_in = 1 if i == 0 else self.hidden_dim
            init = _linear_init(fan_in)
            setattr(self, f"kernel_{i}", self._weight(
                name=f"kernel_{i}", shape=(fan_in, self.hidden_dim), initializer=init))
            setattr(self, f"bias_{i}", self._weight(
                name=f"bias_{i}", shape=(self.hidden_dim,), initializer=init))
        init = _linear_init(self.hidden_dim)
        self.output_kernel = self._weight(name="output_kernel",
                                             shape=(self.hidden_dim, self.num_heads),
                                             initializer=init)
        self.built = True

    def call(self, q_len: int, k_len: int | None = None):
        q_len, k_len = _lengths(q_len, k_len, type(self).__name__)
        if q_len == 0 or k_len == 0:      # JAX's take drops an axis of an empty gather
            return ops.zeros((1, self.num_heads, q_len, k_len), "float32")
        offsets, span = _offsets(q_len, k_len)
        return ops.expand_dims(ops.take(self._row(offsets), _rel(q_len, k_len) + span, axis=1), 0)

    def _row(self, offsets):
        """The MLP at each offset ``j - i``: ``(heads, len(offsets))`` float32."""
        x = -ops.expand_dims(ops.cast(offsets, "float32"), 1)              # i - j, (n, 1)
        if self.log_distance:
            x = ops.sign(x) * ops.log1p(ops.abs(x))
        for i in range(self.depth):
            x = ops.silu(ops.matmul(x, _f32(getattr(self, f"kernel_{i}")))
                         + _f32(getattr(self, f"bias_{i}")))
        return ops.transpose(ops.matmul(x, _f32(self.output_kernel)))

    def bias_at(self, q_positions, k_positions):
        """The bias at per-token positions (a padded or packed batch, a padded cache):
        float32 ``(batch, heads, q, k)`` of ``p_j - p_i``, the MLP run once per offset
        ``-(k - 1) .. k - 1``."""
        q, k, rel = _positions(q_positions, k_positions, type(self).__name__)
        empty = _empty_bias(q, k, self.num_heads)
        if empty is not None:
            return empty
        n = k.shape[1]
        return _gather(self._row(_offsets(n, n)[0]), rel, n)

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads, "hidden_dim": self.hidden_dim,
                       "depth": self.depth, "log_distance": self.log_distance})
        return config


# --------------------------------------------------------------------------- Swin V2

@keras.saving.register_keras_serializable(package="posenc")
class ContinuousPositionBias(_Float32Weights, _AttentionBias):
    """Swin V2's continuous position bias: an MLP of log-spaced 2D offsets, any window.

    Liu et al. replace Swin's bias table by ``16 * sigmoid(MLP(coords))``, the
    MLP ``2 -> hidden_dim -> num_heads`` (ReLU, no bias on the output layer) run
    on the ``(2H-1) x (2W-1)`` log-spaced offsets of the window
    (:func:`posenc.distance_bias.swinv2_log_coords`), then gathered for each pair
    of patches with :func:`~posenc.keras.swin_relative_index`. The weights do not
    depend on the window: :meth:`resized` gives the bias of another window with the
    same MLP, its offsets normalised by the window the MLP was trained on.

    Args:
        num_heads: positive int.
        window_size: int ``n`` (an ``n x n`` window) or ``(H, W)``, at least 2 x 2.
        hidden_dim: the MLP's width; default 512.
        pretrained_window: ``None`` (default: ``window_size``) or the window the
            MLP was trained on, which normalises the offsets.

    Call arguments:
        q_len: ``H * W``, the patches of a window.
        k_len: ``H * W``; defaults to ``q_len``.

    Returns:
        float32 tensor ``(1, num_heads, H * W, H * W)``, in ``(0, 16)``.

    Weights:
        hidden_kernel ``(2, hidden_dim)``, hidden_bias ``(hidden_dim,)``, output_kernel
        ``(hidden_dim, num_heads)`` (PyTorch's ``nn.Linear`` initialisation).

    Attributes:
        relative_coords_table: float32 ``(2H-1, 2W-1, 2)``, the log-spaced offsets;
        relative_position_index: int32 ``(H*W, H*W)`` (constants, not saved).

    Example:
        >>> cpb = ContinuousPositionBias(4, 8)
        >>> tuple(cpb(64).shape)
        (1, 4, 64, 64)
        >>> tuple(cpb.resized(12)(144).shape)   # the same MLP on a 12 x 12 window
        (1, 4, 144, 144)

    References:
        Liu et al., "Swin Transformer V2: Scaling Up Capacity and Resolution",
        CVPR 2022 (arXiv 2111.09883), section 3.3.
    """

    def __init__(self, num_heads: int, window_size, *, hidden_dim: int = 512,
                 pretrained_window=None, **kwargs):
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        what = "ContinuousPositionBias"
        self.num_heads = check_num_heads(num_heads, what=what)
        self.window_size, self.pretrained_window = check_cpb_window(
            window_size, pretrained_window, what=what)
        self.hidden_dim = check_hidden_dim(hidden_dim, what=what)
        self.hidden_kernel = self._weight(name="hidden_kernel", shape=(2, self.hidden_dim),
                                             initializer=_linear_init(2))
        self.hidden_bias = self._weight(name="hidden_bias", shape=(self.hidden_dim,),
                                           initializer=_linear_init(2))
        self.output_kernel = self._weight(name="output_kernel",
                                             shape=(self.hidden_dim, self.num_heads),
                                             initializer=_linear_init(self.hidden_dim))
        self.relative_coords_table = ops.convert_to_tensor(
            numpy_db.swinv2_log_coords(self.window_size, self.pretrained_window))
        self.relative_position_index = swin_relative_index(*self.window_size)
        self.built = True

    def call(self, q_len: int, k_len: int | None = None):
        check_window_lengths(q_len, q_len if k_len is None else k_len, self.window_size,
                             what=type(self).__name__)
        coords = ops.reshape(self.relative_coords_table, (-1, 2))
        h = ops.relu(ops.matmul(coords, _f32(self.hidden_kernel)) + _f32(self.hidden_bias))
        table = SWINV2_GAIN * ops.sigmoid(ops.matmul(h, _f32(self.output_kernel)))
        bias = ops.take(table, self.relative_position_index, axis=0)
        return ops.expand_dims(ops.transpose(bias, (2, 0, 1)), 0)

    def resized(self, new_window) -> "ContinuousPositionBias":
        """A new layer for ``new_window`` with the same MLP, its offsets normalised by the
        window it was trained on (``pretrained_window``, else ``window_size``)."""
        config = {**self.get_config(), "window_size": new_window,
                  "pretrained_window": tuple(self.pretrained_window or self.window_size)}
        config.pop("name", None)
        out = type(self).from_config(config)
        for name in ("hidden_kernel", "hidden_bias", "output_kernel"):
            getattr(out, name).assign(getattr(self, name))
        return out

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads, "window_size": list(self.window_size),
                       "hidden_dim": self.hidden_dim,
                       "pretrained_window": (None if self.pretrained_window is None
                                             else tuple(self.pretrained_window))})
        return config
