"""posenc against the implementations people trust, on the same inputs (marker ``reference``).

Hugging Face transformers: T5's ``_relative_position_bucket`` and ``compute_bias``, BLOOM's
``build_alibi_tensor``, Swin's ``relative_position_index`` and bias lookup, RoPE's
``ROPE_INIT_FUNCTIONS`` and ``apply_rotary_pos_emb`` (modules built from a config: no
weights are downloaded). keras-hub: ``AlibiBias``, ``RotaryEmbedding``.
rotary-embedding-torch: the interleaved layout. timm: ``resample_abs_pos_embed``. torchtune:
``Llama3ScaledRoPE``. The rope settings of eleven real checkpoints (Llama 3.1 and 4, Qwen2.5,
Phi-3.5, Llama 2, Code Llama, Mistral, DeepSeek V3, GPT-NeoX, Gemma 3 and 4) through ``hf_rope``
against the rotary modules transformers builds from its own config classes. The versions are pinned
in ``requirements-reference.txt`` (``make install`` installs them); without them these
tests are skipped.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import posenc.torch as pt
from faces import numpy
from posenc import bias as nb

pytestmark = pytest.mark.reference

transformers = pytest.importorskip(
    "transformers", reason="the reference implementations are not installed: "
                           "pip install -r requirements-reference.txt")


# --------------------------------------------------------------------------- T5

T5_CONFIGS = [(True, 32, 128), (False, 32, 128), (True, 16, 20), (False, 8, 9), (True, 64, 256)]


@pytest.mark.parametrize("bidirectional, num_buckets, max_distance", T5_CONFIGS)
@pytest.mark.keras
def test_t5_buckets_equal_transformers(bidirectional, num_buckets, max_distance):
    from transformers.models.t5.modeling_t5 import T5Attention

    rel = torch.arange(-5000, 5001)
    want = T5Attention._relative_position_bucket(rel, bidirectional=bidirectional,
                                                 num_buckets=num_buckets,
                                                 max_distance=max_distance)
    kwargs = dict(bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    np.testing.assert_array_equal(nb.t5_buckets(rel.numpy(), **kwargs), want.numpy())
    torch.testing.assert_close(pt.t5_buckets(rel, **kwargs), want, rtol=0, atol=0)


@pytest.mark.parametrize("is_decoder", [False, True])
@pytest.mark.parametrize("q_len, k_len", [(12, 12), (1, 40), (5, 300)])
def test_t5_relative_bias_equals_transformers_compute_bias(is_decoder, q_len, k_len):
    from transformers import T5Config
    from transformers.models.t5.modeling_t5 import T5Attention

    config = T5Config(d_model=16, d_kv=4, num_heads=4, relative_attention_num_buckets=32,
                      relative_attention_max_distance=128, is_decoder=is_decoder)
    torch.manual_seed(0)
    hf = T5Attention(config, has_relative_attention_bias=True).eval()
    ours = pt.T5RelativeBias(4, bidirectional=not is_decoder)
    with torch.no_grad():
        ours.relative_attention_bias.copy_(hf.relative_attention_bias.weight)
        want = hf.compute_bias(q_len, k_len, past_seen_tokens=k_len - q_len)
        torch.testing.assert_close(ours(q_len, k_len), want, rtol=0, atol=0)


# --------------------------------------------------------------------------- BLOOM's ALiBi

@pytest.mark.parametrize("num_heads", [1, 4, 6, 8, 12, 16, 24, 32, 112])
@pytest.mark.keras
def test_alibi_slopes_equal_bloom(num_heads):
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    # BLOOM's tensor is slope_h * key_position: at position 1 it is the slope itself.
    alibi = build_alibi_tensor(torch.ones(1, 2), num_heads, torch.float32)   # (heads, 1, 2)
    np.testing.assert_allclose(nb.alibi_slopes(num_heads), alibi[:, 0, 1].numpy(), rtol=1e-6)


@pytest.mark.parametrize("num_heads", [8, 12])
def test_alibi_bias_gives_blooms_attention(num_heads):
    """BLOOM adds ``slope * j`` (the key position) and masks the future; ``posenc`` adds
    ``-slope * (i - j)``, which differs by ``slope * i``, a constant per query row. The
    softmax does not see such a constant: the attention weights are equal."""
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    seq = 20
    alibi = build_alibi_tensor(torch.ones(1, seq), num_heads, torch.float32)  # (heads, 1, seq)
    ours = pt.alibi_bias(num_heads, seq, seq)
    causal = torch.ones(seq, seq, dtype=torch.bool).tril()
    slopes = torch.as_tensor(nb.alibi_slopes(num_heads), dtype=torch.float32)
    shift = slopes[:, None, None] * torch.arange(seq)[:, None]
    torch.testing.assert_close(torch.where(causal, ours + shift, 0.0),
                               torch.where(causal, alibi.expand(-1, seq, -1), 0.0),
                               rtol=1e-6, atol=1e-6)
    scores = torch.randn(2, num_heads, seq, seq, generator=torch.Generator().manual_seed(0))
    bloom = torch.softmax((scores + alibi).masked_fill(~causal, float("-inf")), dim=-1)
    torch.testing.assert_close(torch.softmax(scores + ours, dim=-1), bloom, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- Swin

def _swin_bias_modules(window_size: int):
    """The relative-bias modules of a tiny Swin built from its config (random weights)."""
    from transformers import SwinConfig, SwinModel

    config = SwinConfig(image_size=4 * window_size * 2, patch_size=4, embed_dim=8,
                        depths=[1, 1], num_heads=[2, 4], window_size=window_size)
    torch.manual_seed(0)
    model = SwinModel(config).eval()
    modules = [m for m in model.modules() if hasattr(m, "relative_position_bias_table")]
    assert modules, "no relative position bias found in the Swin model"
    return modules


@pytest.mark.parametrize("window_size", [2, 3, 7])
@pytest.mark.keras
def test_swin_index_and_bias_lookup_equal_transformers(window_size):
    for module in _swin_bias_modules(window_size):
        table = module.relative_position_bias_table
        n = window_size * window_size
        index = module.relative_position_index.reshape(n, n)
        np.testing.assert_array_equal(nb.swin_relative_index(window_size, window_size),
                                      index.numpy())
        torch.testing.assert_close(pt.swin_relative_index(window_size, window_size), index,
                                   rtol=0, atol=0)
        ours = pt.SwinRelativeBias(table.shape[1], window_size)
        with torch.no_grad():
            table.normal_(generator=torch.Generator().manual_seed(1))   # Swin starts at zeros
            ours.relative_position_bias_table.copy_(table)
            torch.testing.assert_close(ours(n), module(), rtol=0, atol=0)


@pytest.mark.keras
def test_swin_rectangular_index_equals_transformers():
    from transformers.models.swin.modeling_swin import SwinRelativePositionBias

    module = SwinRelativePositionBias(3, (3, 5))
    np.testing.assert_array_equal(nb.swin_relative_index(3, 5),
                                  module.relative_position_index.reshape(15, 15).numpy())


# --------------------------------------------------------------------------- keras-hub

@pytest.mark.keras
@pytest.mark.parametrize("num_heads", [4, 6, 8, 12])
def test_alibi_equals_keras_hub_alibi_bias(num_heads):
    keras_hub = pytest.importorskip("keras_hub", reason="keras-hub is not installed: "
                                                        "pip install -r requirements-reference.txt")
    import keras

    import posenc.keras as pk

    k_len = 17
    scores = np.random.default_rng(0).normal(size=(2, num_heads, k_len, k_len))
    hub = numpy(keras_hub.layers.AlibiBias()(keras.ops.convert_to_tensor(scores, "float32")))
    # keras-hub adds slope * (j - (k_len - 1)): posenc's bias of the last query, to every query
    last = numpy(pk.ALiBiBias(num_heads)(1, k_len))
    np.testing.assert_allclose(hub - scores, np.broadcast_to(last, hub.shape), rtol=1e-6,
                               atol=1e-6)
    # a constant per row apart, so with the causal mask the attention weights are equal
    causal = np.tril(np.ones((k_len, k_len), bool))
    ours = numpy(keras.ops.softmax(keras.ops.convert_to_tensor(scores, "float32")
                                   + pk.ALiBiBias(num_heads)(k_len)))
    masked = np.where(causal, hub, -np.inf)
    weights = np.exp(masked - masked.max(-1, keepdims=True))
    np.testing.assert_allclose(ours, weights / weights.sum(-1, keepdims=True), rtol=1e-5,
                               atol=1e-6)


# --------------------------------------------------------------------------- rotary

ROPE_CONFIGS = {
    "default": ({"rope_type": "default"}, {}, None),
    "linear": ({"rope_type": "linear", "factor": 4.0}, {}, None),
    "dynamic-short": ({"rope_type": "dynamic", "factor": 2.0},
                      {"original_max_position_embeddings": 4096}, 1000),
    "dynamic-long": ({"rope_type": "dynamic", "factor": 2.0},
                     {"original_max_position_embeddings": 4096}, 20000),
    "yarn": ({"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 4096},
             {}, None),
    "yarn-betas-mscale": ({"rope_type": "yarn", "factor": 40.0, "beta_fast": 16.0,
                           "beta_slow": 2.0, "mscale": 0.707, "mscale_all_dim": 0.707,
                           "original_max_position_embeddings": 4096}, {}, None),
    "yarn-attention_factor": ({"rope_type": "yarn", "factor": 4.0, "attention_factor": 1.5,
                               "original_max_position_embeddings": 2048}, {}, None),
    "llama3": ({"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192,
                "low_freq_factor": 1.0, "high_freq_factor": 4.0}, {}, None),
}


def llama_config(params: dict, *, head_dim: int = 64, base: float = 10000.0,
                 max_position_embeddings: int = 131072):
    from transformers import LlamaConfig

    return LlamaConfig(hidden_size=8 * head_dim, num_attention_heads=8, head_dim=head_dim,
                       max_position_embeddings=max_position_embeddings,
                       rope_parameters={"rope_theta": base, **params})


@pytest.mark.parametrize("head_dim, base", [(64, 10000.0), (128, 500000.0), (32, 1e6)])
@pytest.mark.parametrize("name", sorted(ROPE_CONFIGS))
@pytest.mark.keras
def test_rope_frequencies_equal_transformers_rope_init_functions(name, head_dim, base):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    from posenc import rotary

    params, extra, seq_len = ROPE_CONFIGS[name]
    mpe = extra.get("original_max_position_embeddings", 131072)
    config = llama_config(params, head_dim=head_dim, base=base, max_position_embeddings=mpe)
    rope_type = params["rope_type"]
    if rope_type == "default":
        want, want_factor = LlamaRotaryEmbedding.compute_default_rope_parameters(config)
    else:
        want, want_factor = ROPE_INIT_FUNCTIONS[rope_type](config, "cpu", seq_len=seq_len)
    scaling = None if rope_type == "default" else {**params, **extra}
    got, factor = rotary.rope_frequencies(head_dim, base=base, scaling=scaling, seq_len=seq_len)
    # Hugging Face computes in float32, posenc in float64 then rounds: a few ulp apart.
    np.testing.assert_allclose(got, want.numpy(), rtol=3e-7, atol=0)
    assert factor == pytest.approx(want_factor, rel=1e-12)
    torch_got, _ = pt.rope_frequencies(head_dim, base=base, scaling=scaling, seq_len=seq_len)
    np.testing.assert_array_equal(torch_got.numpy(), got)


@pytest.mark.parametrize("name", ["default", "yarn", "llama3"])
def test_rotary_embedding_equals_transformers_apply_rotary_pos_emb(name):
    from transformers.models.llama.modeling_llama import (LlamaRotaryEmbedding,
                                                          apply_rotary_pos_emb)

    params, extra, _ = ROPE_CONFIGS[name]
    head_dim, seq = 64, 50
    hf = LlamaRotaryEmbedding(llama_config(params, head_dim=head_dim))
    rng = np.random.default_rng(0)
    q, k = (torch.as_tensor(rng.normal(size=(2, 8, seq, head_dim)), dtype=torch.float32)
            for _ in range(2))
    position_ids = torch.arange(100, 100 + seq)[None].expand(2, seq)
    cos, sin = hf(q, position_ids)
    want_q, want_k = apply_rotary_pos_emb(q, k, cos, sin)
    scaling = None if name == "default" else {**params, **extra}
    ours = pt.RotaryEmbedding(head_dim, scaling=scaling)
    got_q, got_k = ours(q, k, offset=100)
    # Frequencies a float32 ulp apart (float32 in transformers, float64 rounded here) give
    # angles up to 150 * 2^-24 rad apart at these positions: 3e-5 on entries of about 3.
    tol = {"rtol": 1e-5, "atol": 3e-5}
    torch.testing.assert_close(got_q, want_q, **tol)
    torch.testing.assert_close(got_k, want_k, **tol)
    inv_freq, factor = pt.rope_frequencies(head_dim, scaling=scaling)
    torch.testing.assert_close(pt.apply_rope(q, position_ids, inv_freq, attention_factor=factor),
                               want_q, **tol)


@pytest.mark.parametrize("rotary_dim", [64, 32])
def test_interleaved_layout_equals_rotary_embedding_torch(rotary_dim):
    rotary_embedding_torch = pytest.importorskip(
        "rotary_embedding_torch", reason="rotary-embedding-torch is not installed: "
                                         "pip install -r requirements-reference.txt")
    theirs = rotary_embedding_torch.RotaryEmbedding(dim=rotary_dim)
    x = torch.as_tensor(np.random.default_rng(1).normal(size=(2, 4, 30, 64)),
                        dtype=torch.float32)
    want = theirs.rotate_queries_or_keys(x)
    ours = pt.RotaryEmbedding(64, layout="interleaved", rotary_dim=rotary_dim)
    got, _ = ours(x, x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    want_offset = theirs.rotate_queries_or_keys(x, offset=7)
    torch.testing.assert_close(ours(x, x, offset=7)[0], want_offset, rtol=1e-5, atol=1e-5)


@pytest.mark.keras
@pytest.mark.parametrize("scaling_factor", [1.0, 4.0])
def test_rotary_embedding_equals_keras_hub(scaling_factor):
    keras_hub = pytest.importorskip("keras_hub", reason="keras-hub is not installed: "
                                                        "pip install -r requirements-reference.txt")
    import keras

    import posenc.keras as pk

    x = np.random.default_rng(2).normal(size=(2, 30, 4, 64)).astype(np.float32)  # (b, s, h, d)
    hub = keras_hub.layers.RotaryEmbedding(max_wavelength=10000, scaling_factor=scaling_factor)
    scaling = None if scaling_factor == 1.0 else {"rope_type": "linear", "factor": scaling_factor}
    ours = pk.RotaryEmbedding(64, scaling=scaling)
    heads_first = np.transpose(x, (0, 2, 1, 3))
    for start in (0, 11):
        want = numpy(hub(keras.ops.convert_to_tensor(x), start_index=start))
        got = numpy(ours(heads_first, heads_first, offset=start)[0])
        np.testing.assert_allclose(np.transpose(got, (0, 2, 1, 3)), want, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------- real checkpoints

# Phi-3.5-mini-instruct's LongRoPE factors (48 pairs, head_dim 96), as in its config.json.
PHI35_SHORT = [1.0, 1.0199999809265137, 1.0299999713897705, 1.0299999713897705, 1.0499999523162842,
               1.0499999523162842, 1.0499999523162842, 1.0499999523162842, 1.0499999523162842,
               1.0699999332427979, 1.0999999046325684, 1.1099998950958252, 1.1599998474121094,
               1.1599998474121094, 1.1699998378753662, 1.2899998426437378, 1.339999794960022,
               1.679999828338623, 1.7899998426437378, 1.8199998140335083, 1.8499997854232788,
               1.8799997568130493, 1.9099997282028198, 1.9399996995925903, 1.9899996519088745,
               2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346,
               2.0199997425079346, 2.0199997425079346, 2.0299997329711914, 2.0299997329711914,
               2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914,
               2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0799996852874756,
               2.0899996757507324, 2.189999580383301, 2.2199995517730713, 2.5899994373321533,
               2.729999542236328, 2.749999523162842, 2.8399994373321533]
PHI35_LONG = [1.0800000429153442, 1.1100000143051147, 1.1399999856948853, 1.340000033378601,
              1.5899999141693115, 1.600000023841858, 1.6200000047683716, 2.620000123977661,
              3.2300000190734863, 3.2300000190734863, 4.789999961853027, 7.400000095367432,
              7.700000286102295, 9.09000015258789, 12.199999809265137, 17.670000076293945,
              24.46000099182129, 28.57000160217285, 30.420001983642578, 30.840002059936523,
              32.590003967285156, 32.93000411987305, 42.320003509521484, 44.96000289916992,
              50.340003967285156, 50.45000457763672, 57.55000305175781, 57.93000411987305,
              58.21000289916992, 60.1400032043457, 62.61000442504883, 62.62000274658203,
              62.71000289916992, 63.1400032043457, 63.1400032043457, 63.77000427246094,
              63.93000411987305, 63.96000289916992, 63.970001220703125, 64.02999877929688,
              64.06999969482422, 64.08000183105469, 64.12000274658203, 64.41000366210938,
              64.4800033569336, 64.51000213623047, 64.52999877929688, 64.83999633789062]

# The rope settings of real checkpoints' config.json files (the other sizes made small where
# they do not touch RoPE), as (transformers model type, config dict, layer types, the original
# context: each is checked at half of it and at twice it).
CHECKPOINTS = {
    # meta-llama/Llama-3.1-8B
    "llama-3.1": ("llama", {"hidden_size": 4096, "num_attention_heads": 32,
                            "max_position_embeddings": 131072, "rope_theta": 500000.0,
                            "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                                             "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                             "original_max_position_embeddings": 8192}},
                  [None], 8192),
    # meta-llama/Llama-4-Scout-17B-16E (text): no blend, low_freq_factor == high_freq_factor
    "llama-4-scout": ("llama4_text", {"hidden_size": 5120, "num_attention_heads": 40,
                                      "head_dim": 128, "max_position_embeddings": 10485760,
                                      "rope_theta": 500000.0,
                                      "rope_scaling": {"rope_type": "llama3", "factor": 16.0,
                                                       "low_freq_factor": 1.0,
                                                       "high_freq_factor": 1.0,
                                                       "original_max_position_embeddings": 8192}},
                      [None], 8192),
    # Qwen/Qwen2.5-7B-Instruct with the YaRN block its model card adds (legacy "type" key)
    "qwen2.5-yarn": ("qwen2", {"hidden_size": 3584, "num_attention_heads": 28,
                               "max_position_embeddings": 32768, "rope_theta": 1000000.0,
                               "rope_scaling": {"type": "yarn", "factor": 4.0,
                                                "original_max_position_embeddings": 32768}},
                     [None], 32768),
    # microsoft/Phi-3.5-mini-instruct: LongRoPE, the original length beside the scaling
    "phi-3.5-mini": ("phi3", {"hidden_size": 3072, "num_attention_heads": 32,
                              "max_position_embeddings": 131072,
                              "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
                              "rope_scaling": {"type": "longrope", "short_factor": PHI35_SHORT,
                                               "long_factor": PHI35_LONG}},
                     [None], 4096),
    # meta-llama/Llama-2-7b-hf with the dynamic NTK scaling users add to it
    "llama-2-dynamic": ("llama", {"hidden_size": 4096, "num_attention_heads": 32,
                                  "max_position_embeddings": 4096, "rope_theta": 10000.0,
                                  "rope_scaling": {"type": "dynamic", "factor": 2.0}},
                        [None], 4096),
    # codellama/CodeLlama-7b-hf (rope_theta 1e6) with a position-interpolation factor of 4 (the
    # checkpoint itself has no rope_scaling; the linear factor is what long fine-tunes add)
    "code-llama-linear": ("llama", {"hidden_size": 4096, "num_attention_heads": 32,
                                    "max_position_embeddings": 16384, "rope_theta": 1000000.0,
                                    "rope_scaling": {"type": "linear", "factor": 4.0}},
                          [None], 16384),
    # mistralai/Mistral-7B-Instruct-v0.2: the default rule with base 1e6
    "mistral-7b": ("mistral", {"hidden_size": 4096, "num_attention_heads": 32, "head_dim": 128,
                               "max_position_embeddings": 32768, "rope_theta": 1000000.0},
                   [None], 32768),
    # deepseek-ai/DeepSeek-V3: YaRN with mscale and mscale_all_dim on the 64 rotated features
    "deepseek-v3": ("deepseek_v3", {"hidden_size": 7168, "num_attention_heads": 128,
                                    "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
                                    "v_head_dim": 128, "max_position_embeddings": 163840,
                                    "rope_theta": 10000.0,
                                    "rope_scaling": {"type": "yarn", "factor": 40.0,
                                                     "beta_fast": 32, "beta_slow": 1,
                                                     "mscale": 1.0, "mscale_all_dim": 1.0,
                                                     "original_max_position_embeddings": 4096}},
                    [None], 4096),
    # EleutherAI/gpt-neox-20b: a quarter of each head rotates
    "gpt-neox-20b": ("gpt_neox", {"hidden_size": 6144, "num_attention_heads": 64,
                                  "max_position_embeddings": 2048, "rotary_pct": 0.25,
                                  "rotary_emb_base": 10000},
                     [None], 2048),
    # google/gemma-3-4b-it (text): local layers base 1e4, global ones 1e6 with a linear 8
    "gemma-3": ("gemma3_text", {"hidden_size": 2560, "num_attention_heads": 8, "head_dim": 256,
                                "max_position_embeddings": 131072, "rope_theta": 1000000.0,
                                "rope_local_base_freq": 10000.0, "sliding_window": 1024,
                                "rope_scaling": {"rope_type": "linear", "factor": 8.0}},
                ["sliding_attention", "full_attention"], 32768),
    # google/gemma-4 (v5 file): p-RoPE on the global layers, a quarter of the pairs turn
    "gemma-4": ("gemma4_text", {"hidden_size": 2560, "num_attention_heads": 8, "head_dim": 256,
                                "global_head_dim": 512, "max_position_embeddings": 131072,
                                "rope_parameters": {
                                    "full_attention": {"rope_type": "proportional",
                                                       "partial_rotary_factor": 0.25,
                                                       "rope_theta": 1000000.0},
                                    "sliding_attention": {"rope_type": "default",
                                                          "rope_theta": 10000.0}}},
                ["sliding_attention", "full_attention"], 32768),
}


def hf_config(model_type: str, values: dict):
    from transformers import AutoConfig

    return AutoConfig.for_model(model_type, num_hidden_layers=2, **values)


def hf_frequencies(config, layer_type, seq_len: int):
    """The frequencies Hugging Face's rotary module of ``config`` uses for a sequence whose
    last position is ``seq_len - 1``, and its attention scaling."""
    import importlib

    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    name = MODEL_MAPPING_NAMES[config.model_type]
    folder = {"llama4_text": "llama4", "gemma3_text": "gemma3",
              "gemma4_text": "gemma4"}.get(config.model_type, config.model_type)
    module = importlib.import_module(f"transformers.models.{folder}.modeling_{folder}")
    cls = getattr(module, name.replace("Model", "RotaryEmbedding"), None)
    rope = (cls or getattr(module, name.replace("TextModel", "RotaryEmbedding")))(config)
    x = torch.zeros(1, 1, 1, 8)
    positions = torch.tensor([[seq_len - 1]])
    prefix = "" if layer_type is None else f"{layer_type}_"
    if layer_type is None:
        rope(x, positions)
    else:
        rope(x, positions, layer_type)
    return (getattr(rope, f"{prefix}inv_freq").numpy(),
            float(getattr(rope, f"{prefix}attention_scaling")))


@pytest.mark.parametrize("name", sorted(CHECKPOINTS))
@pytest.mark.keras
def test_hf_rope_of_real_checkpoints_equals_transformers(name):
    from posenc import rotary

    model_type, values, layer_types, original = CHECKPOINTS[name]
    if layer_types != [None]:
        values = {**values, "layer_types": [layer_types[0], layer_types[1]]}
    config = hf_config(model_type, values)
    for layer_type in layer_types:
        for seq_len in (original // 2, 2 * original):
            want, want_factor = hf_frequencies(config, layer_type, seq_len)
            for source in (values, config):   # the config.json dict, and the config object
                kwargs = rotary.hf_rope(source, layer_type=layer_type)
                got, factor = rotary.rope_frequencies(**kwargs, seq_len=seq_len)
                where = f"{name} {layer_type} seq_len={seq_len} from {type(source).__name__}"
                np.testing.assert_allclose(got, want, rtol=3e-7, atol=0, err_msg=where)
                assert factor == pytest.approx(want_factor, rel=1e-6), where


@pytest.mark.parametrize("name, factor, low, high", [("llama-3.1", 8.0, 1.0, 4.0),
                                                     ("llama-4-scout", 16.0, 1.0, 1.0)])
@pytest.mark.keras
def test_llama3_scaling_equals_torchtune(name, factor, low, high):
    """torchtune's Llama3ScaledRoPE (interleaved layout), frequencies and rotation; Llama 4
    Scout's equal low and high factors included."""
    pytest.importorskip("torchtune", reason="pip install -r requirements-reference.txt")
    from torchtune.models.llama3_1._position_embeddings import Llama3ScaledRoPE

    from posenc import rotary

    tune = Llama3ScaledRoPE(128, max_seq_len=64, base=500000, scale_factor=factor,
                            low_freq_factor=low, high_freq_factor=high, old_context_len=8192)
    scaling = {"rope_type": "llama3", "factor": factor, "low_freq_factor": low,
               "high_freq_factor": high, "original_max_position_embeddings": 8192}
    inv_freq, _ = rotary.rope_frequencies(128, base=500000.0, scaling=scaling)
    np.testing.assert_allclose(inv_freq, tune.theta.numpy(), rtol=3e-7, atol=0)
    x = torch.randn(2, 64, 4, 128, generator=torch.Generator().manual_seed(0))
    want = tune(x)                                  # (batch, seq, heads, head_dim)
    got = pt.apply_rope(x.transpose(1, 2), 64, inv_freq, layout="interleaved").transpose(1, 2)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------- learned tables (timm)


