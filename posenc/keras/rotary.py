"""Rotary position embedding (Keras face): frequencies, rotation, layouts, a cached layer.

RoPE (Su et al.) rotates each pair of query and key features by
``position * inv_freq[i]``; the score ``q_m . k_n`` then depends on the
positions only through ``m - n``. :func:`rope_frequencies` gives the
frequencies (with Hugging Face's context scalings), :func:`apply_rope`
rotates a tensor ``(..., seq, head_dim)``, :class:`RotaryEmbedding` rotates
``q`` and ``k`` from a cos/sin cache (decoding with ``offset``),
:func:`apply_rope_2d` is axial RoPE for image patches, and
:func:`convert_rope_layout` converts checkpoints between the ``"half"`` and
``"interleaved"`` layouts.

Only ``keras.ops``: the angles are float32 whatever the dtype policy (a
bfloat16 position near 65,536 would be 256 away from the true one), and cos
and sin are cast to the input's dtype last. The frequencies and their
registry are in ``posenc/rotary.py``, its rules beside them; the
PyTorch face mirrors this module name for name.
"""

from __future__ import annotations

import keras
import numpy as np
from keras import ops

from posenc import rotary as numpy_rotary
from posenc._checks import (
    _error,
    check_bool,
    check_float,
    check_hw,
    check_int,
    check_positive_int,
    check_rank,
)
from posenc.keras._util import as_positions, dtype_of
from posenc.rotary import (
    check_head_dim,
    check_rope_features,
    check_rope_grid,
    check_rope_layout,
    check_rope_positions,
    check_rope_weight,
    check_rope_width,
)

__all__ = [
    "rope_frequencies",
    "apply_rope",
    "convert_rope_layout",
    "RotaryEmbedding",
    "apply_rope_2d",
    "RotaryEmbedding2D",
]


def rope_frequencies(head_dim: int, *, base: float = 10000.0, scaling: dict | None = None,
                     seq_len: int | None = None):
    """RoPE's inverse frequencies and attention factor, with an optional context scaling.

    ``inv_freq[i] = base^(-2i/d)``, changed by ``scaling`` (Hugging Face's
    ``rope_scaling`` vocabulary; the registry is
    ``posenc.rotary.ROPE_SCALINGS``). Computed in float64, returned as
    float32; equal to Hugging Face's ``ROPE_INIT_FUNCTIONS`` for the types it
    has. See :func:`posenc.rotary.rope_frequencies` for every key.

    Args:
        head_dim: the number of rotated features, even.
        base: the wavelength base; default 10000.0.
        scaling: ``None`` or ``{"rope_type": "linear" | "ntk" | "dynamic" |
            "yarn" | "llama3" | "longrope" | "proportional", "factor": ..., ...}``
            (Hugging Face's ``rope_scaling`` or ``rope_parameters``).
        seq_len: the current sequence length, for ``dynamic`` only.

    Returns:
        ``(inv_freq, attention_factor)``: float32 tensor ``(head_dim // 2,)`` and
        a float (pass it to :func:`apply_rope`).

    Example:
        >>> inv_freq, attention_factor = rope_frequencies(
        ...     64, scaling={"rope_type": "yarn", "factor": 4.0,
        ...                  "original_max_position_embeddings": 2048})
        >>> tuple(inv_freq.shape), round(attention_factor, 4)
        ((32,), 1.1386)

    References:
        Su et al., "RoFormer: Enhanced Transformer with Rotary Position
        Embedding", 2021; Peng et al., "YaRN: Efficient Context Window
        Extension of Large Language Models", ICLR 2024.
    """
    inv_freq, attention_factor = numpy_rotary.rope_frequencies(
        head_dim, base=base, scaling=scaling, seq_len=seq_len)
    return ops.convert_to_tensor(inv_freq), attention_factor


# --------------------------------------------------------------------------- the rotation

