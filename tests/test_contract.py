"""The cross-framework contract: every public name exists in both faces, with the same
argument names, kinds and defaults, and those are the contract's.

``CONTRACT`` holds what the faces export today (the contract's functions and classes,
and the names beyond its list that follow the same rules); ``PLANNED`` holds the names the
contract promises that no face exports yet. When one lands, it moves from ``PLANNED`` to
``CONTRACT`` with its signature (a test below fails until it does), so ``PLANNED`` only
shrinks.
"""

from __future__ import annotations

import inspect
import math
import re
from pathlib import Path

import keras
import pytest
import torch

import posenc.keras as pk
import posenc.torch as pt

FACES = {"torch": pt, "keras": pk}
REQUIRED = inspect.Parameter.empty
POS = "positional"      # positional-or-keyword
KW = "keyword-only"


def p(name, default=REQUIRED, kind=POS):
    return (name, kind, default)


def kw(name, default=REQUIRED):
    return (name, KW, default)


SCHEME_OPTIONS = [kw(name, None) for name in ("base", "rope_scaling", "rope_layout",
                                              "max_distance", "num_buckets", "grid")]

# name -> the parameters of the function, or of the class's constructor (without self;
# Keras layers may add **kwargs for the Layer's own arguments, and nothing else).
CONTRACT = {
    # The contract's functions.
    "sinusoidal": [p("positions"), p("dim"), kw("base", 10000.0), kw("layout", "interleaved")],
    "sinusoidal_2d": [p("height"), p("width"), p("dim"), kw("base", 10000.0),
                      kw("layout", "interleaved"), kw("trained_hw", None)],  # beyond the contract
    "resize_table": [p("table"), p("new_length"), kw("mode", "linear")],
    "resize_table_2d": [p("table"), p("old_hw"), p("new_hw"), kw("prefix_tokens", 0),
                        kw("mode", "bicubic"), kw("antialias", True)],
    # The contract's classes (constructor arguments named as the functions' arguments).
    "SinusoidalEncoding": [p("dim"), kw("base", 10000.0), kw("layout", "interleaved")],
    "LearnedEncoding": [p("max_len"), p("dim"), kw("init_std", 0.02)],
    "HybridEncoding": [p("max_len"), p("dim"), kw("base", 10000.0), kw("layout", "interleaved"),
                       kw("scale", 1.0)],
    # Beyond the contract's list, under the same rules.
    "EncodingDropout": [p("rate"), kw("seed", None)],
    "ChannelDropout": [p("rate"), kw("seed", None)],
    "GaussianNoise": [p("std"), kw("seed", None)],
    "RegularizedEncoding": [p("encoding"), kw("dropout", 0.0), kw("channel_dropout", 0.0),
                            kw("noise_std", 0.0), kw("seed", None)],
    "ContinuousTimeEncoding": [p("dim"), kw("time_scale", 1.0), kw("base", 10000.0),
                               kw("layout", "interleaved")],
    "Time2Vec": [p("dim")],
    "hierarchical": [p("paths"), p("dim"), kw("max_depth"), kw("base", 10000.0)],
    "HierarchicalEncoding": [p("max_depth"), p("max_children"), p("dim")],
    "modality_positions": [p("modality_ids"), kw("num_modalities", None)],
    "MultimodalEncoding": [p("dim"), kw("num_modalities"), kw("max_len"),
                           kw("mode", "shared_offset")],
    "LowRankEncoding": [p("max_len"), p("dim"), kw("rank")],
    "coordinate_encoding": [p("coords"), p("dim"), kw("scale", 2 * math.pi),
                            kw("base", 10000.0), kw("layout", "interleaved")],
    "laplacian": [p("adjacency"), kw("normalized", True)],
    "laplacian_positions": [p("adjacency"), p("k"), kw("normalized", True),
                            kw("return_eigenvalues", False)],
    "LaplacianEncoding": [p("k"), p("dim"), kw("sign_flip", True), kw("seed", None)],
    # Attention biases (the contract's functions and classes).
    "alibi_slopes": [p("num_heads")],
    "alibi_bias": [p("num_heads"), p("q_len"), p("k_len"), kw("causal", True)],
    "ALiBiBias": [p("num_heads"), kw("causal", True)],
    "t5_buckets": [p("relative_position"), kw("bidirectional", True), kw("num_buckets", 32),
                   kw("max_distance", 128)],
    "T5RelativeBias": [p("num_heads"), kw("bidirectional", True), kw("num_buckets", 32),
                       kw("max_distance", 128)],
    "swin_relative_index": [p("window_h"), p("window_w")],
    "resize_swin_bias_table": [p("table"), p("old_window"), p("new_window"),
                               kw("mode", "bicubic")],   # beyond the contract
    "SwinRelativeBias": [p("num_heads"), p("window_size")],

    # Shaw et al.'s relative attention.
    "shaw_relative_index": [p("q_len"), p("k_len"), p("max_distance")],
    "shaw_attention": [p("q"), p("k"), p("v"), p("key_table"), p("value_table"),
                       p("max_distance"), kw("causal", False), kw("method", "skew"),
                       kw("dropout", 0.0), kw("return_weights", False)],
    "ShawRelativeAttention": [p("dim"), p("num_heads"), p("max_distance"), kw("causal", False),
                              kw("method", "skew")],
    "windowed_attention": [p("q"), p("k"), p("v"), p("window"), kw("key_table", None),
                           kw("value_table", None), kw("causal", False)],  # beyond the contract

    # The attention family: the scheme's options are keywords, None meaning its default.
    "MultiHeadAttention": [p("dim"), p("heads"), kw("position", "none"), kw("causal", False),
                           kw("max_len", 512), kw("dropout", 0.0), *SCHEME_OPTIONS],
    "Transformer": [p("vocab_size"), kw("dim", 64), kw("depth", 2), kw("heads", 4),
                    kw("mlp_dim", None), kw("causal", True), kw("position", "rope"),
                    kw("max_len", 512), kw("dropout", 0.0), *SCHEME_OPTIONS],
    # Rotary position embedding.
    "rope_frequencies": [p("head_dim"), kw("base", 10000.0), kw("scaling", None),
                         kw("seq_len", None)],
    "apply_rope": [p("x"), p("positions"), p("inv_freq"), kw("layout", "half"),
                   kw("attention_factor", 1.0), kw("exact", False)],   # exact: beyond the contract
    "convert_rope_layout": [p("weight"), p("num_heads"), kw("to")],
    "RotaryEmbedding": [p("head_dim"), kw("base", 10000.0), kw("scaling", None),
                        kw("layout", "half"), kw("rotary_dim", None), kw("max_len", 2048),
                        kw("exact", False)],   # exact: beyond the contract
    "apply_rope_2d": [p("x"), p("height"), p("width"), p("inv_freq"),
                      kw("layout", "half")],   # beyond the contract
    "RotaryEmbedding2D": [p("head_dim"), p("grid"), kw("base", 10000.0),
                          kw("layout", "half")],   # beyond the contract
}

