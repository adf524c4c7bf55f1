"""Rotary position embedding (PyTorch face): frequencies, rotation, layouts, a cached module.

RoPE (Su et al.) rotates each pair of query and key features by
``position * inv_freq[i]``; the score ``q_m . k_n`` then depends on the
positions only through ``m - n``. :func:`rope_frequencies` gives the
frequencies (with Hugging Face's context scalings), :func:`apply_rope`
rotates a tensor ``(..., seq, head_dim)``, :class:`RotaryEmbedding` rotates
``q`` and ``k`` from a cos/sin cache (decoding with ``offset``),
:func:`apply_rope_2d` is axial RoPE for image patches, and
:func:`convert_rope_layout` converts checkpoints between the ``"half"`` and
``"interleaved"`` layouts.

Precision: the angles are computed in float32 with autocast off
(``torch.outer``, never a bfloat16 ``einsum``), then cos and sin are cast to
``x``'s dtype: bfloat16 positions near 65,536 would be 256 apart. Speed: in
eager mode the interleaved layout is one complex product, the half layout
``x * cos`` then one ``addcmul_`` per half (no ``rotate_half`` copies), and
the backward is the same rotation with the angle negated; under
``torch.compile`` a plain formula is traced.

The frequencies and their registry are in ``posenc/rotary.py``, its rules beside
them; the Keras face mirrors this module name for name.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

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
from posenc.torch._util import as_positions, is_compiling
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
                     seq_len: int | None = None) -> tuple[torch.Tensor, float]:
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
        >>> inv_freq.shape, round(attention_factor, 4)
        (torch.Size([32]), 1.1386)

    References:
        Su et al., "RoFormer: Enhanced Transformer with Rotary Position
        Embedding", 2021; Peng et al., "YaRN: Efficient Context Window
        Extension of Large Language Models", ICLR 2024.
    """
    inv_freq, attention_factor = numpy_rotary.rope_frequencies(
        head_dim, base=base, scaling=scaling, seq_len=seq_len)
    return torch.from_numpy(inv_freq), attention_factor


# --------------------------------------------------------------------------- the rotation

