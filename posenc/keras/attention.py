"""Multi-head attention and a small Transformer with every positional scheme (Keras face).

Mirrors ``posenc/torch/attention.py`` name for name, with ``keras.ops`` only:
``MultiHeadAttention(dim, heads, position=...)`` and ``Transformer(vocab_size,
position=...)`` take the scheme by name (:data:`posenc.attention.POSITIONS`),
and each scheme enters by its route (the embeddings, the rotation of queries
and keys, a bias on the logits, Shaw's relative keys and values). The logits
and the softmax are computed in float32 whatever the dtype policy. The
``Transformer`` is a ``keras.Model``: ``compile`` and ``fit`` train it.
Sequence lengths must be static (known when the graph is traced), as for the
bias layers. The registry, the option rules and the cache are in
``posenc/attention.py``, with the checks of its arguments.
"""

from __future__ import annotations

import keras
from keras import ops

from posenc._checks import check_embeddings, check_rank
from posenc.attention import (
    check_cache_allowed,
    check_tokens,
    NORM_EPS,
    OPTION_NAMES,
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
from posenc.keras import batches
from posenc.keras._util import dtype_of
from posenc.keras.bias import ALiBiBias, SwinRelativeBias, T5RelativeBias
from posenc.keras.learned import HybridEncoding, LearnedEncoding
from posenc.keras.rotary import RotaryEmbedding
from posenc.keras.shaw import relative_attention, relative_tables
from posenc.keras.sinusoidal import SinusoidalEncoding
from posenc.learned import TABLE_INIT_STD
from posenc.stacks import (QK_NORM_EPS, LayerRule, layer_mask, layer_settings, stack_entry,
                           temperature_scales)

__all__ = ["MultiHeadAttention", "Transformer"]


# --------------------------------------------------------------------------- each route's parts

# The classes that carry a route's scheme (posenc.attention.ROUTE_LAYERS names them).
_CLASSES = {cls.__name__: cls for cls in (SinusoidalEncoding, LearnedEncoding, HybridEncoding,
                                          ALiBiBias, T5RelativeBias, SwinRelativeBias,
                                          RotaryEmbedding)}
# The length-extrapolation family (posenc/keras/distance_bias.py).
from posenc.keras import distance_bias as _distance_bias  # noqa: E402
_CLASSES.update({name: getattr(_distance_bias, name) for name in _distance_bias.__all__})
# The content-dependent family (posenc/keras/content.py).
from posenc.keras import content as _content  # noqa: E402
_CLASSES.update({name: getattr(_content, name) for name in _content.__all__})


def _option_config(options: dict) -> dict:
    """Every scheme option for ``get_config``: the scheme's values, ``None`` for the rest."""
    return {name: options.get(name) for name in OPTION_NAMES}


def _layer_norm(x, scale, bias):
    """Layer normalisation in float32, cast back to ``x``'s dtype."""
    h = ops.cast(x, "float32")
    mean = ops.mean(h, axis=-1, keepdims=True)
    var = ops.mean(ops.square(h - mean), axis=-1, keepdims=True)
    h = (h - mean) * ops.rsqrt(var + NORM_EPS)
    h = h * ops.cast(scale, "float32") + ops.cast(bias, "float32")
    return ops.cast(h, dtype_of(x))


def _linear(x, kernel, bias):
    return ops.matmul(x, ops.cast(kernel, dtype_of(x))) + ops.cast(bias, dtype_of(x))


_GLOROT = keras.initializers.GlorotUniform
_ZEROS = keras.initializers.Zeros
_ONES = keras.initializers.Ones


# --------------------------------------------------------------------------- attention

@keras.saving.register_keras_serializable(package="posenc")
class MultiHeadAttention(keras.layers.Layer):
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

    The projections run in the layer's compute dtype; the logits and the
    softmax in float32, always on this explicit path (never
    ``keras.ops.dot_product_attention``, whose fused kernels compute in the
    compute dtype), so that the numbers are the same on every backend and
    policy. The PyTorch face runs SDPA instead: the two agree within float32
    rounding, and the speed differs. The key projection has no bias (without
    RoPE it would add one constant to each row of logits, which the softmax ignores; under
    RoPE the rotated bias depends on the key's position, so it would not cancel, and no bias
    is used either).

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
        x: ``(batch, seq, dim)`` embeddings (``seq`` static).
        attention_mask: optional ``(batch, seq)``, 1 for real tokens, 0 for padding (left
            or right); with a cache, ``(batch, seq)`` for the new tokens or
            ``(batch, cached + seq)`` for all. Positions count real tokens only
            (:func:`posenc.keras.batches.mask_positions`) and padding is never attended; a
            query with no key to attend (a pad) gets zero weights.
        document_ids: optional int ``(batch, seq)``: packed documents; positions restart in
            each and no token attends across documents (no cache).
        cache: a :class:`posenc.attention.LayerCache` (:meth:`new_cache`), causal only:
            ``x`` continues the cached positions, and its keys and values join the cache
            (with a mask, each row continues at its number of real tokens, and the padding
            keys stay masked).
        return_attention: also return the ``(batch, heads, seq, k_len)`` weights.
        training: whether dropout is on.

    Returns:
        Tensor of the shape of ``x`` in the compute dtype; with
        ``return_attention=True``, ``(output, weights)``, the weights in float32.

    Weights:
        query_kernel, key_kernel, value_kernel, output_kernel: ``(dim, dim)``,
        applied as ``x @ kernel``; query_bias, value_bias, output_bias: ``(dim,)``;
        the scheme's own (``position_bias``'s table, ``key_table``, ``value_table``,
        ``content.*``).

    Example:
        >>> attn = MultiHeadAttention(32, 4, position="alibi", causal=True)
        >>> tuple(attn(keras.random.normal((2, 10, 32), seed=0)).shape)
        (2, 10, 32)

    References:
        Vaswani et al., "Attention Is All You Need", NeurIPS 2017.
    """

    def __init__(self, dim: int, heads: int, *, position: str = "none", causal: bool = False,
                 max_len: int = 512, dropout: float = 0.0, base=None, rope_scaling=None,
                 rope_layout=None, max_distance=None, num_buckets=None, grid=None, **kwargs):
        self._setup(attention_settings(dim, heads, position, causal, max_len, dropout,
                                       given_options(base, rope_scaling, rope_layout,
                                                     max_distance, num_buckets, grid),
                                       what="MultiHeadAttention"), **kwargs)

    @classmethod
    def from_settings(cls, settings: Settings, **kwargs) -> "MultiHeadAttention":
        """The layer for :class:`posenc.attention.Settings` checked already (a
        ``Transformer``'s): nothing is checked again. ``kwargs`` go to ``keras.layers.Layer``
        (``dtype``, ``name``)."""
        layer = cls.__new__(cls)
        layer._setup(settings, **kwargs)
        return layer

    def _setup(self, s: Settings, **kwargs) -> None:
        kwargs.setdefault("autocast", False)   # weights cast by hand: logits in float32
        keras.layers.Layer.__init__(self, **kwargs)
        self.settings = s
        self.dim, self.heads, self.head_dim = s.dim, s.heads, s.head_dim
        self.position, self.route, self.causal = s.position, s.route, s.causal
        self.scheme = POSITIONS[s.position]
        self.max_len, self.dropout, self.options = s.max_len, s.dropout, s.options
        for name in ("query", "key", "value", "output"):
            setattr(self, f"{name}_kernel", self.add_weight(
                name=f"{name}_kernel", shape=(self.dim, self.dim), initializer=_GLOROT()))
        for name in ("query", "value", "output"):
            setattr(self, f"{name}_bias", self.add_weight(
                name=f"{name}_bias", shape=(self.dim,), initializer=_ZEROS()))
        self.position_bias = route_layer(s, "bias", _CLASSES)
        self.rotary = route_layer(s, "rotary", _CLASSES, dtype=self.dtype_policy)
        self.content = route_layer(s, "content", _CLASSES)
        if self.route == "relative":
            relative_tables(self, self.options["max_distance"], self.head_dim)
        self.layer_rule = LayerRule() if s.layer is None else s.layer
        self.weights_dropout = keras.layers.Dropout(self.dropout) if self.dropout else None
        self.built = True

    def get_config(self):
        config = super().get_config()
        config.update({"dim": self.dim, "heads": self.heads, "position": self.position,
                       "causal": self.causal, "max_len": self.max_len,
                       "dropout": self.dropout, **_option_config(self.options)})
        return config

    def new_cache(self) -> LayerCache:
        """An empty cache for decoding chunk by chunk (causal attention only)."""
        check_cache_allowed(self.causal, what=type(self).__name__)
        return LayerCache()

    def position_weights(self) -> list:
        """The weights that belong to the positional scheme (bias tables, Shaw's tables)."""
        out = [] if self.position_bias is None else list(self.position_bias.weights)
        if self.content is not None:
            out += list(self.content.weights)
        if self.route == "relative":
            out += [self.key_table, self.value_table]
        return out

    def compute_output_shape(self, input_shape):
        return input_shape

    def compute_output_spec(self, x, attention_mask=None, document_ids=None, cache=None,
                            return_attention=False, training=None):
        out = keras.KerasTensor(x.shape, dtype=self.compute_dtype)
        if return_attention:
            return out, keras.KerasTensor((x.shape[0], self.heads, x.shape[1], x.shape[1]),
                                          dtype="float32")
        return out

    def _heads(self, x, kernel, bias=None):
        """``x @ kernel (+ bias)`` split into ``(batch, heads, seq, head_dim)``."""
        y = ops.matmul(x, ops.cast(kernel, dtype_of(x)))
        if bias is not None:
            y = y + ops.cast(bias, dtype_of(x))
        batch, seq = ops.shape(x)[0], ops.shape(x)[1]
        return ops.transpose(ops.reshape(y, (batch, seq, self.heads, self.head_dim)),
                             (0, 2, 1, 3))

    def call(self, x, attention_mask=None, document_ids=None, cache=None,
             return_attention=False, training=None):
        what = type(self).__name__
        x = ops.convert_to_tensor(x)
        check_embeddings(x.shape, self.dim, what=what)
        check_rank("x", x.shape, 3, what=what, fix="pass (batch, seq, dim) embeddings")
        if cache is not None:
            check_cache_allowed(self.causal, what=what)
        offset = 0 if cache is None else cache.length
        seq = x.shape[1]
        if self.scheme.check_seq is not None:
            self.scheme.check_seq(self.options, seq, what)
        x = ops.cast(x, self.compute_dtype)
        if seq == 0:
            weights = ops.zeros((ops.shape(x)[0], self.heads, 0, offset), "float32")
            return (x, weights) if return_attention else x
        if batches.active(attention_mask, document_ids, cache):
            return self._call_batch(x, attention_mask, document_ids, cache, return_attention,
                                    training)
        q = self._heads(x, self.query_kernel, self.query_bias)
        k = self._heads(x, self.key_kernel)
        v = self._heads(x, self.value_kernel, self.value_bias)
        if self.rotary is not None:
            q, k = self.rotary(q, k, offset=offset)
        q, k = self._stack_rule(q, k, offset)
        if cache is not None:
            k, v = cache.append(k, v, lambda t: ops.concatenate(t, axis=-2))
        extra = self._content_term(x, q, k, cache)
        dropping = bool(training) and self.weights_dropout is not None
        if self.route == "relative":
            drop = (lambda w: self.weights_dropout(w, training=training)) if dropping else None
            z = relative_attention(q, k, v, self.key_table, self.value_table,
                                   self.options["max_distance"], causal=self.causal, drop=drop,
                                   return_weights=return_attention)
            z, weights = z if return_attention else (z, None)
        else:
            z, weights = self._explicit(q, k, v, training, extra)
        z = ops.reshape(ops.transpose(ops.cast(z, self.compute_dtype), (0, 2, 1, 3)),
                        (ops.shape(x)[0], ops.shape(x)[1], self.dim))
        out = _linear(z, self.output_kernel, self.output_bias)
        return (out, weights) if return_attention else out

    def _call_batch(self, x, attention_mask, document_ids, cache, return_attention, training):
        """The call on per-token positions (a padded or packed batch, a padded cache)."""
        st = batches.state(x.shape[0], x.shape[1], attention_mask, document_ids, cache,
                           self.causal, what=type(self).__name__)
        q = self._heads(x, self.query_kernel, self.query_bias)
        k = self._heads(x, self.key_kernel)
        v = self._heads(x, self.value_kernel, self.value_bias)
        if self.rotary is not None:
            q, k = self.rotary(q, k, positions=st.positions)
        q, k = self._stack_rule(q, k, 0, positions=st.positions)
        if cache is not None:
            k, v = cache.append(k, v, lambda t: ops.concatenate(t, axis=-2))
            cache.key_mask, cache.positions = st.key_mask, st.key_positions
        drop = None
        if bool(training) and self.weights_dropout is not None:
            drop = lambda w: self.weights_dropout(w, training=training)   # noqa: E731
        rows = st.allowed
        if self.layer_rule.masks:            # a stack's window or chunks, on the real positions
            rule = self.layer_rule
            q_pos = ops.cast(st.positions, "int32")[:, :, None]
            k_pos = ops.cast(st.key_positions, "int32")[:, None, :]
            if rule.window is not None:
                rows = ops.logical_and(rows, ops.less(q_pos - k_pos, rule.window))
            if rule.chunk is not None:
                rows = ops.logical_and(rows, ops.equal(ops.floor_divide(q_pos, rule.chunk),
                                                       ops.floor_divide(k_pos, rule.chunk)))
        if self.route == "relative":
            z, weights = batches.relative_attention_at(
                q, k, v, self.key_table, self.value_table, self.options["max_distance"],
                st.positions, st.key_positions, rows, drop)
        else:
            qf = ops.cast(q, "float32") * self.head_dim ** -0.5
            logits = ops.matmul(qf, ops.swapaxes(ops.cast(k, "float32"), -1, -2))
            if self.position == "swin":          # the grid's bias: the same in every row
                logits = logits + self.position_bias(q.shape[-2], k.shape[-2])
            elif self.position_bias is not None:
                logits = logits + batches.positional_bias(self.position_bias, st.positions,
                                                          st.key_positions)
            elif self.content is not None:       # each row's own gates over its own keys
                logits = logits + self._content_term(x, q, k, cache, rows,
                                                     st.key_mask[:, -x.shape[1]:])
            weights = batches.masked_softmax(logits, rows[:, None])
            dropped = weights if drop is None else drop(weights)
            z = ops.matmul(ops.cast(dropped, dtype_of(v)), v)
        z = ops.reshape(ops.transpose(ops.cast(z, self.compute_dtype), (0, 2, 1, 3)),
                        (ops.shape(x)[0], ops.shape(x)[1], self.dim))
        out = _linear(z, self.output_kernel, self.output_bias)
        return (out, weights) if return_attention else out

    def _stack_rule(self, q, k, offset: int, positions=None):
        """A stack's per-layer rule on the rotated ``q`` and ``k``: the QK RMS norm, then
        Llama 4's temperature of a NoPE layer's queries (:class:`posenc.stacks.LayerRule`), at
        ``offset ..`` or at each token's ``positions`` ``(batch, seq)`` (a padded batch)."""
        rule = self.layer_rule
        if rule.qk_norm:
            def norm(t):
                f = ops.cast(t, "float32")
                f = f * ops.rsqrt(ops.mean(ops.square(f), axis=-1, keepdims=True) + QK_NORM_EPS)
                return ops.cast(f, dtype_of(t))
            q, k = norm(q), norm(k)
        if rule.attn_temperature_tuning and positions is not None:
            p = ops.cast(positions, "float32")
            steps = ops.floor((p + 1.0) / rule.floor_scale)
            scales = ops.log1p(steps) * rule.attn_scale + 1.0           # (batch, seq)
            q = ops.cast(ops.cast(q, "float32") * scales[:, None, :, None], dtype_of(q))
        elif rule.attn_temperature_tuning:
            scales = ops.convert_to_tensor(temperature_scales(offset, q.shape[-2],
                                                              rule.floor_scale, rule.attn_scale))
            q = ops.cast(ops.cast(q, "float32") * scales[:, None], dtype_of(q))
        return q, k

    def _logit_bias(self, q_len: int, k_len: int):
        """The scheme's bias plus the causal mask (and a stack's window or chunks), float32
        ``(1, heads, q_len, k_len)``, or ``None`` when there is neither."""
        bias = None if self.position_bias is None else self.position_bias(q_len, k_len)
        if self.causal:
            future = future_keys(q_len, k_len, lambda n: ops.arange(n, dtype="int32"))
            far = layer_mask(q_len, k_len, self.layer_rule, lambda n: ops.arange(n, dtype="int32"))
            future = future if far is None else ops.logical_or(future, far)
            bias = ops.where(future, float("-inf"), 0.0 if bias is None else bias)
        return None if bias is None else ops.cast(bias, "float32")

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
            log_f = ops.where(ops.cast(real, "bool")[:, None, :], log_f, 0.0)
        c = ops.cumsum(log_f, axis=-1)
        c_all = c
        if cache is not None:
            if cache.log_forget is not None:
                c = c + cache.log_forget[..., -1:]
                c_all = ops.concatenate((cache.log_forget, c), axis=-1)
            cache.log_forget = c_all
        return c[..., :, None] - c_all[..., None, :]

    def _explicit(self, q, k, v, training, extra=None):
        """Softmax attention, logits and softmax in float32: (output, float32 weights)."""
        q_len, k_len = q.shape[-2], k.shape[-2]
        qf = ops.cast(q, "float32") * self.head_dim ** -0.5
        logits = ops.matmul(qf, ops.swapaxes(ops.cast(k, "float32"), -1, -2))
        bias = self._logit_bias(q_len, k_len)
        if bias is not None:
            logits = logits + bias
        if extra is not None:
            logits = logits + extra
        # (one key: Keras warns about a softmax over an axis of size 1; it is 1)
        weights = ops.softmax(logits, axis=-1) if k_len != 1 else ops.ones_like(logits)
        dropped = weights
        if self.weights_dropout is not None:
            dropped = self.weights_dropout(weights, training=training)
        z = ops.matmul(ops.cast(dropped, dtype_of(v)), v)
        return z, weights


# --------------------------------------------------------------------------- the model

class _Block(keras.layers.Layer):
    """One pre-norm block: ``x + attention(norm(x))``, then ``x + mlp(norm(x))``."""

    def __init__(self, s: Settings, **kwargs):
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        dim, mlp_dim = s.dim, s.mlp_dim

        def weight(name, shape, init):
            return self.add_weight(name=name, shape=shape, initializer=init)

        self.attention_norm_scale = weight("attention_norm_scale", (dim,), _ONES())
        self.attention_norm_bias = weight("attention_norm_bias", (dim,), _ZEROS())
        self.attention = MultiHeadAttention.from_settings(s, dtype=self.dtype_policy)
        self.mlp_norm_scale = weight("mlp_norm_scale", (dim,), _ONES())
        self.mlp_norm_bias = weight("mlp_norm_bias", (dim,), _ZEROS())
        self.mlp_hidden_kernel = weight("mlp_hidden_kernel", (dim, mlp_dim), _GLOROT())
        self.mlp_hidden_bias = weight("mlp_hidden_bias", (mlp_dim,), _ZEROS())
        self.mlp_output_kernel = weight("mlp_output_kernel", (mlp_dim, dim), _GLOROT())
        self.mlp_output_bias = weight("mlp_output_bias", (dim,), _ZEROS())
        self.dropout = s.dropout
        self.residual_dropout = keras.layers.Dropout(s.dropout)  # a no-op at rate 0, as in torch
        self.built = True

    def _drop(self, h, training):
        return self.residual_dropout(h, training=training)

    def call(self, x, cache=None, return_attention=False, training=None, attention_mask=None,
             document_ids=None):
        h = _layer_norm(x, self.attention_norm_scale, self.attention_norm_bias)
        h = self.attention(h, attention_mask=attention_mask, document_ids=document_ids,
                           cache=cache, return_attention=return_attention, training=training)
        h, weights = h if return_attention else (h, None)
        x = x + self._drop(h, training)
        h = _layer_norm(x, self.mlp_norm_scale, self.mlp_norm_bias)
        h = ops.gelu(_linear(h, self.mlp_hidden_kernel, self.mlp_hidden_bias), approximate=False)
        x = x + self._drop(_linear(h, self.mlp_output_kernel, self.mlp_output_bias), training)
        return x, weights


@keras.saving.register_keras_serializable(package="posenc")
class Transformer(keras.Model):
    """A small pre-norm Transformer language model (or encoder) with any positional scheme.

    Token embeddings, the scheme's encoding added to them when its route is
    the embeddings (``"sinusoidal"``, ``"learned"``, ``"hybrid"``), ``depth``
    pre-norm blocks (:class:`MultiHeadAttention` with the scheme, then a GELU
    MLP, each added back to the residual stream), a final layer norm and a
    linear head to ``vocab_size`` logits. ``causal=True`` (default) makes it
    a decoder that can decode with a cache (:meth:`new_cache`); ``causal=False``
    an encoder (``"swin"`` is for encoders on a patch grid). A ``keras.Model``:
    ``compile`` it with a loss on logits and train it with ``fit``.

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
            ``model.stack`` holds the checked entries (and ``get_config`` them).

    Call arguments:
        tokens: int ``(batch, seq)`` token ids (``seq`` static).
        attention_mask: optional ``(batch, seq)``, 1 for real tokens and 0 for padding
            (left or right); with a cache, for the new tokens or for all
            (``(batch, cached + seq)``). Positions count real tokens only (the cumsum
            rule, :func:`posenc.keras.batches.mask_positions`), for every scheme: the
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
        training: whether dropout is on.

    Returns:
        ``(batch, seq, vocab_size)`` logits in the compute dtype; ``(logits, hidden)``,
        ``(logits, attention)`` or ``(logits, hidden, attention)`` when asked.

    Example:
        >>> model = Transformer(100, position="alibi")
        >>> tokens = keras.random.randint((2, 12), 0, 100, seed=0)
        >>> tuple(model(tokens).shape)
        (2, 12, 100)
        >>> cache = model.new_cache()
        >>> steps = [model(tokens[:, i:i + 1], cache=cache) for i in range(12)]
        >>> bool(keras.ops.all(keras.ops.isclose(keras.ops.concatenate(steps, 1),
        ...                                      model(tokens), atol=1e-5)))
        True

    References:
        Vaswani et al., "Attention Is All You Need", NeurIPS 2017.
        Xiong et al., "On Layer Normalization in the Transformer Architecture",
        ICML 2020 (pre-norm).
    """

    def __init__(self, vocab_size: int, *, dim: int = 64, depth: int = 2, heads: int = 4,
                 mlp_dim=None, causal: bool = True, position: str = "rope", max_len: int = 512,
                 dropout: float = 0.0, base=None, rope_scaling=None, rope_layout=None,
                 max_distance=None, num_buckets=None, grid=None, stack=None, **kwargs):
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        s = transformer_settings(vocab_size, dim, depth, heads, mlp_dim, causal, position,
                                 max_len, dropout, given_options(base, rope_scaling, rope_layout,
                                                                 max_distance, num_buckets, grid))
        self.settings = s
        self.vocab_size, self.dim, self.depth = s.vocab_size, s.dim, s.depth
        self.heads, self.mlp_dim, self.causal = s.heads, s.mlp_dim, s.causal
        self.position, self.route, self.max_len = s.position, s.route, s.max_len
        self.scheme = POSITIONS[s.position]
        self.dropout, self.options = s.dropout, s.options
        self.token_embedding = self.add_weight(
            name="token_embedding", shape=(self.vocab_size, self.dim),
            initializer=keras.initializers.RandomNormal(stddev=TABLE_INIT_STD))
        self.position_encoding = route_layer(s, "embedding", _CLASSES)
        self.embedding_dropout = keras.layers.Dropout(self.dropout)  # a no-op at rate 0
        layers = layer_settings(s, stack)
        self.stack = None if stack is None else [stack_entry(x) for x in layers]
        self.blocks = [_Block(x, dtype=self.dtype_policy) for x in layers]
        self.norm_scale = self.add_weight(name="norm_scale", shape=(self.dim,),
                                          initializer=_ONES())
        self.norm_bias = self.add_weight(name="norm_bias", shape=(self.dim,),
                                         initializer=_ZEROS())
        self.output_kernel = self.add_weight(name="output_kernel",
                                             shape=(self.dim, self.vocab_size),
                                             initializer=_GLOROT())
        self.output_bias = self.add_weight(name="output_bias", shape=(self.vocab_size,),
                                           initializer=_ZEROS())
        self.built = True

    def get_config(self):
        config = {"name": self.name, "trainable": self.trainable,
                  "dtype": keras.saving.serialize_keras_object(self.dtype_policy)}
        config.update({"vocab_size": self.vocab_size, "dim": self.dim, "depth": self.depth,
                       "heads": self.heads, "mlp_dim": self.mlp_dim, "causal": self.causal,
                       "position": self.position, "max_len": self.max_len,
                       "dropout": self.dropout, **_option_config(self.options),
                       "stack": self.stack})
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.saving.deserialize_keras_object(config["dtype"])
        return cls(**config)

    def new_cache(self) -> Cache:
        """An empty cache for decoding chunk by chunk (causal models only)."""
        check_cache_allowed(self.causal, what=type(self).__name__)
        return Cache(self.depth)

    def position_weights(self) -> list:
        """The weights that belong to the positional scheme: the learned table or offsets,
        each layer's bias table or Shaw's tables (empty for none, sinusoidal, rope, alibi)."""
        out = [] if self.position_encoding is None else list(self.position_encoding.weights)
        for block in self.blocks:
            out += block.attention.position_weights()
        return out

    def embed(self, tokens, offset: int = 0):
        """Token embeddings plus the scheme's encoding (when it enters there), before dropout."""
        x = ops.take(ops.cast(self.token_embedding, self.compute_dtype), tokens, axis=0)
        if self.position_encoding is not None:
            positions = None if offset == 0 else ops.arange(
                offset, offset + tokens.shape[1], dtype="int32")
            x = ops.cast(self.position_encoding(x, positions), self.compute_dtype)
        return x

    def compute_output_spec(self, tokens, attention_mask=None, document_ids=None, cache=None,
                            return_hidden=False, return_attention=False, training=None):
        batch, seq = tokens.shape[0], tokens.shape[1]
        out = (keras.KerasTensor((batch, seq, self.vocab_size), dtype=self.compute_dtype),)
        if return_hidden:
            out += ([keras.KerasTensor((batch, seq, self.dim), dtype=self.compute_dtype)
                     for _ in range(self.depth + 1)],)
        if return_attention:
            out += ([keras.KerasTensor((batch, self.heads, seq, seq), dtype="float32")
                     for _ in range(self.depth)],)
        return out[0] if len(out) == 1 else out

    def call(self, tokens, attention_mask=None, document_ids=None, cache=None,
             return_hidden=False, return_attention=False, training=None):
        what = type(self).__name__
        tokens = ops.convert_to_tensor(tokens)
        check_tokens(tuple(tokens.shape), dtype_of(tokens), what=what)
        if cache is not None:
            check_cache_allowed(self.causal, what=what)
        if self.scheme.check_seq is not None:
            self.scheme.check_seq(self.options, tokens.shape[1], what)
        first = None if cache is None else cache.layers[0]
        if batches.active(attention_mask, document_ids, first):
            st = batches.state(tokens.shape[0], tokens.shape[1], attention_mask, document_ids,
                               first, self.causal, what=what)   # the checks, named once
            x = ops.take(ops.cast(self.token_embedding, self.compute_dtype), tokens, axis=0)
            if self.position_encoding is not None:     # the absolute tables read real positions
                x = ops.cast(self.position_encoding(x, st.positions), self.compute_dtype)
        else:
            x = self.embed(tokens, 0 if cache is None else cache.length)
        x = self.embedding_dropout(x, training=training)
        hidden, attention = [x], []
        for i, block in enumerate(self.blocks):
            x, weights = block(x, cache=None if cache is None else cache.layers[i],
                               return_attention=return_attention, training=training,
                               attention_mask=attention_mask, document_ids=document_ids)
            hidden.append(x)
            attention.append(weights)
        logits = _linear(_layer_norm(x, self.norm_scale, self.norm_bias), self.output_kernel,
                         self.output_bias)
        out = (logits,) + ((hidden,) if return_hidden else ()) \
            + ((attention,) if return_attention else ())
        return out[0] if len(out) == 1 else out
