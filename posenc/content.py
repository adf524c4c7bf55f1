"""Positions that depend on the content (NumPy): the Forgetting Transformer's decay and CoPE.

Both schemes of this family read the tokens, not only their indices:

* the Forgetting Transformer (FoX, Lin et al. 2025) gates each token with a
  forget gate ``f_t = sigmoid(w_h . x_t + b_h)`` per head ``h``, read from the
  layer input ``x``, and adds ``D_ij = sum_{l=j+1}^{i} log f_l`` to the logit of
  query ``i`` and key ``j <= i``: a decay like ALiBi's, but whose slope each
  token chooses. With the cumulative sum ``c_i = sum_{l<=i} log f_l`` it is
  ``D_ij = c_i - c_j``, and ``log f = -softplus(-z)`` is computed without
  forming ``f`` (no ``log(0)`` when a gate saturates);
* CoPE (Golovneva et al. 2024) counts: the gate ``g_ij = sigmoid(q_i . k_j)``
  says whether key ``j`` counts for query ``i``, the position of ``j`` seen from
  ``i`` is ``p_ij = sum_{t=j}^{i} g_it`` (clamped to ``max_position - 1``), and
  the logit gains ``q_i . e[p_ij]``, the learned embedding ``e`` interpolated
  between the integer positions ``floor(p_ij)`` and ``ceil(p_ij)``. It is
  computed as the paper's section 3 recommends: ``z_i[p] = q_i . e[p]`` for the
  ``max_position`` integers, then interpolated, so no ``(q, k, head_dim)``
  tensor is formed.

Both are causal: a query sees the keys at or before it (queries being the last
``q_len`` of the ``k_len`` positions, as in :mod:`posenc.bias`). Here are the
family's argument rules and the from-scratch formulas in NumPy (float64), which
the faces, ``posenc/torch/content.py`` and ``posenc/keras/content.py``, equal.
"""

from __future__ import annotations

import numpy as np

from posenc._checks import _error, check_float, check_positive_int
from posenc.bias import check_num_heads

__all__ = [
    "CONTENT_SCHEMES",
    "forget_gate_bias",
    "cope_logits",
]

#: The schemes of this family and the tensors each one reads.
CONTENT_SCHEMES = {"fox": "the layer input x", "cope": "the queries and keys"}


# --------------------------------------------------------------------------- argument rules

def check_model_dim(dim, *, what: str = "") -> int:
    return check_positive_int("dim", dim, what=what,
                              fix="pass the width of the layer input x (the model width)")


def check_max_position(max_position, *, what: str = "") -> int:
    return check_positive_int("max_position", max_position, what=what,
                              fix="CoPE's positions are counts up to the context length; the "
                                  "paper uses max_position=64 on language modelling")


def check_gate_scale(scale, *, what: str = "") -> float:
    return check_float("scale", scale, above=0.0, what=what,
                       fix="pass scale=1.0 (the paper's sigmoid(q . k)) or 1 / sqrt(head_dim) "
                           "(the authors' code gates on the scaled logits)")


def check_gate_bias_init(bias_init, *, what: str = "") -> float:
    return check_float("bias_init", bias_init, what=what,
                       fix="pass a number; 0.0 starts each gate near 0.5, a large one (e.g. "
                           "5.0) starts with almost no forgetting")


def check_fox_input(shape, dim: int, *, what: str = "") -> None:
    """The layer input ``x``: ``(batch, seq, dim)``."""
    if len(shape) != 3 or (shape[-1] is not None and shape[-1] != dim):
        raise _error(what, f"x must be the layer input (batch, seq, dim={dim}), got shape "
                           f"{tuple(shape)}",
                     "pass the tokens' features before the attention's projections")


def check_cope_inputs(q_shape, k_shape, head_dim: int, num_heads: int, *,
                      what: str = "") -> None:
    """Queries ``(batch, heads, q_len, head_dim)`` and keys ``(batch, heads, k_len, head_dim)``
    with ``q_len <= k_len`` (the queries are the last ``q_len`` positions)."""
    for name, shape in (("q", q_shape), ("k", k_shape)):
        if (len(shape) != 4 or (shape[-1] is not None and shape[-1] != head_dim)
                or (shape[1] is not None and shape[1] != num_heads)):
            raise _error(what, f"{name} must be (batch, heads={num_heads}, seq, "
                               f"head_dim={head_dim}), got shape {tuple(shape)}",
                         "split the heads first, e.g. q.reshape(b, s, heads, head_dim)"
                         ".transpose(1, 2)")
    if None not in (q_shape[2], k_shape[2]) and q_shape[2] > k_shape[2]:
        raise _error(what, f"q must not have more positions than k, got q_len={q_shape[2]} "
                           f"and k_len={k_shape[2]}",
                     "the queries are the last q_len of the k_len positions; pass every key")
    if None not in (q_shape[0], k_shape[0]) and q_shape[0] != k_shape[0]:
        raise _error(what, f"q and k must have one batch, got {tuple(q_shape)} and "
                           f"{tuple(k_shape)}", "pass the queries and keys of the same rows")


