"""The score-modification route: bias schemes through PyTorch's ``flex_attention``.

Each scheme's score_mod (``posenc/torch/flex.py``) against the attention written out with the
bias the layer materialises (FoX's from the paper's formula, ``posenc/content.py``): a full
pass, queries that continue a cache (the last ``q_len`` of the keys), an encoder; eager on the
CPU, and compiled by ``torch.compile`` once. Counter-check: a score_mod that forgets the
queries' offset is off. And the errors.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import posenc.torch as pt
from posenc import content as nc
from posenc.torch.content import ForgetGateBias
from posenc.torch.flex import dense_bias_attention, flex_bias_attention, score_mod

HEADS, HEAD_DIM, DIM = 4, 16, 24


def layer(name):
    torch.manual_seed(1)
    m = {"alibi": lambda: pt.ALiBiBias(HEADS), "alibi_encoder": lambda: pt.ALiBiBias(
        HEADS, causal=False), "kerple_log": lambda: pt.KerpleBias(HEADS, kernel="log"),
         "kerple_power": lambda: pt.KerpleBias(HEADS, kernel="power"),
         "fire": lambda: pt.FireBias(HEADS), "fox": lambda: ForgetGateBias(HEADS, DIM)}[name]()
    rng = np.random.default_rng(2)
    with torch.no_grad():
        for _, p in sorted(m.named_parameters()):
            p.copy_(torch.as_tensor(0.5 * rng.normal(size=tuple(p.shape)) + 1.0 * (p.dim() == 0)))
        if name == "fire":                # threshold L = 3: queries past it read max(L, i) = i
            m.threshold_multiplier.fill_(3.0 / m.threshold)
    return m


def inputs(q_len, k_len, batch=2, seed=3):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, HEADS, q_len, HEAD_DIM, generator=g)
    k, v = (torch.randn(batch, HEADS, k_len, HEAD_DIM, generator=g) for _ in range(2))
    return q, k, v, torch.randn(batch, k_len, DIM, generator=g)


def written_out(q, k, v, m, x, causal):
    """softmax(q k^T / sqrt(d) + bias + mask) v in float64, the bias from the layer (FoX's from
    the paper's sum over each span)."""
    q_len, k_len = q.shape[-2], k.shape[-2]
    if isinstance(m, ForgetGateBias):
        w = {n: p.detach().double().numpy() for n, p in m.named_parameters()}
        bias = torch.as_tensor(nc.forget_gate_bias(x.double().numpy(), w["weight"], w["bias"])
                               )[..., k_len - q_len:, :]
    else:
        bias = m(q_len, k_len).double()
    logits = q.double() @ k.double().transpose(-1, -2) / HEAD_DIM ** 0.5 + bias
    if causal:
        logits = logits.masked_fill(torch.as_tensor(~nc.causal_mask(q_len, k_len)), -torch.inf)
    return torch.softmax(logits, -1) @ v.double()


SCHEMES = ["alibi", "kerple_log", "kerple_power", "fire", "fox"]


@pytest.mark.parametrize("q_len, k_len", [(37, 37), (5, 37), (1, 37)])
@pytest.mark.parametrize("name", SCHEMES)
def test_flex_equals_the_dense_bias(name, q_len, k_len):
    m = layer(name)
    q, k, v, x = inputs(q_len, k_len)
    with torch.no_grad():
        flex = flex_bias_attention(q, k, v, m, x=x, compiled=False)
        dense = dense_bias_attention(q, k, v, m, x=x)
        want = written_out(q, k, v, m, x, True)
    assert flex.shape == (2, HEADS, q_len, HEAD_DIM) and flex.dtype == torch.float32
    torch.testing.assert_close(flex.double(), want, rtol=1e-5, atol=2e-5)
    torch.testing.assert_close(dense.double(), want, rtol=1e-5, atol=2e-5)


def test_flex_encoder_alibi_equals_the_dense_bias():
    m = layer("alibi_encoder")
    q, k, v, x = inputs(20, 20)
    with torch.no_grad():
        flex = flex_bias_attention(q, k, v, m, causal=False, compiled=False)
    torch.testing.assert_close(flex.double(), written_out(q, k, v, m, x, False),
                               rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("name", ["fire", "fox"])
def test_counter_check_a_score_mod_without_the_queries_offset(name, monkeypatch):
    """The bug: decoding queries read as positions 0 .. q_len - 1 (no offset): FIRE's
    max(L, i) and FoX's c_i are read at the wrong rows."""
    m = layer(name)
    q, k, v, x = inputs(5, 37)
    import posenc.torch.flex as flex
    plain = flex.score_mod
    monkeypatch.setattr(flex, "score_mod", lambda mod_layer, offset=0, **kw: plain(
        mod_layer, 0, **kw))
    with torch.no_grad():
        wrong = flex_bias_attention(q, k, v, m, x=x, compiled=False, causal=False)
        want = written_out(q, k, v, m, x, False)
    assert (wrong.double() - want).abs().max() > 1e-2


@pytest.mark.slow
def test_flex_compiled_equals_the_dense_bias():
    m = layer("fire")
    q, k, v, x = inputs(64, 64, batch=1)
    with torch.no_grad():
        flex = flex_bias_attention(q, k, v, m, compiled=True)
    torch.testing.assert_close(flex.double(), written_out(q, k, v, m, x, True),
                               rtol=1e-4, atol=1e-4)


def test_a_score_mod_reads_one_entry():
    """Query 1 of a chunk at offset 3 is position 4: its score_mod at key 0 adds the bias
    entry (4, 0) of head 2."""
    m = layer("kerple_log")
    with torch.no_grad():
        m.r1.copy_(torch.linspace(0.5, 2.0, HEADS))
        mod = score_mod(m, 3)
        got = mod(torch.tensor(0.5), torch.tensor(0), torch.tensor(2), torch.tensor(1),
                  torch.tensor(0))
        want = 0.5 + float(m(5, 5)[0, 2, 4, 0])
    assert float(got) == pytest.approx(want, abs=1e-6) and want < 0.5 - 1e-2


def test_errors_name_the_argument_and_the_fix():
    q, k, v, _ = inputs(4, 4)
    with pytest.raises(ValueError, match=r"^flex_bias_attention: layer must be one of "
                                         r"ALiBiBias, KerpleBias, FireBias, ForgetGateBias, "
                                         r"got T5RelativeBias; pass the bias layer"):
        flex_bias_attention(q, k, v, pt.T5RelativeBias(HEADS))
    with pytest.raises(ValueError, match=r"^score_mod: x must be the layer input .* got "
                                         r"x=None; pass x"):
        flex_bias_attention(q, k, v, ForgetGateBias(HEADS, DIM))
    with pytest.raises(ValueError, match=r"q_len <= k_len, got shapes"):
        flex_bias_attention(k.repeat(1, 1, 2, 1), k, v, pt.ALiBiBias(HEADS))


def test_a_prebuilt_block_mask_gives_the_same_output_and_is_checked():
    from posenc.torch.flex import causal_block_mask

    m = layer("fire")
    q, k, v, x = inputs(5, 37)
    mask = causal_block_mask(5, 37)
    with torch.no_grad():
        shared = flex_bias_attention(q, k, v, m, compiled=False, block_mask=mask)
        built = flex_bias_attention(q, k, v, m, compiled=False)
    torch.testing.assert_close(shared, built)
    assert causal_block_mask(256, 256).sparsity() == 25.0
    with pytest.raises(ValueError, match=r"block_mask must be for q_len=5, k_len=37, got one "
                                         r"for \(37, 37\); build it with causal_block_mask"):
        flex_bias_attention(q, k, v, m, compiled=False, block_mask=causal_block_mask(37, 37))
    with pytest.raises(ValueError, match=r"block_mask is the causal mask's, got it with "
                                         r"causal=False"):
        flex_bias_attention(q, k, v, m, compiled=False, causal=False, block_mask=mask)
