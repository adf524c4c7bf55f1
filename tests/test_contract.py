"""The cross-framework contract: every public name exists in both faces, with the same
argument names, kinds and defaults, and those are the contract's; every exported class has
the same public methods, properties and attributes in both faces, each of one kind, the
methods with one signature (``FRAMEWORK`` lists the differences each framework imposes).

``CONTRACT`` holds what the faces export today (the contract's functions and classes,
and the names beyond its list that follow the same rules); ``PLANNED`` holds the names the
contract promises that no face exports yet. When one lands, it moves from ``PLANNED`` to
``CONTRACT`` with its signature (a test below fails until it does), so ``PLANNED`` only
shrinks.
"""

from __future__ import annotations

import importlib
import inspect
import math
import re
from pathlib import Path

import keras
import numpy as np
import pytest
import torch

import posenc.keras as pk
import posenc.keras.batches as kbat
import posenc.keras.bugs as kb
import posenc.keras.diagnostics as kd
import posenc.keras.tasks as kt
import posenc.torch as pt
import posenc.torch.batches as tbat
import posenc.torch.bugs as tb
import posenc.torch.diagnostics as td
import posenc.torch.tasks as tt

FACES = {"torch": pt, "keras": pk}
# Signatures and members do not depend on the Keras backend: run in the first pass only.
pytestmark = pytest.mark.backend_free
# The face modules that are not re-exported by the faces' ``__init__``: imported as
# ``posenc.torch.tasks`` / ``posenc.keras.tasks``, under the same rules.
SUBMODULES = {"diagnostics": (td, kd), "tasks": (tt, kt), "bugs": (tb, kb),
              "batches": (tbat, kbat)}
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
                    kw("max_len", 512), kw("dropout", 0.0), *SCHEME_OPTIONS,
                    kw("stack", None)],   # stack: this round's per-layer schemes
    # Stacks whose layers differ: DeepSeek's multi-head latent attention (beyond the list).
    "LatentAttention": [p("dim"), p("heads"), kw("kv_lora_rank"), kw("qk_rope_head_dim"),
                        kw("qk_nope_head_dim"), kw("v_head_dim", None), kw("q_lora_rank", None),
                        kw("base", 10000.0), kw("rope_scaling", None),
                        kw("rope_layout", "interleaved"), kw("causal", True), kw("max_len", 512),
                        kw("norm_eps", 1e-6)],
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
    # Multimodal RoPE (Qwen2-VL chunked, Qwen3-VL interleaved).
    "apply_mrope": [p("x"), p("positions"), p("inv_freq"), kw("sections"),
                    kw("arrangement", "chunked"), kw("layout", "half")],
    # Vision RoPE (beyond the contract's list): axial 2D at any grid, and RoPE-Mixed.
    "apply_vision_rope": [p("x"), p("grid"), kw("prefix_tokens", 0), kw("ref_grid", None),
                          kw("base", 10000.0), kw("offset", 0.0), kw("axis_order", "hw"),
                          kw("layout", "interleaved")],
    "apply_mixed_rope": [p("x"), p("grid"), p("freqs"), kw("prefix_tokens", 0),
                         kw("ref_grid", None), kw("offset", 0.0), kw("layout", "interleaved")],
    "VisionRotaryEmbedding": [p("head_dim"), kw("grid", None), kw("ref_grid", None),
                              kw("prefix_tokens", 0), kw("base", 10000.0), kw("offset", 0.0),
                              kw("axis_order", "hw"), kw("layout", "interleaved")],
    "MixedRotaryEmbedding": [p("head_dim"), p("num_heads"), kw("depth", 1), kw("grid", None),
                             kw("ref_grid", None), kw("prefix_tokens", 0), kw("base", 10.0),
                             kw("offset", 0.0), kw("rotate", True), kw("seed", None),
                             kw("layout", "interleaved")],
    # The length-extrapolation family (this round's schemes; names of our choosing).
    "XPosEmbedding": [p("head_dim"), kw("base", 10000.0), kw("scale_base", 512.0),
                      kw("gamma", 0.4), kw("layout", "interleaved"), kw("center", None)],
    "KerpleBias": [p("num_heads"), kw("kernel", "log")],
    "SandwichBias": [p("num_heads"), p("dim")],
    "FireBias": [p("num_heads"), kw("hidden_dim", 32), kw("c", 0.1), kw("threshold", 512.0),
                 kw("eps", 1e-6)],
    "DynamicPositionBias": [p("num_heads"), kw("hidden_dim", 64), kw("depth", 2),
                            kw("log_distance", False)],
    "ContinuousPositionBias": [p("num_heads"), p("window_size"), kw("hidden_dim", 512),
                               kw("pretrained_window", None)],
    # Positions that depend on the content (names of our choosing).
    "ForgetGateBias": [p("num_heads"), p("dim"), kw("bias_init", 0.0)],
    "CoPE": [p("num_heads"), p("head_dim"), p("max_position"), kw("scale", 1.0)],
}

