"""Stacks whose layers differ: per-layer schemes, windows, chunks, Llama 4's temperature, MLA.

The package part (``posenc/stacks.py``, ``Transformer(stack=...)``, ``LatentAttention``)
against Hugging Face's formulas and modules, both faces against each other, cached decoding
against the full pass, the argument errors; and the lab's stack schemes.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from posenc.experiments import load_results
from posenc.experiments.cli import main


# --------------------------------------------------------------------------- the lab

def test_lab_trains_the_stacks_and_records_their_layers(tmp_path):
    main(["lm-extrapolation", "--stacks", "--rope-bases", "500", "--train-len", "8",
          "--eval-lens", "8", "16", "--steps", "2", "--batch-size", "4", "--dim", "16",
          "--heads", "2", "--eval-chars", "64", "--no-progress", "--device", "cpu",
          "--out", str(tmp_path)])
    results = load_results("lm-extrapolation", folder=tmp_path)
    meta, rows = results["meta"], results["rows"]
    s = meta["settings"]
    assert s["depth"] == 4 and s["schemes"] == ["rope", "none", "irope", "local-global",
                                                "rope-base500"]
    irope = s["stacks"]["irope"]["stack"]
    assert [e["position"] for e in irope] == ["rope", "rope", "rope", "none"]
    assert irope[0]["chunk"] == 2 and irope[3]["floor_scale"] == 2.0
    local = s["stacks"]["local-global"]["stack"]
    assert [e.get("window") for e in local] == [2, 2, 2, None]
    assert [e["base"] for e in local] == [1e4, 1e4, 1e4, 1e6]
    assert s["stacks"]["rope-base500"] == {"base": 500.0}
    # equal parameters: no scheme of the study has positional weights
    assert len({t["parameters"] for t in meta["training"]}) == 1
    assert {t["position_parameters"] for t in meta["training"]} == {0}
    assert len(rows) == 5 * 2 and {r["eval_len"] for r in rows} == {8, 16}
    # the mixes are other models than all-RoPE from the same seed
    by = {(r["scheme"], r["eval_len"]): r["loss"] for r in rows}
    assert by[("irope", 16)] != by[("rope", 16)] != by[("local-global", 16)]
    json.dumps(meta)


# --------------------------------------------------------------------------- the package

import torch  # noqa: E402

import posenc.keras as pk  # noqa: E402
import posenc.torch as pt  # noqa: E402
from faces import dtype_name, numpy, same_error  # noqa: E402
from posenc import stacks  # noqa: E402
from posenc.attention import transformer_settings  # noqa: E402
from posenc.interop import copy_weights  # noqa: E402

FACES = {"torch": pt, "keras": pk}

#: A stack with every per-layer rule: a sliding window, chunks with the QK norm, Llama 4's
#: NoPE temperature, a second RoPE base with a linear factor, a bias scheme.
MIXED = [{"position": "rope", "window": 3},
         {"position": "rope", "chunk": 5, "qk_norm": True, "rope_layout": "interleaved"},
         {"position": "none", "attn_temperature_tuning": True, "floor_scale": 4.0,
          "attn_scale": 0.5},
         {"position": "rope", "base": 1e6, "rope_scaling": {"rope_type": "linear",
                                                             "factor": 8.0}},
         {"position": "alibi", "window": 6}]


def _tokens(batch=2, seq=19, vocab=37, seed=0):
    return np.random.default_rng(seed).integers(0, vocab, (batch, seq)).astype("int32")


def _model(face, stack, depth, seed=0, **kw):
    if face == "torch":
        torch.manual_seed(seed)
    else:
        import keras

        keras.utils.set_random_seed(seed)
    return FACES[face].Transformer(37, dim=32, depth=depth, heads=4, stack=stack, **kw)


def _call(face, model, tokens, **kw):
    if face == "torch":
        return model(torch.as_tensor(tokens, dtype=torch.long), **kw)
    return model(tokens, **kw)


@pytest.mark.parametrize("face", ["torch", "keras"])
def test_mixed_stack_decodes_chunk_by_chunk_as_the_full_pass(face):
    model = _model(face, MIXED, 5)
    tokens = _tokens()
    full = numpy(_call(face, model, tokens))
    for step in (1, 4):
        cache = model.new_cache()
        got = np.concatenate([numpy(_call(face, model, tokens[:, i:i + step], cache=cache))
                              for i in range(0, tokens.shape[1], step)], axis=1)
        np.testing.assert_allclose(got, full, atol=2e-5)
    # each rule changes the logits: dropping it (the plain stack) is another model
    plain = _model(face, [{k: v for k, v in e.items() if k in ("position",)} for e in MIXED], 5)
    copy_weights(model, plain) if face == "torch" else plain.set_weights(model.get_weights())
    assert not np.allclose(numpy(_call(face, plain, tokens)), full, atol=1e-3)


@pytest.mark.parametrize("face", ["torch", "keras"])
def test_each_rule_reaches_its_layer(face):
    """A window of 1 leaves a token only itself; the temperature multiplies its queries."""
    model = _model(face, [{"position": "none", "window": 1},
                          {"position": "none", "attn_temperature_tuning": True,
                           "floor_scale": 2.0, "attn_scale": 1.0},
                          {"position": "rope", "chunk": 4}], 3)
    _, weights = _call(face, model, _tokens(seq=9), return_attention=True)
    w0, w2 = numpy(weights[0]), numpy(weights[2])
    np.testing.assert_allclose(w0, np.broadcast_to(np.eye(9), w0.shape), atol=1e-6)
    block = np.kron(np.eye(3), np.ones((4, 4)))[:9, :9] * np.tril(np.ones((9, 9)))
    assert ((w2 > 0) == (block > 0)).all()
    assert model.stack[1]["floor_scale"] == 2.0 and model.blocks[1].attention.layer_rule.attn_scale == 1.0


@pytest.mark.keras
def test_torch_and_keras_agree_on_a_mixed_stack():
    torch_model, keras_model = _model("torch", MIXED, 5), _model("keras", MIXED, 5)
    tokens = _tokens()
    _call("keras", keras_model, tokens)
    copy_weights(torch_model, keras_model)
    np.testing.assert_allclose(numpy(_call("keras", keras_model, tokens)),
                               numpy(_call("torch", torch_model, tokens)), atol=2e-5)
    assert keras_model.stack == torch_model.stack


@pytest.mark.keras
def test_keras_config_round_trips_with_the_stack():
    model = _model("keras", "llama4", 4)
    tokens = _tokens()
    config = model.get_config()
    assert config["stack"] == model.stack and config["stack"][3]["position"] == "none"
    json.dumps(config)
    again = pk.Transformer.from_config(config)
    _call("keras", again, tokens)
    again.set_weights(model.get_weights())
    np.testing.assert_allclose(numpy(_call("keras", again, tokens)),
                               numpy(_call("keras", model, tokens)), atol=1e-6)
    assert [b.attention.layer_rule for b in again.blocks] == \
        [b.attention.layer_rule for b in model.blocks]


def test_layer_entries_inherit_the_models_options_and_refuse_others():
    s = transformer_settings(10, 32, 3, 4, None, True, "rope", 64, 0.0,
                             {"base": 500.0, "rope_layout": "interleaved"})
    layers = stacks.layer_settings(s, ["rope", {"base": 7.0}, {"position": "t5"}])
    assert [x.options.get("base") for x in layers] == [500.0, 7.0, None]
    assert layers[1].options["rope_layout"] == "interleaved"
    assert layers[2].options == {"num_buckets": 32, "max_distance": 128}
    assert stacks.stack_entries(None, 3) is None and stacks.layer_settings(s, None) == [s] * 3


def test_presets_follow_gemma3_and_llama4():
    g = stacks.gemma3_stack(12)
    globals_ = [i for i, e in enumerate(g) if "window" not in e]
    assert globals_ == [5, 11]                             # keras-hub's i % 6 == 5
    assert g[5]["rope_scaling"] == {"rope_type": "linear", "factor": 8.0}
    assert g[0] == {"position": "rope", "base": 1e4, "window": 1024}
    l4 = stacks.llama4_stack(8)
    assert [i for i, e in enumerate(l4) if e["position"] == "none"] == [3, 7]
    assert l4[0]["chunk"] == 8192 and l4[0]["qk_norm"] and "chunk" not in l4[3]


@pytest.mark.reference
def test_llama4_preset_follows_transformers_llama4_text_config():
    # Llama4TextConfig's defaults are Scout's: base, chunk, NoPE interval, QK norm, temperature
    from transformers import Llama4TextConfig

    config = Llama4TextConfig()
    preset = stacks.llama4_stack(2 * config.no_rope_layer_interval)
    parameters = config.rope_parameters or {}
    rope_theta = parameters.get("rope_theta", getattr(config, "rope_theta", None))
    assert preset[0]["base"] == rope_theta
    assert preset[0]["chunk"] == config.attention_chunk_size
    assert preset[0]["qk_norm"] == config.use_qk_norm
    nope = [i for i, e in enumerate(preset) if e["position"] == "none"]
    assert nope == [i for i in range(len(preset)) if (i + 1) % config.no_rope_layer_interval == 0]
    assert preset[nope[0]]["floor_scale"] == config.floor_scale
    assert preset[nope[0]]["attn_scale"] == config.attn_scale
    assert config.attn_temperature_tuning


@pytest.mark.reference
def test_gemma3_stack_is_what_transformers_builds_for_gemma3():
    from transformers import Gemma3TextConfig

    config = Gemma3TextConfig(hidden_size=64, num_attention_heads=4, head_dim=16,
                              num_hidden_layers=12, sliding_window=1024,
                              rope_scaling={"rope_type": "linear", "factor": 8.0})
    ours = stacks.hf_stack(config)
    preset = stacks.gemma3_stack(12)
    for a, b in zip(ours, preset):
        assert (a["base"], a.get("window"), a["rope_scaling"]) == \
            (b["base"], b.get("window"), b.get("rope_scaling"))


@pytest.mark.reference
def test_keras_hub_gemma3_layers_match_the_preset():
    from keras_hub.models import Gemma3Backbone

    backbone = Gemma3Backbone(vocabulary_size=16, image_size=16, num_layers=7, num_query_heads=2,
                              num_key_value_heads=1, hidden_dim=16, intermediate_dim=32,
                              head_dim=8, use_sliding_window_attention=True,
                              sliding_window_size=1024, global_rope_scaling_factor=8.0,
                              vision_encoder=None)
    preset = stacks.gemma3_stack(7)
    for layer, entry in zip(backbone.transformer_layers, preset):
        assert layer.rope_wavelength == entry["base"]
        assert bool(layer.use_sliding_window_attention) == ("window" in entry)
        factor = (entry.get("rope_scaling") or {"factor": 1.0})["factor"]
        assert layer.rope_scaling_factor == factor


@pytest.mark.reference
def test_gemma3_per_layer_rope_equals_transformers_rotary_of_each_layer_type():
    """Survey item 10: each layer gets its own inv_freq and scaling (linear x8 on the global
    layers only); positions far past a short prompt, where a misapplied factor shows."""
    from transformers import Gemma3TextConfig
    from transformers.models.gemma3.modeling_gemma3 import Gemma3RotaryEmbedding

    config = Gemma3TextConfig(hidden_size=64, num_attention_heads=4, head_dim=16,
                              num_hidden_layers=6, sliding_window=8, max_position_embeddings=4096,
                              rope_parameters={
                                  "sliding_attention": {"rope_type": "default",
                                                        "rope_theta": 10_000.0},
                                  "full_attention": {"rope_type": "linear", "factor": 8.0,
                                                     "rope_theta": 1_000_000.0}})
    hf = Gemma3RotaryEmbedding(config)
    model = pt.Transformer(11, dim=64, heads=4, depth=6, stack=config)
    positions = torch.arange(3000, 3016)[None]
    x = torch.zeros(1, 16, 16)
    for i, layer_type in enumerate(config.layer_types):
        cos, sin = hf(x, positions, layer_type=layer_type)
        q = torch.randn(1, 4, 16, 16)
        ours, _ = model.blocks[i].attention.rotary(q, q, positions=positions[0])
        rot = lambda t: torch.cat((-t[..., 8:], t[..., :8]), -1)   # noqa: E731
        want = q * cos[:, None] + rot(q) * sin[:, None]
        torch.testing.assert_close(ours, want, atol=1e-4, rtol=1e-4)
        assert (model.stack[i].get("window") == 8) == (layer_type == "sliding_attention")
    # the misport: the global scaling on every layer moves a sliding layer's angles
    wrong = pt.Transformer(11, dim=64, heads=4, depth=6, stack=[
        {"base": 1e4, "rope_scaling": {"rope_type": "linear", "factor": 8.0}, "window": 8}] * 6)
    q = torch.randn(1, 4, 16, 16)
    assert not torch.allclose(wrong.blocks[0].attention.rotary(q, q, positions=positions[0])[0],
                              model.blocks[0].attention.rotary(q, q, positions=positions[0])[0],
                              atol=1e-2)


@pytest.mark.reference
@pytest.mark.parametrize("window", [1, 3, 8])
def test_window_and_chunks_equal_transformers_masks(window):
    from transformers.masking_utils import (chunked_causal_mask_function,
                                            sliding_window_causal_mask_function)

    q_len, k_len = 6, 14                                  # queries continue a cache of 8
    sees = sliding_window_causal_mask_function(window)
    chunked = chunked_causal_mask_function(window, torch.zeros(1, dtype=torch.long))
    for rule, hf in ((stacks.LayerRule(window=window), sees),
                     (stacks.LayerRule(chunk=window), chunked)):
        ours = stacks.layer_mask(q_len, k_len, rule, np.arange)
        future = np.arange(k_len)[None] > np.arange(k_len - q_len, k_len)[:, None]
        want = np.array([[not bool(hf(0, 0, torch.tensor(k_len - q_len + i), torch.tensor(j)))
                          for j in range(k_len)] for i in range(q_len)])
        np.testing.assert_array_equal(ours | future, want)


def _llama4_pair(layer_idx, floor_scale=4):
    from transformers import Llama4TextConfig
    from transformers.models.llama4.modeling_llama4 import (Llama4TextAttention,
                                                            Llama4TextRotaryEmbedding)

    config = Llama4TextConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=4,
                              head_dim=8, num_hidden_layers=4, attention_chunk_size=5,
                              floor_scale=floor_scale, attn_scale=0.5, rope_theta=500000.0,
                              attn_temperature_tuning=True, use_qk_norm=True, rope_scaling=None,
                              intermediate_size=16, intermediate_size_mlp=16)
    config._attn_implementation = "eager"
    hf = Llama4TextAttention(config, layer_idx).eval()
    for p in hf.parameters():
        torch.nn.init.normal_(p, std=0.3)
    model = pt.Transformer(7, dim=32, heads=4, depth=4, stack=config)
    ours = model.blocks[layer_idx].attention
    with torch.no_grad():
        for name, proj in (("query", hf.q_proj), ("key", hf.k_proj), ("value", hf.v_proj),
                           ("output", hf.o_proj)):
            getattr(ours, f"{name}_kernel").copy_(proj.weight.T)
    return config, hf, ours, Llama4TextRotaryEmbedding(config)


@pytest.mark.reference
@pytest.mark.parametrize("layer_idx", [0, 3])
def test_llama4_layers_equal_transformers_attention(layer_idx):
    """Layer 0: interleaved RoPE in chunks of 5 with the QK norm; layer 3: NoPE with the
    temperature, past floor_scale (4) so that the scale grows along the 20 positions."""
    config, hf, ours, rotary = _llama4_pair(layer_idx)
    x = torch.randn(2, 20, 32)
    positions = torch.arange(20)[None].expand(2, -1)
    i, j = np.arange(20)[:, None], np.arange(20)[None]
    allowed = (j <= i) & ((j // 5 == i // 5) if layer_idx != 3 else True)
    mask = torch.where(torch.as_tensor(allowed), 0.0, float("-inf"))[None, None]
    with torch.no_grad():
        want, _ = hf(x, rotary(x, positions), mask)
        got = ours(x)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert ours.layer_rule == (stacks.LayerRule(attn_temperature_tuning=True, floor_scale=4.0,
                                                attn_scale=0.5) if layer_idx == 3
                               else stacks.LayerRule(chunk=5, qk_norm=True))


@pytest.mark.reference
def test_temperature_scales_equal_llama4s_formula():
    positions = torch.arange(0, 70000, 97).float()
    want = torch.log1p(torch.floor((positions + 1.0) / 8192)) * 0.1 + 1.0
    got = np.concatenate([stacks.temperature_scales(int(p), 1) for p in positions])
    np.testing.assert_array_equal(got, want.numpy())
    assert got[0] == 1.0 and got[-1] > 1.2


def _deepseek(q_lora_rank):
    from transformers.models.deepseek_v3.configuration_deepseek_v3 import DeepseekV3Config
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import (DeepseekV3Attention,
                                                                      DeepseekV3RotaryEmbedding)

    config = DeepseekV3Config(
        hidden_size=64, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=q_lora_rank,
        kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=12,
        max_position_embeddings=256, rope_interleave=True, num_hidden_layers=1, vocab_size=10,
        rope_parameters={"rope_type": "yarn", "factor": 4.0,
                         "original_max_position_embeddings": 64, "beta_fast": 32.0,
                         "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 0.7,
                         "rope_theta": 10000.0})
    config._attn_implementation = "eager"
    torch.manual_seed(q_lora_rank or 0)
    hf = DeepseekV3Attention(config, 0).eval()
    for p in hf.parameters():
        torch.nn.init.normal_(p, std=0.2)
    return config, hf, DeepseekV3RotaryEmbedding(config)


def _copy_deepseek(hf, ours):
    with torch.no_grad():
        if hf.q_lora_rank is None:
            ours.query_kernel.copy_(hf.q_proj.weight.T)
        else:
            ours.query_down_kernel.copy_(hf.q_a_proj.weight.T)
            ours.query_norm_scale.copy_(hf.q_a_layernorm.weight)
            ours.query_up_kernel.copy_(hf.q_b_proj.weight.T)
        ours.kv_down_kernel.copy_(hf.kv_a_proj_with_mqa.weight.T)
        ours.kv_norm_scale.copy_(hf.kv_a_layernorm.weight)
        ours.kv_up_kernel.copy_(hf.kv_b_proj.weight.T)
        ours.output_kernel.copy_(hf.o_proj.weight.T)
    return ours


@pytest.mark.reference
@pytest.mark.parametrize("q_lora_rank", [None, 24])
def test_latent_attention_equals_transformers_deepseek_v3(q_lora_rank):
    """Survey item 8: at positions > 0 (100 ..), YaRN's two corrections, interleaved."""
    config, hf, rotary = _deepseek(q_lora_rank)
    ours = _copy_deepseek(hf, pt.LatentAttention.from_hf_config(config, max_len=256))
    x = torch.randn(2, 7, 64)
    positions = torch.arange(100, 107)[None].expand(2, -1)
    mask = torch.full((7, 7), float("-inf")).triu(1)[None, None]
    with torch.no_grad():
        want, _ = hf(x, rotary(x, positions), mask)
        got = ours(x, positions=positions[0])
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert ours.softmax_scale == pytest.approx(hf.scaling, rel=1e-12)
    assert ours.rotary.attention_factor == pytest.approx(rotary.attention_scaling, rel=1e-12)
    # the misports of the threads: one correction forgotten, or the other layout
    for wrong in ({"mscale_all_dim": None}, {"mscale": None, "mscale_all_dim": None}):
        scaling = {**config.rope_parameters, **wrong}
        kw = stacks.hf_latent(config)
        bad = _copy_deepseek(hf, pt.LatentAttention(**{**kw, "rope_scaling": scaling},
                                                    max_len=256))
        assert not torch.allclose(bad(x, positions=positions[0]), want, atol=1e-3)
    half = _copy_deepseek(hf, pt.LatentAttention(**{**stacks.hf_latent(config),
                                                    "rope_layout": "half"}, max_len=256))
    assert not torch.allclose(half(x, positions=positions[0]), want, atol=1e-3)


