"""Length-extrapolation schemes (PyTorch face): xPos, Kerple, Sandwich, FIRE, continuous biases.

:class:`XPosEmbedding` rotates queries and keys as RoPE does and scales them
by xPos's decay; it is called like :class:`~posenc.torch.RotaryEmbedding`,
``(q, k, *, offset=0, positions=None) -> (q_rot, k_rot)``. The bias modules
(:class:`KerpleBias`, :class:`SandwichBias`, :class:`FireBias`,
:class:`DynamicPositionBias`, :class:`ContinuousPositionBias`) share the call of
``posenc/torch/bias.py``, ``forward(q_len, k_len=None)``, and return a float32
bias ``(1, heads, q_len, k_len)`` for the logits, queries being the last
``q_len`` of the ``k_len`` positions. None of the biases masks the future: a
decoder adds its causal mask (the Transformer does).

The framework-free parts (the argument rules, xPos's ``zeta``, Sandwich's
bias, Swin V2's coordinates) are in ``posenc/distance_bias.py``.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

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
from posenc.positions import relative_positions
from posenc.rotary import check_head_dim, check_rope_layout, check_rope_positions, check_rope_width
from posenc.torch._util import as_indices, as_positions
from posenc.torch.bias import _lengths, swin_relative_index
from posenc.torch.rotary import apply_rope, rope_frequencies

__all__ = [
    "XPosEmbedding",
    "KerpleBias",
    "SandwichBias",
    "FireBias",
    "DynamicPositionBias",
    "ContinuousPositionBias",
]


def _rel(q_len: int, k_len: int, device) -> torch.Tensor:
    """``j - i`` ``(q_len, k_len)``, the queries the last ``q_len`` of ``k_len`` positions."""
    return relative_positions(q_len, k_len, partial(torch.arange, device=device))


def _offsets(q_len: int, k_len: int, device) -> tuple[torch.Tensor, int]:
    """Every ``j - i`` of a ``(q_len, k_len)`` block, ``-(k_len-1) .. q_len-1``, and the shift
    ``span = k_len - 1`` that turns ``j - i`` into an index of that row."""
    span = max(k_len, 1) - 1
    return torch.arange(-span, q_len, device=device), span


def _positions(q_positions, k_positions, what: str, device):
    """``bias_at``'s positions as int64 ``(batch, q)``, ``(batch, k)`` on ``device``, and
    their offsets ``j - i`` ``(batch, q, k)``."""
    q = as_indices(q_positions, name="q_positions", what=what).to(device)
    k = as_indices(k_positions, name="k_positions", what=what).to(device)
    check_bias_positions(tuple(q.shape), tuple(k.shape), what=what)
    return q, k, k[:, None, :] - q[:, :, None]


def _gather(row: torch.Tensor, rel: torch.Tensor) -> torch.Tensor:
    """``row`` ``(heads, 2k - 1)``, the bias of each offset ``-(k - 1) .. k - 1``, read at the
    offsets ``rel`` ``(batch, q, k)``: ``(batch, heads, q, k)``. Real positions never lie
    further apart than the ``k`` slots of a row (the cumsum rule counts real tokens); the
    pads' offsets are clamped in (their entries are masked)."""
    span = (row.shape[1] - 1) // 2
    return row[:, (rel + span).clamp(0, 2 * span)].permute(1, 0, 2, 3)


def _linear_init(kernel: torch.Tensor, bias: torch.Tensor | None) -> None:
    """PyTorch's ``nn.Linear`` initialisation, ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``, for a
    kernel ``(fan_in, fan_out)`` applied as ``x @ kernel``."""
    bound = 1.0 / math.sqrt(kernel.shape[0])
    nn.init.uniform_(kernel, -bound, bound)
    if bias is not None:
        nn.init.uniform_(bias, -bound, bound)


# --------------------------------------------------------------------------- xPos