def check_cope_mask(mask_shape, q_len, k_len, *, what: str = "") -> None:
    """CoPE's optional ``visible`` mask: boolean, broadcastable to ``(batch, heads, q_len, k_len)``."""
    if len(mask_shape) not in (2, 3, 4) or tuple(mask_shape[-2:]) != (q_len, k_len):
        raise _error(what, f"visible must be a boolean (q_len, k_len)=({q_len}, {k_len}), "
                           f"(batch, q_len, k_len) or (batch, heads, q_len, k_len) array of "
                           f"the keys each query may see, got shape {tuple(mask_shape)}",
                     "pass True where a query sees a key (causal and in its sequence)")


def causal_mask(q_len: int, k_len: int) -> np.ndarray:
    """``(q_len, k_len)`` bool, True where key ``j`` is at or before query ``i`` (the queries the
    last ``q_len`` of ``k_len`` positions)."""
    i = np.arange(k_len - q_len, k_len)[:, None]
    return np.arange(k_len)[None, :] <= i


# --------------------------------------------------------------------------- formulas

def _log_sigmoid(z):
    return -np.logaddexp(0.0, -z)


def forget_gate_bias(x, weight, bias) -> np.ndarray:
    """FoX's logit bias from the scratch formula: float64 ``(batch, heads, seq, seq)``.

    ``D_ij = sum_{l=j+1}^{i} log sigmoid(x_l . weight[:, h] + bias[h])`` for
    ``j <= i``, 0 above the diagonal (the causal mask hides those entries). Each
    entry is the sum over its own span, written as the paper defines it (the
    faces use the cumulative sum).

    Args:
        x: the layer input ``(batch, seq, dim)``.
        weight: ``(dim, heads)``.
        bias: ``(heads,)``.

    Example:
        >>> x = np.zeros((1, 3, 2))          # every gate sigmoid(0) = 1/2
        >>> forget_gate_bias(x, np.zeros((2, 1)), np.zeros(1))[0, 0].round(3)
        array([[ 0.   ,  0.   ,  0.   ],
               [-0.693,  0.   ,  0.   ],
               [-1.386, -0.693,  0.   ]])

    References:
        Lin et al., "Forgetting Transformer: Softmax Attention with a Forget Gate",
        ICLR 2025 (arXiv 2503.02130), section 2.
    """
    x = np.asarray(x, dtype=np.float64)
    log_f = _log_sigmoid(x @ np.asarray(weight, np.float64) + np.asarray(bias, np.float64))
    log_f = np.moveaxis(log_f, -1, 1)                                   # (batch, heads, seq)
    b, h, n = log_f.shape
    out = np.zeros((b, h, n, n))
    for i in range(n):
        for j in range(i):
            out[:, :, i, j] = log_f[:, :, j + 1:i + 1].sum(-1)
    return out


def cope_logits(q, k, embedding, *, scale: float = 1.0, mask=None) -> np.ndarray:
    """CoPE's logit term from the scratch formula: float64 ``(batch, heads, q_len, k_len)``.

    ``g_ij = sigmoid(scale * q_i . k_j)`` where key ``j`` is visible to query
    ``i`` (``mask``, by default causal), else 0; ``p_ij = min(sum_{t >= j}
    g_it, max_position - 1)``; the term is ``q_i . e[p_ij]`` with ``e[p]``
    interpolated linearly between ``e[floor p]`` and ``e[ceil p]`` (here the
    embedding itself is interpolated, as the paper's equation 5 defines it).

    Args:
        q: ``(batch, heads, q_len, head_dim)``, the last ``q_len`` of the positions.
        k: ``(batch, heads, k_len, head_dim)``.
        embedding: ``e``, ``(max_position, head_dim)``.
        scale: the gates' logit scale; default 1.0.
        mask: optional bool, broadcastable to ``(batch, heads, q_len, k_len)``.

    Example:
        >>> q = np.ones((1, 1, 2, 1)); k = np.zeros((1, 1, 2, 1))   # every gate 1/2
        >>> e = np.array([[0.0], [1.0]])                           # e[p] = p in between
        >>> cope_logits(q, k, e)[0, 0]    # p = 1/2 for j = i, 1 for j = i - 1
        array([[0.5, 0. ],
               [1. , 0.5]])

    References:
        Golovneva et al., "Contextual Position Encoding: Learning to Count What's
        Important", arXiv 2405.18719 (2024), section 3.
    """
    q, k = np.asarray(q, np.float64), np.asarray(k, np.float64)
    e = np.asarray(embedding, np.float64)
    q_len, k_len = q.shape[2], k.shape[2]
    seen = causal_mask(q_len, k_len) if mask is None else np.asarray(mask, bool)
    gates = np.where(seen, 1.0 / (1.0 + np.exp(-scale * q @ np.swapaxes(k, -1, -2))), 0.0)
    pos = np.minimum(np.flip(np.cumsum(np.flip(gates, -1), -1), -1), e.shape[0] - 1)
    low = np.floor(pos).astype(int)
    high = np.ceil(pos).astype(int)
    w = (pos - low)[..., None]
    emb = (1.0 - w) * e[low] + w * e[high]                    # (b, h, q, k, head_dim)
    return np.einsum("bhqd,bhqkd->bhqk", q, emb)