# The contract's names that no face exports yet, with the signatures it states (None: a
# class whose constructor the contract leaves open). When a face exports one, move it
# to CONTRACT.
PLANNED = {
}

# Backticked names in the contract's text that are not posenc's: a formula's clip, Keras
# methods, Python's own.
NOT_POSENC = {"clip", "get_config", "from_config", "model.save", "ValueError", "None"}

API_MD = Path(__file__).resolve().parents[2] / "shared" / "API.md"


def parameters(face: str, obj) -> list[tuple]:
    """``(name, kind, default)`` of a function, or of a class's constructor."""
    target = obj.__init__ if inspect.isclass(obj) else obj
    out = []
    for param in inspect.signature(target).parameters.values():
        if param.name == "self":
            continue
        if param.kind is inspect.Parameter.VAR_KEYWORD and face == "keras" and inspect.isclass(obj):
            continue  # the Layer's own arguments (name, dtype, ...)
        kind = {inspect.Parameter.POSITIONAL_OR_KEYWORD: POS,
                inspect.Parameter.KEYWORD_ONLY: KW}.get(param.kind, param.kind.name)
        out.append((param.name, kind, param.default))
    return out


def exported(face: str) -> set[str]:
    return set(FACES[face].__all__)


# --------------------------------------------------------------------------- the contract's names

@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("name", sorted(CONTRACT))
def test_contract_name_has_the_contract_signature(name, face):
    module = FACES[face]
    assert name in module.__all__, f"{module.__name__} does not export {name}"
    assert parameters(face, getattr(module, name)) == CONTRACT[name]


@pytest.mark.parametrize("name", sorted(set(pt.__all__) | set(pk.__all__)))
def test_every_export_is_in_both_faces_with_one_signature(name):
    missing = [face for face in FACES if name not in exported(face)]
    assert not missing, f"{name} is exported by one face only; add it to {missing}"
    assert parameters("torch", getattr(pt, name)) == parameters("keras", getattr(pk, name))
    assert name in CONTRACT, (f"{name} is exported but not in the contract: add it to "
                              "CONTRACT in tests/test_contract.py with its signature")


def test_same_export_lists():
    assert pt.__all__ == pk.__all__
    assert len(pt.__all__) == len(set(pt.__all__))


@pytest.mark.parametrize("name", [n for n in pt.__all__ if inspect.isclass(getattr(pt, n))])
def test_classes_are_module_and_layer(name):
    assert issubclass(getattr(pt, name), torch.nn.Module)
    assert issubclass(getattr(pk, name), keras.layers.Layer)


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("name", pt.__all__)
def test_documented(name, face):
    doc = inspect.getdoc(getattr(FACES[face], name)) or ""
    assert len(doc.splitlines()) >= 3, f"{face}: {name} needs a docstring"
    assert "Args:" in doc or "Call arguments:" in doc, f"{face}: {name} has no Args section"


# --------------------------------------------------------------------------- the planned names

def test_planned_and_contract_do_not_overlap():
    assert not set(PLANNED) & set(CONTRACT)


def test_planned_names_not_exported_yet():
    landed = {name: [face for face in FACES
                     if name in exported(face) or hasattr(FACES[face], name)]
              for name in PLANNED}
    landed = {name: faces for name, faces in landed.items() if faces}
    assert not landed, (
        f"{landed} have landed: move them from PLANNED to CONTRACT in tests/test_contract.py "
        "(with their signatures) and give each class a row in the layer table "
        "(tests/test_layers.py)")


def test_every_call_in_the_contract_text_is_tested_or_planned():
    if not API_MD.exists():
        pytest.skip("the contract's text is not in this checkout")
    names = set(re.findall(r"`([A-Za-z_][\w.]*)\(", API_MD.read_text()))
    classes = set(re.findall(r"`([A-Z]\w+)`", API_MD.read_text()))
    unknown = (names | classes) - set(CONTRACT) - set(PLANNED) - NOT_POSENC
    assert not unknown, f"add these names of the contract to CONTRACT or PLANNED: {unknown}"