def _angles(positions, inv_freq, attention_factor: float, terms=None):
    """float32 ``cos`` and ``sin`` of ``positions * inv_freq``: ``(*positions.shape, n)``.

    The frequencies are padded with zeros to a multiple of 16 for the sines and
    cosines: a backend that computes the last elements of a tensor outside its
    vector loop (TensorFlow on a CPU) then gives every position the same bits,
    whatever the shape of ``positions``. With ``terms``
    (:func:`posenc.rotary.angle_terms`) the angles are exact to about 1e-6 rad
    at any position (:func:`_exact_angles`).
    """
    n = inv_freq.shape[0]
    pad = -n % 16
    inv_freq = ops.pad(ops.cast(inv_freq, "float32"), [(0, pad)])
    if terms is not None:
        terms = ops.pad(ops.convert_to_tensor(terms, "float32"), [(0, 0), (0, 0), (0, pad)])
        angles = _exact_angles(positions, inv_freq, terms)
    else:
        angles = ops.expand_dims(ops.cast(positions, "float32"), -1) * inv_freq
    cos, sin = ops.cos(angles)[..., :n], ops.sin(angles)[..., :n]
    if attention_factor != 1.0:
        cos, sin = cos * attention_factor, sin * attention_factor
    return cos, sin


def _exact_angles(positions, inv_freq, terms):
    """``2 pi frac(p * inv_freq / 2 pi)`` in float32 from the bytes of ``p``
    (see :func:`posenc.rotary.angle_terms`); a float position's fraction adds
    ``fraction * inv_freq``."""
    positions = ops.convert_to_tensor(positions)
    rest = None
    if "float" in str(positions.dtype):
        whole = ops.floor(positions)
        rest = ops.cast(positions - whole, "float32")
    else:
        whole = ops.cast(positions, "int32")
    total = 0.0
    for j in range(terms.shape[0]):
        limb = ops.floor_divide(whole, 256 ** j) if j else whole
        if j < terms.shape[0] - 1:
            limb = limb - 256 * ops.floor_divide(limb, 256)
        limb = ops.expand_dims(ops.cast(limb, "float32"), -1)
        head = limb * terms[j, 0]
        total = total + (head - ops.floor(head)) + limb * terms[j, 1]
    angles = (total - ops.floor(total)) * np.float32(2 * np.pi)
    if rest is not None:
        angles = angles + ops.expand_dims(rest, -1) * inv_freq
    return angles


def _traced_frequencies(rule: dict, length, exact: bool, *, what: str):
    """The frequencies of a length known only in the graph (:meth:`RotarySetup.length_rule`),
    and their exact angles' constants (or ``None``)."""
    length = ops.cast(length, "float32")
    if rule["kind"] == "ntk":
        if exact:
            raise _error(what, "exact=True with rope_type='dynamic' needs the sequence length, "
                               "got a length known only in the graph",
                         "give q a static length and the default positions, or call the "
                         "layer eagerly")
        grown = ops.maximum(rule["factor"] * length / rule["original"] - (rule["factor"] - 1.0),
                            1.0)
        inv_freq, exponent = (ops.convert_to_tensor(rule[k], "float32")
                              for k in ("inv_freq", "exponent"))
        return inv_freq * ops.exp(-ops.log(grown) * exponent), None
    long = length > rule["original"]
    terms = ops.where(long, rule["long_terms"], rule["short_terms"]) if exact else None
    return ops.where(long, rule["long"], rule["short"]), terms


def _value(x):
    """``x``'s value as NumPy, or ``None`` inside a traced function (no value yet)."""
    try:
        return ops.convert_to_numpy(x)
    except Exception:   # each backend has its own tracer error (TensorFlow, JAX, torch)
        return None


def _rotate(x, cos, sin, layout: str, dtype=None):
    """``x`` (cast to ``dtype``) rotated by float32 ``cos``/``sin`` ``(..., seq, n)``.

    ``x * C + swap(x) * S``: ``swap`` exchanges the members of each pair, ``C``
    repeats cos over both members and ``S`` is ``-sin`` on the first, ``sin`` on
    the second: four passes over ``x``, each a plain elementwise op on every backend.
    """
    dtype = dtype or dtype_of(x)
    x = ops.cast(x, dtype)
    cos, sin = ops.cast(cos, dtype), ops.cast(sin, dtype)
    n = cos.shape[-1]
    whole = x.shape[-1] == 2 * n
    rot = x if whole else x[..., :2 * n]
    if layout == "half":
        c, s = ops.concatenate([cos, cos], axis=-1), ops.concatenate([sin, sin], axis=-1)
        swapped = ops.roll(rot, n, axis=-1)
        sign = np.repeat(np.array([-1.0, 1.0], np.float32), n)
    else:
        c, s = ops.repeat(cos, 2, axis=-1), ops.repeat(sin, 2, axis=-1)
        swapped = ops.reshape(ops.stack([rot[..., 1::2], rot[..., 0::2]], axis=-1),
                              ops.shape(rot))
        sign = np.tile(np.array([-1.0, 1.0], np.float32), n)
    rotated = rot * c + swapped * (s * ops.cast(sign, dtype))
    return rotated if whole else ops.concatenate([rotated, x[..., 2 * n:]], axis=-1)