class XPosEmbedding(nn.Module):
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
        ``(q_rot, k_rot)`` of the shapes and dtypes of ``q`` and ``k``.

    Example:
        >>> xpos = XPosEmbedding(64)
        >>> q, k = torch.randn(2, 8, 10, 64), torch.randn(2, 8, 10, 64)
        >>> q_rot, k_rot = xpos(q, k)
        >>> q_rot.shape
        torch.Size([2, 8, 10, 64])

    References:
        Sun et al., "A Length-Extrapolatable Transformer", ACL 2023 (arXiv 2212.10554),
        section 3.2.
    """

    def __init__(self, head_dim: int, *, base: float = 10000.0, scale_base: float = 512.0,
                 gamma: float = 0.4, layout: str = "interleaved", center: int | None = None):
        super().__init__()
        what = "XPosEmbedding"
        self.head_dim = check_head_dim(head_dim, what=what)
        self.scale_base = check_scale_base(scale_base, what=what)
        self.gamma = check_gamma(gamma, what=what)
        self.layout = check_rope_layout(layout, what=what)
        self.center = None if center is None else check_int(
            "center", center, minimum=0, what=what,
            fix="pass a non-negative position, e.g. half the longest sequence")
        inv_freq, _ = rope_frequencies(self.head_dim, base=base)
        self.base = float(base)
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        zeta = numpy_db.xpos_zeta(self.head_dim, self.gamma)
        self.register_buffer("zeta", torch.as_tensor(zeta, dtype=torch.float32),
                             persistent=False)
        self.register_buffer("_log_zeta", torch.as_tensor(np.log(zeta), dtype=torch.float32),
                             persistent=False)

    def extra_repr(self) -> str:
        return (f"head_dim={self.head_dim}, base={self.base}, scale_base={self.scale_base}, "
                f"gamma={self.gamma}, layout={self.layout!r}, center={self.center}")

    def forward(self, q: torch.Tensor, k: torch.Tensor, *, offset: int = 0, positions=None):
        what = type(self).__name__
        for name, t in (("q", q), ("k", k)):
            check_rope_width(name, t.shape, self.head_dim, what=what)
        offset = check_int("offset", offset, minimum=0, what=what,
                           fix="pass the number of cached tokens before q")
        check_rope_positions((q.shape[-2],), k.shape, name="k", what=what)
        seq = q.shape[-2]
        if positions is None:
            positions = torch.arange(offset, offset + seq, device=q.device)
        else:
            positions = as_positions(positions, what=what).to(q.device)
            check_rope_positions(positions.shape, q.shape, name="q", what=what)
        q_rot = apply_rope(q, positions, self.inv_freq.float(), layout=self.layout)
        k_rot = apply_rope(k, positions, self.inv_freq.float(), layout=self.layout)
        center = seq // 2 if self.center is None else self.center
        with torch.autocast(device_type=q.device.type, enabled=False):
            power = (positions.float() - center) / self.scale_base
            exponent = power[..., None] * self._log_zeta.to(q.device).float()   # (..., seq, d/2)
            scales = []
            for sign in (1.0, -1.0):      # the keys' scale as its own exp: no division
                scale = torch.exp(sign * exponent)
                scale = (scale.repeat_interleave(2, dim=-1) if self.layout == "interleaved"
                         else torch.cat((scale, scale), dim=-1))
                if positions.ndim == 2:                               # (batch, seq)
                    scale = scale.reshape(scale.shape[0], *[1] * (q.ndim - 3), *scale.shape[1:])
                scales.append(scale)
            return ((q_rot.float() * scales[0]).to(q.dtype),
                    (k_rot.float() * scales[1]).to(k.dtype))


# --------------------------------------------------------------------------- Kerple

class KerpleBias(nn.Module):
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
        >>> kerple(1, 6).shape   # one new token, five cached
        torch.Size([1, 8, 1, 6])

    References:
        Chi et al., "KERPLE: Kernelized Relative Positional Embedding for Length
        Extrapolation", NeurIPS 2022 (arXiv 2205.09921), section 4.
    """

    def __init__(self, num_heads: int, *, kernel: str = "log"):
        super().__init__()
        what = "KerpleBias"
        self.num_heads = check_num_heads(num_heads, what=what)
        self.kernel = check_kerple_kernel(kernel, what=what)
        self.r1 = nn.Parameter(torch.empty(self.num_heads))
        self.r2 = nn.Parameter(torch.empty(self.num_heads))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        high1, high2 = _KERPLE_INIT[self.kernel]
        nn.init.uniform_(self.r1, 0.0, high1)
        nn.init.uniform_(self.r2, 0.0, high2)

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}, kernel={self.kernel!r}"

    def _row(self, offsets: torch.Tensor) -> torch.Tensor:
        """The kernel at each offset: ``(heads, len(offsets))`` float32."""
        d = offsets.abs().float()[None]                              # (1, n)
        r1 = self.r1.float().clamp(min=KERPLE_EPS)[:, None]
        if self.kernel == "log":
            r2 = self.r2.float().clamp(min=KERPLE_EPS)[:, None]
            return -r1 * torch.log1p(r2 * d)
        # d^r2 as exp(r2 log d), 0 at d = 0 (no log(0) in the gradient)
        r2 = self.r2.float().clamp(min=KERPLE_EPS, max=2.0)[:, None]
        power = torch.exp(r2 * torch.log(d.clamp(min=1.0)))
        return -r1 * torch.where(d > 0, power, torch.zeros_like(power))

    def forward(self, q_len: int, k_len: int | None = None) -> torch.Tensor:
        q_len, k_len = _lengths(q_len, k_len, type(self).__name__)
        device = self.r1.device
        offsets, span = _offsets(q_len, k_len, device)
        with torch.autocast(device_type=device.type, enabled=False):
            return self._row(offsets)[:, _rel(q_len, k_len, device) + span][None]

    def bias_at(self, q_positions, k_positions) -> torch.Tensor:
        """The bias at per-token positions (a padded or packed batch, a padded cache):
        float32 ``(batch, heads, q, k)`` of ``|p_j - p_i|``."""
        device = self.r1.device
        _, k, rel = _positions(q_positions, k_positions, type(self).__name__, device)
        with torch.autocast(device_type=device.type, enabled=False):
            return _gather(self._row(_offsets(k.shape[1], k.shape[1], device)[0]), rel)


