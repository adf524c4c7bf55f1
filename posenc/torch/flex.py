"""The score-modification route (PyTorch): a bias scheme through ``flex_attention``.

A bias scheme enters attention as a ``(1, heads, q_len, k_len)`` float ``attn_mask``
(``posenc/torch/attention.py``): a tensor of ``q_len * k_len`` entries per head, and a float
mask rules out the FlashAttention kernels. PyTorch's ``flex_attention``
(``torch.nn.attention.flex_attention``) takes the bias as a ``score_mod(score, b, h, q_idx,
kv_idx)`` instead, a function of one score and its indices that the kernel calls for each entry,
and the causal mask as a block mask whose fully masked blocks it skips: the bias is never
materialised. :func:`score_mod` writes each scheme's bias as such a function of its
parameters (ALiBi's slopes, Kerple's ``r1`` and ``r2``, FIRE's MLP, FoX's cumulative
log-forget), and :func:`flex_bias_attention` runs it, equal to the dense path.

Eager ``flex_attention`` (a CPU without compilation) evaluates the score_mod over every
entry with ``torch.vmap``: it is exact but not memory-saving; compiled
(``torch.compile``, ``compiled=True``; the default on a GPU), it is a fused kernel.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F

from posenc._checks import _error
from posenc.torch.bias import ALiBiBias
from posenc.torch.content import ForgetGateBias
from posenc.torch.distance_bias import FireBias, KerpleBias

__all__ = ["FLEX_SCHEMES", "score_mod", "causal_block_mask", "flex_bias_attention",
           "dense_bias_attention"]

#: The bias layers :func:`score_mod` writes as a score modification, by scheme name.
FLEX_SCHEMES = {"alibi": ALiBiBias, "kerple": KerpleBias, "fire": FireBias,
                "fox": ForgetGateBias}


def _scheme(layer, what: str) -> str:
    for name, cls in FLEX_SCHEMES.items():
        if isinstance(layer, cls):
            return name
    names = ", ".join(cls.__name__ for cls in FLEX_SCHEMES.values())
    raise _error(what, f"layer must be one of {names}, got {type(layer).__name__}",
                 "pass the bias layer of one of the schemes posenc.torch.flex.FLEX_SCHEMES "
                 "names, or run the others on the dense bias (dense_bias_attention)")


def _fox_cumsum(layer: ForgetGateBias, x, what: str):
    if x is None:
        raise _error(what, "x must be the layer input (batch, seq, dim) for a ForgetGateBias, "
                           "got x=None", "pass x, the input the queries and keys come from")
    return layer.log_forget(x).cumsum(-1)                       # (batch, heads, seq) float32


def score_mod(layer, offset: int = 0, *, x=None):
    """The scheme's bias as a ``flex_attention`` score modification.

    ``score_mod(score, b, h, q_idx, kv_idx)`` returns ``score`` plus the bias of query
    ``i = q_idx + offset`` (the queries are the last of the keys' positions) and key
    ``j = kv_idx``, computed from the layer's parameters at that one entry: ALiBi's
    ``-slope_h (i - j)`` (``-slope_h |i - j|`` for ``causal=False``), Kerple's kernel of
    ``|i - j|``, FIRE's MLP of ``psi(i - j) / psi(max(L, i))``, FoX's ``c_i - c_j`` (``c``
    the cumulative log-forget of ``x``, read once here). Entries above the diagonal carry
    their formula's value; the causal block mask hides them.

    Args:
        layer: an :class:`ALiBiBias`, :class:`KerpleBias`, :class:`FireBias` or
            :class:`ForgetGateBias` (:data:`FLEX_SCHEMES`).
        offset: the position of the first query, ``k_len - q_len`` (decoding). Default 0.
        x: the layer input ``(batch, seq, dim)``, for a ``ForgetGateBias`` only.

    Returns:
        the score_mod function.

    Example:
        >>> mod = score_mod(ALiBiBias(4))
        >>> float(mod(torch.tensor(0.0), 0, torch.tensor(1), torch.tensor(5), torch.tensor(2)))
        -0.1875

    References:
        Dong et al., "Flex Attention: A Programming Model for Generating Optimized Attention
        Kernels", arXiv 2412.05496 (2024).
    """
    what = "score_mod"
    scheme = _scheme(layer, what)
    if scheme == "alibi":
        slopes, causal = layer.slopes.float(), layer.causal

        def mod(score, b, h, q_idx, kv_idx):
            d = (q_idx + offset - kv_idx).float()
            return score - slopes[h] * (d if causal else d.abs())
    elif scheme == "kerple":
        r1 = layer.r1.float().clamp(min=_kerple_eps())
        if layer.kernel == "log":
            r2 = layer.r2.float().clamp(min=_kerple_eps())

            def mod(score, b, h, q_idx, kv_idx):
                d = (q_idx + offset - kv_idx).abs().float()
                return score - r1[h] * torch.log1p(r2[h] * d)
        else:
            r2 = layer.r2.float().clamp(min=_kerple_eps(), max=2.0)

            def mod(score, b, h, q_idx, kv_idx):
                d = (q_idx + offset - kv_idx).abs().float()
                power = torch.exp(r2[h] * torch.log(d.clamp(min=1.0)))
                return score - r1[h] * torch.where(d > 0, power, torch.zeros_like(power))
    elif scheme == "fire":
        c = layer.c.float()
        limit = (layer.threshold_multiplier.float() * layer.threshold).abs()
        # the MLP unit by unit: a score_mod indexes tensors by its scalar indices only
        units = list(zip(layer.hidden_kernel.float()[0], layer.hidden_bias.float(),
                         layer.output_kernel.float(), strict=True))
        eps = layer.eps

        def mod(score, b, h, q_idx, kv_idx):
            i = (q_idx + offset).float()
            numerator = torch.log(torch.abs(c * (i - kv_idx.float())) + 1.0)
            t = numerator / (torch.log(torch.abs(c * torch.maximum(i, limit)) + 1.0) + eps)
            for weight, bias, out in units:
                score = score + F.relu(t * weight + bias) * out[h]
            return score
    else:
        cumsum = _fox_cumsum(layer, x, what)

        def mod(score, b, h, q_idx, kv_idx):
            return score + cumsum[b, h, q_idx + offset] - cumsum[b, h, kv_idx]
    return mod


def _kerple_eps() -> float:
    from posenc.distance_bias import KERPLE_EPS
    return KERPLE_EPS


def causal_block_mask(q_len: int, k_len: int, device="cpu"):
    """The causal block mask of ``q_len`` queries, the last of ``k_len`` keys, for every batch
    row and head (``create_block_mask``): build it once per shape and pass it to
    :func:`flex_bias_attention` (``block_mask=``) to share it across calls and layers.

    Example:
        >>> causal_block_mask(256, 256).sparsity()     # one of the 2 x 2 blocks is skipped
        25.0
    """
    from torch.nn.attention.flex_attention import create_block_mask
    offset = k_len - q_len

    def causal(b, h, q_idx, kv_idx):
        return kv_idx <= q_idx + offset

    return create_block_mask(causal, None, None, q_len, k_len, device=device)


def flex_bias_attention(q, k, v, layer, *, x=None, causal: bool = True, compiled=None,
                        block_mask=None):
    """Attention with a bias scheme through ``flex_attention``: the bias as a score_mod.

    Computes ``softmax(q k^T / sqrt(head_dim) + bias + causal mask) v`` without forming the
    bias (:func:`score_mod`), the causal mask as a block mask (``create_block_mask``), the
    queries being the last ``q_len`` of the ``k_len`` positions. Equal to
    :func:`dense_bias_attention` (the float ``attn_mask`` path of ``MultiHeadAttention``).

    Args:
        q: ``(batch, heads, q_len, head_dim)``.
        k, v: ``(batch, heads, k_len, head_dim)``, ``k_len >= q_len``.
        layer: the scheme's bias layer (:data:`FLEX_SCHEMES`).
        x: the layer input ``(batch, k_len, dim)`` for FoX (its gates of every position;
            the queries read the last ``q_len``).
        causal: mask the future (default ``True``).
        compiled: run ``flex_attention`` compiled by ``torch.compile`` (``True``) or eagerly
            (``False``); ``None`` (default): compiled on a GPU, eager on a CPU.
        block_mask: the causal block mask of these lengths, built once
            (:func:`causal_block_mask`); default ``None`` builds it in this call. Only with
            ``causal=True``.

    Call arguments:
        (a function; see Args.)

    Returns:
        ``(batch, heads, q_len, head_dim)`` in ``q``'s dtype.

    Example:
        >>> q, k, v = (torch.randn(1, 4, 16, 8) for _ in range(3))
        >>> alibi = ALiBiBias(4)
        >>> out = flex_bias_attention(q, k, v, alibi, compiled=False)
        >>> bool(torch.allclose(out, dense_bias_attention(q, k, v, alibi), atol=1e-5))
        True

    References:
        Dong et al., "Flex Attention: A Programming Model for Generating Optimized Attention
        Kernels", arXiv 2412.05496 (2024).
    """
    from torch.nn.attention.flex_attention import flex_attention
    what = "flex_bias_attention"
    _check_qkv(q, k, v, what)
    q_len, k_len = q.shape[-2], k.shape[-2]
    if _scheme(layer, what) == "fox" and x is not None and x.shape[1] != k_len:
        raise _error(what, f"x must hold every key's position, (batch, k_len={k_len}, dim), "
                           f"got shape {tuple(x.shape)}", "pass the inputs of all the keys")
    mod = score_mod(layer, k_len - q_len, x=x)
    if block_mask is not None and not causal:
        raise _error(what, "block_mask is the causal mask's, got it with causal=False",
                     "pass causal=True with a block mask, or no block mask")
    if block_mask is not None and tuple(block_mask.shape[-2:]) != (q_len, k_len):
        raise _error(what, f"block_mask must be for q_len={q_len}, k_len={k_len}, got one for "
                           f"{tuple(block_mask.shape[-2:])}",
                     "build it with causal_block_mask(q_len, k_len)")
    mask = block_mask if block_mask is not None else (
        causal_block_mask(q_len, k_len, q.device) if causal else None)
    if compiled is None:
        compiled = q.device.type == "cuda"
    if compiled:
        return _compiled_flex()(q, k, v, score_mod=mod, block_mask=mask)
    with warnings.catch_warnings():      # (eager on purpose: the unfused path, said above)
        warnings.filterwarnings("ignore", "flex_attention called without torch.compile")
        return flex_attention(q, k, v, score_mod=mod, block_mask=mask)


_COMPILED = []


def _compiled_flex():
    if not _COMPILED:
        from torch.nn.attention.flex_attention import flex_attention
        _COMPILED.append(torch.compile(flex_attention, dynamic=False))
    return _COMPILED[0]


def _check_qkv(q, k, v, what: str) -> None:
    shapes = tuple(tuple(t.shape) for t in (q, k, v))
    if any(len(s) != 4 for s in shapes) or shapes[1] != shapes[2] or shapes[0][:2] != \
            shapes[1][:2] or shapes[0][-1] != shapes[1][-1] or shapes[0][2] > shapes[1][2]:
        raise _error(what, f"q, k and v must be (batch, heads, seq, head_dim) with k and v of "
                           f"one shape and q_len <= k_len, got shapes {shapes}",
                     "split the heads first; the queries are the last q_len of the keys")


def dense_bias_attention(q, k, v, layer, *, x=None, causal: bool = True):
    """The dense path :func:`flex_bias_attention` equals: the bias materialised as a float
    ``attn_mask`` of ``scaled_dot_product_attention`` (with the causal mask as ``-inf``).

    Args:
        q, k, v, layer, x, causal: as in :func:`flex_bias_attention`.

    Returns:
        ``(batch, heads, q_len, head_dim)``.

    Example:
        >>> q, k, v = (torch.randn(1, 4, 6, 8) for _ in range(3))
        >>> dense_bias_attention(q, k, v, KerpleBias(4)).shape
        torch.Size([1, 4, 6, 8])
    """
    what = "dense_bias_attention"
    _check_qkv(q, k, v, what)
    q_len, k_len = q.shape[-2], k.shape[-2]
    if _scheme(layer, what) == "fox":
        bias = _fox_cumsum(layer, x, what)
        bias = bias[..., k_len - q_len:, None] - bias[..., None, :]
    else:
        bias = layer(q_len, k_len)
    if causal:
        i = torch.arange(k_len - q_len, k_len, device=q.device)[:, None]
        future = torch.arange(k_len, device=q.device)[None, :] > i
        bias = bias.masked_fill(future, float("-inf"))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype))
