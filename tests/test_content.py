"""Positions that depend on the content: the Forgetting Transformer's forget gate bias and CoPE.

Each face against the from-scratch NumPy formula of the paper (``posenc/content.py``, which
sums each span and interpolates the embeddings themselves, where the faces use a cumulative
sum and interpolate ``q . e``), both faces on the same weights, bfloat16 inputs, gradients,
causality, masks, and the errors.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import torch

import posenc.keras as pk
import posenc.torch as pt
from faces import np32, same_error
from posenc import content as nc
from posenc.interop import copy_weights

BOTH = ["torch", pytest.param("keras", marks=pytest.mark.keras)]


def _weights(module, seed=0, scale=0.5):
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for _, p in sorted(module.named_parameters()):
            p.copy_(torch.as_tensor(scale * rng.normal(size=tuple(p.shape))))
    return {n: p.detach().double().numpy() for n, p in module.named_parameters()}


def layer_pair(cls, *args, seed=0, **kwargs):
    t = getattr(pt, cls)(*args, **kwargs)
    w = _weights(t, seed)
    k = getattr(pk, cls)(*args, **kwargs)
    copy_weights(t, k)
    return t, k, w


def run(face, layer, *arrays, dtype="float32", **kw):
    if face == "torch":
        args = [torch.as_tensor(a, dtype=getattr(torch, dtype)) for a in arrays]
        return np32(layer(*args, **kw).detach().float())
    args = [keras.ops.cast(a, dtype) for a in arrays]
    return np32(layer(*args, **kw))


# --------------------------------------------------------------------------- FoX

@pytest.mark.parametrize("face", BOTH)
def test_forget_gate_bias_equals_the_paper_sum(face):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 37, 16))
    t, k, w = layer_pair("ForgetGateBias", 4, 16)
    got = run(face, t if face == "torch" else k, x)
    want = nc.forget_gate_bias(x, w["weight"], w["bias"])
    assert got.shape == (2, 4, 37, 37) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    assert (np.triu(got[0, 0], 1) == 0).all() and (got <= 0).all()


@pytest.mark.parametrize("face", BOTH)
def test_forget_gate_constant_gate_is_alibi(face):
    """Weights 0: every gate sigmoid(b), the bias is ALiBi's -(i - j) * softplus(-b)."""
    layer = (pt if face == "torch" else pk).ForgetGateBias(2, 8, bias_init=1.5)
    if face == "torch":
        torch.nn.init.zeros_(layer.weight)
    else:
        layer.weight.assign(np.zeros((8, 2), "float32"))
    got = run(face, layer, np.random.default_rng(0).normal(size=(1, 12, 8)))
    i, j = np.arange(12)[:, None], np.arange(12)[None]
    want = np.where(j <= i, -(i - j) * np.log1p(np.exp(-1.5)), 0.0)
    np.testing.assert_allclose(got[0, 1], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("face", BOTH)
def test_forget_gate_bf16_and_future_tokens(face):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 64, 16))
    t, k, w = layer_pair("ForgetGateBias", 3, 16)
    layer = t if face == "torch" else k
    got = run(face, layer, x, dtype="bfloat16")
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, nc.forget_gate_bias(x.astype(np.float32), w["weight"],
                                                        w["bias"]), rtol=0.05, atol=0.3)
    y = x.copy()
    y[:, 40:] = rng.normal(size=y[:, 40:].shape)      # change the future of row 39
    a, b = run(face, layer, x), run(face, layer, y)
    np.testing.assert_array_equal(a[:, :, :40], b[:, :, :40])
    assert not np.allclose(a[:, :, 40:], b[:, :, 40:])


def test_forget_gate_gradients_flow_and_saturation_is_finite():
    layer = pt.ForgetGateBias(2, 8)
    x = torch.randn(2, 20, 8, requires_grad=True)
    layer(x).sum().backward()
    assert x.grad.abs().sum() > 0 and layer.weight.grad.abs().sum() > 0
    assert layer.bias.grad.abs().sum() > 0
    with torch.no_grad():
        layer.bias.fill_(-200.0)                     # gates of 1e-87: log f of -200, not -inf
    assert torch.isfinite(layer(x)).all()


@pytest.mark.keras
def test_forget_gate_faces_agree_on_long_sequences():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(1, 1024, 32)).astype("float32")
    t, k, _ = layer_pair("ForgetGateBias", 4, 32)
    np.testing.assert_allclose(run("torch", t, x), run("keras", k, x), rtol=1e-4, atol=2e-3)


# --------------------------------------------------------------------------- CoPE

