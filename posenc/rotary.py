"""Rotary position embedding (NumPy): the frequencies, their scalings, the layouts.

RoPE (Su et al.) rotates each pair of query and key features by an angle
``position * inv_freq[i]``, so that the score ``q_m . k_n`` depends on the
positions only through ``m - n``. The frequencies are
``inv_freq[i] = base^(-2i/d)`` for ``i = 0 .. d/2 - 1``; the ways to stretch a
model past its trained length change them, and YaRN also scales the
attention (``attention_factor``). Each variant is a small function of a
registry, :data:`ROPE_SCALINGS`, keyed by Hugging Face's ``rope_type`` names:

* ``default``: no scaling;
* ``linear``: position interpolation (Chen et al.), ``inv_freq / factor``;
* ``ntk``: the static NTK-aware rule, ``base * factor^(d/(d-2))``;
* ``dynamic``: dynamic NTK, the same rule with the factor grown to
  ``factor * seq_len / L - (factor - 1)`` for ``seq_len > L`` (``L`` the
  original length) and the default frequencies below it;
* ``yarn`` (Peng et al.): the fast frequencies kept, the slow ones
  interpolated, a linear ramp between, and ``attention_factor =
  0.1 ln(factor) + 1``;
* ``llama3``: wavelengths longer than ``L / low_freq_factor`` divided by
  ``factor``, shorter than ``L / high_freq_factor`` kept, a smooth blend
  between.

Every value is computed in float64 and returned as float32; for each type
Hugging Face transformers has (all but ``ntk``) the frequencies equal its
``ROPE_INIT_FUNCTIONS``. The faces only convert them.

Layouts: ``"half"`` pairs feature ``i`` with ``i + r/2`` (GPT-NeoX, Hugging
Face's ``rotate_half``); ``"interleaved"`` pairs ``2i`` with ``2i + 1``
(GPT-J, Meta's complex form). :func:`layout_permutation` is the row
permutation of a q or k projection that turns one into the other. The
rules of RoPE's arguments (``check_head_dim``, ``check_rope_*``) are here too,
next to the registry; the message builder is in :mod:`posenc._checks`.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from posenc._checks import (
    _error,
    check_base,
    check_choice,
    check_float,
    check_positive_int,
)

__all__ = [
    "ROPE_LAYOUTS",
    "ROPE_SCALINGS",
    "rope_frequencies",
    "checked_frequencies",
    "layout_permutation",
    "grid_positions",
]


# --------------------------------------------------------------------------- the rules

#: The two ways to pair a head's features (see the module docstring).
ROPE_LAYOUTS = ("half", "interleaved")


def check_head_dim(head_dim, *, name: str = "head_dim", multiple: int = 2,
                   what: str = "") -> int:
    """The number of rotated features: a positive integer, even (they rotate in pairs), or
    a multiple of 4 for axial 2D RoPE (``multiple=4``: pairs for the rows and the columns)."""
    head_dim = check_positive_int(name, head_dim, what=what)
    if head_dim % multiple:
        lower = head_dim - head_dim % multiple
        reason = ("must be even (RoPE rotates the features in pairs)" if multiple == 2 else
                  f"must be a multiple of {multiple} (pairs of features for the rows and "
                  "as many for the columns)")
        raise _error(what, f"{name} {reason}, got {name}={head_dim}",
                     f"use {name}={lower + multiple}" + (f" or {name}={lower}" if lower else ""))
    return head_dim


def check_rope_layout(layout, *, what: str = "") -> str:
    """``"half"`` (GPT-NeoX, Hugging Face) or ``"interleaved"`` (GPT-J, Meta)."""
    return check_choice("layout", layout, ROPE_LAYOUTS, what=what,
                        fix='"half" pairs feature i with i + r/2 (GPT-NeoX, Hugging Face), '
                            '"interleaved" pairs 2i with 2i+1 (GPT-J, Meta); convert a '
                            "checkpoint with convert_rope_layout")


def check_rope_scaling(scaling, types, head_dim: int, seq_len, *, what: str = "") -> dict:
    """A ``rope_scaling`` dict in Hugging Face's vocabulary, checked for its ``rope_type``.

    ``types`` are the registry's names. Returns a plain dict with ``rope_type``
    (``"default"`` for ``None``), and ``seq_len`` for ``dynamic``.
    """
    if scaling is None:
        return {"rope_type": "default"}
    if not isinstance(scaling, dict):
        raise _error(what, f"scaling must be None or a dict such as {{'rope_type': 'linear', "
                           f"'factor': 4.0}}, got scaling={scaling!r}")
    params = dict(scaling)
    rope_type = params.pop("rope_type", params.pop("type", None))
    rope_type = check_choice("scaling['rope_type']", rope_type, types, what=what,
                             fix="Hugging Face's rope_scaling vocabulary; 'ntk' is the static "
                                 "NTK-aware rule, 'dynamic' the dynamic one")
    params["rope_type"] = rope_type
    if rope_type == "default":
        return params
    params["factor"] = check_float(
        "scaling['factor']", params.get("factor"), at_least=1.0, what=what,
        meaning="how many times longer the context becomes",
        fix="a factor below 1 would shrink the context; use e.g. 4.0 for 4x the trained length")
    if rope_type in ("ntk", "dynamic") and head_dim < 4:
        raise _error(what, f"head_dim must be at least 4 for rope_type={rope_type!r} (the "
                           f"new base is base * factor^(d/(d-2))), got head_dim={head_dim}",
                     "use a wider head, or rope_type='linear'")
    if rope_type in ("dynamic", "yarn", "llama3"):
        params["original_max_position_embeddings"] = check_positive_int(
            "scaling['original_max_position_embeddings']",
            params.get("original_max_position_embeddings"), what=what,
            fix="pass the context length the model was trained on, e.g. 4096")
    if rope_type == "dynamic":
        if seq_len is None:
            raise _error(what, "rope_type='dynamic' needs seq_len (its base grows with the "
                               "sequence), got seq_len=None",
                         "pass seq_len=, the number of positions of the current sequence")
        params["seq_len"] = check_positive_int("seq_len", seq_len, what=what)
    if rope_type == "llama3":
        low = check_float("scaling['low_freq_factor']", params.get("low_freq_factor"),
                          above=0.0, what=what, fix="Llama 3 uses low_freq_factor=1.0")
        high = check_float("scaling['high_freq_factor']", params.get("high_freq_factor"),
                           above=low, what=what,
                           fix="Llama 3 uses high_freq_factor=4.0 (above low_freq_factor)")
        params["low_freq_factor"], params["high_freq_factor"] = low, high
    return params


def check_rope_features(num_freq, head_dim, *, name: str = "x", what: str = "") -> None:
    """``inv_freq`` of ``n`` frequencies rotates ``2n`` features: at most ``head_dim``."""
    if head_dim is not None and 2 * num_freq > head_dim:
        raise _error(what, f"inv_freq has {num_freq} frequencies, which rotate {2 * num_freq} "
                           f"features, but {name} has only head_dim={head_dim}",
                     f"pass at most {head_dim // 2} frequencies "
                     f"(rope_frequencies({head_dim - head_dim % 2}))")


def check_rope_width(name: str, shape, head_dim: int, *, what: str = "") -> None:
    """A layer's ``q`` or ``k`` is ``(..., seq, head_dim)`` with the layer's ``head_dim``."""
    shape = tuple(shape)
    if len(shape) >= 2 and shape[-1] is not None and shape[-1] != head_dim:
        raise _error(what, f"{name} must be (..., seq, head_dim) with head_dim={head_dim}, got "
                           f"{name}.shape={shape}",
                     f"build the layer with head_dim={shape[-1]}, or split the heads first "
                     "(batch, heads, seq, head_dim)")


def check_rope_positions(shape, x_shape, *, name: str = "x", what: str = "") -> None:
    """Positions ``(seq,)`` or ``(batch, seq)`` for ``x`` ``(batch, ..., seq, head_dim)``:
    ``batch`` is ``x``'s first axis (or 1); ``None`` sizes pass."""
    shape, x_shape = tuple(shape), tuple(x_shape)
    seq = x_shape[-2] if len(x_shape) >= 2 else None

    def same(a, b):
        return a is None or b is None or a == b

    ok = len(x_shape) >= 2 and (
        (len(shape) == 1 and same(shape[0], seq))
        or (len(shape) == 2 and len(x_shape) >= 3 and same(shape[1], seq)
            and (shape[0] == 1 or same(shape[0], x_shape[0]))))
    if not ok:
        raise _error(what, f"positions must have shape (seq,) or (batch, seq) matching "
                           f"{name}'s (batch, ..., seq, head_dim), got positions.shape={shape} "
                           f"for {name}.shape={x_shape}", "pass one position per token")