# --------------------------------------------------------------------------- Sandwich

class SandwichBias(nn.Module):
    """Sandwich: the inner product of sinusoidal embeddings as a bias, scaled per head.

    Chi et al. add ``(sum_{k=1}^{d'/2} cos((i - j) / 10000^(2k/d')) - d'/2) / (8h/H)``
    to the logits of head ``h = 1 .. H`` (:func:`posenc.distance_bias.sandwich_bias`):
    ``p_i . p_j`` of two ``d'``-wide sinusoidal embeddings, 0 on the diagonal and
    falling with the distance, steepest for the first head. No parameters.

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
        >>> sandwich(5, 9).shape
        torch.Size([1, 8, 5, 9])

    References:
        Chi et al., "Dissecting Transformer Length Extrapolation via the Lens of
        Receptive Field Analysis", ACL 2023 (arXiv 2212.10356), section 5.
    """

    def __init__(self, num_heads: int, dim: int):
        super().__init__()
        what = "SandwichBias"
        self.num_heads = check_num_heads(num_heads, what=what)
        self.dim = check_sandwich_dim(dim, what=what)
        self.register_buffer("_device", torch.empty(0), persistent=False)

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}, dim={self.dim}"

    def forward(self, q_len: int, k_len: int | None = None) -> torch.Tensor:
        q_len, k_len = _lengths(q_len, k_len, type(self).__name__)
        bias = numpy_db.sandwich_bias(self.num_heads, self.dim, q_len, k_len)
        return torch.as_tensor(bias, device=self._device.device)[None]

    def bias_at(self, q_positions, k_positions) -> torch.Tensor:
        """The bias at per-token positions (a padded or packed batch, a padded cache):
        float32 ``(batch, heads, q, k)`` of ``p_j - p_i``, from the float64 row of every
        offset ``-(k - 1) .. k - 1``."""
        device = self._device.device
        _, k, rel = _positions(q_positions, k_positions, type(self).__name__, device)
        n = k.shape[1]
        row = numpy_db.sandwich_at(self.num_heads, self.dim, np.arange(-(n - 1), n))
        return _gather(torch.as_tensor(row, device=device), rel)


# --------------------------------------------------------------------------- FIRE

