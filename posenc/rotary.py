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
argument checks live in :mod:`posenc._checks`.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from posenc._checks import (
    ROPE_LAYOUTS,
    check_base,
    check_choice,
    check_head_dim,
    check_rope_scaling,
)

__all__ = [
    "ROPE_LAYOUTS",
    "ROPE_SCALINGS",
    "rope_frequencies",
    "checked_frequencies",
    "layout_permutation",
    "grid_positions",
]


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


# rope_config: provisional
def rope_config(scaling, *, base: float = 10000.0, what: str = "Transformer",
                arg: str = "rope_scaling") -> dict:
    """A ``rope_scaling`` dict checked once and normalised (``type`` becomes ``rope_type``).

    Errors start with ``what`` and name ``arg``. ``dynamic``'s ``seq_len`` is the layer's to
    supply, so it is not part of the result.

    Example:
        >>> rope_config({"type": "linear", "factor": 2.0})
        {'factor': 2.0, 'rope_type': 'linear'}
    """
    import re

    check_base(base, what=what)
    try:
        params = check_rope_scaling(scaling, tuple(ROPE_SCALINGS), 4, 1, what=what)
    except ValueError as error:
        raise ValueError(re.sub(r"\bscaling\b", arg, str(error))) from None
    params.pop("seq_len", None)
    return params