@pytest.mark.parametrize("face", ["torch", "keras"])
def test_latent_attention_caches_the_latent_and_decodes_as_the_full_pass(face):
    kw = stacks.deepseek_latent(dim=48, heads=3, kv_lora_rank=12, q_lora_rank=20,
                                qk_nope_head_dim=8, qk_rope_head_dim=6, v_head_dim=10,
                                rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                              "original_max_position_embeddings": 16,
                                              "mscale": 1.0, "mscale_all_dim": 1.0})
    layer = FACES[face].LatentAttention(**kw, max_len=64)
    x = np.random.default_rng(1).normal(size=(2, 11, 48)).astype("float32")
    t = torch.as_tensor(x) if face == "torch" else x
    full = numpy(layer(t))
    cache = layer.new_cache()
    got = np.concatenate([numpy(layer(t[:, i:i + 3], cache=cache)) for i in range(0, 11, 3)], 1)
    np.testing.assert_allclose(got, full, atol=2e-5)
    assert tuple(cache.keys.shape) == (2, 1, 11, 12) and tuple(cache.values.shape) == (2, 1, 11, 6)


@pytest.mark.keras
def test_latent_attention_torch_equals_keras_and_round_trips():
    kw = dict(kv_lora_rank=12, q_lora_rank=20, qk_nope_head_dim=8, qk_rope_head_dim=6,
              v_head_dim=10, rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                           "original_max_position_embeddings": 16,
                                           "mscale": 1.0, "mscale_all_dim": 0.5})
    torch.manual_seed(0)
    ours_t = pt.LatentAttention(48, 3, **kw, max_len=64)
    ours_k = pk.LatentAttention(48, 3, **kw, max_len=64)
    x = np.random.default_rng(2).normal(size=(2, 9, 48)).astype("float32")
    ours_k(x)
    copy_weights(ours_t, ours_k)
    positions = np.arange(40, 49)
    np.testing.assert_allclose(numpy(ours_k(x, positions=positions)),
                               numpy(ours_t(torch.as_tensor(x), positions=positions)), atol=2e-5)
    again = pk.LatentAttention.from_config(ours_k.get_config())
    again(x)
    again.set_weights(ours_k.get_weights())
    np.testing.assert_allclose(numpy(again(x)), numpy(ours_k(x)), atol=1e-6)


