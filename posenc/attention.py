"""The attention family's framework-free part: the schemes, their routes, their options.

A positional scheme enters a Transformer by one of four routes (see the
cross-framework contract, "Where a scheme enters attention"):

* ``"embedding"``: an encoding added to the token embeddings (``sinusoidal``,
  ``learned``, ``hybrid``);
* ``"rotary"``: the queries and keys rotated by their positions (``rope``, ``xpos``);
* ``"bias"``: a ``(1, heads, q_len, k_len)`` bias added to the logits
  (``alibi``, ``t5``, ``swin``, ``kerple_log``, ``kerple_power``, ``sandwich``, ``fire``,
  ``dynamic``);
* ``"relative"``: Shaw et al.'s relative keys and values (``shaw``);
* ``"content"``: a ``(batch, heads, q_len, k_len)`` term computed inside the attention from
  the layer input (``fox``, the Forgetting Transformer's forget gate bias) or from the
  queries and keys (``cope``), added to the logits before the mask (causal only);

and ``"none"`` adds nothing (NoPE). :data:`POSITIONS` maps each scheme's
name to a :class:`Scheme` (its route, the options it reads and their
defaults, whether a causal decoder may use it); the faces' ``MultiHeadAttention``
and ``Transformer`` (``posenc/torch/attention.py``, ``posenc/keras/attention.py``)
read this table instead of chains of ``if``. :func:`scheme_options` applies the
option rules (an option the scheme does not use is refused; ``None`` means the
scheme's default), :data:`ROUTE_LAYERS` says which class of a face carries a
route's scheme and with which arguments, :func:`future_keys` is the causal mask
of queries that continue a cache, :class:`Cache` holds the keys and values of
cached decoding. The attention models' own argument rules (``check_*``) are here
too; the shared primitives and the message builder are in :mod:`posenc._checks`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from posenc._checks import (
    _error,
    check_base,
    check_bool,
    check_choice,
    check_even_dim,
    check_hw,
    check_integer_dtype,
    check_positive_int,
    check_rank,
    check_rate,
)
from posenc.bias import check_t5_buckets
from posenc.distance_bias import check_sandwich_dim
from posenc.positions import relative_positions
from posenc.rotary import ROPE_LAYOUTS, check_head_dim, rope_config
from posenc.shaw import check_heads, check_max_distance

__all__ = ["Settings", "Scheme", "POSITIONS", "ROUTES", "OPTION_NAMES", "ROUTE_LAYERS", "NORM_EPS",
           "scheme_options", "attention_settings", "transformer_settings", "given_options",
           "route_layer", "future_keys", "Cache", "LayerCache"]

#: The routes by which a scheme enters attention.
ROUTES = ("none", "embedding", "rotary", "bias", "relative", "content")

#: Every scheme option the constructors take (``None`` there means "the scheme's default").
OPTION_NAMES = ("base", "rope_scaling", "rope_layout", "max_distance", "num_buckets", "grid")


@dataclasses.dataclass(frozen=True)
class Settings:
    """A ``MultiHeadAttention``'s or a ``Transformer``'s arguments, checked once.

    Built by :func:`attention_settings` (or :func:`transformer_settings`) from the
    caller's arguments, so that every error names the caller and its arguments; the
    blocks of a model receive this object (``MultiHeadAttention.from_settings``) and
    check nothing again.

    Attributes:
        dim, heads, position, causal, max_len, dropout: the checked arguments (``dropout``
            is the rate).
        options: the scheme's options over their defaults, each checked by the scheme
            (``rope_scaling`` normalised by :func:`posenc.rotary.rope_config`); not to be
            changed.
        vocab_size, depth, mlp_dim: a ``Transformer``'s (``None`` for one attention layer).
        layer: the block's :class:`posenc.stacks.LayerRule` (window, chunks, QK norm,
            temperature) in a stack whose layers differ, else ``None``.
    """

    dim: int
    heads: int
    position: str
    causal: bool
    max_len: int
    dropout: float
    options: dict
    vocab_size: int | None = None
    depth: int | None = None
    mlp_dim: int | None = None
    layer: object = None

    @property
    def route(self) -> str:
        """The route by which the scheme enters attention (:data:`ROUTES`)."""
        return POSITIONS[self.position].route

    @property
    def head_dim(self) -> int:
        """``dim // heads``."""
        return self.dim // self.heads


