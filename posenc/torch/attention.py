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
from posenc.torch import batches
from posenc.stacks import (QK_NORM_EPS, LayerRule, layer_mask, layer_settings, position_mask,
                           stack_entry, temperature_scales)
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
# The length-extrapolation family (posenc/torch/distance_bias.py).
from posenc.torch import distance_bias as _distance_bias  # noqa: E402
_CLASSES.update({name: getattr(_distance_bias, name) for name in _distance_bias.__all__})
# The content-dependent family (posenc/torch/content.py).
from posenc.torch import content as _content  # noqa: E402
_CLASSES.update({name: getattr(_content, name) for name in _content.__all__})


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
            ``height * width`` patches. ``"fox"`` and ``"cope"`` (the content route, causal
            only) add FoX's forget gate bias of the layer input or CoPE's term of the
            queries and keys to the logits (:class:`ForgetGateBias`, :class:`CoPE`, as
            ``content``; CoPE counts up to ``max_len``); they take no option. Each scheme
            option is for the schemes named (another scheme refuses it); ``None`` means
            its default.

    Call arguments:
        x: ``(batch, seq, dim)`` embeddings.
        attention_mask: optional ``(batch, seq)``, 1 for real tokens, 0 for padding (left
            or right); with a cache, ``(batch, seq)`` for the new tokens or
            ``(batch, cached + seq)`` for all. Positions count real tokens only
            (:func:`posenc.torch.batches.mask_positions`) and padding is never attended; a
            query with no key to attend (a pad) gets zero weights.
        document_ids: optional int ``(batch, seq)``: packed documents; positions restart in
            each and no token attends across documents (no cache).
        cache: a :class:`posenc.attention.LayerCache` (:meth:`new_cache`), causal only:
            ``x`` continues the cached positions, and its keys and values join the cache
            (with a mask, each row continues at its number of real tokens, and the padding
            keys stay masked).
        return_attention: also return the ``(batch, heads, seq, k_len)`` weights.

    Returns:
        Tensor of the shape and dtype of ``x``; with ``return_attention=True``,
        ``(output, weights)``, the weights in float32.

    Weights:
        query_kernel, key_kernel, value_kernel, output_kernel: ``(dim, dim)``,
        applied as ``x @ kernel``; query_bias, value_bias, output_bias: ``(dim,)``;
        the scheme's own (``position_bias.*``, ``key_table``, ``value_table``,
        ``content.*``).

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
        self.content = route_layer(s, "content", _CLASSES)
        if self.route == "relative":
            relative_tables(self, self.options["max_distance"], self.head_dim)
        self.layer_rule = LayerRule() if s.layer is None else s.layer
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
        if self.content is not None:
            out += list(self.content.parameters())
        if self.route == "relative":
            out += [self.key_table, self.value_table]
        return out

    def _heads(self, x, kernel, bias=None):
        """``x @ kernel (+ bias)`` split into ``(batch, heads, seq, head_dim)``."""
        y = x @ (kernel if torch.is_autocast_enabled() else kernel.to(x.dtype))
        if bias is not None:
            y = y + bias.to(y.dtype)
        return y.unflatten(-1, (self.heads, self.head_dim)).transpose(1, 2)

    def forward(self, x: torch.Tensor, *, attention_mask=None, document_ids=None,
                cache: LayerCache | None = None, return_attention: bool = False):
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
        if batches.active(attention_mask, document_ids, cache):
            return self._forward_batch(x, attention_mask, document_ids, cache, return_attention)
        q = self._heads(x, self.query_kernel, self.query_bias)
        k = self._heads(x, self.key_kernel)
        v = self._heads(x, self.value_kernel, self.value_bias)
        if self.rotary is not None:
            q, k = self.rotary(q, k, offset=offset)
        q, k = self._stack_rule(q, k, offset)
        if cache is not None:
            k, v = cache.append(k, v, lambda t: torch.cat(t, dim=-2))
        extra = self._content_term(x, q, k, cache)
        dropout = self.dropout if self.training else 0.0
        weights = None
        if self.route == "relative":
            drop = (lambda w: F.dropout(w, dropout)) if dropout > 0 else None
            z = relative_attention(q, k, v, self.key_table, self.value_table,
                                   self.options["max_distance"], causal=self.causal, drop=drop,
                                   return_weights=return_attention)
            z, weights = z if return_attention else (z, None)
        elif return_attention:
            z, weights = self._explicit(q, k, v, dropout, extra)
        else:
            z = self._fused(q, k, v, dropout, extra)
        z = z.transpose(1, 2).flatten(-2)
        out = _linear(z, self.output_kernel, self.output_bias)
        return (out, weights) if return_attention else out

    def _forward_batch(self, x, attention_mask, document_ids, cache, return_attention):
        """The call on per-token positions (a padded or packed batch, a padded cache)."""
        st = batches.state(x.shape[0], x.shape[1], attention_mask, document_ids, cache,
                           self.causal, x.device, what=type(self).__name__)
        q = self._heads(x, self.query_kernel, self.query_bias)
        k = self._heads(x, self.key_kernel)
        v = self._heads(x, self.value_kernel, self.value_bias)
        if self.rotary is not None:
            q, k = self.rotary(q, k, positions=st.positions)
        q, k = self._stack_rule(q, k, 0, positions=st.positions)
        if cache is not None:
            k, v = cache.append(k, v, lambda t: torch.cat(t, dim=-2))
            cache.key_mask, cache.positions = st.key_mask, st.key_positions
        dropout = self.dropout if self.training else 0.0
        drop = (lambda w: F.dropout(w, dropout)) if dropout > 0 else None
        rows = st.allowed
        far = position_mask(st.positions, st.key_positions, self.layer_rule)
        if far is not None:                  # a stack's window or chunks, on the real positions
            rows = rows & ~far
        allowed = rows[:, None]
        if self.route == "relative":
            z, weights = batches.relative_attention_at(
                q, k, v, self.key_table, self.value_table, self.options["max_distance"],
                st.positions, st.key_positions, rows, drop)
        else:
            bias = None
            if self.position == "swin":          # the grid's bias: the same in every row
                bias = self.position_bias(q.shape[-2], k.shape[-2])
            elif self.position_bias is not None:
                bias = batches.positional_bias(self.position_bias, st.positions,
                                               st.key_positions)
            elif self.content is not None:       # each row's own gates over its own keys
                bias = self._content_term(x, q, k, cache, rows, st.key_mask[:, -x.shape[1]:])
            if return_attention:
                with torch.autocast(device_type=q.device.type, enabled=False):
                    logits = (q.float() * self.head_dim ** -0.5) @ k.float().transpose(-1, -2)
                    weights = batches.masked_softmax(
                        logits if bias is None else logits + bias.to(q.device), allowed)
                    z = ((weights if drop is None else drop(weights)) @ v.float()).to(q.dtype)
            else:
                some = allowed.any(-1, keepdim=True)
                base = torch.zeros((), device=q.device) if bias is None else bias.to(q.device)
                mask = torch.where(some, torch.where(allowed, base, float("-inf")), 0.0)
                z = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.to(q.dtype),
                                                   dropout_p=dropout) * some.to(q.dtype)
                weights = None
        z = z.transpose(1, 2).flatten(-2)
        out = _linear(z, self.output_kernel, self.output_bias)
        return (out, weights) if return_attention else out

    def _stack_rule(self, q, k, offset: int, positions=None):
        """A stack's per-layer rule on the rotated ``q`` and ``k``: the QK RMS norm, then
        Llama 4's temperature of a NoPE layer's queries (:class:`posenc.stacks.LayerRule`), at
        ``offset ..`` or at each token's ``positions`` ``(batch, seq)`` (a padded batch)."""
        rule = self.layer_rule
        if rule.qk_norm:
            def norm(t):
                f = t.float()
                return (f * torch.rsqrt(f.pow(2).mean(-1, keepdim=True) + QK_NORM_EPS)).to(t.dtype)
            q, k = norm(q), norm(k)
        if rule.attn_temperature_tuning and positions is not None:
            p = positions.to(device=q.device, dtype=torch.float32)
            steps = torch.floor((p + 1.0) / rule.floor_scale)
            scales = torch.log1p(steps) * rule.attn_scale + 1.0         # (batch, seq)
            q = (q * scales[:, None, :, None]).to(q.dtype)
        elif rule.attn_temperature_tuning:
            scales = torch.as_tensor(temperature_scales(offset, q.shape[-2], rule.floor_scale,
                                                        rule.attn_scale), device=q.device)
            q = (q * scales[:, None]).to(q.dtype)
        return q, k

    def _logit_bias(self, q_len: int, k_len: int, device):
        """The scheme's bias plus the causal mask (and a stack's window or chunks), float32
        ``(1, heads, q_len, k_len)``, or ``None`` when there is neither."""
        bias = None if self.position_bias is None else self.position_bias(q_len, k_len)
        if self.causal:
            future = future_keys(q_len, k_len, lambda n: torch.arange(n, device=device))
            far = layer_mask(q_len, k_len, self.layer_rule, lambda n: torch.arange(n, device=device))
            future = future if far is None else future | far
            if bias is None:
                bias = torch.zeros(1, 1, q_len, k_len, device=device)
            bias = bias.to(device).masked_fill(future, float("-inf"))
        return bias

    def _content_term(self, x, q, k, cache=None, visible=None, real=None):
        """The content route's float32 ``(batch, heads, q_len, k_len)`` logit term, or ``None``.

        FoX: ``c_i - c_j`` of the cumulative log-forget ``c`` of the layer input ``x``, the
        cache keeping ``c`` of the cached rows (``real``: ``(batch, seq)``, False at a pad,
        whose gate is 1). CoPE: its term of the rotated ``q`` and all the keys ``k``, the
        gates on the keys each query sees (``visible``, by default causal)."""
        if self.content is None:
            return None
        if self.position == "cope":
            return self.content(q, k, visible)
        log_f = self.content.log_forget(x)                       # (batch, heads, seq)
        if real is not None:
            log_f = log_f.masked_fill(~real.to(log_f.device)[:, None, :], 0.0)
        c = log_f.cumsum(-1)
        c_all = c
        if cache is not None:
            if cache.log_forget is not None:
                c = c + cache.log_forget[..., -1:]
                c_all = torch.cat((cache.log_forget, c), -1)
            cache.log_forget = c_all
        return c[..., :, None] - c_all[..., None, :]

    def _fused(self, q, k, v, dropout: float, extra=None):
        q_len, k_len = q.shape[-2], k.shape[-2]
        if self.position_bias is None and extra is None and self.causal and q_len == k_len \
                and not self.layer_rule.masks:
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=True)
        bias = self._logit_bias(q_len, k_len, q.device)
        if extra is not None:
            bias = extra if bias is None else extra + bias
        mask = None if bias is None else bias.to(q.dtype)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)

    def _explicit(self, q, k, v, dropout: float, extra=None):
        """Softmax attention in float32 with autocast off: (output, float32 weights)."""
        with torch.autocast(device_type=q.device.type, enabled=False):
            logits = (q.float() * self.head_dim ** -0.5) @ k.float().transpose(-1, -2)
            bias = self._logit_bias(q.shape[-2], k.shape[-2], q.device)
            if bias is not None:
                logits = logits + bias
            if extra is not None:
                logits = logits + extra
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

    def forward(self, x, cache=None, return_attention=False, attention_mask=None,
                document_ids=None):
        h = _layer_norm(x, self.attention_norm_scale, self.attention_norm_bias)
        h = self.attention(h, attention_mask=attention_mask, document_ids=document_ids,
                           cache=cache, return_attention=return_attention)
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
        stack: a stack whose layers differ, or ``None`` (default: every block alike). A
            list of ``depth`` entries, one per block, each a scheme's name or a dict of
            :data:`posenc.stacks.LAYER_KEYS`: ``position`` (default the model's; an entry
            of the model's scheme inherits its options), the scheme's options, and the
            rules ``window`` (a sliding window: keys ``window`` or more positions back are
            masked), ``chunk`` (attention within chunks of ``chunk`` positions),
            ``qk_norm``, ``attn_temperature_tuning`` with ``floor_scale`` and
            ``attn_scale`` (Llama 4's NoPE layers; :class:`posenc.stacks.LayerRule`). Or
            a preset's name (``"gemma3"``, ``"llama4"``: :data:`posenc.stacks.STACKS`), or
            a Hugging Face config with ``layer_types`` (:func:`posenc.stacks.hf_stack`).
            ``model.stack`` holds the checked entries.

    Call arguments:
        tokens: int ``(batch, seq)`` token ids.
        attention_mask: optional ``(batch, seq)``, 1 for real tokens and 0 for padding
            (left or right); with a cache, for the new tokens or for all
            (``(batch, cached + seq)``). Positions count real tokens only (the cumsum
            rule, :func:`posenc.torch.batches.mask_positions`), for every scheme: the
            absolute tables, the rotation and the biases read them, and padding is never
            attended. A padded row gives, on its real tokens, the logits of the sequence
            alone.
        document_ids: optional int ``(batch, seq)``: packed documents. Positions restart
            in each document and no token attends across documents (a full pass, no
            cache).
        cache: a :class:`posenc.attention.Cache` from :meth:`new_cache` (causal only):
            ``tokens`` continue the cached positions; the cache grows in place. After a
            masked call each row continues at its own number of real tokens, and the
            cached padding stays masked.
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
                 max_distance=None, num_buckets=None, grid=None, stack=None):
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
        layers = layer_settings(s, stack)
        self.stack = None if stack is None else [stack_entry(x) for x in layers]
        self.blocks = nn.ModuleList([_Block(x) for x in layers])
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

    def forward(self, tokens: torch.Tensor, *, attention_mask=None, document_ids=None,
                cache: Cache | None = None, return_hidden: bool = False,
                return_attention: bool = False):
        what = type(self).__name__
        tokens = tokens if torch.is_tensor(tokens) else torch.as_tensor(tokens)
        check_tokens(tuple(tokens.shape), dtype_of(tokens), what=what)
        if cache is not None:
            check_cache_allowed(self.causal, what=what)
        if self.scheme.check_seq is not None:
            self.scheme.check_seq(self.options, tokens.shape[1], what)
        first = None if cache is None else cache.layers[0]
        if batches.active(attention_mask, document_ids, first):
            st = batches.state(tokens.shape[0], tokens.shape[1], attention_mask, document_ids,
                               first, self.causal, tokens.device, what=what)   # checks, once
            x = self.token_embedding[tokens]
            if self.position_encoding is not None:     # the absolute tables read real positions
                x = self.position_encoding(x, st.positions)
        else:
            x = self.embed(tokens, 0 if cache is None else cache.length)
        x = self.embedding_dropout(x)
        hidden, attention = [x], []
        for i, block in enumerate(self.blocks):
            x, weights = block(x, None if cache is None else cache.layers[i], return_attention,
                               attention_mask, document_ids)
            hidden.append(x)
            attention.append(weights)
        logits = _linear(_layer_norm(x, self.norm_scale, self.norm_bias), self.output_kernel,
                         self.output_bias)
        out = (logits,) + ((hidden,) if return_hidden else ()) \
            + ((attention,) if return_attention else ())
        return out[0] if len(out) == 1 else out