def _angles(positions: torch.Tensor, inv_freq: torch.Tensor, attention_factor: float,
            terms: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 ``cos`` and ``sin`` of ``positions * inv_freq``: ``(*positions.shape, n)``.

    Autocast is off and both factors are float32. In bfloat16 a position rounds
    to a multiple of 256 from 32,768 on and of 512 from 65,536 on, so the fastest
    pair's angle (``inv_freq = 1``) would be off by up to 128 and 256 radians there,
    and more once ``inv_freq`` is rounded too. With ``terms``
    (:func:`posenc.rotary.angle_terms`) the angles are exact to about 1e-6 rad
    at any position (:func:`_exact_angles`).
    """
    device = inv_freq.device
    with torch.autocast(device_type=device.type, enabled=False):
        f = inv_freq.to(torch.float32)
        if terms is not None:
            angles = _exact_angles(positions.to(device), f, terms.to(device))
        else:
            p = positions.to(device=device, dtype=torch.float32)
            angles = torch.outer(p, f) if p.dim() == 1 else p[..., None] * f
        cos, sin = angles.cos(), angles.sin()
        if attention_factor != 1.0:
            cos, sin = cos * attention_factor, sin * attention_factor
    return cos, sin


def _exact_angles(positions: torch.Tensor, inv_freq: torch.Tensor,
                  terms: torch.Tensor) -> torch.Tensor:
    """``2 pi frac(p * inv_freq / 2 pi)`` in float32 from the bytes of ``p``
    (see :func:`posenc.rotary.angle_terms`); a float position's fraction adds
    ``fraction * inv_freq``."""
    if positions.is_floating_point():
        whole = torch.floor(positions)
        rest = (positions - whole).to(torch.float32)
        whole = whole.to(torch.int64)
    else:
        whole, rest = positions.to(torch.int64), None
    total = torch.zeros((*whole.shape, inv_freq.shape[0]), dtype=torch.float32,
                        device=inv_freq.device)
    for j in range(terms.shape[0]):
        limb = torch.div(whole, 256 ** j, rounding_mode="floor")
        if j < terms.shape[0] - 1:
            limb = torch.remainder(limb, 256)
        limb = limb.to(torch.float32)[..., None]
        head = limb * terms[j, 0]
        total = total + (head - torch.floor(head)) + limb * terms[j, 1]
    angles = (total - torch.floor(total)) * (2 * np.pi)
    if rest is not None:
        angles = angles + rest[..., None] * inv_freq
    return angles


def _traced_frequencies(rule: dict, length, exact: bool, device, *, what: str):
    """The frequencies of a length that only the traced graph knows, from
    :meth:`posenc.rotary.RotarySetup.length_rule`, and their exact angles' constants."""
    length = torch.as_tensor(length, device=device)
    if rule["kind"] == "ntk":
        if exact:
            raise _error(what, "exact=True with rope_type='dynamic' needs the sequence length, "
                               "got a length known only in the graph",
                         "call the layer eagerly, outside torch.compile")
        # float64 (on the CPU where the device has none), as the eager path's NumPy
        where = "cpu" if device.type == "mps" else device
        n = length.to(where, torch.float64)
        factor, d = rule["factor"], rule["dim"]
        grown = torch.clamp(factor * n / rule["original"] - (factor - 1.0), min=1.0)
        base = rule["base"] * grown ** (d / (d - 2))
        exponents = torch.arange(0, d, 2, dtype=torch.float64, device=where) / d
        return (1.0 / base ** exponents).to(device, torch.float32), None
    long = length.to(torch.float32) > rule["original"]
    inv_freq = torch.where(long, torch.as_tensor(rule["long"], device=device),
                           torch.as_tensor(rule["short"], device=device))
    terms = (torch.where(long, torch.as_tensor(rule["long_terms"], device=device),
                         torch.as_tensor(rule["short_terms"], device=device)) if exact else None)
    return inv_freq, terms


def _pairs(t: torch.Tensor, n: int, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The two members of each rotated pair, as views of ``t``."""
    if layout == "half":
        return t[..., :n], t[..., n:2 * n]
    return t[..., 0:2 * n:2], t[..., 1:2 * n:2]


def _rotate_plain(x, cos, sin, layout):
    """The rotation as a formula (traced by ``torch.compile``, differentiable in all inputs)."""
    n = cos.shape[-1]
    x1, x2 = _pairs(x, n, layout)
    a, b = x1 * cos - x2 * sin, x2 * cos + x1 * sin
    rotated = (torch.cat((a, b), -1) if layout == "half"
               else torch.stack((a, b), -1).flatten(-2))
    return torch.cat((rotated, x[..., 2 * n:]), -1) if 2 * n < x.shape[-1] else rotated


def _rotate_fused(x, cos, sin, layout):
    """The rotation into one new tensor, in as few passes over ``x`` as eager ops allow.

    Interleaved float32/float64: one complex multiplication (``x`` read once, the output
    written once). Otherwise ``x * cos`` in one pass over the pairs, then an ``addcmul_``
    per member of each pair: 3 reads and 2 writes of ``x``'s size, and no ``rotate_half``
    temporaries.
    """
    n = cos.shape[-1]
    rotated = x[..., :2 * n]
    if 2 * n == x.shape[-1] and x.is_contiguous():
        out = None
    else:
        out = torch.empty_like(x, memory_format=torch.contiguous_format)
        out[..., 2 * n:] = x[..., 2 * n:]
    if (layout == "interleaved" and x.dtype in (torch.float32, torch.float64)
            and x.stride(-1) == 1 and x.storage_offset() % 2 == 0
            and all(s % 2 == 0 for s in x.stride()[:-1])):
        pairs = torch.view_as_complex(rotated.unflatten(-1, (n, 2)))
        turn = torch.complex(cos, sin)
        if out is None:
            return torch.view_as_real(pairs * turn).flatten(-2)
        torch.mul(pairs, turn, out=torch.view_as_complex(out[..., :2 * n].unflatten(-1, (n, 2))))
        return out
    split, axis = ((2, n), -2) if layout == "half" else ((n, 2), -1)
    pairs = rotated.unflatten(-1, split)
    if out is None:
        turned = pairs * cos.unsqueeze(axis)
    else:
        turned = out[..., :2 * n].unflatten(-1, split)
        torch.mul(pairs, cos.unsqueeze(axis), out=turned)
    first, second = (turned.select(axis, i) for i in (0, 1))
    first.addcmul_(pairs.select(axis, 1), sin, value=-1)
    second.addcmul_(pairs.select(axis, 0), sin)
    return turned.flatten(-2) if out is None else out


class _Rotate(torch.autograd.Function):
    """Rotation by ``(cos, sin)``; its gradient is the rotation by ``(cos, -sin)``."""

    @staticmethod
    def forward(ctx, x, cos, sin, layout):
        ctx.save_for_backward(cos, sin)
        ctx.layout = layout
        with torch.no_grad():
            return _rotate_fused(x, cos, sin, layout)

    @staticmethod
    def backward(ctx, grad):
        cos, sin = ctx.saved_tensors
        return _Rotate.apply(grad, cos, -sin, ctx.layout), None, None, None


def _rotate(x, cos, sin, layout):
    """``x`` rotated by float32 ``cos``/``sin`` ``(..., seq, n)``, cast to ``x``'s dtype."""
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    if is_compiling() or cos.requires_grad or sin.requires_grad:
        return _rotate_plain(x, cos, sin, layout)
    return _Rotate.apply(x, cos, sin, layout)


def _batched(cos, sin, positions, x):
    """``(batch, seq, n)`` angles get a singleton axis for each axis of ``x`` between."""
    if positions.dim() == 2 and x.dim() > 3:
        shape = (cos.shape[0],) + (1,) * (x.dim() - 3) + tuple(cos.shape[1:])
        return cos.reshape(shape), sin.reshape(shape)
    return cos, sin


def _check_x(x, num_freq: int, *, name: str, what: str) -> None:
    check_rank(name, x.shape, tuple(range(2, 9)), what=what,
               fix=f"lay {name} out as (batch, heads, seq, head_dim)")
    check_rope_features(num_freq, x.shape[-1], name=name, what=what)


def _terms(inv_freq) -> torch.Tensor:
    """The exact angles' constants of ``inv_freq`` at its own precision (float64 if given so)."""
    values = (inv_freq.detach().to("cpu", torch.float64).numpy() if torch.is_tensor(inv_freq)
              else np.asarray(inv_freq, np.float64))
    return torch.as_tensor(numpy_rotary.angle_terms(values.reshape(-1)))


def _inv_freq(inv_freq, what: str) -> torch.Tensor:
    inv_freq = inv_freq if torch.is_tensor(inv_freq) else torch.as_tensor(np.asarray(inv_freq))
    check_rank("inv_freq", inv_freq.shape, 1, what=what,
               fix="pass the (head_dim // 2,) frequencies of rope_frequencies")
    return inv_freq


def apply_rope(x: torch.Tensor, positions, inv_freq, *, layout: str = "half",
               attention_factor: float = 1.0, exact: bool = False) -> torch.Tensor:
    """Rotate the features of ``x`` by the angles ``positions * inv_freq`` (RoPE).

    Pair ``i`` of the first ``r = 2 * len(inv_freq)`` features turns by
    ``positions * inv_freq[i]``; the features from ``r`` on pass unchanged
    (partial rotary, as in GPT-NeoX and Phi). ``layout="half"`` pairs feature
    ``i`` with ``i + r/2`` (GPT-NeoX, Hugging Face's ``rotate_half``);
    ``layout="interleaved"`` pairs ``2i`` with ``2i + 1`` (GPT-J, Meta's
    complex form). Cos and sin are multiplied by ``attention_factor`` (YaRN).
    The angles are float32 with autocast off; the result has ``x``'s dtype.

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
        >>> q = torch.randn(2, 8, 10, 64)
        >>> apply_rope(q, torch.arange(10), inv_freq).shape
        torch.Size([2, 8, 10, 64])

    References:
        Su et al., "RoFormer: Enhanced Transformer with Rotary Position
        Embedding", 2021, section 3.4.
    """
    what = "apply_rope"
    layout = check_rope_layout(layout, what=what)
    attention_factor = check_float("attention_factor", attention_factor, above=0.0, what=what,
                                   fix="use 1.0, or the factor rope_frequencies returns")
    exact = check_bool("exact", exact, what=what)
    terms = _terms(inv_freq) if exact else None
    inv_freq = _inv_freq(inv_freq, what)
    _check_x(x, inv_freq.shape[0], name="x", what=what)
    positions = as_positions(positions, what=what)
    check_rope_positions(positions.shape, x.shape, name="x", what=what)
    cos, sin = _angles(positions, inv_freq.to(x.device), attention_factor, terms)
    cos, sin = _batched(cos, sin, positions, x)
    return _rotate(x, cos, sin, layout)


def apply_rope_2d(x: torch.Tensor, height: int, width: int, inv_freq, *,
                  layout: str = "half") -> torch.Tensor:
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
        >>> apply_rope_2d(torch.randn(2, 4, 6 * 7, 32), 6, 7, inv_freq).shape
        torch.Size([2, 4, 42, 32])

    References:
        Heo et al., "Rotary Position Embedding for Vision Transformer", ECCV 2024.
    """
    what = "apply_rope_2d"
    height = check_positive_int("height", height, what=what)
    width = check_positive_int("width", width, what=what)
    return _rope_2d(x, height, width, _inv_freq(inv_freq, what), layout, what=what)


def _rope_2d(x, height: int, width: int, inv_freq: torch.Tensor, layout: str, *, what: str):
    """Rows on the first ``2n`` features, columns on the next ``2n``; the rest unchanged."""
    n = inv_freq.shape[0]
    _check_x(x, 2 * n, name="x", what=what)
    check_rope_grid(height, width, x.shape, name="x", what=what)
    rows, cols = (torch.as_tensor(a, device=x.device)
                  for a in numpy_rotary.grid_positions(height, width))
    parts = [apply_rope(x[..., :2 * n], rows, inv_freq, layout=layout),
             apply_rope(x[..., 2 * n:4 * n], cols, inv_freq, layout=layout)]
    return torch.cat(parts + ([x[..., 4 * n:]] if 4 * n < x.shape[-1] else []), -1)


def convert_rope_layout(weight: torch.Tensor, num_heads: int, *, to: str) -> torch.Tensor:
    """Permute the rows of a q or k projection so that the other RoPE layout computes
    the same attention scores.

    A checkpoint trained with one layout, loaded into a model of the other,
    rotates the wrong pairs. Permuting each head's output rows, the same way
    for q and k, fixes it: ``to="half"`` puts each head's even features first,
    then the odd ones (Meta's Llama checkpoints to Hugging Face's), and
    ``to="interleaved"`` undoes it. Scores are unchanged because ``q . k`` is
    invariant under the same permutation of both.

    Args:
        weight: ``(num_heads * head_dim, in_features)``, e.g. ``nn.Linear.weight``
            (a bias ``(num_heads * head_dim,)`` works as ``bias[:, None]``).
        num_heads: heads of the projection.
        to: ``"half"`` or ``"interleaved"``, the layout of the model that loads it.

    Returns:
        Tensor of ``weight``'s shape and dtype.

    Example:
        >>> w = torch.arange(8.)[:, None]
        >>> convert_rope_layout(w, 2, to="half")[:, 0]
        tensor([0., 2., 1., 3., 4., 6., 5., 7.])
    """
    what = "convert_rope_layout"
    num_heads = check_positive_int("num_heads", num_heads, what=what)
    head_dim = check_rope_weight(weight.shape, num_heads, what=what)
    perm = torch.as_tensor(numpy_rotary.layout_permutation(head_dim, to), device=weight.device)
    return weight.reshape(num_heads, head_dim, -1)[:, perm].reshape(weight.shape)


# --------------------------------------------------------------------------- the module

class RotaryEmbedding(nn.Module):
    """RoPE for attention: rotates ``q`` and ``k`` with a cached table of cos and sin.

    The module computes ``inv_freq`` once (:func:`rope_frequencies`) and keeps
    float32 cos and sin for positions ``0 .. size-1`` (at least ``max_len``;
    a call that needs more regrows it to the next power of two that holds the
    call's last position, in eager mode; under
    ``torch.compile`` a longer call computes its angles directly). Called with
    ``offset``, it rotates the new tokens of a decoder at positions
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
        ``(q_rot, k_rot)`` of the shapes and dtypes of ``q`` and ``k``.

    Example:
        >>> rope = RotaryEmbedding(64)
        >>> q, k = torch.randn(2, 8, 10, 64), torch.randn(2, 8, 10, 64)
        >>> q_rot, k_rot = rope(q, k)
        >>> q_new, k_new = rope(q[:, :, :1], k[:, :, :1], offset=10)   # an 11th token
        >>> q_new.shape
        torch.Size([2, 8, 1, 64])

    References:
        Su et al., "RoFormer: Enhanced Transformer with Rotary Position
        Embedding", 2021.
    """

    def __init__(self, head_dim: int, *, base: float = 10000.0, scaling: dict | None = None,
                 layout: str = "half", rotary_dim: int | None = None, max_len: int = 2048,
                 exact: bool = False):
        super().__init__()
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
        self.register_buffer("_cos", torch.empty(0, self.rotary_dim // 2), persistent=False)
        self.register_buffer("_sin", torch.empty(0, self.rotary_dim // 2), persistent=False)

    def extra_repr(self) -> str:
        return (f"head_dim={self.head_dim}, base={self.base}, scaling={self.scaling}, "
                f"layout={self.layout!r}, rotary_dim={self.rotary_dim}, max_len={self.max_len}"
                + (", exact=True" if self.exact else ""))

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

    def _angles(self, positions: torch.Tensor, length: int):
        """cos and sin of ``positions`` with the frequencies of a ``length``-long sequence."""
        inv_freq, terms = self._inv_freq, self._terms
        device = self._cos.device
        if self.dynamic and (is_compiling() or torch.is_tensor(length)):
            inv_freq, terms = _traced_frequencies(self._rule, length, self.exact,
                                                  device, what=type(self).__name__)
            return _angles(positions, inv_freq, self.attention_factor, terms)
        if self.dynamic:
            inv_freq64, _ = self._setup.frequencies(length)
            inv_freq = inv_freq64.astype(np.float32)
            terms = numpy_rotary.angle_terms(inv_freq64) if self.exact else None
        return _angles(positions, torch.as_tensor(inv_freq, device=device), self.attention_factor,
                       None if terms is None else torch.as_tensor(terms, device=device))

    def _table(self, offset: int, seq: int):
        """cos and sin ``(seq, rotary_dim / 2)`` for positions ``offset .. offset+seq-1``."""
        end = offset + seq
        if self.dynamic or (is_compiling() and (self._cos.shape[0] < end
                                                or self._cos.dtype != torch.float32)):
            return self._angles(torch.arange(offset, end, device=self._cos.device), end)
        if self._cos.shape[0] < end or self._cos.dtype != torch.float32:
            size = max(self.max_len, 1 << (end - 1).bit_length()) if end else self.max_len
            self._cos, self._sin = self._angles(torch.arange(size, device=self._cos.device), size)
        return self._cos[offset:end], self._sin[offset:end]

    def forward(self, q: torch.Tensor, k: torch.Tensor, *, offset: int = 0, positions=None):
        what = type(self).__name__
        n = self.rotary_dim // 2
        for name, t in (("q", q), ("k", k)):
            check_rope_width(name, t.shape, self.head_dim, what=what)
            _check_x(t, n, name=name, what=what)
        offset = check_int("offset", offset, minimum=0, what=what,
                           fix="pass the number of cached tokens before q")
        check_rope_positions((q.shape[-2],), k.shape, name="k", what=what)
        if positions is None:
            cos, sin = self._table(offset, q.shape[-2])
            qc = kc = (cos, sin)
        else:
            positions = as_positions(positions, what=what)
            check_rope_positions(positions.shape, q.shape, name="q", what=what)
            check_rope_positions(positions.shape, k.shape, name="k", what=what)
            # the frequencies of the sequence these positions end: its largest one + 1
            length = 0
            if self.dynamic and positions.numel():
                largest = positions.max() + 1
                length = largest if is_compiling() else int(largest)
            cos, sin = self._angles(positions, length)
            qc, kc = _batched(cos, sin, positions, q), _batched(cos, sin, positions, k)
        return _rotate(q, *qc, self.layout), _rotate(k, *kc, self.layout)


class RotaryEmbedding2D(nn.Module):
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
        ``(q_rot, k_rot)`` of the shapes and dtypes of ``q`` and ``k``.

    Example:
        >>> rope = RotaryEmbedding2D(32, (6, 7))
        >>> q = k = torch.randn(2, 4, 42, 32)
        >>> rope(q, k)[0].shape
        torch.Size([2, 4, 42, 32])

    References:
        Heo et al., "Rotary Position Embedding for Vision Transformer", ECCV 2024.
    """

    def __init__(self, head_dim: int, grid, *, base: float = 10000.0, layout: str = "half"):
        super().__init__()
        what = "RotaryEmbedding2D"
        self.head_dim = check_head_dim(head_dim, multiple=4, what=what)
        self.grid = check_hw("grid", grid, what=what)
        self.layout = check_rope_layout(layout, what=what)
        self._inv_freq, _ = numpy_rotary.checked_frequencies(self.head_dim // 2, base, None,
                                                             None, what=what)
        self.base = float(base)
        self.register_buffer("_anchor", torch.empty(0), persistent=False)

    def extra_repr(self) -> str:
        return (f"head_dim={self.head_dim}, grid={self.grid}, base={self.base}, "
                f"layout={self.layout!r}")

    def forward(self, q: torch.Tensor, k: torch.Tensor):
        inv_freq = torch.as_tensor(self._inv_freq, device=self._anchor.device)
        what = type(self).__name__
        for name, t in (("q", q), ("k", k)):
            check_rank(name, t.shape, tuple(range(2, 9)), what=what,
                       fix=f"lay {name} out as (batch, heads, seq, head_dim)")
            check_rope_width(name, t.shape, self.head_dim, what=what)
        return tuple(_rope_2d(t, *self.grid, inv_freq, self.layout, what=what) for t in (q, k))