def qk(seed, b=2, h=3, q_len=17, k_len=17, d=8):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(b, h, q_len, d)), rng.normal(size=(b, h, k_len, d))


@pytest.mark.parametrize("face", BOTH)
@pytest.mark.parametrize("q_len,k_len,max_position", [(17, 17, 32), (5, 23, 8), (40, 40, 6)])
def test_cope_equals_the_paper_formula(face, q_len, k_len, max_position):
    q, k = qk(4, q_len=q_len, k_len=k_len)
    t, kl, w = layer_pair("CoPE", 3, 8, max_position, scale=0.5)
    got = run(face, t if face == "torch" else kl, q, k)
    want = nc.cope_logits(q, k, w["embedding"], scale=0.5)
    assert got.shape == (2, 3, q_len, k_len)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("face", BOTH)
def test_cope_mask_counts_only_the_seen_keys(face):
    """A padded batch: row 0 has 4 pads on the left; its real rows equal the unpadded run."""
    q, k = qk(5, b=1, q_len=12, k_len=12)
    t, kl, w = layer_pair("CoPE", 3, 8, 16)
    layer = t if face == "torch" else kl
    pad = 4
    seen = nc.causal_mask(12, 12) & (np.arange(12) >= pad)[None, :]
    got = run(face, layer, q, k, visible=seen[None])
    alone = run(face, layer, q[:, :, pad:], k[:, :, pad:])
    np.testing.assert_allclose(got[:, :, pad:, pad:], alone, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, nc.cope_logits(q, k, w["embedding"], mask=seen),
                               rtol=1e-4, atol=1e-4)
    # The span j .. i of a seen key lies inside its sequence: the causal mask alone already
    # gives each sequence's entries. A mask that lets a query see later keys counts them.
    np.testing.assert_allclose(run(face, layer, q, k)[:, :, pad:, pad:], alone,
                               rtol=1e-5, atol=1e-5)
    full = run(face, layer, q, k, visible=np.ones((1, 12, 12), bool))
    np.testing.assert_allclose(full, nc.cope_logits(q, k, w["embedding"], mask=True),
                               rtol=1e-4, atol=1e-4)
    assert not np.allclose(full[:, :, pad:, pad:], alone, atol=1e-3)


@pytest.mark.parametrize("face", BOTH)
def test_cope_bf16_and_future_tokens(face):
    q, k = qk(6, q_len=48, k_len=48)
    t, kl, w = layer_pair("CoPE", 3, 8, 64)
    layer = t if face == "torch" else kl
    got = run(face, layer, q, k, dtype="bfloat16")
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, nc.cope_logits(q, k, w["embedding"]), rtol=0.05, atol=0.3)
    k2, q2 = k.copy(), q.copy()
    k2[:, :, 30:] += 1.0
    q2[:, :, 30:] += 1.0
    a, b = run(face, layer, q, k), run(face, layer, q2, k2)
    np.testing.assert_array_equal(a[:, :, :30], b[:, :, :30])
    assert not np.allclose(a[:, :, 30:], b[:, :, 30:])


def test_cope_gradients_reach_queries_keys_and_embedding():
    layer = pt.CoPE(2, 8, 16)
    _weights(layer)
    q = torch.randn(2, 2, 10, 8, requires_grad=True)
    k = torch.randn(2, 2, 10, 8, requires_grad=True)
    layer(q, k).square().sum().backward()
    for g in (q.grad, k.grad, layer.embedding.grad):
        assert g is not None and g.abs().sum() > 0     # keys only through the gates


@pytest.mark.keras
def test_cope_positions_clamp_at_max_position():
    """Far keys all read e[max_position - 1]: with every gate near 1 the term is constant."""
    q = np.ones((1, 1, 30, 4)) * 3.0
    k = np.ones((1, 1, 30, 4)) * 3.0                   # q . k = 36: gates of 1 - 2e-16
    layer = pt.CoPE(1, 4, 5)
    _weights(layer)
    got = run("torch", layer, q, k)[0, 0]
    e_last = 3.0 * layer.embedding.detach().numpy()[-1].sum()
    np.testing.assert_allclose(got[29, :26], e_last, rtol=1e-5)


# --------------------------------------------------------------------------- errors

FACES = {"torch": pt, "keras": pk}


