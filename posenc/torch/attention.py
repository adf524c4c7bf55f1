"""Multi-head attention and a small Transformer with every positional scheme (PyTorch face).

``MultiHeadAttention(dim, heads, position=...)`` and ``Transformer(vocab_size,
position=...)`` take the scheme by name (:data:`posenc.attention.POSITIONS`);
each scheme enters by its route: an encoding added to the token embeddings
(the ``Transformer`` adds it), the rotation of queries and keys, a bias on the
logits, or Shaw et al.'s relative keys and values. The attention itself runs
on ``torch.nn.functional.scaled_dot_product_attention`` with the bias as a
float ``attn_mask``; an explicit path (softmax of the logits) serves
``return_attention=True``, and Shaw's relative keys and values run on the core of
``shaw_attention`` (``posenc/torch/shaw.py``). The registry, the option
rules, their checks and the cache are in ``posenc/attention.py``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from posenc._checks import check_embeddings, check_rank
from posenc.attention import (
    check_cache_allowed,
    check_tokens,
    NORM_EPS,
    POSITIONS,
    Cache,
    LayerCache,
    Settings,
    attention_settings,
    given_options,
    route_layer,
    future_keys,
    transformer_settings,
)
from posenc.learned import TABLE_INIT_STD
from posenc.torch._util import dtype_of
from posenc.torch.bias import ALiBiBias, SwinRelativeBias, T5RelativeBias
from posenc.torch.learned import HybridEncoding, LearnedEncoding
from posenc.torch.rotary import RotaryEmbedding
from posenc.torch.shaw import relative_attention, relative_tables, reset_relative_tables
from posenc.torch.sinusoidal import SinusoidalEncoding

__all__ = ["MultiHeadAttention", "Transformer"]


# --------------------------------------------------------------------------- each route's parts
# A registry per route: what a scheme adds to the embeddings, and to the attention.

# The classes that carry a route's scheme (posenc.attention.ROUTE_LAYERS names them).
_CLASSES = {cls.__name__: cls for cls in (SinusoidalEncoding, LearnedEncoding, HybridEncoding,
                                          ALiBiBias, T5RelativeBias, SwinRelativeBias,
                                          RotaryEmbedding)}


def _layer_norm(x, scale, bias):
    if not torch.is_autocast_enabled():
        scale, bias = scale.to(x.dtype), bias.to(x.dtype)
    return F.layer_norm(x, (x.shape[-1],), scale, bias, NORM_EPS)


# --------------------------------------------------------------------------- attention

class MultiHeadAttention(nn.Module):
    """Multi-head self-attention with a positional scheme chosen by name.

    Projects ``x`` to queries, keys and values, splits them into ``heads``
    heads of ``dim // heads`` features, attends and projects back. The scheme
    (:data:`posenc.attention.POSITIONS`) enters by its route: ``"rope"``
    rotates the queries and keys (:class:`RotaryEmbedding`), ``"alibi"``,
    ``"t5"`` and ``"swin"`` add their bias to the logits (:class:`ALiBiBias`,
    :class:`T5RelativeBias`, :class:`SwinRelativeBias`), ``"shaw"`` adds
    relative keys and values (:func:`shaw_attention`). The absolute schemes
    (``"sinusoidal"``, ``"learned"``, ``"hybrid"``) and ``"none"`` leave this
    layer plain attention: the :class:`Transformer` adds them to its embeddings.

    The attention runs on ``torch.nn.functional.scaled_dot_product_attention``
    (the bias and the causal mask as a float ``attn_mask``: a float mask
    materialises ``(1, heads, q_len, k_len)`` and rules out the FlashAttention
    kernel on a GPU, so a bias scheme is not free there); with
    ``return_attention=True`` on an explicit softmax in float32; ``"shaw"`` on the
    core of :func:`shaw_attention` (float32). The key projection has no bias (without RoPE it would add one
    constant to each row of logits, which the softmax ignores; under RoPE the rotated bias
    depends on the key's position, so it would not cancel, and no bias is used either).

    Args:
        dim: model width; must equal ``x.shape[-1]``.
        heads: number of heads; must divide ``dim``.
        position: a name of :data:`posenc.attention.POSITIONS`. Default ``"none"``.
        causal: each position attends only to itself and the ones before it.
            Default ``False``.
        max_len: the longest sequence (the rotary cache's first size). Default 512.
        dropout: dropout rate of the attention weights. Default 0.
        base: ``"rope"``'s wavelength base (10000).
        rope_scaling: ``"rope"``'s Hugging Face ``rope_scaling`` dict, or ``None``.
        rope_layout: ``"rope"``'s ``"half"`` (default) or ``"interleaved"``.
        max_distance: ``"shaw"``'s clipping distance (16); ``"t5"``'s distance
            where the last bucket starts (128).
        num_buckets: ``"t5"``'s number of buckets (32).
        grid: ``"swin"``'s ``(height, width)``; the sequence must hold
            ``height * width`` patches. Each scheme option is for the schemes named
            (another scheme refuses it); ``None`` means its default.

    Call arguments:
        x: ``(batch, seq, dim)`` embeddings.
        cache: a :class:`posenc.attention.LayerCache` (:meth:`new_cache`), causal only:
            ``x`` continues the cached positions, and its keys and values join the cache.
        return_attention: also return the ``(batch, heads, seq, k_len)`` weights.

    Returns:
        Tensor of the shape and dtype of ``x``; with ``return_attention=True``,
        ``(output, weights)``, the weights in float32.

    Weights:
        query_kernel, key_kernel, value_kernel, output_kernel: ``(dim, dim)``,
        applied as ``x @ kernel``; query_bias, value_bias, output_bias: ``(dim,)``;
        the scheme's own (``position_bias.*``, ``key_table``, ``value_table``).

    Example:
        >>> attn = MultiHeadAttention(32, 4, position="alibi", causal=True)
        >>> attn(torch.randn(2, 10, 32)).shape
        torch.Size([2, 10, 32])

    References:
        Vaswani et al., "Attention Is All You Need", NeurIPS 2017.
    """

    def __init__(self, dim: int, heads: int, *, position: str = "none", causal: bool = False,
                 max_len: int = 512, dropout: float = 0.0, base=None, rope_scaling=None,
                 rope_layout=None, max_distance=None, num_buckets=None, grid=None):
        super().__init__()
        self._setup(attention_settings(dim, heads, position, causal, max_len, dropout,
                                       given_options(base, rope_scaling, rope_layout,
                                                     max_distance, num_buckets, grid),
                                       what="MultiHeadAttention"))

    @classmethod
    def from_settings(cls, settings: Settings) -> "MultiHeadAttention":
        """The layer for :class:`posenc.attention.Settings` checked already (a
        ``Transformer``'s): nothing is checked again."""
        layer = cls.__new__(cls)
        nn.Module.__init__(layer)
        layer._setup(settings)
        return layer

    def _setup(self, s: Settings) -> None:
        self.settings = s
        self.dim, self.heads, self.head_dim = s.dim, s.heads, s.head_dim
        self.position, self.route, self.causal = s.position, s.route, s.causal
        self.scheme = POSITIONS[s.position]
        self.max_len, self.dropout, self.options = s.max_len, s.dropout, s.options
        for name in ("query", "key", "value", "output"):
            setattr(self, f"{name}_kernel", nn.Parameter(torch.empty(self.dim, self.dim)))
        for name in ("query", "value", "output"):
            setattr(self, f"{name}_bias", nn.Parameter(torch.zeros(self.dim)))
        self.position_bias = route_layer(s, "bias", _CLASSES)
        self.rotary = route_layer(s, "rotary", _CLASSES)
        if self.route == "relative":
            relative_tables(self, self.options["max_distance"], self.head_dim)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot-uniform kernels, zero biases, relative tables from N(0, 0.02^2)."""
        for name in ("query", "key", "value", "output"):
            nn.init.xavier_uniform_(getattr(self, f"{name}_kernel"))
        for name in ("query", "value", "output"):
            nn.init.zeros_(getattr(self, f"{name}_bias"))
        if self.route == "relative":
            reset_relative_tables(self)

    def extra_repr(self) -> str:
        options = "".join(f", {k}={v!r}" for k, v in self.options.items())
        return (f"dim={self.dim}, heads={self.heads}, position={self.position!r}, "
                f"causal={self.causal}{options}")

    def new_cache(self) -> LayerCache:
        """An empty cache for decoding chunk by chunk (causal attention only)."""
        check_cache_allowed(self.causal, what=type(self).__name__)
        return LayerCache()

    def position_weights(self) -> list[nn.Parameter]:
        """The weights that belong to the positional scheme (bias tables, Shaw's tables)."""
        out = [] if self.position_bias is None else list(self.position_bias.parameters())
        if self.route == "relative":
            out += [self.key_table, self.value_table]
        return out

    def _heads(self, x, kernel, bias=None):
        """``x @ kernel (+ bias)`` split into ``(batch, heads, seq, head_dim)``."""
        y = x @ (kernel if torch.is_autocast_enabled() else kernel.to(x.dtype))
        if bias is not None:
            y = y + bias.to(y.dtype)
        return y.unflatten(-1, (self.heads, self.head_dim)).transpose(1, 2)

    def forward(self, x: torch.Tensor, *, cache: LayerCache | None = None,
                return_attention: bool = False):
        what = type(self).__name__
        check_embeddings(x.shape, self.dim, what=what)
        check_rank("x", x.shape, 3, what=what, fix="pass (batch, seq, dim) embeddings")
        if cache is not None:
            check_cache_allowed(self.causal, what=what)
        offset = 0 if cache is None else cache.length
        batch, seq = x.shape[0], x.shape[1]
        if self.scheme.check_seq is not None:
            self.scheme.check_seq(self.options, seq, what)
        if seq == 0:
            return (x, x.new_zeros(batch, self.heads, 0, offset).float()) \
                if return_attention else x
        q = self._heads(x, self.query_kernel, self.query_bias)
        k = self._heads(x, self.key_kernel)
        v = self._heads(x, self.value_kernel, self.value_bias)
        if self.rotary is not None:
            q, k = self.rotary(q, k, offset=offset)
        if cache is not None:
            k, v = cache.append(k, v, lambda t: torch.cat(t, dim=-2))
        dropout = self.dropout if self.training else 0.0
        weights = None
        if self.route == "relative":
            drop = (lambda w: F.dropout(w, dropout)) if dropout > 0 else None
            z = relative_attention(q, k, v, self.key_table, self.value_table,
                                   self.options["max_distance"], causal=self.causal, drop=drop,
                                   return_weights=return_attention)
            z, weights = z if return_attention else (z, None)
        elif return_attention:
            z, weights = self._explicit(q, k, v, dropout)
        else:
            z = self._fused(q, k, v, dropout)
        z = z.transpose(1, 2).flatten(-2)
        out = _linear(z, self.output_kernel, self.output_bias)
        return (out, weights) if return_attention else out


    def _logit_bias(self, q_len: int, k_len: int, device):
        """The scheme's bias plus the causal mask, float32 ``(1, heads, q_len, k_len)``, or
        ``None`` when there is neither."""
        bias = None if self.position_bias is None else self.position_bias(q_len, k_len)
        if self.causal:
            future = future_keys(q_len, k_len, lambda n: torch.arange(n, device=device))
            if bias is None:
                bias = torch.zeros(1, 1, q_len, k_len, device=device)
            bias = bias.to(device).masked_fill(future, float("-inf"))
        return bias

    def _fused(self, q, k, v, dropout: float):
        q_len, k_len = q.shape[-2], k.shape[-2]
        if self.position_bias is None and self.causal and q_len == k_len:
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=True)
        bias = self._logit_bias(q_len, k_len, q.device)
        mask = None if bias is None else bias.to(q.dtype)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)

    def _explicit(self, q, k, v, dropout: float):
        """Softmax attention in float32 with autocast off: (output, float32 weights)."""
        with torch.autocast(device_type=q.device.type, enabled=False):
            logits = (q.float() * self.head_dim ** -0.5) @ k.float().transpose(-1, -2)
            bias = self._logit_bias(q.shape[-2], k.shape[-2], q.device)
            if bias is not None:
                logits = logits + bias
            weights = torch.softmax(logits, dim=-1)
            dropped = F.dropout(weights, dropout) if dropout > 0 else weights
            z = dropped @ v.float()
        return z.to(q.dtype), weights


# --------------------------------------------------------------------------- the model

class _Block(nn.Module):
    """One pre-norm block: ``x + attention(norm(x))``, then ``x + mlp(norm(x))``."""

    def __init__(self, s: Settings):
        super().__init__()
        dim, mlp_dim = s.dim, s.mlp_dim
        self.attention_norm_scale = nn.Parameter(torch.ones(dim))
        self.attention_norm_bias = nn.Parameter(torch.zeros(dim))
        self.attention = MultiHeadAttention.from_settings(s)
        self.mlp_norm_scale = nn.Parameter(torch.ones(dim))
        self.mlp_norm_bias = nn.Parameter(torch.zeros(dim))
        self.mlp_hidden_kernel = nn.Parameter(torch.empty(dim, mlp_dim))
        self.mlp_hidden_bias = nn.Parameter(torch.zeros(mlp_dim))
        self.mlp_output_kernel = nn.Parameter(torch.empty(mlp_dim, dim))
        self.mlp_output_bias = nn.Parameter(torch.zeros(dim))
        nn.init.xavier_uniform_(self.mlp_hidden_kernel)
        nn.init.xavier_uniform_(self.mlp_output_kernel)
        self.dropout = s.dropout
        self.residual_dropout = nn.Dropout(s.dropout)

    def forward(self, x, cache=None, return_attention=False):
        h = _layer_norm(x, self.attention_norm_scale, self.attention_norm_bias)
        h = self.attention(h, cache=cache, return_attention=return_attention)
        h, weights = h if return_attention else (h, None)
        x = x + self.residual_dropout(h)
        h = _layer_norm(x, self.mlp_norm_scale, self.mlp_norm_bias)
        h = F.gelu(_linear(h, self.mlp_hidden_kernel, self.mlp_hidden_bias))
        x = x + self.residual_dropout(_linear(h, self.mlp_output_kernel, self.mlp_output_bias))
        return x, weights


def _linear(x, kernel, bias):
    """``x @ kernel + bias`` in ``x``'s dtype (autocast's, under autocast)."""
    y = x @ (kernel if torch.is_autocast_enabled() else kernel.to(x.dtype))
    return y + bias.to(y.dtype)


class Transformer(nn.Module):
    """A small pre-norm Transformer language model (or encoder) with any positional scheme.

    Token embeddings, the scheme's encoding added to them when its route is
    the embeddings (``"sinusoidal"``, ``"learned"``, ``"hybrid"``), ``depth``
    pre-norm blocks (:class:`MultiHeadAttention` with the scheme, then a GELU
    MLP, each added back to the residual stream), a final layer norm and a
    linear head to ``vocab_size`` logits. ``causal=True`` (default) makes it
    a decoder that can decode with a cache (:meth:`new_cache`); ``causal=False``
    an encoder (``"swin"`` is for encoders on a patch grid).

    Args:
        vocab_size: number of token ids.
        dim: model width. Default 64.
        depth: number of blocks. Default 2.
        heads: attention heads; must divide ``dim``. Default 4.
        mlp_dim: hidden width of the MLP. Default ``4 * dim``.
        causal: decoder (``True``, default) or encoder.
        position: a name of :data:`posenc.attention.POSITIONS`. Default ``"rope"``.
        max_len: rows of a learned table (``"learned"``, ``"hybrid"``); the rotary
            cache's first size. Default 512.
        dropout: dropout rate (embeddings, attention weights, residual branches).
            Default 0.
        base, rope_scaling, rope_layout, max_distance, num_buckets, grid: the
            scheme's options, as in :class:`MultiHeadAttention` (``base`` also
            for ``"sinusoidal"`` and ``"hybrid"``); ``None`` means its default.

    Call arguments:
        tokens: int ``(batch, seq)`` token ids.
        cache: a :class:`posenc.attention.Cache` from :meth:`new_cache` (causal only):
            ``tokens`` continue the cached positions; the cache grows in place.
        return_hidden: also return the hidden states: a list of ``depth + 1``
            ``(batch, seq, dim)`` tensors, the embedding output then each block's.
        return_attention: also return a list per layer of the
            ``(batch, heads, seq, k_len)`` attention weights (float32).

    Returns:
        float ``(batch, seq, vocab_size)`` logits; ``(logits, hidden)``,
        ``(logits, attention)`` or ``(logits, hidden, attention)`` when asked.

    Example:
        >>> model = Transformer(100, position="alibi")
        >>> tokens = torch.randint(0, 100, (2, 12))
        >>> model(tokens).shape
        torch.Size([2, 12, 100])
        >>> cache = model.new_cache()
        >>> steps = [model(tokens[:, i:i + 1], cache=cache) for i in range(12)]
        >>> torch.allclose(torch.cat(steps, 1), model(tokens), atol=1e-5)
        True

    References:
        Vaswani et al., "Attention Is All You Need", NeurIPS 2017.
        Xiong et al., "On Layer Normalization in the Transformer Architecture",
        ICML 2020 (pre-norm).
    """

    def __init__(self, vocab_size: int, *, dim: int = 64, depth: int = 2, heads: int = 4,
                 mlp_dim=None, causal: bool = True, position: str = "rope", max_len: int = 512,
                 dropout: float = 0.0, base=None, rope_scaling=None, rope_layout=None,
                 max_distance=None, num_buckets=None, grid=None):
        super().__init__()
        s = transformer_settings(vocab_size, dim, depth, heads, mlp_dim, causal, position,
                                 max_len, dropout, given_options(base, rope_scaling, rope_layout,
                                                                 max_distance, num_buckets, grid))
        self.settings = s
        self.vocab_size, self.dim, self.depth = s.vocab_size, s.dim, s.depth
        self.heads, self.mlp_dim, self.causal = s.heads, s.mlp_dim, s.causal
        self.position, self.route, self.max_len = s.position, s.route, s.max_len
        self.scheme = POSITIONS[s.position]
        self.dropout, self.options = s.dropout, s.options
        self.token_embedding = nn.Parameter(torch.empty(self.vocab_size, self.dim))
        nn.init.normal_(self.token_embedding, std=TABLE_INIT_STD)
        self.position_encoding = route_layer(s, "embedding", _CLASSES)
        self.embedding_dropout = nn.Dropout(s.dropout)
        self.blocks = nn.ModuleList([_Block(s) for _ in range(self.depth)])
        self.norm_scale = nn.Parameter(torch.ones(self.dim))
        self.norm_bias = nn.Parameter(torch.zeros(self.dim))
        self.output_kernel = nn.Parameter(torch.empty(self.dim, self.vocab_size))
        self.output_bias = nn.Parameter(torch.zeros(self.vocab_size))
        nn.init.xavier_uniform_(self.output_kernel)

    def extra_repr(self) -> str:
        options = "".join(f", {k}={v!r}" for k, v in self.options.items())
        return (f"vocab_size={self.vocab_size}, dim={self.dim}, depth={self.depth}, "
                f"heads={self.heads}, causal={self.causal}, position={self.position!r}"
                f"{options}")

    def new_cache(self) -> Cache:
        """An empty cache for decoding chunk by chunk (causal models only)."""
        check_cache_allowed(self.causal, what=type(self).__name__)
        return Cache(self.depth)

    def position_weights(self) -> list[nn.Parameter]:
        """The weights that belong to the positional scheme: the learned table or offsets,
        each layer's bias table or Shaw's tables (empty for none, sinusoidal, rope, alibi)."""
        out = [] if self.position_encoding is None else list(self.position_encoding.parameters())
        for block in self.blocks:
            out += block.attention.position_weights()
        return out

    def embed(self, tokens: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """Token embeddings plus the scheme's encoding (when it enters there), before dropout."""
        x = self.token_embedding[tokens]
        if self.position_encoding is not None:
            positions = None if offset == 0 else torch.arange(
                offset, offset + tokens.shape[1], device=tokens.device)
            x = self.position_encoding(x, positions)
        return x

    def forward(self, tokens: torch.Tensor, *, cache: Cache | None = None,
                return_hidden: bool = False, return_attention: bool = False):
        what = type(self).__name__
        tokens = tokens if torch.is_tensor(tokens) else torch.as_tensor(tokens)
        check_tokens(tuple(tokens.shape), dtype_of(tokens), what=what)
        if cache is not None:
            check_cache_allowed(self.causal, what=what)
        if self.scheme.check_seq is not None:
            self.scheme.check_seq(self.options, tokens.shape[1], what)
        x = self.embedding_dropout(self.embed(tokens, 0 if cache is None else cache.length))
        hidden, attention = [x], []
        for i, block in enumerate(self.blocks):
            x, weights = block(x, None if cache is None else cache.layers[i], return_attention)
            hidden.append(x)
            attention.append(weights)
        logits = _linear(_layer_norm(x, self.norm_scale, self.norm_bias), self.output_kernel,
                         self.output_bias)
        out = (logits,) + ((hidden,) if return_hidden else ()) \
            + ((attention,) if return_attention else ())
        return out[0] if len(out) == 1 else out