# The contract's names that no face exports yet, with the signatures it states (None: a
# class whose constructor the contract leaves open). When a face exports one, move it
# to CONTRACT.
PLANNED = {
    # The inspector of a checkpoint's positions (framework-free) and its report's methods.
    "posenc.inspect": [p("config")],
    "report.to_dict": None,
    "report.figure": None,
}

# The contract's names that are not face exports: a framework-free function
# (``posenc.<family>.<name>``, one object for both faces) or a class's method, with their
# signatures.
CONTRACT_MEMBERS = {
    # Hugging Face configs: the framework-free reader and the layer's constructor.
    "posenc.rotary.hf_rope": [p("config"), kw("layer_type", None)],
    # Multimodal RoPE's positions (framework-free: NumPy in, NumPy out, for both faces).
    "posenc.mrope.mrope_positions": [p("token_types"), kw("image_grid_thw", None),
                                     kw("video_grid_thw", None), kw("spatial_merge_size", 1),
                                     kw("tokens_per_second", None),
                                     kw("second_per_grid_t", None), kw("attention_mask", None),
                                     kw("text_start", "max")],
    "posenc.mrope.mrope_decode_positions": [p("rope_deltas"), p("cache_position")],
    # ``**kwargs``: the layer's other constructor arguments (layout, max_len, ...)
    "RotaryEmbedding.from_hf_config": [p("config"), kw("layer_type", None),
                                       p("kwargs", REQUIRED, "VAR_KEYWORD")],
}

# The call arguments of the contract's models (``forward`` in PyTorch, ``call`` in Keras, which
# adds ``training``): names and defaults in this order, the masks of padded and packed rows
# first ("Additions of this round").
CALLS = {
    "Transformer": [("tokens", REQUIRED), ("attention_mask", None), ("document_ids", None),
                    ("cache", None), ("return_hidden", False), ("return_attention", False)],
    "MultiHeadAttention": [("x", REQUIRED), ("attention_mask", None), ("document_ids", None),
                           ("cache", None), ("return_attention", False)],
}

# Backticked names in the contract's text that are not posenc's: a formula's clip, Keras
# methods, Python's own.
NOT_POSENC = {"clip", "get_config", "from_config", "model.save", "ValueError", "None"}

# The contract's text, in the book's reference part: every call and class it names must be in
# CONTRACT, CONTRACT_MEMBERS or PLANNED.
API_MD = Path(__file__).resolve().parents[1] / "book" / "contract.md"


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

def lookup(face: str, name: str):
    """A planned name in a face: ``apply_mrope``, ``RotaryEmbedding.from_hf_config``, or a
    framework-free ``posenc.<family>.<name>`` (the same object for both faces); ``None``
    when it does not exist yet."""
    if name.startswith("posenc."):
        module, _, attr = name.rpartition(".")
        return getattr(importlib.import_module(module), attr, None)
    owner, _, attr = name.rpartition(".")
    obj = getattr(FACES[face], owner, None) if owner else FACES[face]
    return getattr(obj, attr, None) if obj is not None else None


