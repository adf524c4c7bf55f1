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
  between (none when the two factors are equal, as in Llama 4);
* ``longrope`` (Ding et al., Phi-3): each pair's frequency divided by its own
  factor, ``short_factor`` up to ``L`` positions and ``long_factor`` beyond,
  and ``attention_factor = sqrt(1 + ln(factor) / ln(L))``;
* ``proportional`` (Gemma 4's p-RoPE): the exponents run over the whole head
  but only the first ``partial_rotary_factor`` share of the pairs turns; the
  others get frequency 0.

Each entry of the registry is a :class:`Scaling`: its formula, the keys it
requires and the optional ones with their defaults, and whether it follows
the sequence length; :func:`rope_config` checks a dict against it once (an
unknown key is an error) and :func:`hf_rope` reads a whole Hugging Face config.
``partial_rotary_factor`` (any type) makes ``head_dim`` the head's width, of
which the first ``int(head_dim * partial_rotary_factor)`` features rotate.

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

import dataclasses
import math
from typing import Callable

import numpy as np

from posenc import positions
from posenc._checks import (
    _error,
    check_base,
    check_bool,
    check_choice,
    check_float,
    check_positive_int,
)

__all__ = [
    "ROPE_LAYOUTS",
    "ROPE_SCALINGS",
    "ROPE_KEYS",
    "Scaling",
    "rope_config",
    "rope_frequencies",
    "checked_frequencies",
    "RotarySetup",
    "rotary_setup",
    "hf_rope",
    "ANGLE_LIMBS",
    "angle_terms",
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


def check_rope_grid(height: int, width: int, x_shape, *, name: str = "x", what: str = "") -> None:
    """Axial 2D RoPE rotates one token per patch of a ``height x width`` grid: ``x`` holds
    ``height * width`` tokens on its sequence axis (a ``None`` size passes)."""
    seq = tuple(x_shape)[-2] if len(tuple(x_shape)) >= 2 else None
    if seq is not None and seq != height * width:
        raise _error(what, f"{name} must hold one token per patch of the grid, got "
                           f"{seq} tokens ({name}.shape={tuple(x_shape)}) for grid=({height}, "
                           f"{width}), which has {height * width} patches",
                     f"pass {height * width} tokens (a prefix token such as CLS takes no 2D "
                     "rotation: rotate the patch tokens only), or use the grid of the image")


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

def _powers(d: int, base: float, over: int | None = None) -> np.ndarray:
    """``base^(2i/over)`` for ``i < d/2``, the wavelengths over ``2 pi``, float64 ``(d/2,)``."""
    return base ** (np.arange(0, d, 2, dtype=np.float64) / (over or d))


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

    def dim_of(rotations: float) -> float:
        # The pair index whose wavelength fits ``rotations`` turns into the original length.
        return d * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = dim_of(params["beta_fast"]), dim_of(params["beta_slow"])
    if params["truncate"]:
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
    out = np.where(wavelen > original / low, inv_freq / factor, inv_freq)
    medium = (wavelen >= original / high) & (wavelen <= original / low)
    if high == low:   # no blend (Llama 4): at most a wavelength exactly at the edge, kept
        return out, 1.0
    smooth = (original / wavelen - low) / (high - low)
    blended = (1.0 - smooth) * inv_freq / factor + smooth * inv_freq
    return np.where(medium, blended, out), 1.0


def _longrope(d: int, base: float, params: dict) -> tuple[np.ndarray, float]:
    original = params["original_max_position_embeddings"]
    seq_len = params.get("seq_len")
    long = seq_len is not None and seq_len > original
    ext = np.asarray(params["long_factor" if long else "short_factor"], np.float64)
    attention_factor = params.get("attention_factor")
    if attention_factor is None:
        factor = params["factor"]
        attention_factor = (1.0 if factor <= 1.0 else
                            math.sqrt(1.0 + math.log(factor) / math.log(original)))
    return 1.0 / (ext * _powers(d, base)), float(attention_factor)


def _proportional(d: int, base: float, params: dict) -> tuple[np.ndarray, float]:
    # ``d`` is the whole head here: the first pairs turn with exponents over ``d``, the rest
    # (the ``1 - partial_rotary_factor`` share) get frequency 0 and never turn.
    rotated = int(params.get("partial_rotary_factor", 1.0) * d // 2)
    inv_freq = np.zeros(d // 2, np.float64)
    inv_freq[:rotated] = 1.0 / _powers(2 * rotated, base, over=d)
    return inv_freq / params["factor"], 1.0


def _factor(name, value, params, *, what):
    return check_float(name, value, at_least=1.0, what=what,
                       meaning="how many times longer the context becomes",
                       fix="a factor below 1 would shrink the context; use e.g. 4.0 for 4x the "
                           "trained length")


def _original(name, value, params, *, what):
    return check_positive_int(name, value, what=what,
                              fix="pass the context length the model was trained on, e.g. 4096")


def _positive(fix):
    def check(name, value, params, *, what):
        return check_float(name, value, above=0.0, what=what, fix=fix)
    return check


def _optional(check):
    def maybe(name, value, params, *, what):
        return None if value is None else check(name, value, params, what=what)
    return maybe


def _high_freq_factor(name, value, params, *, what):
    return check_float(name, value, at_least=params["low_freq_factor"], what=what,
                       fix="Llama 3 uses high_freq_factor=4.0 (at least low_freq_factor)")


def _truncate(name, value, params, *, what):
    return check_bool(name, value, what=what)


def _pair_factors(name, value, params, *, what):
    try:
        values = np.asarray(value, np.float64)
    except (TypeError, ValueError):
        values = np.full(0, np.nan)
    n = params["_pairs"]
    if values.ndim != 1 or len(values) != n or not np.all(np.isfinite(values) & (values > 0)):
        raise _error(what, f"{name} must be a list of {n} positive numbers (one per rotated pair "
                           f"of features), got {name}={value!r}",
                     "pass the list of the checkpoint's config, of head_dim // 2 numbers")
    return [float(v) for v in values]


def _partial(name, value, params, *, what):
    value = check_float(name, value, above=0.0, what=what,
                        fix="the share of each head's features that rotate, e.g. 0.25")
    if value > 1.0:
        raise _error(what, f"{name} must be at most 1 (the share of the head that rotates), "
                           f"got {name}={value!r}", "use a number in (0, 1], e.g. 0.25")
    return value


#: The keys of a scaling dict: ``key -> check(name, value, params, what=) -> value``; the
#: checks run in this order, so that ``high_freq_factor`` sees ``low_freq_factor``.
ROPE_KEYS: dict[str, Callable] = {
    "rope_theta": _positive("use the checkpoint's rope_theta, e.g. 10000.0 or 500000.0"),
    "partial_rotary_factor": _partial,
    "factor": _factor,
    "original_max_position_embeddings": _original,
    "low_freq_factor": _positive("Llama 3 uses low_freq_factor=1.0"),
    "high_freq_factor": _high_freq_factor,
    "beta_fast": _positive("YaRN uses beta_fast=32"),
    "beta_slow": _positive("YaRN uses beta_slow=1"),
    "attention_factor": _optional(_positive("omit it for the type's own factor")),
    "mscale": _optional(_positive("DeepSeek V3 uses mscale=1.0")),
    "mscale_all_dim": _optional(_positive("DeepSeek V3 uses mscale_all_dim=1.0")),
    "truncate": _truncate,
    "short_factor": _pair_factors,
    "long_factor": _pair_factors,
}

#: Keys every type takes.
COMMON_KEYS = ("rope_type", "rope_theta", "partial_rotary_factor")


@dataclasses.dataclass(frozen=True)
class Scaling:
    """One rope type: its frequencies and the keys of its dict.

    ``frequencies(d, base, params) -> (inv_freq float64, attention_factor)``;
    ``required`` keys must be given, ``defaults`` are the optional keys with the
    value they take when missing (``None``: none); ``by_length`` types change
    their frequencies with the sequence length (``seq_len``); ``min_dim`` is the
    narrowest rotated width the formula allows; ``whole_head`` types get the
    whole head even with ``partial_rotary_factor`` (they rotate part of it by
    giving the other pairs frequency 0).
    """

    frequencies: Callable[[int, float, dict], tuple[np.ndarray, float]]
    required: tuple[str, ...] = ()
    defaults: dict = dataclasses.field(default_factory=dict)
    by_length: bool = False
    min_dim: int = 2
    whole_head: bool = False

    def keys(self) -> tuple[str, ...]:
        return COMMON_KEYS + self.required + tuple(self.defaults)


_YARN_DEFAULTS = {"beta_fast": 32.0, "beta_slow": 1.0, "attention_factor": None, "mscale": None,
                  "mscale_all_dim": None, "truncate": True}

#: ``rope_type`` -> :class:`Scaling`, keyed by Hugging Face's names (``ntk`` is the static
#: NTK-aware rule, which Hugging Face does not have).
ROPE_SCALINGS: dict[str, Scaling] = {
    "default": Scaling(_default),
    "linear": Scaling(_linear, ("factor",)),
    "ntk": Scaling(_ntk, ("factor",), min_dim=4),
    "dynamic": Scaling(_dynamic, ("factor", "original_max_position_embeddings"), by_length=True,
                       min_dim=4),
    "yarn": Scaling(_yarn, ("factor", "original_max_position_embeddings"), _YARN_DEFAULTS),
    "llama3": Scaling(_llama3, ("factor", "original_max_position_embeddings", "low_freq_factor",
                                "high_freq_factor")),
    "longrope": Scaling(_longrope, ("short_factor", "long_factor",
                                    "original_max_position_embeddings"),
                        {"factor": 1.0, "attention_factor": None}, by_length=True),
    "proportional": Scaling(_proportional, (), {"factor": 1.0}, whole_head=True),
}

_DEFAULT_BASE = 10000.0


def rope_config(scaling, *, base: float = _DEFAULT_BASE, what: str = "rope_frequencies",
                arg: str = "scaling") -> dict:
    """A scaling dict checked once and normalised, for :func:`rope_frequencies` and the layers.

    Reads Hugging Face's vocabulary, v4 (``rope_scaling``, the legacy key
    ``type``) and v5 (``rope_parameters``, with ``rope_theta`` and
    ``partial_rotary_factor`` inside): the result has ``rope_type``, every key the
    type requires, its optional keys with their defaults, and ``rope_theta`` and
    ``partial_rotary_factor`` only where given. A key the type does not take is
    refused, as is a ``rope_theta`` that contradicts a ``base`` other than the
    default. Errors start with ``what`` and name the argument ``arg``.

    Args:
        scaling: ``None`` (no scaling) or a dict, e.g. ``{"rope_type": "yarn",
            "factor": 4.0, "original_max_position_embeddings": 32768}``.
        base: the base given beside it (checked against ``rope_theta``).
        what: the function or class being called, for the messages.
        arg: the name of ``scaling`` in that call, e.g. ``"rope_scaling"``.

    Returns:
        A new dict; passing it again returns an equal dict.

    Example:
        >>> rope_config({"type": "linear", "factor": 2.0})
        {'rope_type': 'linear', 'factor': 2.0}
        >>> rope_config({"rope_type": "yarn", "factor": 4.0, "beta_fst": 8.0,
        ...              "original_max_position_embeddings": 4096})
        Traceback (most recent call last):
        ...
        ValueError: rope_frequencies: scaling['beta_fst'] is not a key of rope_type='yarn' (its keys: rope_type, rope_theta, partial_rotary_factor, factor, original_max_position_embeddings, beta_fast, beta_slow, attention_factor, mscale, mscale_all_dim, truncate), got scaling['beta_fst']=8.0; remove it or correct its spelling.
    """
    if scaling is None:
        return {"rope_type": "default"}
    if not isinstance(scaling, dict):
        raise _error(what, f"{arg} must be None or a dict such as {{'rope_type': 'linear', "
                           f"'factor': 4.0}}, got {arg}={scaling!r}")
    given = dict(scaling)
    legacy = given.pop("type", None)
    rope_type = given.pop("rope_type", None) or legacy or "default"
    rope_type = check_choice(f"{arg}['rope_type']", rope_type, tuple(ROPE_SCALINGS), what=what,
                             fix="Hugging Face's rope_scaling vocabulary; 'ntk' is the static "
                                 "NTK-aware rule, 'dynamic' the dynamic one")
    spec = ROPE_SCALINGS[rope_type]
    for key, value in given.items():
        if key not in spec.keys():
            raise _error(what, f"{arg}[{key!r}] is not a key of rope_type={rope_type!r} (its "
                               f"keys: {', '.join(spec.keys())}), got {arg}[{key!r}]={value!r}",
                         "remove it or correct its spelling")
    params = {"rope_type": rope_type}
    for key, check in ROPE_KEYS.items():
        value = given.get(key)
        if value is None and key in spec.defaults:
            value = params[key] = spec.defaults[key]
            if value is None:
                continue
        elif value is None and key not in spec.required:
            continue
        if key in ("short_factor", "long_factor"):
            continue   # their length depends on head_dim: checked by rope_frequencies
        params[key] = check(f"{arg}[{key!r}]", value, params, what=what)
    for key in ("short_factor", "long_factor"):
        if key in spec.required:
            params[key] = given.get(key)
    theta = params.get("rope_theta")
    base = check_base(base, what=what)
    if theta is not None and base != _DEFAULT_BASE and base != theta:
        raise _error(what, f"base and {arg}['rope_theta'] disagree, got base={base!r} and "
                           f"{arg}['rope_theta']={theta!r}",
                     "give the base once: as base=, or as rope_theta")
    return {key: params[key] for key in ("rope_type", *spec.required, *spec.defaults,
                                         "rope_theta", "partial_rotary_factor") if key in params}


def rope_frequencies(head_dim: int, *, base: float = 10000.0, scaling: dict | None = None,
                     seq_len: int | None = None) -> tuple[np.ndarray, float]:
    """RoPE's inverse frequencies and attention factor, with an optional context scaling.

    Args:
        head_dim: the number of rotated features ``d``, even; with
            ``partial_rotary_factor`` in ``scaling``, the width of the whole head,
            of which ``int(head_dim * partial_rotary_factor)`` features rotate.
        base: the wavelength base ``theta``; 10000.0 (Su et al.), Llama 3 uses
            500000.0. A ``rope_theta`` in ``scaling`` gives it too.
        scaling: ``None`` or a dict in Hugging Face's vocabulary (``rope_scaling``
            or v5's ``rope_parameters``; see :func:`rope_config`): ``{"rope_type":
            "linear" | "ntk" | "dynamic" | "yarn" | "llama3" | "longrope" |
            "proportional", "factor": ..., ...}``; ``dynamic``, ``yarn``,
            ``llama3`` and ``longrope`` need ``original_max_position_embeddings``,
            ``llama3`` ``low_freq_factor`` and ``high_freq_factor`` (equal ones
            allowed: no blend), ``longrope`` ``short_factor`` and ``long_factor``
            (``head_dim // 2`` numbers each; optional ``factor``, 1.0, and
            ``attention_factor``); ``yarn`` takes ``beta_fast`` (32), ``beta_slow``
            (1), ``attention_factor``, ``mscale``, ``mscale_all_dim``, ``truncate``
            (True); ``proportional`` (Gemma 4's p-RoPE) takes ``factor`` (1.0).
            Every type takes ``rope_theta`` and ``partial_rotary_factor``.
        seq_len: the current sequence length (the largest position + 1), used by
            ``dynamic`` (required) and ``longrope`` (``long_factor`` beyond
            ``original_max_position_embeddings``, ``short_factor`` up to it or
            without ``seq_len``).

    Returns:
        ``(inv_freq, attention_factor)``: float32 NumPy array ``(d // 2,)``, ``d``
        the rotated width (``head_dim // 2`` frequencies for ``proportional``, the
        unrotated pairs 0), and a Python float (1.0 except for YaRN and LongRoPE).

    Example:
        >>> inv_freq, factor = rope_frequencies(8)
        >>> inv_freq
        array([1.   , 0.1  , 0.01 , 0.001], dtype=float32)
        >>> rope_frequencies(8, scaling={"rope_type": "linear", "factor": 4.0})[0]
        array([0.25   , 0.025  , 0.0025 , 0.00025], dtype=float32)
        >>> rope_frequencies(4, scaling={"rope_type": "default", "rope_theta": 100.0})[0]
        array([1. , 0.1], dtype=float32)

    References:
        Su et al., "RoFormer: Enhanced Transformer with Rotary Position
        Embedding", 2021; Chen et al., "Extending Context Window of Large
        Language Models via Positional Interpolation", 2023; Peng et al.,
        "YaRN: Efficient Context Window Extension of Large Language Models",
        ICLR 2024; Ding et al., "LongRoPE: Extending LLM Context Window Beyond 2
        Million Tokens", ICML 2024.
    """
    inv_freq, attention_factor = frequencies64(head_dim, base, scaling, seq_len,
                                               what="rope_frequencies")
    return inv_freq.astype(np.float32), attention_factor


def checked_frequencies(head_dim: int, base: float, scaling: dict | None, seq_len: int | None,
                        *, what: str, arg: str = "scaling") -> tuple[np.ndarray, float]:
    """:func:`rope_frequencies` for the caller ``what`` (whose name its errors carry)."""
    inv_freq, attention_factor = frequencies64(head_dim, base, scaling, seq_len, what=what,
                                               arg=arg)
    return inv_freq.astype(np.float32), attention_factor


def frequencies64(head_dim: int, base: float, scaling: dict | None, seq_len: int | None,
                  *, what: str, arg: str = "scaling") -> tuple[np.ndarray, float]:
    """:func:`checked_frequencies` in float64 (for exact angles, :func:`angle_terms`)."""
    head_dim = check_head_dim(head_dim, what=what)
    params = rope_config(scaling, base=base, what=what, arg=arg)
    base = params.get("rope_theta") or check_base(base, what=what)
    spec = ROPE_SCALINGS[params["rope_type"]]
    d = head_dim
    if "partial_rotary_factor" in params and not spec.whole_head:
        d = check_head_dim(int(head_dim * params["partial_rotary_factor"]),
                           name="int(head_dim * partial_rotary_factor)", what=what)
    if d < spec.min_dim:
        raise _error(what, f"head_dim must be at least {spec.min_dim} for rope_type="
                           f"{params['rope_type']!r} (the new base is base * factor^(d/(d-2))), "
                           f"got head_dim={d}", "use a wider head, or rope_type='linear'")
    params["_pairs"] = d // 2
    for key in ("short_factor", "long_factor"):
        if key in params:
            params[key] = _pair_factors(f"{arg}[{key!r}]", params[key], params, what=what)
    if params["rope_type"] == "dynamic" and seq_len is None:
        raise _error(what, "rope_type='dynamic' needs seq_len (its base grows with the "
                           "sequence), got seq_len=None",
                     "pass seq_len=, the number of positions of the current sequence")
    if seq_len is not None and spec.by_length:
        params["seq_len"] = check_positive_int("seq_len", seq_len, what=what)
    inv_freq, attention_factor = spec.frequencies(d, base, params)
    return np.asarray(inv_freq, np.float64), float(attention_factor)


@dataclasses.dataclass(frozen=True)
class RotarySetup:
    """What a :class:`RotaryEmbedding` layer needs, checked once (:func:`rotary_setup`).

    ``config`` is the normalised scaling (:func:`rope_config`), ``rotary_dim`` the
    features that turn, ``by_length`` whether the frequencies follow the length;
    ``frequencies(seq_len)`` gives the float64 ``inv_freq`` and the attention
    factor for a sequence of ``seq_len`` positions (the largest position + 1).
    """

    config: dict
    head_dim: int
    rotary_dim: int
    base: float
    max_len: int
    by_length: bool
    _width: int

    def frequencies(self, seq_len: int | None = None) -> tuple[np.ndarray, float]:
        return frequencies64(self._width, self.base, self.config,
                             (seq_len or self.max_len) if self.by_length else None, what="")

    def length_rule(self) -> dict:
        """How a ``by_length`` type's frequencies follow a length ``n`` known only
        inside a traced graph, as float32 constants for the faces' own ops:
        ``{"kind": "ntk", "inv_freq", "exponent", "factor", "original"}`` means
        ``inv_freq * g^-exponent`` with ``g = max(factor * n / original - (factor - 1), 1)``
        (dynamic NTK's new base, written per pair; ``base`` and ``dim`` give the
        same in float64 as ``base * g^(dim/(dim-2))``); ``{"kind": "switch", "short",
        "long", "original", "short_terms", "long_terms"}`` means ``long`` where
        ``n > original``, else ``short`` (and their :func:`angle_terms`).
        """
        original = self.config["original_max_position_embeddings"]
        if self.config["rope_type"] == "dynamic":
            d = self._width
            return {"kind": "ntk", "inv_freq": self.frequencies(original)[0].astype(np.float32),
                    "exponent": (np.arange(0, d, 2) / (d - 2)).astype(np.float32),
                    "factor": float(self.config["factor"]), "original": float(original),
                    "base": float(self.base), "dim": d}
        short, long = self.frequencies(original)[0], self.frequencies(original + 1)[0]
        return {"kind": "switch", "short": short.astype(np.float32),
                "long": long.astype(np.float32), "original": float(original),
                "short_terms": angle_terms(short), "long_terms": angle_terms(long)}


def rotary_setup(head_dim, rotary_dim, base, scaling, max_len: int, *, what: str,
                 arg: str = "scaling") -> RotarySetup:
    """The checks and the frequencies of ``RotaryEmbedding(head_dim, base=, scaling=,
    rotary_dim=, max_len=)``, shared by both faces.

    With ``partial_rotary_factor`` in ``scaling`` the rotated width is
    ``int(head_dim * partial_rotary_factor)`` (``head_dim`` for ``proportional``,
    whose other pairs have frequency 0), and ``rotary_dim``, if given, must equal it.
    """
    head_dim = check_head_dim(head_dim, what=what)
    config = rope_config(scaling, base=base, what=what, arg=arg)
    # the base resolved once, as frequencies64 reads it: the scaling's rope_theta wins
    base = config.get("rope_theta") or check_base(base, what=what)
    spec = ROPE_SCALINGS[config["rope_type"]]
    partial = "partial_rotary_factor" in config
    if not partial:
        rotary_dim = (head_dim if rotary_dim is None
                      else check_head_dim(rotary_dim, name="rotary_dim", what=what))
    width = head_dim if partial else rotary_dim
    inv_freq, _ = frequencies64(width, base, config, max_len if spec.by_length else None,
                                what=what, arg=arg)
    if partial:
        if rotary_dim is not None and rotary_dim != 2 * len(inv_freq):
            raise _error(what, f"rotary_dim and {arg}['partial_rotary_factor'] disagree, got "
                               f"rotary_dim={rotary_dim!r} for int(head_dim * "
                               f"partial_rotary_factor)={2 * len(inv_freq)}",
                         "give the rotated width once: as rotary_dim=, or as "
                         "partial_rotary_factor")
        rotary_dim = 2 * len(inv_freq)
    check_rope_features(rotary_dim // 2, head_dim, name="q", what=what)
    return RotarySetup(config, head_dim, rotary_dim, base, max_len, spec.by_length, width)


# --------------------------------------------------------------------------- exact angles

#: Exact angles split an integer position into bytes: ``p = sum_j p_j 256^j`` (the top one
#: signed), four of them for any int32 position.
ANGLE_LIMBS = 4


def angle_terms(inv_freq) -> np.ndarray:
    """The float32 constants of RoPE's exact angles, ``(ANGLE_LIMBS, 2, n)``.

    In float32 the angle ``p * inv_freq`` loses ``p * inv_freq * 2^-24`` radians:
    0.43 rad for the fastest pairs at position 10M (base 500000). The exact path
    works in turns and keeps only their fraction: with ``g = inv_freq / 2 pi``
    (float64) and ``p = sum_j p_j 256^j``,
    ``frac(p g) = frac(sum_j frac(p_j c_j))`` with ``c_j = frac(256^j g)``. Each
    ``c_j`` is split into a head of 16 significant bits and a float32 tail, so
    ``p_j * head`` (8 bits times 16) is exact in float32 and its fraction too;
    the sum and the final ``2 pi frac(.)`` lose about ``1e-6`` rad whatever ``p``.
    Row ``[j, 0]`` holds the heads, ``[j, 1]`` the tails.

    Example:
        >>> angle_terms(np.array([2 * np.pi]))[:, :, 0].tolist()   # one turn per position
        [[0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]
    """
    turns = np.asarray(inv_freq, np.float64) / (2 * np.pi)
    out = np.zeros((ANGLE_LIMBS, 2) + turns.shape, np.float32)
    for j in range(ANGLE_LIMBS):
        c = turns * float(256 ** j)
        c = c - np.floor(c)
        mantissa, exponent = np.frexp(c)
        head = np.ldexp(np.round(np.ldexp(mantissa, 16)), exponent - 16)
        out[j, 0], out[j, 1] = head, c - head
    return out


# --------------------------------------------------------------------------- Hugging Face configs

def _layer_head_dim(config: dict, layer_type: str | None) -> int | None:
    """Gemma 4's wider heads of its full-attention layers: ``global_head_dim`` in
    ``config.json``, ``per_layer_config`` (by layer index) in a config object's dict."""
    if layer_type != "full_attention":
        return None
    if config.get("global_head_dim"):
        return config["global_head_dim"]
    per_layer = config.get("per_layer_config") or {}
    for index, kind in enumerate(config.get("layer_types") or ()):
        override = per_layer.get(str(index), per_layer.get(index)) or {}
        if kind == layer_type and override.get("head_dim"):
            return override["head_dim"]
    return None


def hf_rope(config, *, layer_type: str | None = None) -> dict:
    """The keyword arguments of :func:`rope_frequencies` for a Hugging Face config.

    ``rope_frequencies(**hf_rope(config, layer_type=t), seq_len=n)`` is Hugging
    Face's ``(inv_freq, attention_scaling)`` for that config, layer type and
    length. It reads both vocabularies: v5's ``rope_parameters`` (with
    ``rope_theta`` and ``partial_rotary_factor`` inside, one dict per layer type
    where the layer types differ) and v4's ``rope_scaling`` with ``rope_theta``,
    ``partial_rotary_factor`` (GPT-NeoX's ``rotary_emb_base`` and ``rotary_pct``)
    and Gemma 3's ``rope_local_base_freq`` for its sliding layers beside it. The
    head's width is ``qk_rope_head_dim`` (multi-head latent attention), else
    ``head_dim`` (``global_head_dim`` for Gemma 4's full-attention layers), else
    ``hidden_size // num_attention_heads``. Hugging Face's implicit values are
    filled in: ``original_max_position_embeddings`` (a top-level value first,
    else ``max_position_embeddings``), dynamic NTK's original length (always
    ``max_position_embeddings``, as Hugging Face uses it), and YaRN's and
    LongRoPE's missing ``factor`` (``max_position_embeddings /
    original_max_position_embeddings``). A value the config does not give takes
    Hugging Face's generic default (``rope_theta`` 10000), not a model class's own.

    Args:
        config: a dict as in ``config.json``, or a config object (read with
            ``to_dict()``).
        layer_type: the layer type (e.g. ``"sliding_attention"``) of a config
            whose rope settings differ by layer type; ``None`` otherwise.

    Returns:
        ``{"head_dim": ..., "base": ..., "scaling": ...}``; ``scaling`` holds
        ``partial_rotary_factor`` when part of the head rotates.

    Example:
        >>> hf_rope({"hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 500000.0,
        ...          "max_position_embeddings": 131072,
        ...          "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
        ...                           "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        ...                           "original_max_position_embeddings": 8192}})["scaling"]
        {'rope_type': 'llama3', 'factor': 8.0, 'original_max_position_embeddings': 8192, 'low_freq_factor': 1.0, 'high_freq_factor': 4.0}
    """
    what = "hf_rope"
    if not isinstance(config, dict):
        to_dict = getattr(config, "to_dict", None)
        if to_dict is None:
            raise _error(what, f"config must be a dict or a Hugging Face config, got "
                               f"config={type(config).__name__}",
                         "pass the dict of config.json, or a PretrainedConfig")
        config = to_dict()
    config = dict(config)
    params = config.get("rope_parameters") or config.get("rope_scaling") or {}
    params = dict(params)
    layer_types = set(config.get("layer_types") or ())
    nested = sorted(key for key, value in params.items()
                    if isinstance(value, dict) and (key in layer_types or not layer_types))
    if not nested and config.get("rope_local_base_freq") is not None:
        # Gemma 3 (v4 file): the scaling and rope_theta are the full layers', the sliding
        # layers turn with their own base and no scaling
        nested = ["full_attention", "sliding_attention"]
        params = {"full_attention": params,
                  "sliding_attention": {"rope_type": "default",
                                        "rope_theta": config["rope_local_base_freq"]}}
    if nested:
        layer_type = check_choice("layer_type", layer_type, tuple(nested), what=what,
                                  fix="this config's rope settings differ by layer type; "
                                      "pass one of its layer_types")
        params = dict(params[layer_type] or {})
    elif layer_type is not None and layer_type not in layer_types:
        known = ", ".join(repr(t) for t in sorted(layer_types)) or "none"
        raise _error(what, f"layer_type must be None or one of this config's layer_types "
                           f"({known}), got layer_type={layer_type!r}",
                     "pass None: every layer turns alike")
    theta = params.pop("rope_theta", None)
    if theta is None:
        theta = config.get("rope_theta", config.get("rotary_emb_base", _DEFAULT_BASE))
    partial = params.pop("partial_rotary_factor", None)
    if partial is None:
        partial = config.get("partial_rotary_factor", config.get("rotary_pct"))
    rope_type = params.pop("rope_type", None) or params.pop("type", None) or "default"
    params.pop("type", None)
    if config.get("model_type", "").startswith("phi3") and rope_type in ("su", "yarn"):
        rope_type = "longrope"   # Phi-3's old names of its LongRoPE
    params["rope_type"] = rope_type
    if partial is not None and (float(partial) != 1.0 or rope_type == "proportional"):
        params["partial_rotary_factor"] = float(partial)
    head_dim = (config.get("qk_rope_head_dim") or _layer_head_dim(config, layer_type) or
                config.get("head_dim") or
                config["hidden_size"] // config["num_attention_heads"])
    max_len = config.get("max_position_embeddings")
    if rope_type in ("llama3", "yarn", "longrope"):
        top = config.get("original_max_position_embeddings")
        if top is not None and not nested:
            params["original_max_position_embeddings"] = top
        params.setdefault("original_max_position_embeddings", max_len)
        if rope_type in ("yarn", "longrope") and params.get("factor") is None:
            params["factor"] = max_len / params["original_max_position_embeddings"]
    if rope_type == "dynamic":
        params["original_max_position_embeddings"] = max_len
    scaling = rope_config(params, what=what, arg="rope_parameters")
    return {"head_dim": int(head_dim), "base": float(theta), "scaling": scaling}


# --------------------------------------------------------------------------- layouts and grids

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
    # RoPE's "half" layout is the sinusoid's "concat" channel order: one permutation serves both
    if to == "half":
        return positions.layout_permutation(head_dim, src="interleaved", dst="concat")
    return positions.layout_permutation(head_dim, src="concat", dst="interleaved")


def grid_positions(height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The row and the column of each patch of a row-major ``height x width`` grid
    (axial 2D RoPE): two int32 arrays ``(height * width,)``.

    Example:
        >>> grid_positions(2, 3)
        (array([0, 0, 0, 1, 1, 1], dtype=int32), array([0, 1, 2, 0, 1, 2], dtype=int32))
    """
    rows, cols = np.divmod(np.arange(height * width, dtype=np.int32), np.int32(width))
    return rows, cols
