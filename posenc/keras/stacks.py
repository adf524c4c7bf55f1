"""Multi-head latent attention with decoupled RoPE (Keras face; DeepSeek V2/V3).

Mirrors ``posenc/torch/stacks.py`` with ``keras.ops`` only: :class:`LatentAttention`.
The per-layer rules of a ``Transformer(stack=...)`` live in ``posenc/keras/attention.py``;
the argument rules, the presets and the formulas in ``posenc/stacks.py``.
"""

from __future__ import annotations

import keras
from keras import ops

from posenc._checks import check_embeddings, check_per_token, check_rank
from posenc.attention import LayerCache, check_cache_allowed, future_keys
from posenc.keras._util import dtype_of
from posenc.keras.rotary import RotaryEmbedding
from posenc.stacks import LATENT_OPTIONS, LatentSettings, hf_latent, latent_settings

__all__ = ["LatentAttention"]


def _rms_norm(x, scale, eps: float):
    """RMS norm in float32 (DeepSeek's), the scale applied in ``x``'s dtype."""
    h = ops.cast(x, "float32")
    h = h * ops.rsqrt(ops.mean(ops.square(h), axis=-1, keepdims=True) + eps)
    return ops.cast(scale, dtype_of(x)) * ops.cast(h, dtype_of(x))