def test_planned_and_contract_do_not_overlap():
    assert not set(PLANNED) & (set(CONTRACT) | set(CONTRACT_MEMBERS))


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("name", sorted(PLANNED))
def test_planned_names_not_exported_yet(name, face):
    assert name not in exported(face) and lookup(face, name) is None, (
        f"{name} has landed in {face}: move it from PLANNED to CONTRACT in "
        "tests/test_contract.py (with its signature) and give each class a row in the layer "
        "table (tests/test_layers.py)")


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("name", sorted(CONTRACT_MEMBERS))
def test_contract_member_has_the_contract_signature(name, face):
    obj = lookup(face, name)
    assert obj is not None, f"{face}: {name} does not exist"
    assert parameters(face, obj) == CONTRACT_MEMBERS[name]


def test_every_call_in_the_contract_text_is_tested_or_planned():
    text = API_MD.read_text()
    names = set(re.findall(r"`([A-Za-z_][\w.]*)\(", text))
    classes = set(re.findall(r"`([A-Z]\w+)`", text))
    assert "sinusoidal" in names and "Transformer" in classes  # the page was read
    unknown = (names | classes) - set(CONTRACT) - set(CONTRACT_MEMBERS) - set(PLANNED) - NOT_POSENC
    assert not unknown, f"add these names of the contract to CONTRACT or PLANNED: {unknown}"


# --------------------------------------------------------------------------- the modules not re-exported

def _submodule_params():
    for module, (torch_module, keras_module) in SUBMODULES.items():
        assert torch_module.__all__ == keras_module.__all__, module
        for name in torch_module.__all__:
            yield pytest.param(module, name, id=f"{module}.{name}")


@pytest.mark.parametrize("module, name", _submodule_params())
def test_submodules_export_the_same_names_with_one_signature(module, name):
    torch_module, keras_module = SUBMODULES[module]
    assert name in keras_module.__all__
    t, k = getattr(torch_module, name), getattr(keras_module, name)
    assert ([q for q in parameters("torch", t) if q[0] not in FRAMEWORK_ARGUMENTS]
            == [q for q in parameters("keras", k) if q[0] not in FRAMEWORK_ARGUMENTS])


@pytest.mark.parametrize("face", FACES)
def test_gradient_monitor_takes_position_weights(face):
    monitor = (td if face == "torch" else kd).GradientMonitor
    names = [n for n, _, _ in parameters(face, monitor)]
    assert names[:2] == ["model", "position_weights"]


# --------------------------------------------------------------------------- the classes' members

# What each framework imposes, and nothing else: a name here may exist in one face only.
FRAMEWORK = {
    # PyTorch's nn.Module protocol: the computation, the printed summary, re-initialisation.
    "torch": {"forward", "extra_repr", "reset_parameters"},
    # Keras' Layer protocol: the computation, building weights, serialisation, shape inference,
    # and the seeded random state and dropout layers Keras needs where PyTorch draws from
    # torch's generator with a functional call.
    "keras": {"call", "build", "get_config", "from_config", "compute_output_shape",
              "compute_output_spec", "seed_generator", "weights_dropout",
              # keras.Model's compile/fit state (Transformer is a Model)
              "compiled", "loss", "predict_function", "test_function", "train_function",
              "steps_per_execution", "unrolled_steps_per_execution"},
}
# Per class: GradientMonitor collects gradients with backward hooks in PyTorch (``remove``
# detaches the hooks) and with the backend's autodiff in Keras (``gradients`` computes them,
# and keeps the loss it differentiated as ``last_loss``); both close a record with ``step``.
# RegularizedEncoding keeps its ``seed`` for ``get_config`` in Keras; PyTorch seeds the
# wrapped regularisers' generators at construction and needs no copy.
FRAMEWORK_MEMBERS = {"GradientMonitor": {"torch": {"remove"},
                                         "keras": {"gradients", "last_loss"}},
                     "RegularizedEncoding": {"keras": {"seed"}}}
# Arguments one framework imposes: Keras passes ``training`` to a call, PyTorch reads the
# module's ``training`` flag; PyTorch's hooks run the monitor's step automatically, and only
# the optimizer tells them where an optimiser step ends (``optimizer``), while the Keras
# monitor computes each step's gradients itself.
FRAMEWORK_ARGUMENTS = {"training", "auto_step", "optimizer"}

