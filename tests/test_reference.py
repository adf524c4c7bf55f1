"""posenc against the implementations people trust, on the same inputs (marker ``reference``).

Hugging Face transformers: T5's ``_relative_position_bucket`` and ``compute_bias``, BLOOM's
``build_alibi_tensor``, Swin's ``relative_position_index`` and bias lookup (modules built
from a config: no weights are downloaded). keras-hub: ``AlibiBias``. The versions are pinned
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