def _no_rules(s: Settings, what: str) -> dict:
    return dict(s.options)


def _sinusoid_rules(s: Settings, what: str) -> dict:
    """A sinusoid's base, and an even width (its sines and cosines come in pairs)."""
    base = check_base(s.options["base"], what=what)
    check_even_dim(s.dim, what=what)
    return {"base": base}


def _shaw_rules(s: Settings, what: str) -> dict:
    return {"max_distance": check_max_distance(s.options["max_distance"], what=what)}


def _t5_rules(s: Settings, what: str) -> dict:
    _, num_buckets, max_distance = check_t5_buckets(
        not s.causal, s.options["num_buckets"], s.options["max_distance"], what=what)
    return {"num_buckets": num_buckets, "max_distance": max_distance}


def _swin_rules(s: Settings, what: str) -> dict:
    return {"grid": check_hw("grid", s.options["grid"], what=what)}


def _rope_rules(s: Settings, what: str) -> dict:
    """The rotation's base and layout, an even ``dim // heads``, the scaling dict (checked
    and normalised once, by :func:`posenc.rotary.rope_config`)."""
    base = check_base(s.options["base"], what=what)
    layout = check_choice("rope_layout", s.options["rope_layout"], ROPE_LAYOUTS, what=what)
    check_head_dim(s.head_dim, name="dim // heads", what=what)
    scaling = s.options["rope_scaling"]
    if scaling is not None:
        scaling = rope_config(scaling, base=base, what=what, arg="rope_scaling")
    return {"base": base, "rope_scaling": scaling, "rope_layout": layout}


def _xpos_rules(s: Settings, what: str) -> dict:
    """xPos: RoPE's base, and an even ``dim // heads``."""
    check_head_dim(s.head_dim, name="dim // heads", what=what)
    return {"base": check_base(s.options["base"], what=what)}


def _sandwich_rules(s: Settings, what: str) -> dict:
    """Sandwich's sinusoids are ``dim // heads`` wide: an even width."""
    check_sandwich_dim(s.head_dim, name="dim // heads", what=what)
    return {}


def _content_rules(s: Settings, what: str) -> dict:
    """FoX and CoPE are causal: each token's gate (FoX) or count (CoPE) runs over the keys
    before it."""
    if not s.causal:
        raise _error(what, f"position={s.position!r} is a causal scheme (its gates run over the "
                           f"keys at or before each query), got causal=False",
                     "pass causal=True, or pick a scheme an encoder may use (e.g. 'alibi', "
                     "'t5', 'rope')")
    return {}


def _swin_seq(options: dict, seq, what: str) -> None:
    check_grid_seq(options["grid"], seq, what=what)   # (defined with the other rules below)


@dataclasses.dataclass(frozen=True)
class Scheme:
    """One positional scheme: how it enters attention, what it reads, and its rules.

    Attributes:
        route: one of :data:`ROUTES`.
        options: the scheme options it uses, each with its default (``None`` for a
            required one).
        required: the options without a default (Swin's ``grid``).
        causal: whether a causal decoder may use it (Swin's grid bias is for encoders).
        paper: the reference, for error messages and docs.
        check: ``check(settings, what) -> options``: the scheme's own rules on the
            settings (its options filled with their defaults); returns the options in
            canonical types. Errors start with ``what``.
        check_seq: ``check_seq(options, seq, what)``: the scheme's rule on the length of
            the sequence a call reads (Swin's grid must hold it), or ``None``.
    """

    route: str
    options: dict = dataclasses.field(default_factory=dict)
    required: tuple = ()
    causal: bool = True
    paper: str = ""
    check: Callable[[Settings, str], dict] = _no_rules
    check_seq: Callable | None = None