# Members the two faces once named or typed differently: the one name and kind both have now.
RENAMED = {
    ("MultiHeadAttention", "position_weights"): "method",
    ("Transformer", "position_weights"): "method",
    ("ALiBiBias", "slopes"): "tensor",
    ("SwinRelativeBias", "relative_position_index"): "tensor",
    ("ContinuousPositionBias", "relative_position_index"): "tensor",
    ("ContinuousPositionBias", "relative_coords_table"): "tensor",
    ("XPosEmbedding", "zeta"): "tensor",
    ("XPosEmbedding", "inv_freq"): "tensor",
    ("Transformer", "dropout"): "float",
    ("MultiHeadAttention", "dropout"): "float",
}
# Small instances of every class (the attributes set in the constructor are members too).
INSTANCES = {
    "SinusoidalEncoding": ((8,), {}), "LearnedEncoding": ((16, 8), {}),
    "HybridEncoding": ((16, 8), {}), "LowRankEncoding": ((16, 8), {"rank": 2}),
    "EncodingDropout": ((0.1,), {}), "ChannelDropout": ((0.1,), {}),
    "GaussianNoise": ((0.1,), {}), "ContinuousTimeEncoding": ((8,), {}),
    "Time2Vec": ((8,), {}), "HierarchicalEncoding": ((3, 4, 8), {}),
    "MultimodalEncoding": ((8,), {"num_modalities": 2, "max_len": 16}),
    "LaplacianEncoding": ((4, 8), {}), "ALiBiBias": ((2,), {}), "T5RelativeBias": ((2,), {}),
    "SwinRelativeBias": ((2, (3, 4)), {}), "ShawRelativeAttention": ((8, 2, 3), {}),
    "RotaryEmbedding": ((16,), {}), "RotaryEmbedding2D": ((16, (3, 4)), {}),
    "VisionRotaryEmbedding": ((16,), {"grid": (3, 4)}),
    "MixedRotaryEmbedding": ((16, 2), {"seed": 0}),
    "MultiHeadAttention": ((8, 2), {}), "Transformer": ((11,), {}),
    "LatentAttention": ((16, 2), {"kv_lora_rank": 4, "qk_rope_head_dim": 4,
                                  "qk_nope_head_dim": 4}),
    "XPosEmbedding": ((16,), {}), "KerpleBias": ((2,), {}), "SandwichBias": ((2, 8), {}),
    "FireBias": ((2,), {}), "DynamicPositionBias": ((2,), {"depth": 3}),
    "ContinuousPositionBias": ((2, (3, 4)), {}),
    "ForgetGateBias": ((2, 8), {}), "CoPE": ((2, 4, 8), {}),
}


def _instance(face: str, name: str):
    if name == "RegularizedEncoding":
        return FACES[face].RegularizedEncoding(FACES[face].SinusoidalEncoding(8), dropout=0.1)
    args, kwargs = INSTANCES[name]
    return getattr(FACES[face], name)(*args, **kwargs)


def kind(value) -> str:
    """What a member is, in words both faces share."""
    if isinstance(value, property):
        return "property"
    if isinstance(value, (classmethod, staticmethod)) or inspect.isfunction(value):
        return "method"
    if isinstance(value, (torch.Tensor, keras.Variable, np.ndarray)) or keras.ops.is_tensor(value):
        return "tensor"
    if isinstance(value, torch.nn.ModuleList):
        return "sequence"
    if isinstance(value, (torch.nn.Module, keras.layers.Layer)):
        return "layer"
    if (isinstance(value, (list, tuple))
            or type(value).__name__ == "TrackedList"):
        return "sequence"
    if isinstance(value, dict) or type(value).__name__ == "TrackedDict":
        return "mapping"
    return type(value).__name__