def _timm_resample_abs_pos_embed():
    """timm's ``resample_abs_pos_embed``, or a skip when timm is not installed.

    ``import timm`` also imports torchvision (for its data pipeline and layers this
    function does not use). Where torchvision cannot be imported, the module that
    defines the function, ``timm/layers/pos_embed.py``, is loaded on its own from
    timm's installed files: it needs only torch and two helper modules of
    ``timm.layers``, so the function is timm's own code either way.
    """
    import importlib.util
    import sys
    import types

    spec = importlib.util.find_spec("timm")
    if spec is None:
        pytest.skip("timm is not installed: pip install -r requirements-reference.txt")
    try:
        from timm.layers import resample_abs_pos_embed
        return resample_abs_pos_embed
    except Exception:  # torchvision missing, or built for another torch
        pass
    names = ("timm", "timm.layers", "timm.layers._fx", "timm.layers.helpers",
             "timm.layers.pos_embed")
    saved = {name: sys.modules.pop(name) for name in names if name in sys.modules}
    try:
        root = spec.submodule_search_locations[0]
        for name, path in (("timm", root), ("timm.layers", f"{root}/layers")):
            package = types.ModuleType(name)
            package.__path__ = [path]
            sys.modules[name] = package
        module = importlib.import_module("timm.layers.pos_embed")
        return module.resample_abs_pos_embed
    finally:
        for name in names:
            sys.modules.pop(name, None)
        sys.modules.update(saved)