#: name -> :class:`Scheme`, in the order the book presents them.
POSITIONS = {
    "none": Scheme("none", paper="no positional encoding (NoPE; Haviv et al. 2022)"),
    "sinusoidal": Scheme("embedding", {"base": 10000.0}, paper="Vaswani et al. 2017",
                         check=_sinusoid_rules),
    "learned": Scheme("embedding", paper="a learned table (BERT, GPT-2)"),
    "hybrid": Scheme("embedding", {"base": 10000.0}, paper="scaled sinusoid + learned offset",
                     check=_sinusoid_rules),
    "shaw": Scheme("relative", {"max_distance": 16}, paper="Shaw et al. 2018",
                   check=_shaw_rules),
    "t5": Scheme("bias", {"num_buckets": 32, "max_distance": 128}, paper="Raffel et al. 2020",
                 check=_t5_rules),
    "alibi": Scheme("bias", paper="Press et al. 2022"),
    "swin": Scheme("bias", {"grid": None}, required=("grid",), causal=False,
                   paper="Liu et al. 2021", check=_swin_rules,
                   check_seq=_swin_seq),
    "rope": Scheme("rotary", {"base": 10000.0, "rope_scaling": None, "rope_layout": "half"},
                   paper="Su et al. 2021", check=_rope_rules),
    # The length-extrapolation family (posenc/distance_bias.py).
    "xpos": Scheme("rotary", {"base": 10000.0}, paper="Sun et al. 2023", check=_xpos_rules),
    "kerple_log": Scheme("bias", paper="Chi et al. 2022 (Kerple, log kernel)"),
    "kerple_power": Scheme("bias", paper="Chi et al. 2022 (Kerple, power kernel)"),
    "sandwich": Scheme("bias", paper="Chi et al. 2023 (Sandwich)", check=_sandwich_rules),
    "fire": Scheme("bias", paper="Li et al. 2024"),
    "dynamic": Scheme("bias", paper="x-transformers' dynamic position bias"),
    # The content-dependent family (posenc/content.py), causal only.
    "fox": Scheme("content", paper="Lin et al. 2025 (Forgetting Transformer)",
                  check=_content_rules),
    "cope": Scheme("content", paper="Golovneva et al. 2024 (CoPE)", check=_content_rules),
}
assert all(s.route in ROUTES for s in POSITIONS.values())
assert all(set(s.options) <= set(OPTION_NAMES) for s in POSITIONS.values())


# --------------------------------------------------------------------------- argument rules

def check_scheme_options(position: str, given: dict, options, required=(), *,
                         what: str = "") -> None:
    """Only the ``options`` ``position`` uses (``given`` holds the ones not ``None``), and
    the ``required`` ones present."""
    uses = ", ".join(options) if options else "none"
    for name, value in given.items():
        if name not in options:
            raise _error(what, f"{name} is not an option of position={position!r} (its options: "
                               f"{uses}), got {name}={value!r}",
                         f"drop {name}, or pick a position that uses it")
    for name in required:
        if name not in given:
            raise _error(what, f"position={position!r} needs {name}, got {name}=None",
                         "pass grid=(height, width), the patch grid whose height * width "
                         "tokens the model reads" if name == "grid" else f"pass {name}")


def check_position_causal(position: str, causal: bool, causal_ok: bool, *,
                          what: str = "") -> None:
    """An encoder-only scheme (Swin's grid bias) with ``causal=True``."""
    if causal and not causal_ok:
        raise _error(what, f"position={position!r} is an encoder scheme (a bias over a grid of "
                           f"patches, not a sequence in order), got causal=True",
                     "pass causal=False")


def check_cache_allowed(causal: bool, *, what: str = "") -> None:
    """A cache only for a causal model."""
    if not causal:
        raise _error(what, "cache is for causal decoding, got a cache for causal=False (an "
                           "encoder attends to every position at once)",
                     "build the model with causal=True, or call it without cache")


def check_grid_seq(grid, seq, *, what: str = "") -> None:
    """Swin's bias covers a ``height x width`` grid: the sequence must hold ``height * width``
    tokens (``seq`` ``None``: unknown, passes)."""
    if seq is not None and seq != grid[0] * grid[1]:
        raise _error(what, f"grid must match the sequence (height * width tokens), got "
                           f"grid={tuple(grid)} ({grid[0] * grid[1]} patches) for seq={seq}",
                     f"pass {grid[0] * grid[1]} tokens, or build the model with a grid of "
                     f"height * width = {seq}")


def check_tokens(shape, dtype: str, *, what: str = "") -> None:
    """``tokens`` are integer ids ``(batch, seq)``."""
    check_rank("tokens", shape, 2, what=what, fix="pass (batch, seq) integer token ids, e.g. "
                                                   "tokens[None] for one sequence")
    check_integer_dtype("tokens", dtype, what=what)


# --------------------------------------------------------------------------- options