class FireBias(nn.Module):
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
        >>> fire(1, 20).shape
        torch.Size([1, 8, 1, 20])

    References:
        Li et al., "Functional Interpolation for Relative Positions Improves Long
        Context Transformers", ICLR 2024 (arXiv 2310.04418), section 3.
    """

    def __init__(self, num_heads: int, *, hidden_dim: int = 32, c: float = 0.1,
                 threshold: float = 512.0, eps: float = 1e-6):
        super().__init__()
        what = "FireBias"
        self.num_heads = check_num_heads(num_heads, what=what)
        self.hidden_dim = check_hidden_dim(hidden_dim, what=what)
        self.c_init, self.threshold, self.eps = check_fire_init(c, threshold, eps, what=what)
        self.hidden_kernel = nn.Parameter(torch.empty(1, self.hidden_dim))
        self.hidden_bias = nn.Parameter(torch.empty(self.hidden_dim))
        self.output_kernel = nn.Parameter(torch.empty(self.hidden_dim, self.num_heads))
        self.c = nn.Parameter(torch.empty(()))
        self.threshold_multiplier = nn.Parameter(torch.empty(()))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _linear_init(self.hidden_kernel, self.hidden_bias)
        _linear_init(self.output_kernel, None)
        nn.init.constant_(self.c, self.c_init)
        nn.init.constant_(self.threshold_multiplier, 1.0)

    def extra_repr(self) -> str:
        return (f"num_heads={self.num_heads}, hidden_dim={self.hidden_dim}, c={self.c_init}, "
                f"threshold={self.threshold}, eps={self.eps}")

    def _bias(self, distance: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        """The bias of the distances ``i - j`` ``(..., q, k)`` of queries at ``i``
        ``(..., q)``: ``(..., heads, q, k)`` float32."""
        c = self.c.float()
        limit = (self.threshold_multiplier.float() * self.threshold).abs()
        numerator = torch.log(torch.abs(c * distance.float()) + 1.0)
        denominator = torch.log(torch.abs(c * torch.maximum(query.float(), limit)) + 1.0) + self.eps
        x = (numerator / denominator[..., None])[..., None]                      # (..., q, k, 1)
        h = F.relu(x * self.hidden_kernel.float()[0] + self.hidden_bias.float())
        return (h @ self.output_kernel.float()).movedim(-1, -3)                  # (..., heads, q, k)

    def forward(self, q_len: int, k_len: int | None = None) -> torch.Tensor:
        q_len, k_len = _lengths(q_len, k_len, type(self).__name__)
        device = self.c.device
        with torch.autocast(device_type=device.type, enabled=False):
            query = torch.arange(k_len - q_len, k_len, device=device)            # i
            return self._bias(-_rel(q_len, k_len, device), query)[None]

    def bias_at(self, q_positions, k_positions) -> torch.Tensor:
        """The bias at per-token positions (a padded or packed batch, a padded cache):
        float32 ``(batch, heads, q, k)``. FIRE is not a function of ``p_i - p_j`` alone: its
        interpolation divides by ``psi(max(L, p_i))``, the query's real position."""
        device = self.c.device
        q, _, rel = _positions(q_positions, k_positions, type(self).__name__, device)
        with torch.autocast(device_type=device.type, enabled=False):
            return self._bias(-rel, q)


# --------------------------------------------------------------------------- dynamic

