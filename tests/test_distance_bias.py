"""The length-extrapolation family: xPos, Kerple, Sandwich, FIRE, the dynamic and the continuous
(Swin V2) position biases.

Each formula against a from-scratch NumPy version written here from the paper, both faces on
the same weights; the properties the papers rely on; the reference implementations where they
are installed (rotary-embedding-torch's ``use_xpos``, timm's Swin V2 ``RelPosMlp``); the errors;
the Transformer schemes' cached decoding. The generic checks (parity, saving, dtypes,
compilation) are the rows of tests/test_layers.py.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import torch

import posenc.keras as pk
import posenc.torch as pt
from faces import np32, same_error
from posenc import distance_bias as nd
from posenc.interop import copy_weights

FACES = {"torch": pt, "keras": pk}
BOTH = ["torch", pytest.param("keras", marks=pytest.mark.keras)]


def weights(module: torch.nn.Module, seed: int = 0, scale: float = 0.5) -> dict:
    """Draw every weight of ``module`` from ``scale * N(0, 1)``; return them as float64 NumPy."""
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for _, p in sorted(module.named_parameters()):
            p.copy_(torch.as_tensor(scale * rng.normal(size=tuple(p.shape))))
    return {n: p.detach().double().numpy() for n, p in module.named_parameters()}


def both(cls: str, *args, seed: int = 0, **kwargs):
    """The torch module with random weights and the Keras layer holding a copy of them."""
    torch_layer = getattr(pt, cls)(*args, **kwargs)
    w = weights(torch_layer, seed)
    keras_layer = getattr(pk, cls)(*args, **kwargs)
    copy_weights(torch_layer, keras_layer)
    return torch_layer, keras_layer, w


def bias_of(face: str, layer, q_len, k_len=None):
    return np32(layer(q_len, k_len) if face == "keras" else layer(q_len, k_len).detach())


def query_key(q_len: int, k_len: int):
    """Positions ``i`` (query rows, the last ``q_len`` of ``k_len``) and ``j`` (keys)."""
    i = np.arange(k_len - q_len, k_len)[:, None].astype(np.float64)
    j = np.arange(k_len)[None, :].astype(np.float64)
    return i, j


# --------------------------------------------------------------------------- xPos

def xpos_scratch(x, positions, head_dim, base, scale_base, gamma, center, sign):
    """RoPE on interleaved pairs, then pair i times zeta_i^(sign (n - center) / scale_base)."""
    half = head_dim // 2
    theta = base ** (-np.arange(half) * 2.0 / head_dim)
    zeta = (np.arange(half) / half + gamma) / (1 + gamma)
    angle = positions[:, None] * theta
    a, b = x[..., 0::2], x[..., 1::2]
    scale = zeta ** (sign * (positions[:, None] - center) / scale_base)
    out = np.empty_like(x)
    out[..., 0::2] = (a * np.cos(angle) - b * np.sin(angle)) * scale
    out[..., 1::2] = (a * np.sin(angle) + b * np.cos(angle)) * scale
    return out


@pytest.mark.parametrize("face", BOTH)
def test_xpos_equals_its_formula_and_scores_decay_as_zeta_to_the_distance(face):
    rng = np.random.default_rng(0)
    q = rng.normal(size=(2, 3, 40, 16))
    k = rng.normal(size=(2, 3, 40, 16))
    layer = FACES[face].XPosEmbedding(16, scale_base=32.0)
    args = [torch.as_tensor(q, dtype=torch.float32), torch.as_tensor(k, dtype=torch.float32)] \
        if face == "torch" else [q.astype("float32"), k.astype("float32")]
    q_rot, k_rot = (np32(t) for t in layer(*args))
    pos = np.arange(40.0)
    want_q = xpos_scratch(q, pos, 16, 10000.0, 32.0, 0.4, 20, +1)
    want_k = xpos_scratch(k, pos, 16, 10000.0, 32.0, 0.4, 20, -1)
    np.testing.assert_allclose(q_rot, want_q, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(k_rot, want_k, rtol=1e-5, atol=1e-5)
    # A score is RoPE's, pair i scaled by zeta_i^((n - m) / scale_base): the centre cancels.
    scores = q_rot @ np.swapaxes(k_rot, -1, -2)
    recentred = (xpos_scratch(q, pos, 16, 10000.0, 32.0, 0.4, 0, +1)
                 @ np.swapaxes(xpos_scratch(k, pos, 16, 10000.0, 32.0, 0.4, 0, -1), -1, -2))
    np.testing.assert_allclose(scores, recentred, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("face", BOTH)
def test_xpos_with_a_fixed_centre_decodes_like_the_full_pass(face):
    rng = np.random.default_rng(1)
    q, k = rng.normal(size=(2, 2, 12, 8)).astype("float32"), rng.normal(
        size=(2, 2, 12, 8)).astype("float32")
    layer = FACES[face].XPosEmbedding(8, scale_base=8.0, center=6)
    cast = torch.as_tensor if face == "torch" else (lambda a: a)
    full = [np32(t) for t in layer(cast(q), cast(k))]
    parts = [[np32(t) for t in layer(cast(q[:, :, s:s + 1]), cast(k[:, :, s:s + 1]), offset=s)]
             for s in range(12)]
    np.testing.assert_allclose(np.concatenate([p[0] for p in parts], 2), full[0], rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(np.concatenate([p[1] for p in parts], 2), full[1], rtol=1e-5,
                               atol=1e-6)


def test_xpos_zeta_is_the_papers():
    d = 64
    np.testing.assert_allclose(nd.xpos_zeta(d), [(2 * i / d + 0.4) / 1.4 for i in range(d // 2)])


# --------------------------------------------------------------------------- Kerple

@pytest.mark.parametrize("face", BOTH)
@pytest.mark.parametrize("kernel", ["log", "power"])
def test_kerple_equals_its_formula(kernel, face):
    torch_layer, keras_layer, w = both("KerpleBias", 4, kernel=kernel, seed=3)
    layer = torch_layer if face == "torch" else keras_layer
    i, j = query_key(5, 30)
    r1 = np.maximum(w["r1"], 0.01)[:, None, None]
    r2 = np.maximum(w["r2"], 0.01)[:, None, None]
    d = np.abs(i - j)
    want = (-r1 * np.log(1 + r2 * d) if kernel == "log"
            else -r1 * d ** np.minimum(r2, 2.0))
    np.testing.assert_allclose(bias_of(face, layer, 5, 30)[0], want, rtol=1e-5, atol=1e-6)


@pytest.mark.keras
def test_kerple_power_at_one_is_a_linear_bias_and_clamps_its_exponent():
    layer = pt.KerpleBias(2, kernel="power")
    with torch.no_grad():
        layer.r1.fill_(1.0)
        layer.r2.copy_(torch.tensor([1.0, 7.0]))     # 7 is used as 2 (the paper's r2 <= 2)
    i, j = query_key(6, 6)
    got = bias_of("torch", layer, 6)[0]
    np.testing.assert_allclose(got[0], -np.abs(i - j), atol=1e-5)
    np.testing.assert_allclose(got[1], -np.abs(i - j) ** 2, rtol=1e-5)


@pytest.mark.parametrize("face", BOTH)
def test_kerple_starts_as_the_authors_code(face):
    # log: coefficient r1 ~ U(0, 2), scale r2 ~ U(0, 1); power: coefficient r1 ~ U(0, 1),
    # exponent r2 ~ U(0, 2)
    for kernel, (high1, high2) in (("log", (2.0, 1.0)), ("power", (1.0, 2.0))):
        layer = FACES[face].KerpleBias(512, kernel=kernel)
        r1, r2 = np32(layer.r1), np32(layer.r2)
        for r, high in ((r1, high1), (r2, high2)):
            assert 0.0 <= r.min() and r.max() <= high and r.max() > 0.9 * high, (kernel, high)


def test_kerple_power_has_finite_gradients_at_distance_zero():
    layer = pt.KerpleBias(3, kernel="power")
    layer(7).sum().backward()
    assert torch.isfinite(layer.r1.grad).all() and torch.isfinite(layer.r2.grad).all()


# --------------------------------------------------------------------------- Sandwich

@pytest.mark.parametrize("face", BOTH)
def test_sandwich_is_the_inner_product_of_sinusoids_scaled_per_head(face):
    heads, dim = 4, 16
    layer = FACES[face].SandwichBias(heads, dim)
    i, j = query_key(3, 25)
    # p_i . p_j for p = (sin(n w_k), cos(n w_k)), k = 1 .. d'/2, w_k = 10000^(-2k/d')
    inner = 0.0
    for kk in range(1, dim // 2 + 1):
        w_k = 10000.0 ** (-2.0 * kk / dim)
        inner = inner + np.sin(i * w_k) * np.sin(j * w_k) + np.cos(i * w_k) * np.cos(j * w_k)
    want = np.stack([(inner - dim / 2) / (8.0 * h / heads) for h in range(1, heads + 1)])
    np.testing.assert_allclose(bias_of(face, layer, 3, 25)[0], want, rtol=1e-5, atol=1e-5)
    assert np.all(want[:, np.abs(i - j)[:, :] == 0] == 0)


# --------------------------------------------------------------------------- FIRE

def fire_scratch(w, q_len, k_len, threshold, eps=1e-6):
    i, j = query_key(q_len, k_len)
    c = w["c"]
    limit = abs(w["threshold_multiplier"] * threshold)
    x = np.log(np.abs(c * (i - j)) + 1) / (np.log(np.abs(c * np.maximum(i, limit)) + 1) + eps)
    h = np.maximum(x[..., None] * w["hidden_kernel"][0] + w["hidden_bias"], 0)
    return np.moveaxis(h @ w["output_kernel"], -1, 0)


@pytest.mark.parametrize("face", BOTH)
def test_fire_equals_its_formula(face):
    torch_layer, keras_layer, w = both("FireBias", 3, hidden_dim=8, threshold=10.0, seed=4)
    layer = torch_layer if face == "torch" else keras_layer
    np.testing.assert_allclose(bias_of(face, layer, 7, 40)[0],
                               fire_scratch(w, 7, 40, 10.0), rtol=1e-5, atol=1e-5)


@pytest.mark.keras
def test_fire_depends_on_the_distance_alone_below_its_threshold_and_not_beyond():
    layer = pt.FireBias(2, threshold=50.0)
    weights(layer, 5)
    with torch.no_grad():
        layer.c.fill_(0.3)
        layer.threshold_multiplier.fill_(1.0)
    full = bias_of("torch", layer, 80)[0]
    # queries 10 and 20 (both below L = 50) see distance 5 alike; 60 and 70 (beyond) do not
    np.testing.assert_allclose(full[:, 10, 5], full[:, 20, 15], rtol=1e-6)
    assert not np.allclose(full[:, 60, 55], full[:, 70, 65], rtol=1e-4)


# --------------------------------------------------------------------------- dynamic

@pytest.mark.parametrize("face", BOTH)
@pytest.mark.parametrize("log_distance, depth", [(False, 2), (True, 3)])
def test_dynamic_position_bias_equals_its_formula(log_distance, depth, face):
    torch_layer, keras_layer, w = both("DynamicPositionBias", 3, hidden_dim=8, depth=depth,
                                       log_distance=log_distance, seed=6)
    layer = torch_layer if face == "torch" else keras_layer
    i, j = query_key(4, 21)
    x = (i - j)[..., None]
    if log_distance:
        x = np.sign(x) * np.log(1 + np.abs(x))
    for n in range(depth):
        x = x @ w[f"kernel_{n}"] + w[f"bias_{n}"]
        x = x / (1 + np.exp(-x))                                 # SiLU
    want = np.moveaxis(x @ w["output_kernel"], -1, 0)
    np.testing.assert_allclose(bias_of(face, layer, 4, 21)[0], want, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------- Swin V2

def swinv2_scratch(w, window, pretrained=None):
    h, wd = window
    norm = window if pretrained is None else pretrained
    rows, cols = np.divmod(np.arange(h * wd), wd)
    dy = (rows[:, None] - rows[None, :]) / (norm[0] - 1) * 8
    dx = (cols[:, None] - cols[None, :]) / (norm[1] - 1) * 8
    coords = np.stack([np.sign(v) * np.log2(1 + np.abs(v)) / 3 for v in (dy, dx)], -1)
    hidden = np.maximum(coords @ w["hidden_kernel"] + w["hidden_bias"], 0)
    return np.moveaxis(16 / (1 + np.exp(-(hidden @ w["output_kernel"]))), -1, 0)


@pytest.mark.parametrize("face", BOTH)
@pytest.mark.parametrize("window, pretrained", [((3, 4), None), ((5, 5), (3, 3))])
def test_continuous_position_bias_equals_its_formula(window, pretrained, face):
    torch_layer, keras_layer, w = both("ContinuousPositionBias", 3, window, hidden_dim=16,
                                       pretrained_window=pretrained, seed=7)
    layer = torch_layer if face == "torch" else keras_layer
    n = window[0] * window[1]
    np.testing.assert_allclose(bias_of(face, layer, n)[0], swinv2_scratch(w, window, pretrained),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("face", BOTH)
def test_a_resized_continuous_bias_keeps_the_trained_offsets(face):
    torch_layer, keras_layer, _ = both("ContinuousPositionBias", 2, 3, hidden_dim=8, seed=8)
    layer = torch_layer if face == "torch" else keras_layer
    small, large = bias_of(face, layer, 9)[0], bias_of(face, layer.resized(5), 25)[0]
    # patch (1, 1) of the 3 x 3 window and patch (2, 2) of the 5 x 5 window, to every patch
    # at most one row and column away: the same offsets, so the same bias
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            np.testing.assert_allclose(large[:, 12, (2 + dy) * 5 + 2 + dx],
                                       small[:, 4, (1 + dy) * 3 + 1 + dx], rtol=1e-5)


# --------------------------------------------------------------------------- low precision

BIASES = [("KerpleBias", (4,), {"kernel": "power"}), ("FireBias", (4,), {}),
          ("DynamicPositionBias", (4,), {"log_distance": True}), ("SandwichBias", (4, 8), {}),
          ("ContinuousPositionBias", (4, (2, 3)), {"hidden_dim": 8})]


@pytest.mark.parametrize("cls, args, kwargs", BIASES, ids=[b[0] for b in BIASES])
def test_bfloat16_weights_give_a_float32_bias_near_the_float32_one(cls, args, kwargs):
    layer = getattr(pt, cls)(*args, **kwargs)
    weights(layer, 9)
    q_len = 6 if cls == "ContinuousPositionBias" else 5
    k_len = 6 if cls == "ContinuousPositionBias" else 17
    full = layer(q_len, k_len)
    low = layer.to(torch.bfloat16)(q_len, k_len)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        auto = layer(q_len, k_len)
    assert low.dtype == auto.dtype == torch.float32
    torch.testing.assert_close(low, full, rtol=2e-2, atol=5e-2)


@pytest.mark.keras
@pytest.mark.parametrize("cls, args, kwargs", BIASES, ids=[b[0] for b in BIASES])
def test_keras_bfloat16_policy_gives_the_torch_bias(cls, args, kwargs):
    torch_layer = getattr(pt, cls)(*args, **kwargs)
    weights(torch_layer, 10)
    keras_layer = getattr(pk, cls)(*args, **kwargs, dtype="mixed_bfloat16")
    copy_weights(torch_layer, keras_layer)
    q_len = 6 if cls == "ContinuousPositionBias" else 5
    k_len = 6 if cls == "ContinuousPositionBias" else 17
    from keras.src.backend import AutocastScope

    with AutocastScope("bfloat16"):      # the scope of a mixed-precision attention layer
        got = keras_layer(q_len, k_len)
    assert keras.backend.standardize_dtype(got.dtype) == "float32"
    np.testing.assert_allclose(np32(got), np32(torch_layer(q_len, k_len).detach()),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.keras
def test_xpos_in_bfloat16_agrees_across_faces():
    rng = np.random.default_rng(11)
    q, k = (rng.normal(size=(2, 2, 30, 16)).astype("float32") for _ in range(2))
    t = pt.XPosEmbedding(16, scale_base=16.0)
    kl = pk.XPosEmbedding(16, scale_base=16.0, dtype="mixed_bfloat16")
    got_t = t(torch.as_tensor(q, dtype=torch.bfloat16), torch.as_tensor(k, dtype=torch.bfloat16))
    got_k = kl(q, k)
    for a, b, want in zip(got_t, got_k, t(torch.as_tensor(q), torch.as_tensor(k))):
        assert a.dtype == torch.bfloat16 and keras.backend.standardize_dtype(b.dtype) == "bfloat16"
        np.testing.assert_allclose(np32(a), np32(b), rtol=2e-2, atol=5e-2)
        np.testing.assert_allclose(np32(a), np32(want), rtol=2e-2, atol=5e-2)


# --------------------------------------------------------------------------- the Transformer

NEW_SCHEMES = ["xpos", "kerple_log", "kerple_power", "sandwich", "fire", "dynamic"]


@pytest.mark.parametrize("face", BOTH)
@pytest.mark.parametrize("position", NEW_SCHEMES)
def test_transformer_cached_decoding_equals_the_full_pass(position, face):
    model = FACES[face].Transformer(13, dim=16, depth=2, heads=2, max_len=64, position=position)
    rng = np.random.default_rng(12)
    if face == "torch":
        with torch.no_grad():
            for _, p in sorted(model.named_parameters()):
                p.copy_(torch.as_tensor(0.3 * rng.normal(size=tuple(p.shape))))
            model.eval()
    else:
        for w in model.weights:
            w.assign((0.3 * rng.normal(size=tuple(w.shape))).astype("float32"))
    toks = rng.integers(0, 13, size=(2, 20))

    def run(x, **kw):
        if face == "torch":
            with torch.no_grad():
                return np32(model(torch.as_tensor(x), **kw))
        return np32(model(x, **kw))

    full = run(toks)
    for chunks in ([1] * 20, [7, 1, 12]):
        cache, out, start = model.new_cache(), [], 0
        for size in chunks:
            out.append(run(toks[:, start:start + size], cache=cache))
            start += size
        np.testing.assert_allclose(np.concatenate(out, 1), full, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("position", NEW_SCHEMES)
def test_transformer_schemes_carry_their_layer(position):
    model = pt.Transformer(13, dim=16, depth=1, heads=2, position=position, max_len=40)
    attention = model.blocks[0].attention
    layer = attention.rotary if position == "xpos" else attention.position_bias
    want = {"xpos": pt.XPosEmbedding, "sandwich": pt.SandwichBias, "fire": pt.FireBias,
            "dynamic": pt.DynamicPositionBias}.get(position, pt.KerpleBias)
    assert isinstance(layer, want)
    if position == "xpos":
        assert layer.center == 20
    if position.startswith("kerple"):
        assert layer.kernel == position.split("_")[1]


# --------------------------------------------------------------------------- per-token positions

SEQ_BIASES = [("KerpleBias", (3,), {"kernel": "log"}), ("KerpleBias", (3,), {"kernel": "power"}),
              ("SandwichBias", (3, 8), {}), ("FireBias", (3,), {"threshold": 4.0}),
              ("DynamicPositionBias", (3,), {"log_distance": True})]
SEQ_IDS = ["kerple_log", "kerple_power", "sandwich", "fire", "dynamic"]


def at(face, layer, q_positions, k_positions):
    cast = torch.as_tensor if face == "torch" else (lambda a: a)
    out = layer.bias_at(cast(np.asarray(q_positions)), cast(np.asarray(k_positions)))
    assert (out.dtype == torch.float32 if face == "torch"
            else keras.backend.standardize_dtype(out.dtype) == "float32")
    return np32(out.detach() if face == "torch" else out)


@pytest.mark.parametrize("face", BOTH)
@pytest.mark.parametrize("cls, args, kwargs", SEQ_BIASES, ids=SEQ_IDS)
def test_bias_at_the_slots_positions_is_the_block_bias(cls, args, kwargs, face):
    """Queries the last 5 of 12 keys, in 2 rows: bias_at gives forward(5, 12) in each row."""
    torch_layer, keras_layer, _ = both(cls, *args, **kwargs, seed=11)
    layer = torch_layer if face == "torch" else keras_layer
    q = np.tile(np.arange(7, 12), (2, 1))
    k = np.tile(np.arange(12), (2, 1))
    got = at(face, layer, q, k)
    assert got.shape == (2, 3, 5, 12)
    np.testing.assert_allclose(got, np.broadcast_to(bias_of(face, layer, 5, 12), got.shape),
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("face", BOTH)
@pytest.mark.parametrize("cls, args, kwargs", SEQ_BIASES, ids=SEQ_IDS)
def test_bias_at_reads_each_rows_real_positions(cls, args, kwargs, face):
    """Row 1 holds row 0's positions moved by 6 (the slots of a left-padded row read as
    positions, the bug). The relative biases are unchanged; FIRE's interpolation divides by
    psi(max(L, i)) of the query's position, so it changes, and equals its formula at i."""
    torch_layer, keras_layer, w = both(cls, *args, **kwargs, seed=12)
    layer = torch_layer if face == "torch" else keras_layer
    base = np.array([0, 1, 2, 3, 4, 5, 6, 7])
    pos = np.stack([base, base + 6])
    got = at(face, layer, pos, pos)
    moved = np.abs(got[1] - got[0]).max()
    if cls == "FireBias":
        assert moved > 1e-2
        i, j = pos[:, :, None].astype(np.float64), pos[:, None, :].astype(np.float64)
        limit = abs(w["threshold_multiplier"] * 4.0)
        c = w["c"]
        x = np.log(np.abs(c * (i - j)) + 1) / (np.log(np.abs(c * np.maximum(i, limit)) + 1)
                                               + 1e-6)
        h = np.maximum(x[..., None] * w["hidden_kernel"][0] + w["hidden_bias"], 0)
        # float32's log(|c x| + 1) of a small c (the formula as the paper's code writes it)
        np.testing.assert_allclose(got, np.moveaxis(h @ w["output_kernel"], -1, 1),
                                   rtol=2e-4, atol=2e-4)
    else:
        assert moved < 1e-6
        # a packed row: positions restart, the bias of each document is its own
        packed = np.array([[0, 1, 2, 0, 1, 2, 3, 4]])
        doc = at(face, layer, packed, packed)[0]
        np.testing.assert_allclose(doc[:, 3:, 3:], got[0][:, :5, :5], rtol=1e-6, atol=1e-6)