@pytest.mark.parametrize("face", BOTH)
@pytest.mark.parametrize("make,match", [
    (lambda m: m.ForgetGateBias(0, 8), "num_heads"),
    (lambda m: m.ForgetGateBias(2, 0), "dim=0"),
    (lambda m: m.ForgetGateBias(2, 8, bias_init="5"), "bias_init='5'"),
    (lambda m: m.CoPE(2, 8, 0), "max_position=0"),
    (lambda m: m.CoPE(2, 8, 16, scale=-1.0), "scale=-1.0"),
])
def test_constructor_errors(face, make, match):
    with pytest.raises(ValueError, match=match):
        make(FACES[face])


@pytest.mark.parametrize("face", BOTH)
def test_call_errors_name_the_argument_and_the_fix(face):
    m = FACES[face]
    arr = (lambda a: torch.as_tensor(a, dtype=torch.float32)) if face == "torch" \
        else (lambda a: a.astype("float32"))
    with pytest.raises(ValueError, match=r"x must be the layer input .*dim=8.*\(2, 5, 6\)"):
        m.ForgetGateBias(2, 8)(arr(np.zeros((2, 5, 6))))
    cope = m.CoPE(2, 8, 16)
    with pytest.raises(ValueError, match=r"q must be .*heads=2.*split the heads"):
        cope(arr(np.zeros((1, 5, 8))), arr(np.zeros((1, 2, 5, 8))))
    with pytest.raises(ValueError, match=r"q_len=6 and k_len=5.*pass every key"):
        cope(arr(np.zeros((1, 2, 6, 8))), arr(np.zeros((1, 2, 5, 8))))
    with pytest.raises(ValueError, match=r"visible must be .*\(5, 5\).*got shape \(5, 4\)"):
        cope(arr(np.zeros((1, 2, 5, 8))), arr(np.zeros((1, 2, 5, 8))),
             visible=np.ones((5, 4), bool))


# --------------------------------------------------------------------------- generic checks

@pytest.mark.keras
@pytest.mark.parametrize("cls,args,inputs", [
    ("ForgetGateBias", (3, 16), lambda rng: (rng.normal(size=(2, 9, 16)),)),
    ("CoPE", (3, 8, 12), lambda rng: qk(7, q_len=9, k_len=9)),
])
def test_keras_config_save_jit_and_torch_state_dict(cls, args, inputs, tmp_path):
    arrays = [a.astype("float32") for a in inputs(np.random.default_rng(0))]
    t, k, _ = layer_pair(cls, *args, seed=3)
    want = run("torch", t, *arrays)
    clone = type(k).from_config(k.get_config())
    copy_weights(k, clone)
    np.testing.assert_allclose(run("keras", clone, *arrays), want, rtol=1e-5, atol=1e-5)
    inp = [keras.Input(a.shape[1:]) for a in arrays]
    model = keras.Model(inp, k(*inp))
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    np.testing.assert_allclose(np32(loaded(arrays)), want, rtol=1e-5, atol=1e-5)
    model.compile(jit_compile=keras.backend.backend() != "torch")
    np.testing.assert_allclose(model.predict(arrays, verbose=0), want, rtol=1e-5, atol=1e-5)
    t2 = getattr(pt, cls)(*args)
    t2.load_state_dict(t.state_dict())
    np.testing.assert_array_equal(run("torch", t2, *arrays), want)