def scheme_options(position: str, causal: bool, given: dict, *, what: str) -> dict:
    """The options of ``position``: the ones ``given`` (not ``None``) over its defaults.

    Raises ``ValueError`` for an unknown scheme, an option the scheme does not
    use, a missing required option (Swin's ``grid``) and a causal model with an
    encoder-only scheme.

    Example:
        >>> scheme_options("t5", True, {"max_distance": 64}, what="Transformer")
        {'num_buckets': 32, 'max_distance': 64}
    """
    position = check_choice("position", position, POSITIONS, what=what,
                            fix="see posenc.attention.POSITIONS")
    scheme = POSITIONS[position]
    given = {k: v for k, v in given.items() if v is not None}
    check_scheme_options(position, given, scheme.options, scheme.required, what=what)
    check_position_causal(position, causal, scheme.causal, what=what)
    return {**scheme.options, **given}


class LayerCache:
    """The cached keys and values of one attention layer, ``(batch, heads, seq, head_dim)``.

    ``keys`` and ``values`` start as ``None``; the layer appends each chunk's
    keys and values (:meth:`append`, with the face's ``concatenate``), so the
    cache grows in place. ``length`` is the number of cached positions: the
    offset of the next chunk. In a padded batch (``attention_mask``) the layer also keeps
    ``key_mask``, ``(batch, length)`` booleans (``False``: a padding key, masked at every
    later step), and ``positions``, ``(batch, length)``, each cached key's position (the
    next position of a row is its number of real keys); both stay ``None`` otherwise
    (all keys real, at ``0 .. length - 1``). A FoX layer (the ``"content"`` route) also keeps
    ``log_forget``, ``(batch, heads, length)``: the cumulative log-forget of the cached
    positions, from which each new query's decay to every cached key is exact.
    """

    def __init__(self):
        self.keys = None
        self.values = None
        self.key_mask = None
        self.positions = None
        self.log_forget = None

    @property
    def length(self) -> int:
        return 0 if self.keys is None else int(self.keys.shape[-2])

    def append(self, keys, values, concatenate):
        """Add a chunk's ``keys`` and ``values``; return all the cached ones."""
        if self.keys is not None:
            keys = concatenate((self.keys, keys))
            values = concatenate((self.values, values))
        self.keys, self.values = keys, values
        return keys, values


class Cache:
    """The caches of every layer of a Transformer (``model.new_cache()``).

    ``cache.layers[i]`` is layer ``i``'s :class:`LayerCache`; ``cache.length``
    the number of positions decoded so far.
    """

    def __init__(self, depth: int):
        self.layers = [LayerCache() for _ in range(depth)]

    @property
    def length(self) -> int:
        return self.layers[0].length if self.layers else 0

    def __len__(self) -> int:
        return self.length


#: The epsilon of every layer normalisation of the model (PyTorch's default).
NORM_EPS = 1e-5


def future_keys(q_len, k_len, arange):
    """``(q_len, k_len)`` booleans: key ``j`` comes after query ``i`` (the causal mask),
    the queries being the last ``q_len`` of the ``k_len`` positions (decoding with a cache).

    Example:
        >>> import numpy as np
        >>> future_keys(2, 3, np.arange).astype(int)
        array([[0, 0, 1],
               [0, 0, 0]])
    """
    return relative_positions(q_len, k_len, arange) > 0


def attention_settings(dim, heads, position, causal, max_len, dropout, options: dict, *,
                       what: str) -> Settings:
    """Check a ``MultiHeadAttention``'s (or a ``Transformer``'s) arguments, the same way in
    both faces, once: the common ones, then the scheme's own rules (``Scheme.check``).

    Returns:
        a :class:`Settings`, its options over the scheme's defaults in canonical types.

    Example:
        >>> s = attention_settings(32, 4, "shaw", True, 64, 0.0, {}, what="x")
        >>> s.route, s.head_dim, dict(s.options)
        ('relative', 8, {'max_distance': 16})
    """
    dim, heads = check_heads(dim, heads, what=what, name="heads")
    causal = check_bool("causal", causal, what=what)
    max_len = check_positive_int("max_len", max_len, what=what,
                                 fix="pass the longest sequence the model will read")
    dropout = check_rate("dropout", dropout, what=what)
    options = scheme_options(position, causal, options, what=what)
    draft = Settings(dim, heads, position, causal, max_len, dropout,
                     options)
    checked = POSITIONS[position].check(draft, what)
    return dataclasses.replace(draft, options=checked)