@pytest.mark.keras
@pytest.mark.parametrize("cls, args, kwargs", SEQ_BIASES, ids=SEQ_IDS)
def test_bias_at_agrees_across_faces_on_padded_positions(cls, args, kwargs):
    torch_layer, keras_layer, _ = both(cls, *args, **kwargs, seed=13)
    q = np.array([[0, 0, 0, 1], [2, 3, 4, 5]])            # a left-padded row, a cached one
    k = np.array([[0, 0, 0, 0, 0, 1], [0, 1, 2, 3, 4, 5]])
    np.testing.assert_allclose(at("keras", keras_layer, q, k), at("torch", torch_layer, q, k),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("face", BOTH)
def test_xpos_at_per_row_positions_rotates_and_scales_each_row(face):
    rng = np.random.default_rng(14)
    q, k = (rng.normal(size=(2, 3, 6, 8)).astype("float32") for _ in range(2))
    positions = np.array([[0, 0, 0, 1, 2, 3], [4, 5, 6, 7, 8, 9]])
    layer = FACES[face].XPosEmbedding(8, scale_base=4.0, center=3)
    cast = torch.as_tensor if face == "torch" else (lambda a: a)
    batched = [np32(t) for t in layer(cast(q), cast(k), positions=cast(positions))]
    for b in range(2):
        alone = [np32(t) for t in layer(cast(q[b:b + 1]), cast(k[b:b + 1]),
                                        positions=cast(positions[b]))]
        for got, want in zip(batched, alone):
            np.testing.assert_allclose(got[b:b + 1], want, rtol=1e-5, atol=1e-6)
    # the scale moved with the rotation: row 1 is not row 1 at row 0's positions
    wrong = np32(layer(cast(q[1:]), cast(k[1:]), positions=cast(positions[0]))[0])
    assert np.abs(batched[0][1:] - wrong).max() > 1e-1


# --------------------------------------------------------------------------- errors

ERRORS = [
    (lambda F: F.KerpleBias(4, kernel="cubic"), ["kernel", "'cubic'", "log"]),
    (lambda F: F.KerpleBias(0), ["num_heads", "0"]),
    (lambda F: F.SandwichBias(4, 7), ["dim", "7", "even"]),
    (lambda F: F.FireBias(4, c=0.0), ["c", "0.0", "0.1"]),
    (lambda F: F.FireBias(4, threshold=-5.0), ["threshold", "-5.0", "512"]),
    (lambda F: F.FireBias(4, hidden_dim=0), ["hidden_dim", "0", "32"]),
    (lambda F: F.DynamicPositionBias(4, depth=0), ["depth", "0", "depth=2"]),
    (lambda F: F.DynamicPositionBias(4, log_distance="yes"), ["log_distance", "'yes'"]),
    (lambda F: F.ContinuousPositionBias(2, (1, 4)), ["window_size", "(1, 4)", "2 x 2"]),
    (lambda F: F.ContinuousPositionBias(2, 4, pretrained_window=1),
     ["pretrained_window", "(1, 1)"]),
    (lambda F: F.ContinuousPositionBias(2, 4)(15), ["q_len", "15", "16"]),
    (lambda F: F.XPosEmbedding(15), ["head_dim", "15", "16"]),
    (lambda F: F.XPosEmbedding(16, scale_base=0), ["scale_base", "0", "512"]),
    (lambda F: F.XPosEmbedding(16, gamma=-1.0), ["gamma", "-1.0", "0.4"]),
    (lambda F: F.XPosEmbedding(16, center=-3), ["center", "-3"]),
    (lambda F: F.Transformer(11, dim=6, heads=2, position="sandwich"),
     ["Transformer", "dim // heads", "3"]),
    (lambda F: F.Transformer(11, dim=6, heads=2, position="xpos"),
     ["Transformer", "dim // heads", "3"]),
    (lambda F: F.Transformer(11, position="fire", max_distance=4),
     ["max_distance", "'fire'"]),
    (lambda F: F.KerpleBias(2).bias_at(np.zeros(3, np.int64), np.zeros((1, 3), np.int64)),
     ["KerpleBias", "q_positions", "(3,)", "(batch, seq)"]),
    (lambda F: F.FireBias(2).bias_at(np.zeros((2, 3), np.int64), np.zeros((1, 3), np.int64)),
     ["FireBias", "(2, 3)", "(1, 3)", "same rows"]),
    (lambda F: F.SandwichBias(2, 8).bias_at(np.zeros((1, 3), np.float32),
                                            np.zeros((1, 3), np.int64)),
     ["SandwichBias", "q_positions", "float32"]),
]


@pytest.mark.keras
@pytest.mark.parametrize("make, words", ERRORS, ids=range(len(ERRORS)))
def test_bad_arguments_raise_the_same_error_naming_the_argument_in_both_faces(make, words):
    message = same_error(FACES, lambda face: make(FACES[face]))
    for word in words:
        assert word in message, (word, message)


# --------------------------------------------------------------------------- the references

@pytest.mark.reference
@pytest.mark.parametrize("face", BOTH)
@pytest.mark.parametrize("head_dim, seq, scale_base", [(16, 33, 512), (32, 128, 64)])
def test_xpos_equals_rotary_embedding_torch(head_dim, seq, scale_base, face):
    ret = pytest.importorskip("rotary_embedding_torch")
    ref = ret.RotaryEmbedding(head_dim, use_xpos=True, xpos_scale_base=scale_base,
                              cache_if_possible=False)
    rng = np.random.default_rng(13)
    q, k = (rng.normal(size=(2, 3, seq, head_dim)).astype("float32") for _ in range(2))
    want_q, want_k = ref.rotate_queries_and_keys(torch.as_tensor(q), torch.as_tensor(k))
    layer = FACES[face].XPosEmbedding(head_dim, scale_base=float(scale_base))
    args = (torch.as_tensor(q), torch.as_tensor(k)) if face == "torch" else (q, k)
    got_q, got_k = (np32(t) for t in layer(*args))
    np.testing.assert_allclose(got_q, np32(want_q), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_k, np32(want_k), rtol=1e-5, atol=1e-5)
    scores = got_q @ np.swapaxes(got_k, -1, -2)
    want = np32(want_q @ want_k.transpose(-1, -2))
    np.testing.assert_allclose(scores, want, rtol=1e-4, atol=1e-4)


def _timm_pos_embed_rel():
    """timm's ``timm/layers/pos_embed_rel.py`` (Swin V2's coordinates and ``RelPosMlp``), or a
    skip when timm is not installed. ``import timm`` also imports torchvision; where that
    fails, the module is loaded on its own from timm's installed files (it needs only torch
    and a few helper modules of ``timm.layers``), as tests/test_reference.py does for
    ``resample_abs_pos_embed``: timm's own code either way."""
    import importlib
    import importlib.util
    import sys
    import types

    spec = importlib.util.find_spec("timm")
    if spec is None:
        pytest.skip("timm is not installed: pip install -r requirements-reference.txt")
    try:
        from timm.layers import pos_embed_rel
        return pos_embed_rel
    except Exception:  # torchvision missing, or built for another torch
        pass
    prefix = ("timm",)
    saved = {n: m for n, m in sys.modules.items() if n == "timm" or n.startswith("timm.")}
    for name in saved:
        sys.modules.pop(name)
    try:
        root = spec.submodule_search_locations[0]
        for name, path in (("timm", root), ("timm.layers", f"{root}/layers")):
            package = types.ModuleType(name)
            package.__path__ = [path]
            sys.modules[name] = package
        return importlib.import_module("timm.layers.pos_embed_rel")
    finally:
        for name in [n for n in sys.modules if n.startswith(prefix)]:
            sys.modules.pop(name, None)
        sys.modules.update(saved)


@pytest.mark.reference
@pytest.mark.parametrize("window, pretrained", [((7, 7), None), ((6, 9), None),
                                                ((12, 12), (8, 8))])
def test_swinv2_log_coords_equal_timms(window, pretrained):
    pos_embed_rel = _timm_pos_embed_rel()
    want = pos_embed_rel.gen_relative_log_coords(window, pretrained or (0, 0), mode="swin")
    np.testing.assert_allclose(nd.swinv2_log_coords(window, pretrained), want.numpy(),
                               rtol=1e-6, atol=1e-7)


@pytest.mark.reference
@pytest.mark.parametrize("face", BOTH)
@pytest.mark.parametrize("window, pretrained", [((4, 4), None), ((6, 5), (4, 3))])
def test_continuous_position_bias_equals_timms_swin_rel_pos_mlp(window, pretrained, face):
    pos_embed_rel = _timm_pos_embed_rel()
    ref = pos_embed_rel.RelPosMlp(window, num_heads=3, hidden_dim=32, mode="swin",
                                  pretrained_window_size=pretrained or (0, 0)).eval()
    weights(ref, 14)
    layer = FACES[face].ContinuousPositionBias(3, window, hidden_dim=32,
                                               pretrained_window=pretrained)
    state = {"hidden_kernel": ref.mlp.fc1.weight.T, "hidden_bias": ref.mlp.fc1.bias,
             "output_kernel": ref.mlp.fc2.weight.T}
    for name, value in state.items():
        target = getattr(layer, name)
        if face == "torch":
            with torch.no_grad():
                target.copy_(value)
        else:
            target.assign(value.detach().numpy())
    n = window[0] * window[1]
    with torch.no_grad():
        want = np32(ref.get_bias())
    np.testing.assert_allclose(bias_of(face, layer, n), want, rtol=1e-5, atol=1e-5)
    assert 0.0 < float(want.min()) and float(want.max()) < 16.0


@pytest.mark.reference
@pytest.mark.parametrize("face", BOTH)
@pytest.mark.parametrize("window, pretrained", [((4, 4), None), ((6, 4), (3, 3))])
def test_continuous_position_bias_equals_transformers_swinv2(window, pretrained, face):
    swinv2 = pytest.importorskip("transformers.models.swinv2.modeling_swinv2")
    from transformers import Swinv2Config

    ref = swinv2.Swinv2SelfAttention(Swinv2Config(), 24, 3, window,
                                     pretrained_window_size=list(pretrained or (0, 0))).eval()
    mlp = ref.continuous_position_bias_mlp
    weights(mlp, 15)
    np.testing.assert_allclose(nd.swinv2_log_coords(window, pretrained),
                               ref.relative_coords_table[0].numpy(), rtol=1e-6, atol=1e-7)
    layer = FACES[face].ContinuousPositionBias(3, window, pretrained_window=pretrained)
    for name, value in (("hidden_kernel", mlp[0].weight.T), ("hidden_bias", mlp[0].bias),
                        ("output_kernel", mlp[2].weight.T)):
        if face == "torch":
            with torch.no_grad():
                getattr(layer, name).copy_(value)
        else:
            getattr(layer, name).assign(value.detach().numpy())
    n = window[0] * window[1]
    with torch.no_grad():   # Swinv2SelfAttention.forward's bias, from its own modules
        table = mlp(ref.relative_coords_table).view(-1, 3)
        want = 16 * torch.sigmoid(table[ref.relative_position_index.view(-1)].view(n, n, 3)
                                  .permute(2, 0, 1))
    np.testing.assert_allclose(bias_of(face, layer, n)[0], want.numpy(), rtol=1e-5, atol=1e-5)
