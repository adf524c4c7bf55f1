"""Positions that depend on the content (Keras face): FoX's forget gate bias and CoPE.

:class:`ForgetGateBias` is called on the layer input, ``layer(x)`` with ``x``
``(batch, seq, dim)``, and returns the Forgetting Transformer's float32 bias
``(batch, heads, seq, seq)``. :class:`CoPE` is called on the split heads,
``layer(q, k, visible=None)``, and returns CoPE's float32 logit term ``(batch,
heads, q_len, k_len)``, whatever the dtype policy (both are built with
``autocast=False``). The formulas and argument rules are in
``posenc/content.py``; the PyTorch face mirrors this module name for name.
"""

from __future__ import annotations

import math

import keras
from keras import ops

from posenc._checks import check_positive_int
from posenc.bias import check_num_heads
from posenc.content import (
    check_cope_inputs,
    check_cope_mask,
    check_fox_input,
    check_gate_bias_init,
    check_gate_scale,
    check_max_position,
    check_model_dim,
)

__all__ = ["ForgetGateBias", "CoPE"]


def _causal(q_len: int, k_len: int):
    i = ops.expand_dims(ops.arange(k_len - q_len, k_len, dtype="int32"), 1)
    return ops.expand_dims(ops.arange(k_len, dtype="int32"), 0) <= i


def _f32(w):
    return ops.cast(w, "float32")


@keras.saving.register_keras_serializable(package="posenc")
class ForgetGateBias(keras.layers.Layer):
    """The Forgetting Transformer's bias: a data-dependent ALiBi read from the layer input.

    Lin et al. give each head ``h`` a forget gate ``f_t = sigmoid(w_h . x_t +
    b_h)`` per token and add ``D_ij = sum_{l=j+1}^{i} log f_l`` to the logit of
    query ``i`` and key ``j <= i``: each token decides how much of the past it
    lets through, and a constant gate ``f`` is ALiBi of slope ``-log f``. It is
    computed as ``c_i - c_j`` from the cumulative sum ``c`` of ``log f =
    log_sigmoid(z)`` in float32. Entries above the diagonal are 0: the causal
    mask hides them.

    Args:
        num_heads: positive int.
        dim: the width of ``x``.
        bias_init: the gates' initial bias; default 0.0.

    Call arguments:
        x: ``(batch, seq, dim)``, the attention's input.

    Returns:
        float32 tensor ``(batch, num_heads, seq, seq)``, at most 0 on and below the diagonal.

    Weights:
        weight ``(dim, num_heads)`` (PyTorch's ``nn.Linear`` initialisation),
        bias ``(num_heads,)`` (``bias_init``).

    Example:
        >>> import numpy as np
        >>> fox = ForgetGateBias(8, 64)
        >>> bias = fox(np.random.randn(2, 10, 64).astype("float32"))
        >>> tuple(bias.shape), bool(ops.all(bias <= 0))
        ((2, 8, 10, 10), True)

    References:
        Lin et al., "Forgetting Transformer: Softmax Attention with a Forget Gate",
        ICLR 2025 (arXiv 2503.02130), section 2.
    """

    def __init__(self, num_heads: int, dim: int, *, bias_init: float = 0.0, **kwargs):
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        what = "ForgetGateBias"
        self.num_heads = check_num_heads(num_heads, what=what)
        self.dim = check_model_dim(dim, what=what)
        self.bias_init = check_gate_bias_init(bias_init, what=what)
        bound = 1.0 / math.sqrt(self.dim)
        self.weight = self.add_weight(name="weight", shape=(self.dim, self.num_heads),
                                      initializer=keras.initializers.RandomUniform(-bound, bound),
                                      autocast=False)
        self.bias = self.add_weight(name="bias", shape=(self.num_heads,),
                                    initializer=keras.initializers.Constant(self.bias_init),
                                    autocast=False)
        self.built = True

    def log_forget(self, x):
        """``log f`` per head and token: float32 ``(batch, num_heads, seq)``."""
        check_fox_input(tuple(x.shape), self.dim, what=type(self).__name__)
        z = ops.matmul(_f32(x), _f32(self.weight)) + _f32(self.bias)
        return ops.transpose(ops.log_sigmoid(z), (0, 2, 1))

    def call(self, x):
        c = ops.cumsum(self.log_forget(x), axis=-1)
        seq = c.shape[-1]
        d = ops.expand_dims(c, -1) - ops.expand_dims(c, -2)
        return ops.where(_causal(seq, seq), d, ops.zeros_like(d))

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads, "dim": self.dim,
                       "bias_init": self.bias_init})
        return config