def _batched(cos, sin, positions, x):
    """``(batch, seq, n)`` angles get a singleton axis for each axis of ``x`` between."""
    rank = len(x.shape)
    if len(positions.shape) == 2 and rank > 3:
        for _ in range(rank - 3):
            cos, sin = ops.expand_dims(cos, 1), ops.expand_dims(sin, 1)
    return cos, sin


def _check_x(x, num_freq: int, *, name: str, what: str) -> None:
    check_rank(name, x.shape, tuple(range(2, 9)), what=what,
               fix=f"lay {name} out as (batch, heads, seq, head_dim)")
    check_rope_features(num_freq, x.shape[-1], name=name, what=what)


def _terms(inv_freq, what: str):
    """The exact angles' constants of ``inv_freq`` at its own precision (float64 if given so)."""
    values = inv_freq if isinstance(inv_freq, np.ndarray) else _value(inv_freq)
    if values is None:
        raise _error(what, "exact=True needs the values of inv_freq, got a traced inv_freq",
                     "pass inv_freq as a NumPy array (rope_frequencies' values)")
    return numpy_rotary.angle_terms(np.asarray(values, np.float64).reshape(-1))


def _inv_freq(inv_freq, what: str):
    inv_freq = ops.convert_to_tensor(inv_freq)
    check_rank("inv_freq", inv_freq.shape, 1, what=what,
               fix="pass the (head_dim // 2,) frequencies of rope_frequencies")
    return inv_freq


def apply_rope(x, positions, inv_freq, *, layout: str = "half",
               attention_factor: float = 1.0, exact: bool = False):
    """Rotate the features of ``x`` by the angles ``positions * inv_freq`` (RoPE).

    Pair ``i`` of the first ``r = 2 * len(inv_freq)`` features turns by
    ``positions * inv_freq[i]``; the features from ``r`` on pass unchanged
    (partial rotary, as in GPT-NeoX and Phi). ``layout="half"`` pairs feature
    ``i`` with ``i + r/2`` (GPT-NeoX, Hugging Face's ``rotate_half``);
    ``layout="interleaved"`` pairs ``2i`` with ``2i + 1`` (GPT-J, Meta's
    complex form). Cos and sin are multiplied by ``attention_factor`` (YaRN).
    The angles are float32; the result has ``x``'s dtype.

    Args:
        x: tensor ``(..., seq, head_dim)``, e.g. ``(batch, heads, seq, head_dim)``.
        positions: an int ``seq`` (``0 .. seq-1``), or an int or float tensor
            ``(seq,)`` or ``(batch, seq)``.
        inv_freq: ``(n,)`` frequencies with ``2n <= head_dim``
            (:func:`rope_frequencies`).
        layout: ``"half"`` (default) or ``"interleaved"``.
        attention_factor: scale of cos and sin; 1.0 except for YaRN and LongRoPE.
        exact: ``False`` (default): float32 angles ``positions * inv_freq``, off by
            about ``position * inv_freq * 6e-8`` rad (0.43 rad for base 500000 at
            position 10M); ``True``: the angles reduced modulo ``2 pi`` exactly
            first (:func:`posenc.rotary.angle_terms`), right to about 1e-6 rad at
            any position, from ``inv_freq`` at its own precision (pass float64
            frequencies for the full benefit); a few more elementwise steps per
            angle, the rotation unchanged.

    Returns:
        Tensor of the shape and dtype of ``x``.

    Example:
        >>> inv_freq, _ = rope_frequencies(64)
        >>> q = keras.random.normal((2, 8, 10, 64))
        >>> tuple(apply_rope(q, keras.ops.arange(10), inv_freq).shape)
        (2, 8, 10, 64)

    References:
        Su et al., "RoFormer: Enhanced Transformer with Rotary Position
        Embedding", 2021, section 3.4.
    """
    what = "apply_rope"
    layout = check_rope_layout(layout, what=what)
    attention_factor = check_float("attention_factor", attention_factor, above=0.0, what=what,
                                   fix="use 1.0, or the factor rope_frequencies returns")
    exact = check_bool("exact", exact, what=what)
    terms = _terms(inv_freq, what) if exact else None
    inv_freq = _inv_freq(inv_freq, what)
    x = ops.convert_to_tensor(x)
    _check_x(x, inv_freq.shape[0], name="x", what=what)
    positions = as_positions(positions, what=what)
    check_rope_positions(positions.shape, x.shape, name="x", what=what)
    cos, sin = _batched(*_angles(positions, inv_freq, attention_factor, terms), positions, x)
    return _rotate(x, cos, sin, layout)


