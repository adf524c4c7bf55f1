"""Stacks whose layers differ (framework-free): per-layer schemes, windows, presets, latent attention.

Today's decoders do not give every layer the same attention. Gemma 3 alternates
five *local* layers (a sliding window of 1024 keys, 512 in the 1B model; RoPE with
base 10,000) with one *global* layer (every key, RoPE with base 1,000,000 and a linear factor of 8
after its long-context stage); Llama 4 turns three layers out of four with RoPE
inside chunks of 8192 tokens and leaves every fourth layer without a positional
encoding (NoPE), its queries scaled up with the position ("attention temperature
tuning"); DeepSeek V2 and V3 rotate only a slice of each head, beside a latent
compression of the keys and values (multi-head latent attention, MLA).

This module holds the part of these recipes that needs no framework:

* :data:`LAYER_KEYS`, :class:`LayerRule`, :func:`layer_settings`: the per-layer
  specification a ``Transformer(..., stack=...)`` reads (a list with one entry
  per block, a preset's name, or a Hugging Face config with ``layer_types``),
  checked once into one :class:`posenc.attention.Settings` per block;
* :func:`layer_mask` (the sliding window and the chunks, on the face's
  ``arange``) and :func:`temperature_scales` (Llama 4's scale of the queries);
* the presets :func:`gemma3_stack`, :func:`llama4_stack` (the registry
  :data:`STACKS`) and :func:`hf_stack` (a Hugging Face config's layers);
* the rules of ``LatentAttention`` (:func:`latent_settings`,
  :func:`latent_softmax_scale`) and the DeepSeek preset :func:`deepseek_latent`
  with :func:`hf_latent` (a DeepSeek V2/V3 config's attention).

References:
    Gemma Team, "Gemma 3 Technical Report", arXiv:2503.19786, 2025 (section 2, the model
    architecture: the 5:1 local/global layers, the RoPE bases and, for long context, the
    factor 8).
    Meta, "The Llama 4 herd", 2025 (iRoPE: interleaved NoPE layers, attention
    temperature tuning), and Hugging Face's ``Llama4TextAttention``.
    Nakanishi, "Scalable-Softmax Is Superior for Attention", arXiv:2501.19399, 2025.
    DeepSeek-AI, "DeepSeek-V2", arXiv:2405.04434, 2024 (section 2.1.3, decoupled RoPE).
    Yang et al., "Rope to Nope and Back Again: A New Hybrid Attention Strategy",
    arXiv:2501.18795, 2025.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from posenc._checks import (
    _error,
    check_base,
    check_bool,
    check_choice,
    check_float,
    check_positive_int,
)
from posenc.attention import OPTION_NAMES, POSITIONS, Settings, attention_settings
from posenc.rotary import ROPE_LAYOUTS, hf_rope, rope_config

__all__ = ["LAYER_KEYS", "RULE_KEYS", "LayerRule", "STACKS", "stack_entries", "layer_settings",
           "stack_entry",
           "layer_mask", "temperature_scales", "gemma3_stack", "llama4_stack", "hf_stack",
           "LatentSettings", "latent_settings", "latent_softmax_scale", "deepseek_latent",
           "hf_latent", "LATENT_OPTIONS"]

#: The per-layer rules beyond the scheme (:class:`LayerRule`'s fields).
RULE_KEYS = ("window", "chunk", "qk_norm", "attn_temperature_tuning", "floor_scale",
             "attn_scale")

#: Every key an entry of ``stack`` may hold: the scheme, its options, the rules.
LAYER_KEYS = ("position", *OPTION_NAMES, *RULE_KEYS)


@dataclasses.dataclass(frozen=True)
class LayerRule:
    """What one layer does beyond its positional scheme, checked (:func:`layer_settings`).

    Attributes:
        window: sliding window: a query sees itself and the ``window - 1`` keys before
            it (keys ``window`` or more positions back are masked; Hugging Face's
            ``sliding_window``, Gemma 3's 1024, 512 in its 1B model); ``None``: every
            earlier key.
        chunk: chunked attention (Llama 4's ``attention_chunk_size``, 8192): a query
            sees only the keys of its own chunk of ``chunk`` positions; ``None``: off.
        qk_norm: queries and keys divided by their root mean square over the head,
            after the rotation and without a weight (Llama 4's ``Llama4TextL2Norm``,
            eps 1e-5 here); default ``False``.
        attn_temperature_tuning: on a NoPE layer, the queries at position ``p``
            multiplied by ``1 + attn_scale * log1p(floor((p + 1) / floor_scale))``
            (:func:`temperature_scales`); default ``False``.
        floor_scale: the length of one step of that scale (8192).
        attn_scale: its slope (0.1).
    """

    window: int | None = None
    chunk: int | None = None
    qk_norm: bool = False
    attn_temperature_tuning: bool = False
    floor_scale: float = 8192.0
    attn_scale: float = 0.1

    @property
    def masks(self) -> bool:
        """Whether the rule masks keys beyond the causal mask (a window or chunks)."""
        return self.window is not None or self.chunk is not None

    def config(self) -> dict:
        """The fields that differ from the defaults, as an entry of ``stack`` holds them."""
        default = LayerRule()
        return {k: getattr(self, k) for k in RULE_KEYS if getattr(self, k) != getattr(default, k)}


#: The epsilon of ``qk_norm`` (Llama 4's ``rms_norm_eps``).
QK_NORM_EPS = 1e-5


def check_rule(entry: dict, position: str, causal: bool, *, what: str) -> LayerRule:
    """The :class:`LayerRule` of one entry of ``stack`` (``what`` names the entry)."""
    rule = {}
    for name in ("window", "chunk"):
        value = entry.get(name)
        if value is None:
            continue
        meaning = ("the query and the window - 1 keys before it" if name == "window"
                   else "positions per chunk")
        rule[name] = check_positive_int(name, value, what=what,
                                        fix=f"pass at least 1 ({meaning}), or None for "
                                            f"every earlier key")
        if not causal:
            raise _error(what, f"{name} is for causal decoders (it masks earlier keys), got "
                               f"{name}={value!r} with causal=False",
                         f"build the model with causal=True, or drop {name}")
    for name in ("qk_norm", "attn_temperature_tuning"):
        if entry.get(name) is not None:
            rule[name] = check_bool(name, entry[name], what=what)
    tuning = rule.get("attn_temperature_tuning", False)
    for name, low in (("floor_scale", "above"), ("attn_scale", "at_least")):
        if entry.get(name) is None:
            continue
        if not tuning:
            raise _error(what, f"{name} is read only with attn_temperature_tuning=True, got "
                               f"{name}={entry[name]!r} without it",
                         f"add attn_temperature_tuning=True, or drop {name}")
        rule[name] = check_float(name, entry[name], what=what,
                                 **({"above": 0.0} if low == "above" else {"at_least": 0.0}),
                                 fix="Llama 4 uses floor_scale=8192 and attn_scale=0.1")
    if tuning and position != "none":
        raise _error(what, f"attn_temperature_tuning scales the queries of a NoPE layer, got "
                           f"it with position={position!r}",
                     "pass position='none' in this entry, or drop attn_temperature_tuning")
    return LayerRule(**rule)


# --------------------------------------------------------------------------- the stack

def stack_entries(stack, depth: int, *, what: str = "Transformer") -> list[dict] | None:
    """The entries of ``stack``, one dict per block, or ``None`` (every block alike).

    ``stack`` is ``None``; a name of :data:`STACKS` (the preset at ``depth``); a
    Hugging Face config (a dict or config object with ``layer_types``, read by
    :func:`hf_stack`); or a list of ``depth`` entries, each a scheme's name (short
    for ``{"position": name}``) or a dict of :data:`LAYER_KEYS`.

    Example:
        >>> stack_entries(["rope", {"position": "none"}], 2)
        [{'position': 'rope'}, {'position': 'none'}]
    """
    if stack is None:
        return None
    if isinstance(stack, str):
        name = check_choice("stack", stack, STACKS, what=what,
                            fix="pass a preset of posenc.stacks.STACKS, or a list with one "
                                "entry per block")
        return STACKS[name](depth)
    if not isinstance(stack, (list, tuple)):
        if isinstance(stack, dict) or hasattr(stack, "to_dict"):
            entries = hf_stack(stack, what=what)
        else:
            raise _error(what, f"stack must be None, a preset's name, a Hugging Face config or a "
                               f"list of per-layer entries, got stack={type(stack).__name__}",
                         "pass e.g. stack=['rope', 'rope', 'rope', 'none']")
    else:
        entries = list(stack)
    if len(entries) != depth:
        raise _error(what, f"stack must have one entry per block, got {len(entries)} entries "
                           f"for depth={depth}",
                     f"give {depth} entries, or build the model with depth={len(entries)}")
    out = []
    for i, entry in enumerate(entries):
        if isinstance(entry, str):
            entry = {"position": entry}
        if not isinstance(entry, dict):
            raise _error(what, f"stack[{i}] must be a scheme's name or a dict, got "
                               f"stack[{i}]={entry!r}",
                         "pass e.g. {'position': 'rope', 'window': 128}")
        for key in entry:
            if key not in LAYER_KEYS:
                raise _error(what, f"stack[{i}][{key!r}] is not a per-layer key (the keys: "
                                   f"{', '.join(LAYER_KEYS)}), got stack[{i}][{key!r}]="
                                   f"{entry[key]!r}", "remove it or correct its spelling")
        out.append(dict(entry))
    return out


def layer_settings(s: Settings, stack, *, what: str = "Transformer") -> list[Settings]:
    """One :class:`posenc.attention.Settings` per block of the model ``s`` describes.

    Each entry's ``position`` defaults to the model's; an entry whose scheme is the
    model's inherits the model's options (``base``, ``rope_scaling``, ...), which its
    own keys override; another scheme starts from its own defaults. The schemes that
    enter by the embeddings (``sinusoidal``, ``learned``, ``hybrid``) belong to the
    model, not to one layer. Errors name ``stack[i]``.

    Returns:
        a list of ``s.depth`` settings; ``settings.layer`` is each block's
        :class:`LayerRule` (``None`` everywhere when ``stack`` is ``None``).

    Example:
        >>> from posenc.attention import transformer_settings
        >>> s = transformer_settings(10, 32, 2, 4, None, True, "rope", 64, 0.0, {})
        >>> [(x.position, x.options.get("base"), x.layer.window)
        ...  for x in layer_settings(s, [{"window": 8}, {"base": 1e6}])]
        [('rope', 10000.0, 8), ('rope', 1000000.0, None)]
    """
    entries = stack_entries(stack, s.depth, what=what)
    if entries is None:
        return [s] * s.depth
    out = []
    for i, entry in enumerate(entries):
        where = f"{what}: stack[{i}]"
        position = entry.get("position", s.position)
        if position in POSITIONS and POSITIONS[position].route == "embedding" \
                and position != s.position:
            raise _error(where, f"position={position!r} is added to the embeddings, once, not "
                                f"by one layer", f"build the model with position={position!r}, "
                                                 f"or give this layer a rotary or bias scheme")
        given = {k: entry.get(k) for k in OPTION_NAMES}
        if position == s.position:
            given = {k: (s.options.get(k) if v is None else v) for k, v in given.items()}
        layer = attention_settings(s.dim, s.heads, position, s.causal, s.max_len, s.dropout,
                                   given, what=where)
        rule = check_rule(entry, layer.position, s.causal, what=where)
        out.append(dataclasses.replace(layer, vocab_size=s.vocab_size, depth=s.depth,
                                       mlp_dim=s.mlp_dim, layer=rule))
    return out


def stack_entry(s: Settings) -> dict:
    """One block's checked entry (``Transformer.stack``): its scheme, options and rule.

    Example:
        >>> from posenc.attention import transformer_settings
        >>> s = transformer_settings(10, 32, 2, 4, None, True, "rope", 64, 0.0, {})
        >>> stack_entry(layer_settings(s, ["none", {"window": 4}])[1])
        {'position': 'rope', 'base': 10000.0, 'rope_scaling': None, 'rope_layout': 'half', 'window': 4}
    """
    return {"position": s.position, **s.options, **(s.layer or LayerRule()).config()}


def layer_mask(q_len: int, k_len: int, rule, arange):
    """``(q_len, k_len)`` booleans, ``True`` where ``rule``'s window or chunks mask the key,
    the queries being the last ``q_len`` of the ``k_len`` positions (as
    :func:`posenc.attention.future_keys`); ``None`` when the rule masks nothing.

    ``arange`` is the face's (``torch.arange`` with a device, ``keras.ops.arange``).

    Example:
        >>> layer_mask(4, 4, LayerRule(window=2), np.arange).astype(int)
        array([[0, 0, 0, 0],
               [0, 0, 0, 0],
               [1, 0, 0, 0],
               [1, 1, 0, 0]])
    """
    if rule is None or not rule.masks:
        return None
    return _rule_mask((arange(q_len) + (k_len - q_len))[:, None], arange(k_len)[None, :], rule)


def position_mask(q_positions, k_positions, rule):
    """``(batch, q_len, k_len)`` booleans, ``True`` where ``rule``'s window or chunks mask the
    key, from the tokens' own positions (a padded or packed batch: ``q_positions``
    ``(batch, q_len)`` and ``k_positions`` ``(batch, k_len)``, the positions of
    :func:`posenc.batches.mask_positions` or :func:`posenc.batches.document_positions`);
    ``None`` when the rule masks nothing. With ``arange`` positions it equals
    :func:`layer_mask`.

    Example:
        >>> p = np.array([[0, 0, 1, 2]])        # a left-padded row: one pad, then 3 tokens
        >>> position_mask(p, p, LayerRule(window=2))[0].astype(int)
        array([[0, 0, 0, 0],
               [0, 0, 0, 0],
               [0, 0, 0, 0],
               [1, 1, 0, 0]])
    """
    if rule is None or not rule.masks:
        return None
    return _rule_mask(q_positions[:, :, None], k_positions[:, None, :], rule)


def _rule_mask(q_pos, k_pos, rule):
    """The window's and the chunks' mask of query and key positions that broadcast."""
    mask = None
    if rule.window is not None:
        mask = (q_pos - k_pos) >= rule.window
    if rule.chunk is not None:
        other = (q_pos // rule.chunk) != (k_pos // rule.chunk)
        mask = other if mask is None else (mask | other)
    return mask


def temperature_scales(offset: int, seq: int, floor_scale: float = 8192.0,
                       attn_scale: float = 0.1) -> np.ndarray:
    """Llama 4's scale of a NoPE layer's queries at positions ``offset .. offset + seq - 1``.

    ``1 + attn_scale * log1p(floor((p + 1) / floor_scale))``, in float32 as Hugging
    Face computes it: 1 for the first ``floor_scale - 1`` positions, then growing
    like the logarithm of the position (Nakanishi's scalable softmax multiplies the
    logits by ``s log n`` for the same reason: a softmax over ``n`` keys flattens as
    ``n`` grows).

    Example:
        >>> temperature_scales(8190, 4, floor_scale=8192.0, attn_scale=0.1)
        array([1.       , 1.0693147, 1.0693147, 1.0693147], dtype=float32)
    """
    positions = np.arange(offset, offset + seq, dtype=np.float32)
    steps = np.floor((positions + np.float32(1.0)) / np.float32(floor_scale))
    return (np.log1p(steps) * np.float32(attn_scale) + np.float32(1.0)).astype(np.float32)


# --------------------------------------------------------------------------- presets

def gemma3_stack(depth: int, *, window: int = 1024, local_base: float = 10_000.0,
                 global_base: float = 1_000_000.0, global_factor: float = 8.0,
                 pattern: int = 6) -> list[dict]:
    """Gemma 3's layers: ``pattern - 1`` local layers, then one global one, repeated.

    A local layer attends within a sliding ``window`` with RoPE of base
    ``local_base``; every ``pattern``-th layer (the 6th, 12th, ... as in Hugging
    Face's ``layer_types`` and keras-hub's ``Gemma3Backbone``) attends to every key
    with RoPE of base ``global_base`` and, for the 4B, 12B and 27B models after their
    128K stage, positions interpolated by ``global_factor`` (a linear
    ``rope_scaling``; 1.0 for none, as Gemma 3 1B, whose released configs also use
    ``window=512``). Gemma's other parts (the query
    and key RMS norms with weights, which replaced Gemma 2's soft-capping) are not
    positional and not here.

    Example:
        >>> [e.get("window") for e in gemma3_stack(6, window=512)]
        [512, 512, 512, 512, 512, None]
    """
    depth = check_positive_int("depth", depth, what="gemma3_stack")
    pattern = check_positive_int("pattern", pattern, what="gemma3_stack")
    factor = check_float("global_factor", global_factor, at_least=1.0, what="gemma3_stack")
    scaling = None if factor == 1.0 else {"rope_type": "linear", "factor": factor}
    out = []
    for i in range(depth):
        if (i + 1) % pattern:
            out.append({"position": "rope", "base": float(local_base), "window": window})
        else:
            out.append({"position": "rope", "base": float(global_base), "rope_scaling": scaling})
    return out


def llama4_stack(depth: int, *, nope_every: int = 4, base: float = 500_000.0,
                 rope_scaling: dict | None = None, rope_layout: str = "interleaved",
                 chunk: int | None = 8192, qk_norm: bool = True, floor_scale: float = 8192.0,
                 attn_scale: float = 0.1) -> list[dict]:
    """Llama 4's iRoPE: every ``nope_every``-th layer NoPE with temperature tuning, the others RoPE.

    The RoPE layers (Meta's complex form, ``rope_layout="interleaved"``; base 500,000;
    Scout adds ``{"rope_type": "llama3", "factor": 16.0, "low_freq_factor": 1.0,
    "high_freq_factor": 1.0, "original_max_position_embeddings": 8192}``) attend
    within chunks of ``chunk`` tokens with the RMS norm of the queries and keys (Scout;
    the 128-expert Maverick has none, ``qk_norm=False``); the
    NoPE layers (the 4th, 8th, ... as Hugging Face's ``no_rope_layers``) attend to
    every key, their queries scaled by :func:`temperature_scales`.

    Example:
        >>> [e["position"] for e in llama4_stack(8)]
        ['rope', 'rope', 'rope', 'none', 'rope', 'rope', 'rope', 'none']
    """
    depth = check_positive_int("depth", depth, what="llama4_stack")
    nope_every = check_positive_int("nope_every", nope_every, what="llama4_stack")
    out = []
    for i in range(depth):
        if (i + 1) % nope_every:
            entry = {"position": "rope", "base": float(base), "rope_scaling": rope_scaling,
                     "rope_layout": rope_layout, "qk_norm": qk_norm}
            if chunk is not None:
                entry["chunk"] = chunk
        else:
            entry = {"position": "none", "attn_temperature_tuning": True,
                     "floor_scale": float(floor_scale), "attn_scale": float(attn_scale)}
        out.append(entry)
    return out


#: Presets by name: ``STACKS[name](depth, **options)`` returns a ``stack`` list.
STACKS: dict[str, Callable[..., list[dict]]] = {"gemma3": gemma3_stack, "llama4": llama4_stack}


def _config_dict(config, what: str) -> dict:
    if isinstance(config, dict):
        return dict(config)
    to_dict = getattr(config, "to_dict", None)
    if to_dict is None:
        raise _error(what, f"config must be a dict or a Hugging Face config, got "
                           f"config={type(config).__name__}",
                     "pass the dict of config.json, or a PretrainedConfig")
    return to_dict()


def hf_stack(config, *, what: str = "hf_stack") -> list[dict]:
    """The ``stack`` of a Hugging Face config whose layers differ (Gemma 2/3, Llama 4, ...).

    Reads ``layer_types`` (``"sliding_attention"`` gets ``sliding_window``,
    ``"chunked_attention"`` ``attention_chunk_size``, ``"full_attention"`` neither),
    each layer type's RoPE base and scaling by :func:`posenc.rotary.hf_rope` (v5's
    nested ``rope_parameters`` or v4's ``rope_local_base_freq``), Llama 4's
    ``no_rope_layers`` (0: a NoPE layer, with ``attn_temperature_tuning``,
    ``floor_scale``, ``attn_scale``) and ``use_qk_norm`` (its RoPE layers). The
    model's own width decides the head; a ``partial_rotary_factor`` travels in the
    scaling.

    Example:
        >>> cfg = {"hidden_size": 64, "num_attention_heads": 4, "sliding_window": 16,
        ...        "layer_types": ["sliding_attention", "full_attention"],
        ...        "rope_parameters": {
        ...            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
        ...            "full_attention": {"rope_type": "linear", "factor": 8.0,
        ...                               "rope_theta": 1e6}}}
        >>> [(e["base"], e.get("window")) for e in hf_stack(cfg)]
        [(10000.0, 16), (1000000.0, None)]
    """
    config = _config_dict(config, what)
    types = config.get("layer_types")
    if not types:
        raise _error(what, "config must have layer_types (one per layer), got none",
                     "pass a config whose layers differ, or a list with one entry per block")
    no_rope = config.get("no_rope_layers")
    out = []
    for i, layer_type in enumerate(types):
        if no_rope is not None and not no_rope[i]:
            entry = {"position": "none"}
            if config.get("attn_temperature_tuning"):
                entry.update(attn_temperature_tuning=True,
                             floor_scale=float(config.get("floor_scale", 8192)),
                             attn_scale=float(config.get("attn_scale", 0.1)))
        else:
            rope = hf_rope(config, layer_type=layer_type)
            scaling = rope["scaling"]
            entry = {"position": "rope", "base": rope["base"],
                     "rope_scaling": None if scaling == {"rope_type": "default"} else scaling}
            if str(config.get("model_type", "")).startswith("llama4"):
                entry["rope_layout"] = "interleaved"
                if config.get("use_qk_norm"):
                    entry["qk_norm"] = True
        if layer_type == "sliding_attention":
            entry["window"] = int(config["sliding_window"])
        elif layer_type == "chunked_attention":
            entry["chunk"] = int(config["attention_chunk_size"])
        elif layer_type != "full_attention":
            check_choice(f"layer_types[{i}]", layer_type,
                         ("sliding_attention", "chunked_attention", "full_attention"), what=what)
        out.append(entry)
    return out


# --------------------------------------------------------------------------- latent attention

@dataclasses.dataclass(frozen=True)
class LatentSettings:
    """A ``LatentAttention``'s arguments, checked once (:func:`latent_settings`)."""

    dim: int
    heads: int
    kv_lora_rank: int
    q_lora_rank: int | None
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    base: float
    rope_scaling: dict | None
    rope_layout: str
    causal: bool
    max_len: int
    norm_eps: float

    @property
    def qk_head_dim(self) -> int:
        """Each head's query and key width: ``qk_nope_head_dim + qk_rope_head_dim``."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    @property
    def softmax_scale(self) -> float:
        """:func:`latent_softmax_scale` of these settings."""
        return latent_softmax_scale(self.qk_head_dim, self.rope_scaling)


#: ``LatentAttention``'s keyword arguments, in order.
LATENT_OPTIONS = ("kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                  "v_head_dim", "base", "rope_scaling", "rope_layout", "causal", "max_len",
                  "norm_eps")


def latent_settings(dim, heads, kv_lora_rank, q_lora_rank, qk_nope_head_dim, qk_rope_head_dim,
                    v_head_dim, base, rope_scaling, rope_layout, causal, max_len, norm_eps, *,
                    what: str = "LatentAttention") -> LatentSettings:
    """Check ``LatentAttention``'s arguments (both faces); ``v_head_dim`` ``None`` means
    ``qk_nope_head_dim``."""
    def positive(name, value, fix):
        return check_positive_int(name, value, what=what, fix=fix)

    dim = positive("dim", dim, "pass the model width")
    heads = positive("heads", heads, "pass the number of attention heads")
    kv_lora_rank = positive("kv_lora_rank", kv_lora_rank,
                            "the width of the cached latent (DeepSeek V2/V3: 512)")
    if q_lora_rank is not None:
        q_lora_rank = positive("q_lora_rank", q_lora_rank,
                               "the query's low-rank width (DeepSeek V3: 1536), or None for a "
                               "full query projection")
    qk_nope_head_dim = positive("qk_nope_head_dim", qk_nope_head_dim,
                                "the features of each head that do not turn (DeepSeek: 128)")
    rope_dim = positive("qk_rope_head_dim", qk_rope_head_dim,
                        "the rotated features of each head (DeepSeek: 64), an even number")
    if rope_dim % 2:
        raise _error(what, f"qk_rope_head_dim must be even (its features turn in pairs), got "
                           f"qk_rope_head_dim={rope_dim}", f"pass {rope_dim + 1}")
    v_head_dim = qk_nope_head_dim if v_head_dim is None else positive(
        "v_head_dim", v_head_dim, "the value width of each head (DeepSeek: 128)")
    base = check_base(base, what=what)
    layout = check_choice("rope_layout", rope_layout, ROPE_LAYOUTS, what=what,
                          fix="DeepSeek's checkpoints are interleaved")
    if rope_scaling is not None:
        rope_scaling = rope_config(rope_scaling, base=base, what=what, arg="rope_scaling")
        base = float(rope_scaling.pop("rope_theta", base))
    causal = check_bool("causal", causal, what=what)
    max_len = positive("max_len", max_len, "pass the longest sequence the layer will read")
    norm_eps = check_float("norm_eps", norm_eps, above=0.0, what=what,
                           fix="DeepSeek uses 1e-6")
    return LatentSettings(dim, heads, kv_lora_rank, q_lora_rank, qk_nope_head_dim, rope_dim,
                          v_head_dim, base, rope_scaling, layout, causal, max_len, norm_eps)


def _mscale(factor: float, mscale: float) -> float:
    return 1.0 if factor <= 1.0 else 0.1 * mscale * math.log(factor) + 1.0


def latent_softmax_scale(qk_head_dim: int, rope_scaling: dict | None) -> float:
    """MLA's softmax scale: ``qk_head_dim ** -0.5``, times ``mscale(factor, mscale_all_dim)^2``
    under YaRN with ``mscale_all_dim`` (DeepSeek V2/V3).

    YaRN's attention factor ``mscale(factor, mscale) / mscale(factor, mscale_all_dim)``
    multiplies the cos and sin of the rotated slice (it reaches the logits squared, once
    by the query and once by the key); this second factor reaches every logit, the
    unrotated features too. ``mscale(s, m) = 0.1 m ln s + 1`` for ``s > 1``.

    Example:
        >>> round(latent_softmax_scale(192, {"rope_type": "yarn", "factor": 40.0,
        ...     "original_max_position_embeddings": 4096, "mscale": 1.0,
        ...     "mscale_all_dim": 1.0}) * 192 ** 0.5, 6)
        1.873854
    """
    scale = float(qk_head_dim) ** -0.5
    if rope_scaling and rope_scaling.get("rope_type", "default") != "default":
        all_dim = rope_scaling.get("mscale_all_dim") or 0.0
        if all_dim:
            m = _mscale(float(rope_scaling["factor"]), float(all_dim))
            scale *= m * m
    return scale


def deepseek_latent(**overrides) -> dict:
    """DeepSeek V3's attention as ``LatentAttention`` keyword arguments (``dim`` and
    ``heads`` included), with ``overrides`` on top (DeepSeek V2: ``dim=5120``,
    ``q_lora_rank=1536``, the same head widths).

    128 heads of 128 unrotated and 64 rotated query/key features and 128 value features;
    the keys and values cached as one latent of 512 plus one shared rotated key of 64
    (576 numbers per token and layer, against 128 * (192 + 128) = 40,960 for plain
    multi-head attention); YaRN with factor 40 over an original 4096 positions,
    ``beta_fast`` 32 and ``beta_slow`` 1, ``mscale = mscale_all_dim = 1``.

    References:
        DeepSeek-AI, "DeepSeek-V3 Technical Report", arXiv:2412.19437 (sections 4.2 and 4.3).

    Example:
        >>> kw = deepseek_latent(dim=64, heads=2)
        >>> kw["kv_lora_rank"] + kw["qk_rope_head_dim"]
        576
    """
    options = {"dim": 7168, "heads": 128, "kv_lora_rank": 512, "q_lora_rank": 1536,
               "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
               "base": 10000.0,
               "rope_scaling": {"rope_type": "yarn", "factor": 40.0,
                                "original_max_position_embeddings": 4096, "beta_fast": 32.0,
                                "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0},
               "rope_layout": "interleaved"}
    options.update(overrides)
    return options


def hf_latent(config, *, what: str = "hf_latent") -> dict:
    """``LatentAttention`` keyword arguments of a Hugging Face DeepSeek V2/V3 config.

    The rope base and scaling come from :func:`posenc.rotary.hf_rope` (on the
    ``qk_rope_head_dim`` slice); ``rope_interleave`` (V3; V2 is always interleaved)
    picks the layout.

    Example:
        >>> kw = hf_latent({"hidden_size": 64, "num_attention_heads": 2, "kv_lora_rank": 16,
        ...                 "q_lora_rank": None, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4,
        ...                 "v_head_dim": 8, "rope_theta": 10000.0})
        >>> kw["rope_layout"], kw["rope_scaling"]
        ('interleaved', None)
    """
    config = _config_dict(config, what)
    rope = hf_rope(config)
    scaling = rope["scaling"]
    return {"dim": int(config["hidden_size"]), "heads": int(config["num_attention_heads"]),
            "kv_lora_rank": int(config["kv_lora_rank"]),
            "q_lora_rank": config.get("q_lora_rank"),
            "qk_nope_head_dim": int(config["qk_nope_head_dim"]),
            "qk_rope_head_dim": int(config["qk_rope_head_dim"]),
            "v_head_dim": int(config["v_head_dim"]), "base": rope["base"],
            "rope_scaling": None if scaling == {"rope_type": "default"} else scaling,
            "rope_layout": "interleaved" if config.get("rope_interleave", True) else "half",
            "norm_eps": float(config.get("rms_norm_eps", 1e-6))}