@keras.saving.register_keras_serializable(package="posenc")
class CoPE(keras.layers.Layer):
    """Contextual Position Encoding: positions that count the keys a query's gates select.

    Golovneva et al. gate each key ``j`` for query ``i`` with ``g_ij =
    sigmoid(q_i . k_j)``, measure its position as ``p_ij = sum_{t=j}^{i} g_it``
    (clamped to ``max_position - 1``), and add ``q_i . e[p_ij]`` to the logit,
    the learned embedding ``e`` interpolated between ``floor(p_ij)`` and
    ``ceil(p_ij)``. As the paper recommends, ``q_i . e[p]`` is computed for the
    ``max_position`` integers and then interpolated. Gates of keys a query
    does not see (``visible``; by default the causal mask) are 0. The term of an
    unseen key is ``q_i . e[0]``, for the mask to hide. Computed in float32.

    Args:
        num_heads: positive int.
        head_dim: features per head.
        max_position: the number of integer positions ``0 .. max_position - 1``.
        scale: the gates' logit scale, ``sigmoid(scale q . k)``; default 1.0.

    Call arguments:
        q: ``(batch, num_heads, q_len, head_dim)``.
        k: ``(batch, num_heads, k_len, head_dim)``, ``k_len >= q_len``.
        visible: optional bool, broadcastable to ``(batch, num_heads, q_len, k_len)``,
            True where a query sees a key.

    Returns:
        float32 tensor ``(batch, num_heads, q_len, k_len)``.

    Weights:
        embedding ``(max_position, head_dim)``, ``N(0, 0.02^2)``.

    Example:
        >>> import numpy as np
        >>> cope = CoPE(8, 16, 32)
        >>> q = np.random.randn(2, 8, 10, 16).astype("float32")
        >>> tuple(cope(q, q).shape)
        (2, 8, 10, 10)

    References:
        Golovneva et al., "Contextual Position Encoding: Learning to Count What's
        Important", arXiv 2405.18719 (2024), section 3.
    """

    def __init__(self, num_heads: int, head_dim: int, max_position: int, *,
                 scale: float = 1.0, **kwargs):
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        what = "CoPE"
        self.num_heads = check_num_heads(num_heads, what=what)
        self.head_dim = check_positive_int("head_dim", head_dim, what=what,
                                           fix="pass the features per head, e.g. 64")
        self.max_position = check_max_position(max_position, what=what)
        self.scale = check_gate_scale(scale, what=what)
        self.embedding = self.add_weight(
            name="embedding", shape=(self.max_position, self.head_dim),
            initializer=keras.initializers.RandomNormal(stddev=0.02), autocast=False)
        self.built = True

    def call(self, q, k, visible=None):
        what = type(self).__name__
        check_cope_inputs(tuple(q.shape), tuple(k.shape), self.head_dim, self.num_heads,
                          what=what)
        q_len, k_len = q.shape[2], k.shape[2]
        if visible is None:
            mask = _causal(q_len, k_len)
        else:
            mask = ops.convert_to_tensor(visible)
            check_cope_mask(tuple(mask.shape), q_len, k_len, what=what)
            mask = ops.cast(mask, "bool")
            if len(mask.shape) == 3:
                mask = ops.expand_dims(mask, 1)
        q, k = _f32(q), _f32(k)
        gates = ops.sigmoid(self.scale * ops.matmul(q, ops.swapaxes(k, -1, -2)))
        gates = gates * ops.cast(mask, "float32")
        pos = ops.flip(ops.cumsum(ops.flip(gates, -1), axis=-1), -1)
        pos = ops.minimum(pos, float(self.max_position - 1))
        low = ops.floor(pos)
        w = pos - low
        z = ops.matmul(q, ops.transpose(_f32(self.embedding)))          # (b, h, q, P)
        high = ops.take_along_axis(z, ops.cast(ops.ceil(pos), "int32"), axis=-1)
        return high * w + ops.take_along_axis(z, ops.cast(low, "int32"), axis=-1) * (1.0 - w)

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads, "head_dim": self.head_dim,
                       "max_position": self.max_position, "scale": self.scale})
        return config
