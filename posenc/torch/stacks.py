"""Multi-head latent attention with decoupled RoPE (PyTorch face; DeepSeek V2/V3).

The stacks family's layer: :class:`LatentAttention`. The per-layer rules of a
``Transformer(stack=...)`` (windows, chunks, Llama 4's temperature) live in
``posenc/torch/attention.py``; the argument rules, the presets and the formulas in
``posenc/stacks.py``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from posenc._checks import check_embeddings, check_per_token, check_rank
from posenc.attention import LayerCache, check_cache_allowed, future_keys
from posenc.stacks import LatentSettings, hf_latent, latent_settings
from posenc.torch.rotary import RotaryEmbedding

__all__ = ["LatentAttention"]


def _rms_norm(x, scale, eps: float):
    """RMS norm in float32 (DeepSeek's), the scale applied in ``x``'s dtype."""
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return scale.to(x.dtype) * h.to(x.dtype)


class LatentAttention(nn.Module):
    """Multi-head latent attention (MLA) with decoupled RoPE, as DeepSeek V2 and V3.

    The keys and values of every head are rebuilt from one small latent per token,
    ``c = RMSNorm(x W_kv_down)`` of ``kv_lora_rank`` features, which is all a cache
    holds beside one shared rotated key of ``qk_rope_head_dim`` features. RoPE cannot
    act on keys rebuilt from ``c`` (the rotation sits between the query and key
    projections, so the up-projection could no longer be folded into the query), so
    each head's query and key are split: ``qk_nope_head_dim`` features without
    position, from ``c``, and ``qk_rope_head_dim`` rotated ones, the key's shared by
    every head (DeepSeek-V2, section 2.1.3). Under YaRN (``rope_scaling`` with
    ``mscale`` and ``mscale_all_dim``) the cos and sin carry
    ``mscale(factor, mscale) / mscale(factor, mscale_all_dim)`` and the softmax scale
    ``mscale(factor, mscale_all_dim)^2`` (:func:`posenc.stacks.latent_softmax_scale`),
    as Hugging Face's ``DeepseekV3Attention``.

    Args:
        dim: model width.
        heads: number of heads.
        kv_lora_rank: width of the cached latent (DeepSeek: 512).
        qk_rope_head_dim: rotated features of each head's query and key (64), even.
        qk_nope_head_dim: features of each head's query and key without position (128).
        v_head_dim: value features per head; default ``qk_nope_head_dim``.
        q_lora_rank: the query's low-rank width (DeepSeek V2 and V3: 1536), or ``None``
            (default) for one ``(dim, heads * (qk_nope_head_dim + qk_rope_head_dim))``
            projection.
        base: RoPE's base (10000).
        rope_scaling: a Hugging Face ``rope_scaling`` dict (DeepSeek V3's YaRN:
            :func:`posenc.stacks.deepseek_latent`), or ``None``.
        rope_layout: ``"interleaved"`` (default: DeepSeek's checkpoints) or ``"half"``.
        causal: causal attention (default ``True``).
        max_len: the rotary cache's first size (512).
        norm_eps: the RMS norms' epsilon (1e-6).

    Call arguments:
        x: ``(batch, seq, dim)``.
        cache: a :class:`posenc.attention.LayerCache` (:meth:`new_cache`): it holds the
            latents (``cache.keys``, ``(batch, 1, seq, kv_lora_rank)``) and the rotated
            shared keys (``cache.values``, ``(batch, 1, seq, qk_rope_head_dim)``).
        positions: optional ``(seq,)`` or ``(batch, seq)`` absolute positions (default
            ``offset .. offset + seq - 1``, the offset being the cached length); the
            causal mask still follows the order of the tokens.
        return_attention: also return the float32 ``(batch, heads, seq, k_len)`` weights.

    Returns:
        ``(batch, seq, dim)`` in ``x``'s dtype; with ``return_attention``,
        ``(output, weights)``.

    Weights:
        query_kernel ``(dim, heads * qk_head_dim)``, or query_down_kernel
        ``(dim, q_lora_rank)``, query_norm_scale, query_up_kernel; kv_down_kernel
        ``(dim, kv_lora_rank + qk_rope_head_dim)``, kv_norm_scale, kv_up_kernel
        ``(kv_lora_rank, heads * (qk_nope_head_dim + v_head_dim))``, output_kernel
        ``(heads * v_head_dim, dim)``; each applied as ``x @ kernel``, no biases.

    Example:
        >>> mla = LatentAttention(64, 4, kv_lora_rank=16, qk_rope_head_dim=8,
        ...                       qk_nope_head_dim=8)
        >>> x = torch.randn(2, 10, 64)
        >>> cache = mla.new_cache()
        >>> steps = torch.cat([mla(x[:, i:i + 1], cache=cache) for i in range(10)], 1)
        >>> torch.allclose(steps, mla(x), atol=1e-5), tuple(cache.keys.shape)
        (True, (2, 1, 10, 16))

    References:
        DeepSeek-AI, "DeepSeek-V2: A Strong, Economical, and Efficient Mixture-of-Experts
        Language Model", arXiv:2405.04434, 2024 (section 2.1).
        Peng et al., "YaRN: Efficient Context Window Extension of Large Language Models",
        ICLR 2024.
    """

    def __init__(self, dim: int, heads: int, *, kv_lora_rank: int, qk_rope_head_dim: int,
                 qk_nope_head_dim: int, v_head_dim=None, q_lora_rank=None,
                 base: float = 10000.0, rope_scaling=None, rope_layout: str = "interleaved",
                 causal: bool = True, max_len: int = 512, norm_eps: float = 1e-6):
        super().__init__()
        s = latent_settings(dim, heads, kv_lora_rank, q_lora_rank, qk_nope_head_dim,
                            qk_rope_head_dim, v_head_dim, base, rope_scaling, rope_layout,
                            causal, max_len, norm_eps)
        self.settings: LatentSettings = s
        self.dim, self.heads, self.causal = s.dim, s.heads, s.causal
        self.kv_lora_rank, self.q_lora_rank = s.kv_lora_rank, s.q_lora_rank
        self.qk_nope_head_dim, self.qk_rope_head_dim = s.qk_nope_head_dim, s.qk_rope_head_dim
        self.v_head_dim, self.qk_head_dim = s.v_head_dim, s.qk_head_dim
        self.softmax_scale = s.softmax_scale
        # the arguments as given (for the config; ``settings`` holds them checked)
        self.base = float(base)
        self.rope_scaling = None if rope_scaling is None else dict(rope_scaling)

        def weight(*shape):
            return nn.Parameter(torch.empty(*shape))

        q_width = s.heads * s.qk_head_dim
        if s.q_lora_rank is None:
            self.query_kernel = weight(s.dim, q_width)
        else:
            self.query_down_kernel = weight(s.dim, s.q_lora_rank)
            self.query_norm_scale = nn.Parameter(torch.ones(s.q_lora_rank))
            self.query_up_kernel = weight(s.q_lora_rank, q_width)
        self.kv_down_kernel = weight(s.dim, s.kv_lora_rank + s.qk_rope_head_dim)
        self.kv_norm_scale = nn.Parameter(torch.ones(s.kv_lora_rank))
        self.kv_up_kernel = weight(s.kv_lora_rank, s.heads * (s.qk_nope_head_dim + s.v_head_dim))
        self.output_kernel = weight(s.heads * s.v_head_dim, s.dim)
        self.rotary = RotaryEmbedding(s.qk_rope_head_dim, base=s.base, scaling=s.rope_scaling,
                                      layout=s.rope_layout, max_len=s.max_len)
        self.reset_parameters()

    @classmethod
    def from_hf_config(cls, config, **kwargs) -> "LatentAttention":
        """The layer of a Hugging Face DeepSeek V2/V3 config (:func:`posenc.stacks.hf_latent`);
        ``kwargs`` (``max_len``, ``causal``) pass on."""
        return cls(**hf_latent(config), **kwargs)

    def reset_parameters(self) -> None:
        """Glorot-uniform kernels, unit norm scales."""
        for name, p in self.named_parameters(recurse=False):
            if name.endswith("kernel"):
                nn.init.xavier_uniform_(p)
            else:
                nn.init.ones_(p)

    def extra_repr(self) -> str:
        s = self.settings
        return (f"dim={s.dim}, heads={s.heads}, kv_lora_rank={s.kv_lora_rank}, "
                f"q_lora_rank={s.q_lora_rank}, qk_nope_head_dim={s.qk_nope_head_dim}, "
                f"qk_rope_head_dim={s.qk_rope_head_dim}, v_head_dim={s.v_head_dim}")

    def new_cache(self) -> LayerCache:
        """An empty cache of latents for decoding chunk by chunk (causal only)."""
        check_cache_allowed(self.causal, what=type(self).__name__)
        return LayerCache()

    def _split(self, y, width):
        batch, seq = y.shape[0], y.shape[1]
        return y.view(batch, seq, self.heads, width).transpose(1, 2)

    def forward(self, x: torch.Tensor, *, cache: LayerCache | None = None, positions=None,
                return_attention: bool = False):
        what = type(self).__name__
        check_embeddings(x.shape, self.dim, what=what)
        check_rank("x", x.shape, 3, what=what, fix="pass (batch, seq, dim) embeddings")
        if cache is not None:
            check_cache_allowed(self.causal, what=what)
        if positions is not None:
            shape = getattr(positions, "shape", None)
            check_per_token("positions", (len(positions),) if shape is None else tuple(shape),
                            tuple(x.shape), what=what)
        offset = 0 if cache is None else cache.length
        eps = self.settings.norm_eps

        def mm(a, kernel):
            return a @ kernel.to(a.dtype)

        if self.q_lora_rank is None:
            q = mm(x, self.query_kernel)
        else:
            q = mm(_rms_norm(mm(x, self.query_down_kernel), self.query_norm_scale, eps),
                   self.query_up_kernel)
        q = self._split(q, self.qk_head_dim)
        q_pass, q_rot = q.split([self.qk_nope_head_dim, self.qk_rope_head_dim], dim=-1)
        compressed = mm(x, self.kv_down_kernel)
        latent, k_rot = compressed.split([self.kv_lora_rank, self.qk_rope_head_dim], dim=-1)
        latent = _rms_norm(latent, self.kv_norm_scale, eps)[:, None]      # (b, 1, s, r)
        k_rot = k_rot[:, None]                                            # (b, 1, s, rope)
        q_rot, k_rot = self.rotary(q_rot, k_rot, offset=offset, positions=positions)
        if cache is not None:
            latent, k_rot = cache.append(latent, k_rot, lambda t: torch.cat(t, dim=-2))
        kv = mm(latent[:, 0], self.kv_up_kernel)
        kv = self._split(kv, self.qk_nope_head_dim + self.v_head_dim)
        k_pass, v = kv.split([self.qk_nope_head_dim, self.v_head_dim], dim=-1)
        k = torch.cat([k_pass, k_rot.expand(-1, self.heads, -1, -1)], dim=-1)
        q = torch.cat([q_pass, q_rot], dim=-1)
        q_len, k_len = q.shape[-2], k.shape[-2]
        with torch.autocast(device_type=x.device.type, enabled=False):
            logits = (q.float() @ k.float().transpose(-1, -2)) * self.softmax_scale
            if self.causal:
                future = future_keys(q_len, k_len, lambda n: torch.arange(n, device=x.device))
                logits = logits.masked_fill(future, float("-inf"))
            weights = torch.softmax(logits, dim=-1)
            z = weights @ v.float()
        z = z.to(x.dtype).transpose(1, 2).flatten(-2)
        out = mm(z, self.output_kernel)
        return (out, weights) if return_attention else out