def transformer_settings(vocab_size, dim, depth, heads, mlp_dim, causal, position, max_len,
                         dropout, options: dict, *, what: str = "Transformer") -> Settings:
    """Check a ``Transformer``'s arguments (both faces); ``mlp_dim`` defaults to ``4 * dim``."""
    s = attention_settings(dim, heads, position, causal, max_len, dropout, options, what=what)
    vocab_size = check_positive_int("vocab_size", vocab_size, what=what,
                                    fix="pass the number of distinct token ids")
    depth = check_positive_int("depth", depth, what=what, fix="use at least one block")
    mlp_dim = (4 * s.dim if mlp_dim is None else check_positive_int(
        "mlp_dim", mlp_dim, what=what, fix="the usual value is 4 * dim"))
    return dataclasses.replace(s, vocab_size=vocab_size, depth=depth, mlp_dim=mlp_dim)


def given_options(base=None, rope_scaling=None, rope_layout=None, max_distance=None,
                  num_buckets=None, grid=None) -> dict:
    """The scheme options of a constructor's keywords, as one dict (``None``: not given)."""
    return {"base": base, "rope_scaling": rope_scaling, "rope_layout": rope_layout,
            "max_distance": max_distance, "num_buckets": num_buckets, "grid": grid}


def _embedding_layer(s: Settings):
    base = s.options.get("base")
    return {"sinusoidal": ("SinusoidalEncoding", (s.dim,), {"base": base}),
            "learned": ("LearnedEncoding", (s.max_len, s.dim), {}),
            "hybrid": ("HybridEncoding", (s.max_len, s.dim), {"base": base}),
            }[s.position]


def _bias_layer(s: Settings):
    options = s.options
    return {"alibi": ("ALiBiBias", (s.heads,), {"causal": s.causal}),
            "t5": ("T5RelativeBias", (s.heads,),
                   {"bidirectional": not s.causal, "num_buckets": options.get("num_buckets"),
                    "max_distance": options.get("max_distance")}),
            "swin": ("SwinRelativeBias", (s.heads, options.get("grid")), {}),
            "kerple_log": ("KerpleBias", (s.heads,), {"kernel": "log"}),
            "kerple_power": ("KerpleBias", (s.heads,), {"kernel": "power"}),
            "sandwich": ("SandwichBias", (s.heads, s.head_dim), {}),
            "fire": ("FireBias", (s.heads,), {}),
            "dynamic": ("DynamicPositionBias", (s.heads,), {"hidden_dim": max(s.dim // 4, 1)}),
            }[s.position]


def _rotary_layer(s: Settings):
    options = s.options
    if s.position == "xpos":    # one centre for every call, so cached decoding works
        return ("XPosEmbedding", (s.head_dim,), {"base": options["base"],
                                                 "center": s.max_len // 2})
    return ("RotaryEmbedding", (s.head_dim,),
            {"base": options["base"], "scaling": options["rope_scaling"],
             "layout": options["rope_layout"], "max_len": s.max_len})


def _content_layer(s: Settings):
    """FoX's gates read the layer input (``dim`` wide); CoPE counts up to ``max_len``."""
    if s.position == "fox":
        return ("ForgetGateBias", (s.heads, s.dim), {})
    return ("CoPE", (s.heads, s.head_dim, s.max_len), {})


#: route -> the face class (by name) that carries the scheme, and its arguments, from the
#: :class:`Settings`. The embedding route's layer belongs to the Transformer, the others to
#: each MultiHeadAttention; "relative" owns plain tables (the faces' ``RelativeTables``).
ROUTE_LAYERS = {"embedding": _embedding_layer, "bias": _bias_layer, "rotary": _rotary_layer,
                "content": _content_layer}


def route_layer(s: Settings, route: str, classes: dict, **layer_kwargs):
    """The face's layer for ``s``'s scheme when it enters by ``route``, else ``None``.

    ``classes`` maps class names to the face's classes; ``layer_kwargs`` go to the
    layer too (Keras's ``dtype``).
    """
    if s.route != route:
        return None
    name, args, kwargs = ROUTE_LAYERS[route](s)
    return classes[name](*args, **kwargs, **layer_kwargs)