def test_hf_stack_reads_llama4s_no_rope_layers():
    config = {"model_type": "llama4_text", "hidden_size": 32, "num_attention_heads": 4,
              "rope_theta": 500000.0, "no_rope_layers": [1, 1, 1, 0],
              "layer_types": ["chunked_attention"] * 3 + ["full_attention"],
              "attention_chunk_size": 8192, "attn_temperature_tuning": True,
              "floor_scale": 8192, "attn_scale": 0.1, "use_qk_norm": True}
    ours = stacks.hf_stack(config)
    preset = stacks.llama4_stack(4)
    assert [e["position"] for e in ours] == [e["position"] for e in preset]
    for a, b in zip(ours, preset):
        assert {k: v for k, v in a.items() if v is not None} == \
            {k: v for k, v in b.items() if v is not None}


# --------------------------------------------------------------------------- errors

ERRORS = [
    (lambda m: m.Transformer(10, depth=3, stack=["rope", "none"]),
     ["stack must have one entry per block", "got 2 entries for depth=3", "give 3 entries"]),
    (lambda m: m.Transformer(10, depth=1, stack=[{"widow": 4}]),
     ["stack[0]['widow'] is not a per-layer key", "got stack[0]['widow']=4", "spelling"]),
    (lambda m: m.Transformer(10, depth=1, stack=[{"window": 0}]),
     ["stack[0]", "window must be a positive integer", "got window=0", "pass at least 1"]),
    (lambda m: m.Transformer(10, depth=1, causal=False, position="none",
                             stack=[{"window": 4}]),
     ["window is for causal decoders", "causal=True"]),
    (lambda m: m.Transformer(10, depth=1, stack=[{"attn_temperature_tuning": True}]),
     ["attn_temperature_tuning scales the queries of a NoPE layer", "position='rope'",
      "position='none'"]),
    (lambda m: m.Transformer(10, depth=1, stack=[{"position": "none", "floor_scale": 4.0}]),
     ["floor_scale is read only with attn_temperature_tuning=True"]),
    (lambda m: m.Transformer(10, depth=1, stack=[{"position": "learned"}]),
     ["position='learned' is added to the embeddings", "build the model with"]),
    (lambda m: m.Transformer(10, depth=1, stack=[{"position": "alibi", "base": 5.0}]),
     ["stack[0]", "base is not an option of position='alibi'"]),
    (lambda m: m.Transformer(10, depth=2, stack="gemma4"),
     ["stack must be one of 'gemma3', 'llama4'", "got stack='gemma4'"]),
    (lambda m: m.LatentAttention(32, 2, kv_lora_rank=8, qk_rope_head_dim=5, qk_nope_head_dim=8),
     ["qk_rope_head_dim must be even", "got qk_rope_head_dim=5", "pass 6"]),
    (lambda m: m.LatentAttention(32, 2, kv_lora_rank=0, qk_rope_head_dim=4, qk_nope_head_dim=8),
     ["kv_lora_rank must be a positive integer", "got kv_lora_rank=0"]),
]