# (old_hw, new_hw, prefix_tokens): ViT-B/16 from 224 to 384 pixels and back down, a CLS and a
# distillation token (DeiT), register tokens, and grids that are not square.
TIMM_GRIDS = [((14, 14), (24, 24), 1), ((14, 14), (7, 7), 1), ((24, 24), (14, 14), 2),
              ((12, 20), (7, 30), 0), ((5, 9), (16, 4), 4)]


def _timm_resized(table: np.ndarray, old_hw, new_hw, prefix_tokens: int, **options):
    resample = _timm_resample_abs_pos_embed()
    out = resample(torch.as_tensor(table)[None], list(new_hw), list(old_hw),
                   num_prefix_tokens=prefix_tokens, **options)
    return out[0].numpy()


@pytest.mark.parametrize("old_hw, new_hw, prefix_tokens", TIMM_GRIDS)
@pytest.mark.parametrize("mode", ["bicubic", "bilinear"])
@pytest.mark.keras
def test_resize_table_2d_equals_timm_resample_abs_pos_embed(old_hw, new_hw, prefix_tokens,
                                                            mode):
    dim = 32
    table = np.random.default_rng(5).normal(
        size=(prefix_tokens + old_hw[0] * old_hw[1], dim)).astype(np.float32)
    want = _timm_resized(table, old_hw, new_hw, prefix_tokens, interpolation=mode)
    got = pt.resize_table_2d(torch.as_tensor(table), old_hw, new_hw,
                             prefix_tokens=prefix_tokens, mode=mode)
    # timm interpolates in float32, posenc in float64
    np.testing.assert_allclose(numpy(got), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(numpy(got)[:prefix_tokens], table[:prefix_tokens])
    plain = _timm_resized(table, old_hw, new_hw, prefix_tokens, interpolation=mode,
                          antialias=False)
    got = pt.resize_table_2d(torch.as_tensor(table), old_hw, new_hw,
                             prefix_tokens=prefix_tokens, mode=mode, antialias=False)
    np.testing.assert_allclose(numpy(got), plain, rtol=1e-5, atol=1e-5)


@pytest.mark.keras
@pytest.mark.parametrize("old_hw, new_hw, prefix_tokens", TIMM_GRIDS)
def test_keras_resize_table_2d_equals_timm_resample_abs_pos_embed(old_hw, new_hw,
                                                                  prefix_tokens):
    import keras

    import posenc.keras as pk

    table = np.random.default_rng(6).normal(
        size=(prefix_tokens + old_hw[0] * old_hw[1], 16)).astype(np.float32)
    want = _timm_resized(table, old_hw, new_hw, prefix_tokens)
    got = numpy(pk.resize_table_2d(keras.ops.convert_to_tensor(table), old_hw, new_hw,
                                   prefix_tokens=prefix_tokens))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.keras
def test_resize_table_2d_gap_to_timm_without_antialiasing():
    # The plain bicubic resize (a = -0.75, edge rows repeated, no widening) is not what timm
    # computes by default: growing 14 x 14 to 24 x 24 and shrinking it to 7 x 7 differ by a
    # sizeable part of the table's largest entry.
    table = np.random.default_rng(7).normal(size=(1 + 14 * 14, 64)).astype(np.float32)
    for new_hw, least in (((24, 24), 0.05), ((7, 7), 0.5)):
        want = _timm_resized(table, (14, 14), new_hw, 1)
        plain = numpy(pt.resize_table_2d(torch.as_tensor(table), (14, 14), new_hw,
                                         prefix_tokens=1, antialias=False))
        assert np.abs(plain - want).max() > least * np.abs(want).max()