@pytest.mark.parametrize("cls,args,shapes", [
    ("ForgetGateBias", (2, 8), [(2, 12, 8)]),
    ("CoPE", (2, 8, 16), [(2, 2, 12, 8), (2, 2, 12, 8)]),
])
def test_torch_compile_fullgraph(cls, args, shapes):
    layer = getattr(pt, cls)(*args)
    _weights(layer)
    xs = [torch.randn(*s) for s in shapes]
    compiled = torch.compile(layer, fullgraph=True)
    torch.testing.assert_close(compiled(*xs), layer(*xs), rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------- the Transformer route

FACES = {"torch": pt, "keras": pk}


def _attention(face, position, seed=3, dim=16, heads=2):
    """A causal MultiHeadAttention with ``position`` on the torch layer's random weights
    (0.5 N(0, 1)), copied to Keras for ``face="keras"``; and those weights in float64."""
    t = pt.MultiHeadAttention(dim, heads, position=position, causal=True, max_len=24)
    w = _weights(t, seed)
    if face == "torch":
        return t, w
    k = pk.MultiHeadAttention(dim, heads, position=position, causal=True, max_len=24)
    k(np.zeros((1, 2, dim), "float32"))
    copy_weights(t, k)
    return k, w


def _scratch_weights(x, w, position, heads=2, with_term=True):
    """The attention weights of eq. softmax(q k^T / sqrt(d) + term + causal mask), float64,
    the term from the paper's formula (``posenc/content.py``)."""
    b, n, dim = x.shape
    d = dim // heads

    def split(y):
        return y.reshape(b, n, heads, d).transpose(0, 2, 1, 3)

    q = split(x @ w["query_kernel"] + w["query_bias"])
    k = split(x @ w["key_kernel"])
    logits = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    if not with_term:
        pass
    elif position == "fox":
        logits = logits + nc.forget_gate_bias(x, w["content.weight"], w["content.bias"])
    else:
        logits = logits + nc.cope_logits(q, k, w["content.embedding"])
    logits = np.where(nc.causal_mask(n, n), logits, -np.inf)
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("position", ["fox", "cope"])
@pytest.mark.parametrize("face", BOTH)
def test_the_content_route_adds_the_papers_term_to_the_logits(face, position):
    layer, w = _attention(face, position)
    x = np.random.default_rng(4).normal(size=(2, 9, 16))
    if face == "torch":
        with torch.no_grad():
            out, weights = layer(torch.as_tensor(x, dtype=torch.float32), return_attention=True)
            plain = layer(torch.as_tensor(x, dtype=torch.float32))      # the fused path
    else:
        out, weights = layer(x.astype("float32"), return_attention=True)
        plain = layer(x.astype("float32"))
    want = _scratch_weights(x, w, position)
    np.testing.assert_allclose(np32(weights), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np32(plain), np32(out), rtol=1e-5, atol=1e-5)
    # the term matters: plain causal attention (a route that forgot it) is far off
    assert np.abs(_scratch_weights(x, w, position, with_term=False) - want).max() > 1e-2
    assert layer.position_weights() and len(layer.position_weights()) == len(
        [n for n in w if n.startswith("content.")])


@pytest.mark.parametrize("position", ["fox", "cope"])
@pytest.mark.parametrize("face", BOTH)
def test_the_content_route_decodes_with_a_cache_exactly(face, position):
    """Chunks of 4, 1, 3 through a cache equal the full pass: FoX keeps each row's cumulative
    log-forget in the cache, CoPE's queries count over every cached key."""
    layer, _ = _attention(face, position)
    x = np.random.default_rng(5).normal(size=(2, 8, 16)).astype("float32")
    call = (lambda a, **kw: np32(layer(torch.as_tensor(a), **kw).detach())) \
        if face == "torch" else (lambda a, **kw: np32(layer(a, **kw)))
    full = call(x)
    cache = layer.new_cache()
    steps = [call(x[:, a:b], cache=cache) for a, b in ((0, 4), (4, 5), (5, 8))]
    np.testing.assert_allclose(np.concatenate(steps, 1), full, rtol=1e-5, atol=1e-5)
    if position == "fox":
        assert tuple(cache.log_forget.shape) == (2, 2, 8)


@pytest.mark.parametrize("face", BOTH)
def test_counter_check_a_fox_cache_that_forgets_the_log_forget(face):
    """The bug: the cache keeps the keys but not the cumulative log-forget ``c`` of the cached
    rows (zeros in its place): the decay from a new query to a cached key misses the gates
    between them, and the output moves."""
    layer, _ = _attention(face, "fox")
    x = np.random.default_rng(5).normal(size=(2, 8, 16)).astype("float32")
    call = (lambda a, **kw: np32(layer(torch.as_tensor(a), **kw).detach())) \
        if face == "torch" else (lambda a, **kw: np32(layer(a, **kw)))
    full = call(x)
    cache = layer.new_cache()
    call(x[:, :5], cache=cache)
    cache.log_forget = cache.log_forget * 0.0
    assert np.abs(call(x[:, 5:], cache=cache) - full[:, 5:]).max() > 1e-2


@pytest.mark.keras
@pytest.mark.parametrize("position", ["fox", "cope"])
@pytest.mark.parametrize("cls", ["MultiHeadAttention", "Transformer"])
def test_the_content_schemes_are_causal_only(cls, position):
    args = (16, 2) if cls == "MultiHeadAttention" else (10,)
    message = same_error(FACES, lambda face: getattr(FACES[face], cls)(
        *args, position=position, causal=False))
    assert message == (
        f"{cls}: position={position!r} is a causal scheme (its gates run over the keys at or "
        f"before each query), got causal=False; pass causal=True, or pick a scheme an "
        f"encoder may use (e.g. 'alibi', 't5', 'rope').")


@pytest.mark.parametrize("face", BOTH)
def test_the_content_schemes_take_no_scheme_option(face):
    with pytest.raises(ValueError, match="max_distance is not an option of position='cope'"):
        FACES[face].Transformer(10, position="cope", max_distance=8)