def apply_rope_2d(x, height: int, width: int, inv_freq, *, layout: str = "half"):
    """Axial 2D RoPE for a row-major grid of ``height x width`` patches.

    The first ``2n`` features (``n = len(inv_freq)``) turn with the patch's row,
    the next ``2n`` with its column, each as :func:`apply_rope` with the same
    frequencies; the rest pass unchanged. Scores then depend only on the 2D
    offset between patches. Use ``inv_freq = rope_frequencies(head_dim // 2)``
    to rotate every feature.

    Args:
        x: tensor ``(..., height * width, head_dim)``.
        height: rows of patches.
        width: columns of patches.
        inv_freq: ``(n,)`` frequencies with ``4n <= head_dim``.
        layout: ``"half"`` (default) or ``"interleaved"``, within each axis' part.

    Returns:
        Tensor of the shape and dtype of ``x``.

    Example:
        >>> inv_freq, _ = rope_frequencies(16)
        >>> tuple(apply_rope_2d(keras.random.normal((2, 4, 6 * 7, 32)), 6, 7, inv_freq).shape)
        (2, 4, 42, 32)

    References:
        Heo et al., "Rotary Position Embedding for Vision Transformer", ECCV 2024.
    """
    what = "apply_rope_2d"
    height = check_positive_int("height", height, what=what)
    width = check_positive_int("width", width, what=what)
    return _rope_2d(ops.convert_to_tensor(x), height, width, _inv_freq(inv_freq, what), layout,
                    what=what)


def _rope_2d(x, height: int, width: int, inv_freq, layout: str, *, what: str, dtype=None):
    """Rows on the first ``2n`` features, columns on the next ``2n``; the rest unchanged."""
    n = inv_freq.shape[0]
    _check_x(x, 2 * n, name="x", what=what)
    check_rope_grid(height, width, x.shape, name="x", what=what)
    rows, cols = numpy_rotary.grid_positions(height, width)
    dtype = dtype or dtype_of(x)
    parts = [_rotate(x[..., :2 * n], *_angles(rows, inv_freq, 1.0), layout, dtype),
             _rotate(x[..., 2 * n:4 * n], *_angles(cols, inv_freq, 1.0), layout, dtype)]
    if 4 * n < x.shape[-1]:
        parts.append(ops.cast(x[..., 4 * n:], dtype))
    return ops.concatenate(parts, axis=-1)