@keras.saving.register_keras_serializable(package="posenc")
class LatentAttention(keras.layers.Layer):
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
    as Hugging Face's ``DeepseekV3Attention``. Logits and softmax in float32.

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
        x: ``(batch, seq, dim)`` (``seq`` static).
        cache: a :class:`posenc.attention.LayerCache` (:meth:`new_cache`): it holds the
            latents (``cache.keys``, ``(batch, 1, seq, kv_lora_rank)``) and the rotated
            shared keys (``cache.values``, ``(batch, 1, seq, qk_rope_head_dim)``).
        positions: optional ``(seq,)`` or ``(batch, seq)`` absolute positions (default
            ``offset .. offset + seq - 1``, the offset being the cached length); the
            causal mask still follows the order of the tokens.
        return_attention: also return the float32 ``(batch, heads, seq, k_len)`` weights.

    Returns:
        ``(batch, seq, dim)`` in the compute dtype; with ``return_attention``,
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
        >>> x = keras.random.normal((2, 10, 64), seed=0)
        >>> cache = mla.new_cache()
        >>> steps = keras.ops.concatenate([mla(x[:, i:i + 1], cache=cache)
        ...                                for i in range(10)], 1)
        >>> bool(keras.ops.all(keras.ops.isclose(steps, mla(x), atol=1e-5)))
        True

    References:
        DeepSeek-AI, "DeepSeek-V2: A Strong, Economical, and Efficient Mixture-of-Experts
        Language Model", arXiv:2405.04434, 2024 (section 2.1).
        Peng et al., "YaRN: Efficient Context Window Extension of Large Language Models",
        ICLR 2024.
    """

    def __init__(self, dim: int, heads: int, *, kv_lora_rank: int, qk_rope_head_dim: int,
                 qk_nope_head_dim: int, v_head_dim=None, q_lora_rank=None,
                 base: float = 10000.0, rope_scaling=None, rope_layout: str = "interleaved",
                 causal: bool = True, max_len: int = 512, norm_eps: float = 1e-6, **kwargs):
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
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
        glorot, ones = keras.initializers.GlorotUniform, keras.initializers.Ones

        def weight(name, shape, init):
            return self.add_weight(name=name, shape=shape, initializer=init())

        q_width = s.heads * s.qk_head_dim
        if s.q_lora_rank is None:
            self.query_kernel = weight("query_kernel", (s.dim, q_width), glorot)
        else:
            self.query_down_kernel = weight("query_down_kernel", (s.dim, s.q_lora_rank), glorot)
            self.query_norm_scale = weight("query_norm_scale", (s.q_lora_rank,), ones)
            self.query_up_kernel = weight("query_up_kernel", (s.q_lora_rank, q_width), glorot)
        self.kv_down_kernel = weight("kv_down_kernel",
                                     (s.dim, s.kv_lora_rank + s.qk_rope_head_dim), glorot)
        self.kv_norm_scale = weight("kv_norm_scale", (s.kv_lora_rank,), ones)
        self.kv_up_kernel = weight("kv_up_kernel", (s.kv_lora_rank, s.heads * (
            s.qk_nope_head_dim + s.v_head_dim)), glorot)
        self.output_kernel = weight("output_kernel", (s.heads * s.v_head_dim, s.dim), glorot)
        self.rotary = RotaryEmbedding(s.qk_rope_head_dim, base=s.base, scaling=s.rope_scaling,
                                      layout=s.rope_layout, max_len=s.max_len,
                                      dtype=self.dtype_policy)
        self.built = True

    @classmethod
    def from_hf_config(cls, config, **kwargs) -> "LatentAttention":
        """The layer of a Hugging Face DeepSeek V2/V3 config (:func:`posenc.stacks.hf_latent`);
        ``kwargs`` (``max_len``, ``causal``) pass on."""
        return cls(**hf_latent(config), **kwargs)

    def get_config(self):
        config = super().get_config()
        s = self.settings
        config.update({"dim": s.dim, "heads": s.heads,
                       **{name: getattr(s, name) for name in LATENT_OPTIONS},
                       "base": self.base, "rope_scaling": self.rope_scaling})
        return config

    def new_cache(self) -> LayerCache:
        """An empty cache of latents for decoding chunk by chunk (causal only)."""
        check_cache_allowed(self.causal, what=type(self).__name__)
        return LayerCache()

    def compute_output_shape(self, input_shape):
        return input_shape

    def compute_output_spec(self, x, cache=None, positions=None, return_attention=False):
        out = keras.KerasTensor(x.shape, dtype=self.compute_dtype)
        if return_attention:
            return out, keras.KerasTensor((x.shape[0], self.heads, x.shape[1], x.shape[1]),
                                          dtype="float32")
        return out

    def _split(self, y, width):
        batch, seq = ops.shape(y)[0], ops.shape(y)[1]
        return ops.transpose(ops.reshape(y, (batch, seq, self.heads, width)), (0, 2, 1, 3))

    def call(self, x, cache=None, positions=None, return_attention=False):
        what = type(self).__name__
        x = ops.convert_to_tensor(x)
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
        x = ops.cast(x, self.compute_dtype)

        def mm(a, kernel):
            return ops.matmul(a, ops.cast(kernel, dtype_of(a)))

        if self.q_lora_rank is None:
            q = mm(x, self.query_kernel)
        else:
            q = mm(_rms_norm(mm(x, self.query_down_kernel), self.query_norm_scale, eps),
                   self.query_up_kernel)
        q = self._split(q, self.qk_head_dim)
        q_pass, q_rot = q[..., :self.qk_nope_head_dim], q[..., self.qk_nope_head_dim:]
        compressed = mm(x, self.kv_down_kernel)
        latent = _rms_norm(compressed[..., :self.kv_lora_rank], self.kv_norm_scale, eps)
        latent = latent[:, None]                                          # (b, 1, s, r)
        k_rot = compressed[:, None, :, self.kv_lora_rank:]                 # (b, 1, s, rope)
        q_rot, k_rot = self.rotary(q_rot, k_rot, offset=offset, positions=positions)
        if cache is not None:
            latent, k_rot = cache.append(latent, k_rot, lambda t: ops.concatenate(t, axis=-2))
        kv = self._split(mm(latent[:, 0], self.kv_up_kernel),
                         self.qk_nope_head_dim + self.v_head_dim)
        k_pass, v = kv[..., :self.qk_nope_head_dim], kv[..., self.qk_nope_head_dim:]
        shape = ops.shape(k_pass)
        k = ops.concatenate([k_pass, ops.broadcast_to(
            k_rot, (shape[0], self.heads, shape[2], self.qk_rope_head_dim))], axis=-1)
        q = ops.concatenate([q_pass, q_rot], axis=-1)
        q_len, k_len = q.shape[-2], k.shape[-2]
        logits = ops.matmul(ops.cast(q, "float32"),
                            ops.swapaxes(ops.cast(k, "float32"), -1, -2)) * self.softmax_scale
        if self.causal:
            future = future_keys(q_len, k_len, lambda n: ops.arange(n, dtype="int32"))
            logits = ops.where(future, float("-inf"), logits)
        weights = ops.softmax(logits, axis=-1) if k_len != 1 else ops.ones_like(logits)
        z = ops.matmul(weights, ops.cast(v, "float32"))
        z = ops.cast(z, self.compute_dtype)
        z = ops.reshape(ops.transpose(z, (0, 2, 1, 3)),
                        (ops.shape(x)[0], ops.shape(x)[1], self.heads * self.v_head_dim))
        out = mm(z, self.output_kernel)
        return (out, weights) if return_attention else out