class DynamicPositionBias(nn.Module):
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
        >>> bias(4, 30).shape
        torch.Size([1, 8, 4, 30])

    References:
        Wang (lucidrains), x-transformers, ``DynamicPositionBias``; after Wang et al.,
        "CrossFormer", ICLR 2022, section 3.3.
    """

    def __init__(self, num_heads: int, *, hidden_dim: int = 64, depth: int = 2,
                 log_distance: bool = False):
        super().__init__()
        what = "DynamicPositionBias"
        self.num_heads = check_num_heads(num_heads, what=what)
        self.hidden_dim = check_hidden_dim(hidden_dim, what=what)
        self.depth = check_depth(depth, what=what)
        self.log_distance = check_bool("log_distance", log_distance, what=what)
        for i in range(self.depth):
            fan_in = 1 if i == 0 else self.hidden_dim
            setattr(self, f"kernel_{i}", nn.Parameter(torch.empty(fan_in, self.hidden_dim)))
            setattr(self, f"bias_{i}", nn.Parameter(torch.empty(self.hidden_dim)))
        self.output_kernel = nn.Parameter(torch.empty(self.hidden_dim, self.num_heads))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for i in range(self.depth):
            _linear_init(getattr(self, f"kernel_{i}"), getattr(self, f"bias_{i}"))
        _linear_init(self.output_kernel, None)

    def extra_repr(self) -> str:
        return (f"num_heads={self.num_heads}, hidden_dim={self.hidden_dim}, depth={self.depth}, "
                f"log_distance={self.log_distance}")

    def _row(self, offsets: torch.Tensor) -> torch.Tensor:
        """The MLP at each offset ``j - i``: ``(heads, len(offsets))`` float32."""
        x = -offsets.float()[:, None]                                     # i - j, (n, 1)
        if self.log_distance:
            x = torch.sign(x) * torch.log1p(x.abs())
        for i in range(self.depth):
            x = F.silu(x @ getattr(self, f"kernel_{i}").float()
                       + getattr(self, f"bias_{i}").float())
        return (x @ self.output_kernel.float()).T                         # (heads, n)

    def forward(self, q_len: int, k_len: int | None = None) -> torch.Tensor:
        q_len, k_len = _lengths(q_len, k_len, type(self).__name__)
        device = self.output_kernel.device
        offsets, span = _offsets(q_len, k_len, device)
        with torch.autocast(device_type=device.type, enabled=False):
            return self._row(offsets)[:, _rel(q_len, k_len, device) + span][None]

    def bias_at(self, q_positions, k_positions) -> torch.Tensor:
        """The bias at per-token positions (a padded or packed batch, a padded cache):
        float32 ``(batch, heads, q, k)`` of ``p_j - p_i``, the MLP run once per offset
        ``-(k - 1) .. k - 1``."""
        device = self.output_kernel.device
        _, k, rel = _positions(q_positions, k_positions, type(self).__name__, device)
        with torch.autocast(device_type=device.type, enabled=False):
            return _gather(self._row(_offsets(k.shape[1], k.shape[1], device)[0]), rel)


# --------------------------------------------------------------------------- Swin V2

class ContinuousPositionBias(nn.Module):
    """Swin V2's continuous position bias: an MLP of log-spaced 2D offsets, any window.

    Liu et al. replace Swin's bias table by ``16 * sigmoid(MLP(coords))``, the
    MLP ``2 -> hidden_dim -> num_heads`` (ReLU, no bias on the output layer) run
    on the ``(2H-1) x (2W-1)`` log-spaced offsets of the window
    (:func:`posenc.distance_bias.swinv2_log_coords`), then gathered for each pair
    of patches with :func:`~posenc.torch.swin_relative_index`. The weights do not
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
        relative_position_index: int64 ``(H*W, H*W)`` (constants, not saved).

    Example:
        >>> cpb = ContinuousPositionBias(4, 8)
        >>> cpb(64).shape
        torch.Size([1, 4, 64, 64])
        >>> cpb.resized(12)(144).shape   # the same MLP on a 12 x 12 window
        torch.Size([1, 4, 144, 144])

    References:
        Liu et al., "Swin Transformer V2: Scaling Up Capacity and Resolution",
        CVPR 2022 (arXiv 2111.09883), section 3.3.
    """

    def __init__(self, num_heads: int, window_size, *, hidden_dim: int = 512,
                 pretrained_window=None):
        super().__init__()
        what = "ContinuousPositionBias"
        self.num_heads = check_num_heads(num_heads, what=what)
        self.window_size, self.pretrained_window = check_cpb_window(
            window_size, pretrained_window, what=what)
        self.hidden_dim = check_hidden_dim(hidden_dim, what=what)
        self.hidden_kernel = nn.Parameter(torch.empty(2, self.hidden_dim))
        self.hidden_bias = nn.Parameter(torch.empty(self.hidden_dim))
        self.output_kernel = nn.Parameter(torch.empty(self.hidden_dim, self.num_heads))
        self.register_buffer("relative_coords_table", torch.as_tensor(
            numpy_db.swinv2_log_coords(self.window_size, self.pretrained_window)),
            persistent=False)
        self.register_buffer("relative_position_index", swin_relative_index(*self.window_size),
                             persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _linear_init(self.hidden_kernel, self.hidden_bias)
        _linear_init(self.output_kernel, None)

    def extra_repr(self) -> str:
        return (f"num_heads={self.num_heads}, window_size={self.window_size}, "
                f"hidden_dim={self.hidden_dim}, pretrained_window={self.pretrained_window}")

    def forward(self, q_len: int, k_len: int | None = None) -> torch.Tensor:
        check_window_lengths(q_len, q_len if k_len is None else k_len, self.window_size,
                             what=type(self).__name__)
        with torch.autocast(device_type=self.hidden_bias.device.type, enabled=False):
            coords = self.relative_coords_table.float().reshape(-1, 2)
            h = F.relu(coords @ self.hidden_kernel.float() + self.hidden_bias.float())
            table = SWINV2_GAIN * torch.sigmoid(h @ self.output_kernel.float())
            return table[self.relative_position_index].permute(2, 0, 1)[None]

    def resized(self, new_window) -> "ContinuousPositionBias":
        """A new module for ``new_window`` with the same MLP, its offsets normalised by the
        window it was trained on (``pretrained_window``, else ``window_size``)."""
        out = type(self)(self.num_heads, new_window, hidden_dim=self.hidden_dim,
                         pretrained_window=self.pretrained_window or self.window_size)
        out = out.to(self.hidden_bias.device)
        out.load_state_dict(self.state_dict())
        return out