def convert_rope_layout(weight, num_heads: int, *, to: str):
    """Permute the rows of a q or k projection so that the other RoPE layout computes
    the same attention scores.

    A checkpoint trained with one layout, loaded into a model of the other,
    rotates the wrong pairs. Permuting each head's output rows, the same way
    for q and k, fixes it: ``to="half"`` puts each head's even features first,
    then the odd ones (Meta's Llama checkpoints to Hugging Face's), and
    ``to="interleaved"`` undoes it. Scores are unchanged because ``q . k`` is
    invariant under the same permutation of both.

    Args:
        weight: ``(num_heads * head_dim, in_features)``: a PyTorch-style weight,
            or the transpose of a ``keras.layers.Dense`` kernel.
        num_heads: heads of the projection.
        to: ``"half"`` or ``"interleaved"``, the layout of the model that loads it.

    Returns:
        Tensor of ``weight``'s shape and dtype.

    Example:
        >>> w = keras.ops.reshape(keras.ops.arange(8.0), (8, 1))
        >>> keras.ops.convert_to_numpy(convert_rope_layout(w, 2, to="half"))[:, 0]
        array([0., 2., 1., 3., 4., 6., 5., 7.], dtype=float32)
    """
    what = "convert_rope_layout"
    num_heads = check_positive_int("num_heads", num_heads, what=what)
    weight = ops.convert_to_tensor(weight)
    head_dim = check_rope_weight(weight.shape, num_heads, what=what)
    perm = numpy_rotary.layout_permutation(head_dim, to)
    rows = (np.arange(num_heads)[:, None] * head_dim + perm).reshape(-1).astype(np.int32)
    return ops.take(weight, rows, axis=0)


# --------------------------------------------------------------------------- the layer