def check_rope_weight(shape, num_heads: int, *, what: str = "") -> int:
    """A q or k projection weight ``(num_heads * head_dim, in_features)``, ``head_dim``
    even; returns ``head_dim``."""
    shape = tuple(shape)
    if len(shape) != 2 or shape[0] % num_heads:
        raise _error(what, f"weight must be (num_heads * head_dim, in_features) with "
                           f"num_heads={num_heads}, got weight.shape={shape}",
                     "pass a q or k projection weight as stored (out_features first), e.g. "
                     "nn.Linear.weight, or the transpose of a Keras Dense kernel")
    return check_head_dim(shape[0] // num_heads, what=what)


# --------------------------------------------------------------------------- the scalings

def _powers(d: int, base: float) -> np.ndarray:
    """``base^(2i/d)``, the wavelengths over ``2 pi``, float64 ``(d/2,)``."""
    return base ** (np.arange(0, d, 2, dtype=np.float64) / d)


def _default(d: int, base: float, params: dict) -> tuple[np.ndarray, float]:
    return 1.0 / _powers(d, base), 1.0


def _linear(d: int, base: float, params: dict) -> tuple[np.ndarray, float]:
    return 1.0 / (params["factor"] * _powers(d, base)), 1.0


def _ntk_base(d: int, base: float, factor: float) -> float:
    return base * factor ** (d / (d - 2))


def _ntk(d: int, base: float, params: dict) -> tuple[np.ndarray, float]:
    return _default(d, _ntk_base(d, base, params["factor"]), params)


def _dynamic(d: int, base: float, params: dict) -> tuple[np.ndarray, float]:
    original = params["original_max_position_embeddings"]
    seq_len = max(params["seq_len"], original)
    grown = params["factor"] * seq_len / original - (params["factor"] - 1.0)
    return _default(d, _ntk_base(d, base, grown), params)


def _yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    return 1.0 if factor <= 1.0 else 0.1 * mscale * math.log(factor) + 1.0


def _yarn(d: int, base: float, params: dict) -> tuple[np.ndarray, float]:
    factor = params["factor"]
    original = params["original_max_position_embeddings"]
    attention_factor = params.get("attention_factor")
    if attention_factor is None:
        mscale, mscale_all_dim = params.get("mscale"), params.get("mscale_all_dim")
        if mscale and mscale_all_dim:
            attention_factor = _yarn_mscale(factor, mscale) / _yarn_mscale(factor, mscale_all_dim)
        else:
            attention_factor = _yarn_mscale(factor)
    beta_fast = params.get("beta_fast") or 32.0
    beta_slow = params.get("beta_slow") or 1.0

    def dim_of(rotations: float) -> float:
        # The pair index whose wavelength fits ``rotations`` turns into the original length.
        return d * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = dim_of(beta_fast), dim_of(beta_slow)
    if params.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(d // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
    powers = _powers(d, base)
    inv_freq = ramp / (factor * powers) + (1.0 - ramp) / powers
    return inv_freq, float(attention_factor)


def _llama3(d: int, base: float, params: dict) -> tuple[np.ndarray, float]:
    factor = params["factor"]
    original = params["original_max_position_embeddings"]
    low, high = params["low_freq_factor"], params["high_freq_factor"]
    inv_freq = 1.0 / _powers(d, base)
    wavelen = 2 * math.pi / inv_freq
    smooth = (original / wavelen - low) / (high - low)
    blended = (1.0 - smooth) * inv_freq / factor + smooth * inv_freq
    out = np.where(wavelen > original / low, inv_freq / factor, inv_freq)
    medium = (wavelen >= original / high) & (wavelen <= original / low)
    return np.where(medium, blended, out), 1.0


#: ``rope_type`` -> ``f(head_dim, base, params) -> (inv_freq float64, attention_factor)``.
ROPE_SCALINGS: dict[str, Callable[[int, float, dict], tuple[np.ndarray, float]]] = {
    "default": _default,
    "linear": _linear,
    "ntk": _ntk,
    "dynamic": _dynamic,
    "yarn": _yarn,
    "llama3": _llama3,
}


def rope_frequencies(head_dim: int, *, base: float = 10000.0, scaling: dict | None = None,
                     seq_len: int | None = None) -> tuple[np.ndarray, float]:
    """RoPE's inverse frequencies and attention factor, with an optional context scaling.

    Args:
        head_dim: the number of rotated features ``d``, even (with partial
            rotary, the rotated part only).
        base: the wavelength base ``theta``; 10000.0 (Su et al.), Llama 3 uses
            500000.0.
        scaling: ``None`` or a dict in Hugging Face's ``rope_scaling``
            vocabulary: ``{"rope_type": "linear" | "ntk" | "dynamic" | "yarn"
            | "llama3", "factor": ..., ...}``; ``dynamic``, ``yarn`` and
            ``llama3`` also need ``original_max_position_embeddings``,
            ``llama3`` ``low_freq_factor`` and ``high_freq_factor``; ``yarn``
            takes ``beta_fast`` (32), ``beta_slow`` (1), ``attention_factor``,
            ``mscale``, ``mscale_all_dim``, ``truncate`` (True).
        seq_len: the current sequence length, needed by ``dynamic`` only.

    Returns:
        ``(inv_freq, attention_factor)``: float32 NumPy array ``(head_dim // 2,)``
        and a Python float (1.0 except for YaRN).

    Example:
        >>> inv_freq, factor = rope_frequencies(8)
        >>> inv_freq
        array([1.   , 0.1  , 0.01 , 0.001], dtype=float32)
        >>> rope_frequencies(8, scaling={"rope_type": "linear", "factor": 4.0})[0]
        array([0.25   , 0.025  , 0.0025 , 0.00025], dtype=float32)

    References:
        Su et al., "RoFormer: Enhanced Transformer with Rotary Position
        Embedding", 2021; Chen et al., "Extending Context Window of Large
        Language Models via Positional Interpolation", 2023; Peng et al.,
        "YaRN: Efficient Context Window Extension of Large Language Models",
        ICLR 2024.
    """
    return checked_frequencies(head_dim, base, scaling, seq_len, what="rope_frequencies")


def checked_frequencies(head_dim: int, base: float, scaling: dict | None, seq_len: int | None,
                        *, what: str) -> tuple[np.ndarray, float]:
    """:func:`rope_frequencies` for the caller ``what`` (whose name its errors carry)."""
    head_dim = check_head_dim(head_dim, what=what)
    base = check_base(base, what=what)
    params = check_rope_scaling(scaling, tuple(ROPE_SCALINGS), head_dim, seq_len, what=what)
    inv_freq, attention_factor = ROPE_SCALINGS[params["rope_type"]](head_dim, base, params)
    return inv_freq.astype(np.float32), float(attention_factor)


def layout_permutation(head_dim: int, to: str) -> np.ndarray:
    """The feature order that turns one head's rows from the other layout into ``to``.

    ``new = old[perm]``: to ``"half"``, the even features of the interleaved
    layout come first, then the odd ones (how Meta's checkpoints become Hugging
    Face's); to ``"interleaved"``, the inverse.

    Example:
        >>> layout_permutation(6, "half")
        array([0, 2, 4, 1, 3, 5])
        >>> layout_permutation(6, "interleaved")
        array([0, 3, 1, 4, 2, 5])
    """
    what = "convert_rope_layout"
    head_dim = check_head_dim(head_dim, what=what)
    to = check_choice("to", to, ROPE_LAYOUTS, what=what,
                      fix='"half" for Hugging Face / GPT-NeoX, "interleaved" for Meta / GPT-J')
    half = head_dim // 2
    if to == "half":
        return np.concatenate([np.arange(0, head_dim, 2), np.arange(1, head_dim, 2)])
    return np.stack([np.arange(half), np.arange(half) + half], axis=1).reshape(-1)


def grid_positions(height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The row and the column of each patch of a row-major ``height x width`` grid
    (axial 2D RoPE): two int32 arrays ``(height * width,)``.

    Example:
        >>> grid_positions(2, 3)
        (array([0, 0, 0, 1, 1, 1], dtype=int32), array([0, 1, 2, 0, 1, 2], dtype=int32))
    """
    rows, cols = np.divmod(np.arange(height * width, dtype=np.int32), np.int32(width))
    return rows, cols