def members(face: str, cls, instance=None) -> dict[str, str]:
    """Public name -> kind, for what posenc defines (the framework's base classes excluded)."""
    out: dict[str, str] = {}
    for klass in cls.__mro__:
        if klass.__module__.startswith("posenc"):
            for name, value in vars(klass).items():
                if not name.startswith("_"):
                    out.setdefault(name, kind(value))
    if instance is not None:
        base = next(k for k in cls.__mro__ if not k.__module__.startswith("posenc"))
        inherited = set(vars(base()))
        names = {n for n in vars(instance) if n not in inherited}
        if face == "torch":
            names |= {*instance._parameters, *instance._buffers, *instance._modules}
        elif isinstance(instance, torch.nn.Module):
            # Keras on the PyTorch backend: its layers are torch modules, whose sublayers
            # torch keeps in _modules rather than in the instance's __dict__
            names |= set(instance._modules)
        for name in names:
            if not name.startswith("_") and name not in out:
                out[name] = kind(getattr(instance, name))
    for name in FRAMEWORK[face] | FRAMEWORK_MEMBERS.get(cls.__name__, {}).get(face, set()):
        out.pop(name, None)
    return out


def method_parameters(face: str, cls, name: str) -> list[tuple]:
    method = inspect.getattr_static(cls, name)
    method = method.__func__ if isinstance(method, (classmethod, staticmethod)) else method
    # ``**kwargs`` is left out: a Keras layer's own keyword arguments (name, dtype, ...)
    # travel in it; the contract's members with ``**kwargs`` are pinned in CONTRACT_MEMBERS
    return [(n, d) for n, k, d in parameters(face, method)
            if n not in FRAMEWORK_ARGUMENTS and k != "VAR_KEYWORD"]


def classes():
    rows = [(name, getattr(pt, name), getattr(pk, name)) for name in pt.__all__
            if inspect.isclass(getattr(pt, name))]
    for module, (torch_module, keras_module) in SUBMODULES.items():
        rows += [(name, getattr(torch_module, name), getattr(keras_module, name))
                 for name in torch_module.__all__ if inspect.isclass(getattr(torch_module, name))]
    return rows


CLASSES = {name: (t, k) for name, t, k in classes()}


@pytest.mark.parametrize("name", list(CLASSES))
def test_classes_have_the_same_public_members_of_one_kind(name):
    t, k = CLASSES[name]
    instances = ((_instance("torch", name), _instance("keras", name)) if name in INSTANCES
                 or name == "RegularizedEncoding" else (None, None))
    got_t, got_k = members("torch", t, instances[0]), members("keras", k, instances[1])
    assert sorted(set(got_t) - set(got_k)) == [], f"{name}: members only the torch face has"
    assert sorted(set(got_k) - set(got_t)) == [], f"{name}: members only the Keras face has"
    kinds = {n: (got_t[n], got_k[n]) for n in got_t if got_t[n] != got_k[n]}
    assert not kinds, f"{name}: members of different kinds (torch, keras): {kinds}"


@pytest.mark.parametrize("name", list(CLASSES))
def test_public_methods_have_one_signature(name):
    t, k = CLASSES[name]
    shared = {n for n, kd_ in members("torch", t).items() if kd_ == "method"} & {
        n for n, kd_ in members("keras", k).items() if kd_ == "method"}
    for method in sorted(shared):
        assert method_parameters("torch", t, method) == method_parameters("keras", k, method), (
            f"{name}.{method}")
    if issubclass(t, torch.nn.Module):
        # the computation: forward and call take the same arguments with the same defaults
        assert method_parameters("torch", t, "forward") == method_parameters("keras", k, "call")


def _rename_params():
    for (cls, member), want in sorted(RENAMED.items()):
        for face in FACES:
            yield pytest.param(cls, member, want, face, id=f"{cls}.{member}-{face}")


@pytest.mark.parametrize("cls, member, want, face", _rename_params())
def test_renamed_members_have_one_name_and_kind(cls, member, want, face):
    instance = _instance(face, cls)
    static = inspect.getattr_static(type(instance), member, None)
    if static is not None and kind(static) in ("method", "property"):
        assert kind(static) == want
    else:
        assert hasattr(instance, member), f"{face}: {cls} has no {member}"
        assert kind(getattr(instance, member)) == want


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("name", sorted(CALLS))
def test_models_have_the_contract_call_arguments(name, face):
    cls = getattr(FACES[face], name)
    method = "forward" if face == "torch" else "call"
    assert method_parameters(face, cls, method) == CALLS[name]