@keras.saving.register_keras_serializable(package="posenc")
class RotaryEmbedding(keras.layers.Layer):
    """RoPE for attention: rotates ``q`` and ``k`` with a cached table of cos and sin.

    The layer computes ``inv_freq`` once (:func:`rope_frequencies`) and keeps
    float32 cos and sin for positions ``0 .. size-1`` as NumPy arrays (at least
    ``max_len``; an eager call that needs more regrows it to the next power of
    two that holds its last position, and a traced
    call past its end computes its own); a call with a static length and the
    default positions slices it as a constant, so the layer works eagerly, in
    ``tf.function`` and under ``jit_compile``. Called
    with ``offset``, it rotates the new tokens of a decoder at positions
    ``offset .. offset + seq - 1``: token-by-token decoding equals the full
    pass. With ``scaling={"rope_type": "dynamic" | "longrope", ...}`` the
    frequencies follow the length of each call (``offset + seq``, or the
    largest of ``positions`` + 1) instead of the table. A KV cache does not
    follow them: keys cached before the length crossed
    ``original_max_position_embeddings`` keep the frequencies they were
    rotated with (LongRoPE's ``short_factor``, dynamic NTK's smaller base), so
    decoding past that point differs from a full pass over the same tokens, as
    in Hugging Face; re-encode the cached tokens when the length crosses it.
    :meth:`from_hf_config` builds the layer of a Hugging Face config.
    No weights.

    Args:
        head_dim: features per head, even.
        base: the wavelength base; default 10000.0.
        scaling: ``None`` or a Hugging Face ``rope_scaling`` dict (see
            :func:`rope_frequencies`; the legacy key ``type`` is read too). With
            ``partial_rotary_factor`` in it, ``rotary_dim`` is
            ``int(head_dim * partial_rotary_factor)``.
        layout: ``"half"`` (default) or ``"interleaved"``.
        rotary_dim: features rotated (partial rotary), even, at most
            ``head_dim``; default ``head_dim``.
        max_len: initial size of the cos/sin table; default 2048.
        exact: angles exact at any position, from the float64 frequencies (see
            :func:`apply_rope`); default ``False``. Use it past about 100,000
            positions.

    Call arguments:
        q: ``(batch, heads, seq, head_dim)`` (any ``(..., seq, head_dim)``).
        k: the keys, of the same layout and ``seq``.
        offset: position of the first token (the cached ones before it);
            default 0.
        positions: optional int or float ``(seq,)`` or ``(batch, seq)``; the
            absolute positions, used instead of ``offset + arange(seq)``.

    Returns:
        ``(q_rot, k_rot)`` of the shapes of ``q`` and ``k``, in the compute dtype.

    Example:
        >>> rope = RotaryEmbedding(64)
        >>> q, k = keras.random.normal((2, 8, 10, 64)), keras.random.normal((2, 8, 10, 64))
        >>> q_rot, k_rot = rope(q, k)
        >>> q_new, k_new = rope(q[:, :, :1], k[:, :, :1], offset=10)   # an 11th token
        >>> tuple(q_new.shape)
        (2, 8, 1, 64)

    References:
        Su et al., "RoFormer: Enhanced Transformer with Rotary Position
        Embedding", 2021.
    """

    def __init__(self, head_dim: int, *, base: float = 10000.0, scaling: dict | None = None,
                 layout: str = "half", rotary_dim: int | None = None, max_len: int = 2048,
                 exact: bool = False, **kwargs):
        super().__init__(**kwargs)
        what = "RotaryEmbedding"
        self.max_len = check_positive_int("max_len", max_len, what=what)
        self._setup = numpy_rotary.rotary_setup(head_dim, rotary_dim, base, scaling, self.max_len,
                                                what=what)
        self.head_dim, self.rotary_dim = self._setup.head_dim, self._setup.rotary_dim
        self.layout = check_rope_layout(layout, what=what)
        self.dynamic = self._setup.by_length
        self.exact = check_bool("exact", exact, what=what)
        inv_freq, self.attention_factor = self._setup.frequencies()
        self._inv_freq = inv_freq.astype(np.float32)
        self._terms = numpy_rotary.angle_terms(inv_freq) if self.exact else None
        self._rule = self._setup.length_rule() if self.dynamic else None
        self.scaling = None if scaling is None else dict(scaling)
        self.base = float(base)
        self._cos = self._sin = np.zeros((0, self.rotary_dim // 2), np.float32)
        self.built = True

    @classmethod
    def from_hf_config(cls, config, *, layer_type: str | None = None, **kwargs):
        """The layer of a Hugging Face config (a ``config.json`` dict or a config object):
        its head width, base and scaling as :func:`posenc.rotary.hf_rope` reads them,
        ``partial_rotary_factor`` included; ``kwargs`` (``layout``, ``max_len``) pass on.

        Example:
            >>> rope = RotaryEmbedding.from_hf_config({"hidden_size": 2048,
            ...     "num_attention_heads": 16, "rope_theta": 1000000.0})
            >>> rope.head_dim, rope.base
            (128, 1000000.0)
        """
        return cls(**numpy_rotary.hf_rope(config, layer_type=layer_type), **kwargs)

    def _angles(self, positions, length):
        """cos and sin of ``positions`` with the frequencies of a ``length``-long sequence
        (an int, or a tensor inside a traced function)."""
        inv_freq, terms = self._inv_freq, self._terms
        if self.dynamic:
            if isinstance(length, (int, np.integer)):
                inv_freq64, _ = self._setup.frequencies(int(length))
                inv_freq = inv_freq64.astype(np.float32)
                terms = numpy_rotary.angle_terms(inv_freq64) if self.exact else None
            else:
                inv_freq, terms = _traced_frequencies(self._rule, length,
                                                      self.exact, what=type(self).__name__)
        return _angles(positions, inv_freq, self.attention_factor, terms)

    def _table(self, offset: int, seq):
        """cos and sin ``(seq, rotary_dim / 2)`` for positions ``offset .. offset+seq-1``."""
        if self.dynamic:
            return self._angles(ops.arange(offset, offset + seq, dtype="int32"), offset + seq)
        end = offset + seq
        if self._cos.shape[0] < end:
            size = max(self.max_len, 1 << (end - 1).bit_length())
            cos, sin = self._angles(ops.arange(size, dtype="int32"), size)
            try:   # the same ops as explicit positions, so the same bits
                self._cos, self._sin = ops.convert_to_numpy(cos), ops.convert_to_numpy(sin)
            except (NotImplementedError, TypeError, ValueError):   # traced: no value yet
                return cos[offset:end], sin[offset:end]
        return (ops.convert_to_tensor(self._cos[offset:end]),
                ops.convert_to_tensor(self._sin[offset:end]))

    def call(self, q, k, offset: int = 0, positions=None):
        what = type(self).__name__
        n = self.rotary_dim // 2
        for name, t in (("q", q), ("k", k)):
            check_rope_width(name, t.shape, self.head_dim, what=what)
            _check_x(t, n, name=name, what=what)
        offset = check_int("offset", offset, minimum=0, what=what,
                           fix="pass the number of cached tokens before q")
        check_rope_positions((q.shape[-2],), k.shape, name="k", what=what)
        if positions is None:
            seq = q.shape[-2]
            if seq is None:   # a traced length: the frequencies follow it in the graph
                length = ops.shape(q)[-2] + offset
                cos, sin = self._angles(ops.arange(ops.shape(q)[-2], dtype="int32") + offset,
                                        length)
            else:
                cos, sin = self._table(offset, seq)
            qc = kc = (cos, sin)
        else:
            positions = as_positions(positions, what=what)
            check_rope_positions(positions.shape, q.shape, name="q", what=what)
            check_rope_positions(positions.shape, k.shape, name="k", what=what)
            length = 0
            if self.dynamic:   # the sequence these positions end: its largest one + 1
                largest = ops.max(positions) + 1
                value = _value(largest)
                length = largest if value is None else int(value)
            cos, sin = self._angles(positions, length)
            qc, kc = _batched(cos, sin, positions, q), _batched(cos, sin, positions, k)
        dtype = self.compute_dtype
        return _rotate(q, *qc, self.layout, dtype), _rotate(k, *kc, self.layout, dtype)

    def compute_output_shape(self, q_shape, k_shape=None):
        return tuple(q_shape), tuple(q_shape if k_shape is None else k_shape)

    def get_config(self):
        config = super().get_config()
        config.update({"head_dim": self.head_dim, "base": self.base, "scaling": self.scaling,
                       "layout": self.layout, "rotary_dim": self.rotary_dim,
                       "max_len": self.max_len, "exact": self.exact})
        return config


@keras.saving.register_keras_serializable(package="posenc")
class RotaryEmbedding2D(keras.layers.Layer):
    """Axial 2D RoPE for the patches of an image: rotates ``q`` and ``k`` by row and column.

    The first half of each head's features turns with the patch's row, the
    second half with its column (:func:`apply_rope_2d` with
    ``rope_frequencies(head_dim // 2)``), so a score depends only on the 2D
    offset between two patches. The grid is fixed; no weights.

    Args:
        head_dim: features per head, a multiple of 4.
        grid: ``(height, width)`` of the row-major grid of patches.
        base: the wavelength base; default 10000.0.
        layout: ``"half"`` (default) or ``"interleaved"``, within each axis' half.

    Call arguments:
        q: ``(batch, heads, height * width, head_dim)`` (any ``(..., height * width, head_dim)``).
        k: the keys, of the same layout.

    Returns:
        ``(q_rot, k_rot)`` of the shapes of ``q`` and ``k``, in the compute dtype.

    Example:
        >>> rope = RotaryEmbedding2D(32, (6, 7))
        >>> q = k = keras.random.normal((2, 4, 42, 32))
        >>> tuple(rope(q, k)[0].shape)
        (2, 4, 42, 32)

    References:
        Heo et al., "Rotary Position Embedding for Vision Transformer", ECCV 2024.
    """

    def __init__(self, head_dim: int, grid, *, base: float = 10000.0, layout: str = "half",
                 **kwargs):
        super().__init__(**kwargs)
        what = "RotaryEmbedding2D"
        self.head_dim = check_head_dim(head_dim, multiple=4, what=what)
        self.grid = check_hw("grid", grid, what=what)
        self.layout = check_rope_layout(layout, what=what)
        self._inv_freq, _ = numpy_rotary.checked_frequencies(self.head_dim // 2, base, None,
                                                             None, what=what)
        self.base = float(base)
        self.built = True

    def call(self, q, k):
        what = type(self).__name__
        for name, t in (("q", q), ("k", k)):
            check_rank(name, t.shape, tuple(range(2, 9)), what=what,
                       fix=f"lay {name} out as (batch, heads, seq, head_dim)")
            check_rope_width(name, t.shape, self.head_dim, what=what)
        return tuple(_rope_2d(t, *self.grid, self._inv_freq, self.layout, what=what,
                              dtype=self.compute_dtype) for t in (q, k))

    def compute_output_shape(self, q_shape, k_shape=None):
        return tuple(q_shape), tuple(q_shape if k_shape is None else k_shape)

    def get_config(self):
        config = super().get_config()
        config.update({"head_dim": self.head_dim, "grid": list(self.grid), "base": self.base,
                       "layout": self.layout})
        return config
