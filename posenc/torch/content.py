"""Positions that depend on the content (PyTorch face): FoX's forget gate bias and CoPE.

:class:`ForgetGateBias` is called on the layer input, ``forward(x)`` with ``x``
``(batch, seq, dim)``, and returns the Forgetting Transformer's float32 bias
``(batch, heads, seq, seq)``. :class:`CoPE` is called on the split heads,
``forward(q, k, visible=None)``, and returns CoPE's float32 logit term ``(batch,
heads, q_len, k_len)``. Both are added to the attention logits before the mask;
both are causal, and neither masks the future itself (a decoder adds its causal
mask). The formulas and argument rules are in ``posenc/content.py``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

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


def _causal(q_len: int, k_len: int, device) -> torch.Tensor:
    i = torch.arange(k_len - q_len, k_len, device=device)[:, None]
    return torch.arange(k_len, device=device)[None, :] <= i


class ForgetGateBias(nn.Module):
    """The Forgetting Transformer's bias: a data-dependent ALiBi read from the layer input.

    Lin et al. give each head ``h`` a forget gate ``f_t = sigmoid(w_h . x_t +
    b_h)`` per token and add ``D_ij = sum_{l=j+1}^{i} log f_l`` to the logit of
    query ``i`` and key ``j <= i``: each token decides how much of the past it
    lets through, and a constant gate ``f`` is ALiBi of slope ``-log f``. It is
    computed as ``c_i - c_j`` from the cumulative sum ``c`` of ``log f =
    logsigmoid(z)`` in float32 (no ``log(0)`` when a gate saturates). Entries
    above the diagonal are 0: the causal mask hides them. Packed documents need
    no reset: ``D_ij`` only sums gates between ``j`` and ``i``, inside one
    document wherever the mask lets ``i`` see ``j``.

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
        >>> fox = ForgetGateBias(8, 64)
        >>> bias = fox(torch.randn(2, 10, 64))
        >>> bias.shape, bool((bias <= 0).all())
        (torch.Size([2, 8, 10, 10]), True)

    References:
        Lin et al., "Forgetting Transformer: Softmax Attention with a Forget Gate",
        ICLR 2025 (arXiv 2503.02130), section 2.
    """

    def __init__(self, num_heads: int, dim: int, *, bias_init: float = 0.0):
        super().__init__()
        what = "ForgetGateBias"
        self.num_heads = check_num_heads(num_heads, what=what)
        self.dim = check_model_dim(dim, what=what)
        self.bias_init = check_gate_bias_init(bias_init, what=what)
        self.weight = nn.Parameter(torch.empty(self.dim, self.num_heads))
        self.bias = nn.Parameter(torch.empty(self.num_heads))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.dim)
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.constant_(self.bias, self.bias_init)

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}, dim={self.dim}, bias_init={self.bias_init}"

    def log_forget(self, x: torch.Tensor) -> torch.Tensor:
        """``log f`` per head and token: float32 ``(batch, num_heads, seq)``."""
        check_fox_input(tuple(x.shape), self.dim, what=type(self).__name__)
        with torch.autocast(device_type=x.device.type, enabled=False):
            z = x.float() @ self.weight.float() + self.bias.float()
            return F.logsigmoid(z).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        log_f = self.log_forget(x)
        with torch.autocast(device_type=x.device.type, enabled=False):
            c = log_f.cumsum(-1)
            seq = c.shape[-1]
            d = c[..., :, None] - c[..., None, :]
            return d.masked_fill(~_causal(seq, seq, x.device), 0.0)


class CoPE(nn.Module):
    """Contextual Position Encoding: positions that count the keys a query's gates select.

    Golovneva et al. gate each key ``j`` for query ``i`` with ``g_ij =
    sigmoid(q_i . k_j)``, measure its position as ``p_ij = sum_{t=j}^{i} g_it``
    (clamped to ``max_position - 1``), and add ``q_i . e[p_ij]`` to the logit,
    the learned embedding ``e`` interpolated between ``floor(p_ij)`` and
    ``ceil(p_ij)``. As the paper recommends, ``q_i . e[p]`` is computed for the
    ``max_position`` integers and then interpolated. Gates of keys a query
    does not see (``visible``; by default the causal mask, queries being the last
    ``q_len`` of the keys) are 0, so a padded or packed batch counts each
    sequence's own keys only. The term of an unseen key is ``q_i . e[0]``, for the
    mask to hide. Computed in float32.

    Args:
        num_heads: positive int.
        head_dim: features per head.
        max_position: the number of integer positions ``0 .. max_position - 1``.
        scale: the gates' logit scale, ``sigmoid(scale q . k)``; default 1.0 (the
            paper's formula; the authors' code gates on ``q . k / sqrt(head_dim)``).

    Call arguments:
        q: ``(batch, num_heads, q_len, head_dim)``.
        k: ``(batch, num_heads, k_len, head_dim)``, ``k_len >= q_len``.
        visible: optional bool, broadcastable to ``(batch, num_heads, q_len, k_len)``,
            True where a query sees a key (its causal mask and its sequence's keys).

    Returns:
        float32 tensor ``(batch, num_heads, q_len, k_len)``.

    Weights:
        embedding ``(max_position, head_dim)``, ``N(0, 0.02^2)`` (the authors start
        it at 0, where CoPE adds nothing until trained).

    Example:
        >>> cope = CoPE(8, 16, 32)
        >>> q, k = torch.randn(2, 8, 10, 16), torch.randn(2, 8, 10, 16)
        >>> cope(q, k).shape
        torch.Size([2, 8, 10, 10])

    References:
        Golovneva et al., "Contextual Position Encoding: Learning to Count What's
        Important", arXiv 2405.18719 (2024), section 3.
    """

    def __init__(self, num_heads: int, head_dim: int, max_position: int, *,
                 scale: float = 1.0):
        super().__init__()
        what = "CoPE"
        self.num_heads = check_num_heads(num_heads, what=what)
        self.head_dim = check_positive_int("head_dim", head_dim, what=what,
                                           fix="pass the features per head, e.g. 64")
        self.max_position = check_max_position(max_position, what=what)
        self.scale = check_gate_scale(scale, what=what)
        self.embedding = nn.Parameter(torch.empty(self.max_position, self.head_dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.embedding, std=0.02)

    def extra_repr(self) -> str:
        return (f"num_heads={self.num_heads}, head_dim={self.head_dim}, "
                f"max_position={self.max_position}, scale={self.scale}")

    def forward(self, q: torch.Tensor, k: torch.Tensor, visible=None) -> torch.Tensor:
        what = type(self).__name__
        check_cope_inputs(tuple(q.shape), tuple(k.shape), self.head_dim, self.num_heads,
                          what=what)
        q_len, k_len = q.shape[2], k.shape[2]
        if visible is None:
            mask = _causal(q_len, k_len, q.device)
        else:
            mask = visible if torch.is_tensor(visible) else torch.as_tensor(visible)
            check_cope_mask(tuple(mask.shape), q_len, k_len, what=what)
            mask = mask.to(device=q.device, dtype=torch.bool)
            if mask.dim() == 3:
                mask = mask[:, None]
        with torch.autocast(device_type=q.device.type, enabled=False):
            q, k = q.float(), k.float()
            gates = torch.sigmoid(self.scale * q @ k.transpose(-1, -2))
            gates = gates * mask
            pos = gates.flip(-1).cumsum(-1).flip(-1).clamp(max=self.max_position - 1)
            low = pos.floor()
            w = pos - low
            low = low.long()
            high = pos.ceil().long()
            z = q @ self.embedding.float().T                             # (b, h, q, P)
            return z.gather(-1, high) * w + z.gather(-1, low) * (1.0 - w)