@pytest.mark.keras
@pytest.mark.parametrize("call, parts", ERRORS)
def test_bad_stacks_get_the_same_error_in_both_faces(call, parts):
    message = same_error(FACES, lambda face: call(FACES[face]))
    for part in parts:
        assert part in message, (part, message)


# --------------------------------------------------------------------------- the teaching versions

@pytest.mark.keras
def test_scratch_masks_and_temperature_equal_the_package():
    import posenc.keras.scratch as sk
    import posenc.torch.scratch as st
    from keras import ops

    for q_len, k_len, window in ((9, 9, 3), (2, 11, 4), (5, 5, 1)):
        future = np.arange(k_len)[None] > np.arange(k_len - q_len, k_len)[:, None]
        want = stacks.layer_mask(q_len, k_len, stacks.LayerRule(window=window), np.arange) | future
        np.testing.assert_array_equal(st.window_mask(q_len, k_len, window).numpy(), want)
        np.testing.assert_array_equal(ops.convert_to_numpy(sk.window_mask(q_len, k_len, window)),
                                      want)
    p = np.arange(0, 200_000, 1237)
    want = np.concatenate([stacks.temperature_scales(int(i), 1) for i in p])
    np.testing.assert_allclose(st.temperature(torch.as_tensor(p)).numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(ops.convert_to_numpy(sk.temperature(p)), want, rtol=1e-6)


@pytest.mark.keras
def test_scratch_latent_weights_equal_latent_attention():
    import posenc.keras.scratch as sk
    import posenc.torch.scratch as st

    kw = dict(kv_lora_rank=12, qk_nope_head_dim=8, qk_rope_head_dim=6, v_head_dim=10,
              rope_scaling={"rope_type": "yarn", "factor": 4.0,
                            "original_max_position_embeddings": 16, "mscale": 1.0,
                            "mscale_all_dim": 0.5})
    torch.manual_seed(3)
    layer = pt.LatentAttention(48, 3, **kw)
    x = np.random.default_rng(4).normal(size=(2, 9, 48)).astype("float32")
    positions = np.arange(20, 29)
    _, want = layer(torch.as_tensor(x), positions=positions, return_attention=True)
    inv_freq = pt.rope_frequencies(6, scaling=kw["rope_scaling"])[0]
    args = [layer.query_kernel.detach(), layer.kv_down_kernel.detach(),
            layer.kv_norm_scale.detach(), layer.kv_up_kernel.detach(), inv_freq,
            layer.rotary.attention_factor, layer.softmax_scale, 3, 8, 12]
    got = st.latent_weights(torch.as_tensor(x), torch.as_tensor(positions), *args)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    got_k = sk.latent_weights(x, positions, *[a.numpy() if torch.is_tensor(a) else a
                                              for a in args])
    np.testing.assert_allclose(numpy(got_k), numpy(want), atol=1e-5)
    # the decoupling matters: a port that forgets the softmax factor gives other weights
    wrong = st.latent_weights(torch.as_tensor(x), torch.as_tensor(positions),
                              *args[:6], 54 ** -0.5, *args[7:])
    assert not torch.allclose(wrong, want, atol=1e-3)


@pytest.mark.parametrize("face", ["torch", "keras"])
def test_a_mixed_stack_runs_in_bfloat16_close_to_float32(face):
    tokens = _tokens()
    full = _model(face, MIXED, 5)
    if face == "torch":
        low = _model(face, MIXED, 5).to(torch.bfloat16)
        copy_weights(full, low)
        low = low.to(torch.bfloat16)
    else:
        from harness import keras_policy

        with keras_policy("mixed_bfloat16"):
            low = FACES[face].Transformer(37, dim=32, depth=5, heads=4, stack=MIXED)
        _call(face, low, tokens)
        low.set_weights(full.get_weights())
    want, got = _call(face, full, tokens), _call(face, low, tokens)
    assert dtype_name(got) == "bfloat16"
    np.testing.assert_allclose(numpy(got), numpy(want), atol=0.1)
    assert np.abs(numpy(got) - numpy(want)).max() > 0          # it did run in bfloat16
