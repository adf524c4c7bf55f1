"""The rotary family's own properties: frequencies and their scalings, both layouts, partial
rotary, relative scores, cached decoding, layout conversion, axial 2D RoPE, bfloat16
positions. The generic layer checks are rows of ``tests/test_layers.py``; the comparisons
with Hugging Face, keras-hub and rotary-embedding-torch are in ``tests/test_reference.py``."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc.keras as pk
import posenc.torch as pt
from faces import np32, tensor
from mutants import and_the_bugs, wrong_code
from posenc import rotary
from reference import rope as rope_np

FACES = {"torch": pt, "keras": pk}
LAYOUTS = ("half", "interleaved")
SCALINGS = {
    "default": None,
    "linear": {"rope_type": "linear", "factor": 4.0},
    "ntk": {"rope_type": "ntk", "factor": 8.0},
    "dynamic": {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 512},
    "yarn": {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 4096},
    "llama3": {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192,
               "low_freq_factor": 1.0, "high_freq_factor": 4.0},
}


def qk(shape=(2, 3, 12, 16), seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=shape).astype(np.float32),
            rng.normal(size=shape).astype(np.float32))


# --------------------------------------------------------------------------- frequencies

def test_default_frequencies_are_the_geometric_sequence():
    inv_freq, factor = rotary.rope_frequencies(8, base=100.0)
    np.testing.assert_allclose(inv_freq, 100.0 ** (-np.arange(0, 8, 2) / 8), rtol=1e-7)
    assert inv_freq.dtype == np.float32 and factor == 1.0


@pytest.mark.parametrize("name", sorted(SCALINGS))
@pytest.mark.keras
def test_every_scaling_in_both_faces_equals_the_registry(name):
    want, factor = rotary.rope_frequencies(64, scaling=SCALINGS[name], seq_len=2048)
    for face, module in FACES.items():
        got, got_factor = module.rope_frequencies(64, scaling=SCALINGS[name], seq_len=2048)
        np.testing.assert_array_equal(np32(got), want, err_msg=face)
        assert got_factor == factor


def test_scaling_properties():
    default, _ = rotary.rope_frequencies(64)
    linear, _ = rotary.rope_frequencies(64, scaling=SCALINGS["linear"])
    np.testing.assert_allclose(linear, default / 4.0, rtol=1e-6)
    # static NTK: the fastest frequency is kept, the slowest divided by the factor
    ntk, _ = rotary.rope_frequencies(64, scaling=SCALINGS["ntk"])
    assert ntk[0] == default[0]
    np.testing.assert_allclose(ntk[-1], default[-1] / 8.0, rtol=1e-5)
    # dynamic: the default frequencies up to the original length, lower beyond
    for seq_len in (1, 512):
        short, _ = rotary.rope_frequencies(64, scaling=SCALINGS["dynamic"], seq_len=seq_len)
        np.testing.assert_array_equal(short, default)
    long, _ = rotary.rope_frequencies(64, scaling=SCALINGS["dynamic"], seq_len=4096)
    assert np.all(long[1:] < default[1:])
    # YaRN: fast frequencies kept, slow ones interpolated, the attention factor grows
    yarn, factor = rotary.rope_frequencies(64, scaling=SCALINGS["yarn"])
    assert yarn[0] == default[0]
    np.testing.assert_allclose(yarn[-1], default[-1] / 16.0, rtol=1e-6)
    assert factor == pytest.approx(0.1 * np.log(16.0) + 1.0)
    # Llama 3: short wavelengths kept, long ones divided by the factor
    llama, _ = rotary.rope_frequencies(128, base=500000.0, scaling=SCALINGS["llama3"])
    wide, _ = rotary.rope_frequencies(128, base=500000.0)
    assert llama[0] == wide[0]
    np.testing.assert_allclose(llama[-1], wide[-1] / 8.0, rtol=1e-6)
    assert np.all(llama <= wide)


# --------------------------------------------------------------------------- the rotation

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("face", FACES)
def test_apply_rope_is_the_complex_rotation_with_partial_rotary(face, layout):
    x, _ = qk()
    inv_freq, _ = rotary.rope_frequencies(12)         # 12 of 16 features rotate
    positions = np.arange(12) * 7 + 3
    got = FACES[face].apply_rope(tensor(face, x), tensor(face, positions), inv_freq,
                                 layout=layout)
    np.testing.assert_allclose(np32(got), rope_np(x, positions, inv_freq, layout),
                               rtol=1e-5, atol=2e-5)
    np.testing.assert_array_equal(np32(got)[..., 12:], x[..., 12:])


@settings(max_examples=25, deadline=None)
@given(lead=st.lists(st.integers(1, 3), min_size=0, max_size=2), seq=st.integers(1, 9),
       pairs=st.integers(1, 6), extra=st.integers(0, 3), layout=st.sampled_from(LAYOUTS),
       batched=st.booleans(), seed=st.integers(0, 1000))
@pytest.mark.keras
def test_any_shape_in_both_faces(lead, seq, pairs, extra, layout, batched, seed):
    """Leading axes, lengths, partial rotary, layouts and (batch, seq) positions: both faces
    equal the complex rotation."""
    rng = np.random.default_rng(seed)
    batch = 2
    x = rng.normal(size=(batch, *lead, seq, 2 * pairs + 2 * extra)).astype(np.float32)
    inv_freq, _ = rotary.rope_frequencies(2 * pairs, base=float(rng.uniform(2.0, 1e4)))
    positions = rng.integers(0, 5000, size=(batch, seq) if batched else (seq,))
    want = np.stack([rope_np(x[b], positions[b] if batched else positions, inv_freq, layout)
                     for b in range(batch)])
    for face, m in FACES.items():
        got = m.apply_rope(tensor(face, x), tensor(face, positions), inv_freq, layout=layout)
        np.testing.assert_allclose(np32(got), want, rtol=1e-4, atol=5e-4, err_msg=face)


@pytest.mark.parametrize("face", FACES)
def test_batched_and_float_positions(face):
    x, _ = qk()
    inv_freq, _ = rotary.rope_frequencies(16)
    positions = np.random.default_rng(1).uniform(0, 100, size=(2, 12)).astype(np.float32)
    got = np32(FACES[face].apply_rope(tensor(face, x), tensor(face, positions), inv_freq))
    for b in range(2):
        np.testing.assert_allclose(got[b], rope_np(x[b], positions[b], inv_freq, "half"),
                                   rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("face", FACES)
def test_scores_depend_only_on_the_offset_and_norms_are_kept(face, layout):
    rng = np.random.default_rng(2)
    q, k = rng.normal(size=(1, 16)).astype(np.float32), rng.normal(size=(1, 16)).astype(np.float32)
    inv_freq, _ = rotary.rope_frequencies(16)
    m = FACES[face]

    def score(i, j):
        qi = np32(m.apply_rope(tensor(face, q), tensor(face, np.array([i])), inv_freq,
                               layout=layout))
        kj = np32(m.apply_rope(tensor(face, k), tensor(face, np.array([j])), inv_freq,
                               layout=layout))
        np.testing.assert_allclose(np.linalg.norm(qi), np.linalg.norm(q), rtol=1e-5)
        return float((qi * kj).sum())

    for shift in (1, 37, 1000):
        assert score(5 + shift, 2 + shift) == pytest.approx(score(5, 2), rel=1e-4, abs=1e-4)
    assert score(5, 2) != pytest.approx(score(5, 3), rel=1e-3)


def test_torch_gradient_is_the_inverse_rotation():
    """The fused backward equals autograd through the plain formula (both layouts)."""
    x = torch.randn(2, 3, 9, 16, dtype=torch.float64)
    inv_freq = torch.as_tensor(rotary.rope_frequencies(12)[0], dtype=torch.float64)
    for layout in LAYOUTS:
        torch.autograd.gradcheck(lambda t: pt.apply_rope(t, torch.arange(9), inv_freq,
                                                         layout=layout), (x.requires_grad_(),))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_torch_non_contiguous_inputs(layout):
    """q as attention code makes it: a (batch, seq, heads, head_dim) projection transposed,
    or every other feature of a wider tensor; the gradient is the inverse rotation."""
    x = np.random.default_rng(5).normal(size=(2, 12, 3, 33)).astype(np.float32)
    g = np.random.default_rng(6).normal(size=(2, 3, 12, 16)).astype(np.float32)
    inv_freq, _ = rotary.rope_frequencies(12)
    for pick in (lambda t: t[..., :16].transpose(1, 2), lambda t: t.transpose(1, 2)[..., 1::2]):
        leaf = torch.tensor(x, requires_grad=True)
        view = pick(leaf)
        assert not view.is_contiguous()
        got = pt.apply_rope(view, torch.arange(12), inv_freq, layout=layout)
        want = rope_np(view.detach().numpy(), np.arange(12), inv_freq, layout)
        np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-5, atol=2e-5)
        got.backward(torch.as_tensor(g))
        np.testing.assert_allclose(pick(leaf.grad).numpy(),
                                   rope_np(g, -np.arange(12), inv_freq, layout),
                                   rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_torch_compile_fullgraph_of_the_functions(layout):
    torch._dynamo.reset()
    x = torch.as_tensor(qk(shape=(2, 3, 12, 16))[0])
    positions = torch.arange(5, 17)
    inv_freq = torch.as_tensor(rotary.rope_frequencies(12)[0])

    def both(x, positions):
        return (pt.apply_rope(x, positions, inv_freq, layout=layout),
                pt.apply_rope_2d(x, 3, 4, inv_freq[:4], layout=layout))
    compiled = torch.compile(both, fullgraph=True, backend="eager")
    for got, want in zip(compiled(x, positions), both(x, positions)):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


# --------------------------------------------------------------------------- the module

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("face", FACES)
def test_token_by_token_with_offsets_equals_the_full_pass(face, layout):
    q, k = qk(shape=(2, 3, 40, 16))
    rope = FACES[face].RotaryEmbedding(16, layout=layout, rotary_dim=12, max_len=8)
    full_q, full_k = (np32(t) for t in rope(tensor(face, q), tensor(face, k)))
    fresh = FACES[face].RotaryEmbedding(16, layout=layout, rotary_dim=12, max_len=8)
    for i in range(40):   # the cache grows from 8 rows as the offsets pass it
        step_q, step_k = fresh(tensor(face, q[:, :, i:i + 1]), tensor(face, k[:, :, i:i + 1]),
                               offset=i)
        np.testing.assert_array_equal(np32(step_q), full_q[:, :, i:i + 1])
        np.testing.assert_array_equal(np32(step_k), full_k[:, :, i:i + 1])
    explicit = rope(tensor(face, q), tensor(face, k), positions=tensor(face, np.arange(40)))
    np.testing.assert_allclose(np32(explicit[0]), full_q, rtol=1e-6, atol=1e-6)
    inv_freq, _ = rotary.rope_frequencies(12)
    np.testing.assert_allclose(full_q, np32(FACES[face].apply_rope(
        tensor(face, q), tensor(face, np.arange(40)), inv_freq, layout=layout)),
        rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("face", FACES)
def test_dynamic_module_follows_the_length_of_each_call(face):
    scaling = {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 16}
    q, k = qk(shape=(2, 3, 40, 16))
    rope = FACES[face].RotaryEmbedding(16, scaling=scaling)
    for offset, seq in ((0, 10), (0, 40), (30, 10)):
        inv_freq, _ = rotary.rope_frequencies(16, scaling=scaling, seq_len=offset + seq)
        got = rope(tensor(face, q[:, :, :seq]), tensor(face, k[:, :, :seq]), offset=offset)[0]
        want = rope_np(q[:, :, :seq], np.arange(offset, offset + seq), inv_freq, "half")
        np.testing.assert_allclose(np32(got), want, rtol=1e-5, atol=2e-5)
    short, _ = rotary.rope_frequencies(16)
    assert not np.allclose(rotary.rope_frequencies(16, scaling=scaling, seq_len=40)[0], short)


@pytest.mark.keras
def test_keras_cache_past_its_end_inside_a_traced_function():
    """Traced, the layer computes the rows it lacks (no value to store); eager, it grows."""
    if keras.backend.backend() != "tensorflow":
        pytest.skip("a tf.function trace")
    import tensorflow as tf
    q, _ = qk(shape=(2, 3, 10, 16))
    rope = pk.RotaryEmbedding(16, max_len=4)
    traced = tf.function(lambda t: rope(t, t, offset=3)[0], jit_compile=True)
    want = np32(pk.RotaryEmbedding(16)(q, q, offset=3)[0])
    np.testing.assert_allclose(np32(traced(q)), want, rtol=1e-6, atol=1e-6)
    assert rope._cos.shape[0] == 0
    np.testing.assert_array_equal(np32(rope(q, q, offset=3)[0]), want)
    assert rope._cos.shape[0] == 16


@pytest.mark.parametrize("face", FACES)
def test_yarn_module_scales_cos_and_sin(face):
    q, k = qk()
    scaling = SCALINGS["yarn"]
    rope = FACES[face].RotaryEmbedding(16, scaling=scaling)
    inv_freq, factor = rotary.rope_frequencies(16, scaling=scaling)
    assert factor > 1
    np.testing.assert_allclose(np32(rope(tensor(face, q), tensor(face, k))[0]),
                               factor * rope_np(q, np.arange(12), inv_freq, "half"),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.keras
def test_both_faces_agree_on_the_module():
    q, k = qk()
    for layout in LAYOUTS:
        args = {"layout": layout, "scaling": SCALINGS["llama3"], "base": 500.0}
        got = [[np32(t) for t in FACES[f].RotaryEmbedding(16, **args)(
            tensor(f, q), tensor(f, k), offset=5)] for f in FACES]
        for a, b in zip(*got):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- layouts

def qk_converter(face: str, impl: str):
    """``convert(wq, wk, num_heads, num_kv_heads, to=...) -> (wq, wk)``: posenc's conversion
    (each projection with its own head count) or the wrong code of a layout bug."""
    if impl == "rope-layout-gqa":
        return wrong_code(impl, face)
    one = FACES[face].convert_rope_layout if impl == "posenc" else wrong_code(impl, face)
    return lambda wq, wk, heads, kv_heads, *, to: (one(wq, heads, to=to),
                                                   one(wk, kv_heads, to=to))


LAYOUT_HEADS = ((2, 2), (4, 2))      # (query heads, key heads): multi-head and grouped-query


def layout_scores_error(face, convert) -> float:
    """Largest gap between the scores of q/k projections in one layout and those of their
    weights after ``convert(wq, wk, num_heads, num_kv_heads, to=...)`` in the other (both
    directions), with 2 query and 2 key heads and with 4 query heads sharing 2 key heads."""
    head_dim, dim, seq = 8, 12, 7
    rng = np.random.default_rng(3)
    h = rng.normal(size=(seq, dim)).astype(np.float32)
    m = FACES[face]
    inv_freq, _ = rotary.rope_frequencies(head_dim)
    gaps = []
    for heads, kv_heads in LAYOUT_HEADS:
        wq = rng.normal(size=(heads * head_dim, dim)).astype(np.float32)
        wk = rng.normal(size=(kv_heads * head_dim, dim)).astype(np.float32)

        def scores(wq, wk, layout):
            def project(w, n):
                x = (h @ np32(w).T).reshape(seq, n, head_dim).transpose(1, 0, 2)
                return np32(m.apply_rope(tensor(face, x), seq, inv_freq, layout=layout))
            k = np.repeat(project(wk, kv_heads), heads // kv_heads, axis=0)  # query h reads
            return project(wq, heads) @ k.transpose(0, 2, 1)                # key h // group

        for src, dst in (("interleaved", "half"), ("half", "interleaved")):
            converted = convert(tensor(face, wq), tensor(face, wk), heads, kv_heads, to=dst)
            gaps.append(np.abs(scores(*converted, dst) - scores(wq, wk, src)).max())
            # without the conversion the other layout computes other scores
            assert not np.allclose(scores(wq, wk, dst), scores(wq, wk, src), atol=1e-2)
    return float(max(gaps))


@pytest.mark.parametrize("face", FACES)
@and_the_bugs("rope-layout", "rope-layout-gqa")
def test_converted_weights_give_the_same_scores_in_the_other_layout(face, impl):
    assert layout_scores_error(face, qk_converter(face, impl)) < 1e-4
    m = FACES[face]
    wq = np.random.default_rng(3).normal(size=(16, 12)).astype(np.float32)
    back = m.convert_rope_layout(m.convert_rope_layout(tensor(face, wq), 2, to="half"),
                                 2, to="interleaved")
    np.testing.assert_array_equal(np32(back), wq)


# --------------------------------------------------------------------------- 2D

@pytest.mark.parametrize("face", FACES)
def test_axial_2d_scores_depend_only_on_the_2d_offset(face):
    height, width, head_dim = 4, 5, 16
    rng = np.random.default_rng(4)
    q = np.tile(rng.normal(size=(1, head_dim)).astype(np.float32), (height * width, 1))
    k = np.tile(rng.normal(size=(1, head_dim)).astype(np.float32), (height * width, 1))
    inv_freq, _ = rotary.rope_frequencies(head_dim // 2)
    m = FACES[face]
    qr = np32(m.apply_rope_2d(tensor(face, q), height, width, inv_freq))
    kr = np32(m.apply_rope_2d(tensor(face, k), height, width, inv_freq))
    s = (qr @ kr.T).reshape(height, width, height, width)
    # (0,0)-(1,2) and (2,1)-(3,3) share the offset (1, 2); (0,0)-(2,1) does not
    assert s[0, 0, 1, 2] == pytest.approx(s[2, 1, 3, 3], rel=1e-4, abs=1e-4)
    assert s[0, 0, 1, 2] != pytest.approx(s[0, 0, 2, 1], rel=1e-3)
    rows = rope_np(q[:, :8], np.arange(20) // width, inv_freq, "half")
    np.testing.assert_allclose(qr[:, :8], rows, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("face", FACES)
def test_rotary_embedding_2d_is_apply_rope_2d_on_q_and_k(face, layout):
    q, k = qk(shape=(2, 3, 20, 16))
    m = FACES[face]
    q_rot, k_rot = m.RotaryEmbedding2D(16, (4, 5), base=50.0, layout=layout)(
        tensor(face, q), tensor(face, k))
    inv_freq, _ = rotary.rope_frequencies(8, base=50.0)
    for got, x in ((q_rot, q), (k_rot, k)):
        np.testing.assert_array_equal(np32(got), np32(m.apply_rope_2d(
            tensor(face, x), 4, 5, inv_freq, layout=layout)))


# --------------------------------------------------------------------------- precision

POSITIONS_NEAR_64K = np.arange(65_536 - 8, 65_536 + 8)


POSITIONS_NEAR_4K = np.arange(4096 - 8, 4096 + 8)     # an ordinary context length


def bf16_error(face, rope) -> float:
    """Largest gap to float64 of ``rope(x, positions, inv_freq)`` on bfloat16 features, at 16
    positions near 4,096 and 16 near 65,536."""
    x, _ = qk(shape=(2, 2, 16, 64))
    inv_freq, _ = rotary.rope_frequencies(64)
    gaps = []
    for positions in (POSITIONS_NEAR_4K, POSITIONS_NEAR_64K):
        exact = rope_np(x, positions, inv_freq, "half")
        got = rope(tensor(face, x, "bfloat16"), tensor(face, positions), inv_freq)
        gaps.append(np.abs(np32(got) - exact).max())
    return float(max(gaps))


@pytest.mark.parametrize("face", FACES)
@and_the_bugs("bfloat16-positions")
def test_bfloat16_rope_stays_within_005_of_float64(face, impl):
    """bfloat16 features rotated at 16 positions near 4,096 and 16 near 65,536 stay within
    0.05 of the float64 rotation, and the layer's bfloat16 output within 0.05 of its float32
    output near 65,536."""
    rope = FACES[face].apply_rope if impl == "posenc" else wrong_code(impl, face)
    assert bf16_error(face, rope) < 0.05
    x, k = qk(shape=(2, 2, 16, 64))
    rope = FACES[face].RotaryEmbedding(64)
    exact = np32(rope(tensor(face, x), tensor(face, k), offset=65_528)[0])
    low = np32(rope(tensor(face, x, "bfloat16"), tensor(face, k, "bfloat16"), offset=65_528)[0])
    assert np.abs(low - exact).max() < 0.05


def test_bfloat16_autocast_keeps_float32_angles():
    x = torch.as_tensor(qk(shape=(2, 2, 16, 64))[0])
    inv_freq, _ = pt.rope_frequencies(64)
    positions = torch.as_tensor(POSITIONS_NEAR_64K)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = pt.apply_rope(x.bfloat16(), positions, inv_freq)
    exact = pt.apply_rope(x, positions, inv_freq)
    assert (low.float() - exact).abs().max() < 0.05


@pytest.mark.keras
def test_keras_mixed_bfloat16_layer_near_65536(mixed_bfloat16):
    x, k = qk(shape=(2, 2, 16, 64))
    rope = pk.RotaryEmbedding(64)
    q_rot, _ = rope(x, k, offset=65_528)
    assert keras.backend.standardize_dtype(q_rot.dtype) == "bfloat16"
    inv_freq, _ = rotary.rope_frequencies(64)
    assert np.abs(np32(q_rot) - rope_np(x, POSITIONS_NEAR_64K, inv_freq, "half")).max() < 0.05


# --------------------------------------------------------------------------- rope_config

def test_every_registry_entry_lists_its_keys():
    """A type's required keys are enough, and they are all keys the rules know."""
    values = {"factor": 2.0, "original_max_position_embeddings": 64, "low_freq_factor": 1.0,
              "high_freq_factor": 4.0, "short_factor": [1.0] * 4, "long_factor": [2.0] * 4}
    for name, spec in rotary.ROPE_SCALINGS.items():
        assert set(spec.keys()) <= set(rotary.ROPE_KEYS) | {"rope_type"}, name
        given = {"rope_type": name, **{key: values[key] for key in spec.required}}
        assert rotary.rope_config(given)["rope_type"] == name
        inv_freq, _ = rotary.rope_frequencies(8, scaling=given, seq_len=100)
        assert inv_freq.shape == (4,) and np.all(np.isfinite(inv_freq)), name


def test_rope_config_normalises_once():
    legacy = {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    config = rotary.rope_config(legacy)
    assert config == {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
                      "beta_fast": 32.0, "beta_slow": 1.0, "attention_factor": None,
                      "mscale": None, "mscale_all_dim": None, "truncate": True}
    assert rotary.rope_config(config) == config
    assert rotary.rope_config(None) == {"rope_type": "default"}
    assert rotary.rope_config({"rope_theta": 5e5}) == {"rope_type": "default", "rope_theta": 5e5}
    np.testing.assert_array_equal(rotary.rope_frequencies(16, scaling=config)[0],
                                  rotary.rope_frequencies(16, scaling=legacy)[0])


def test_rope_config_names_its_caller_and_argument():
    with pytest.raises(ValueError, match=r"^Transformer: rope_scaling\['factor'\] must be"):
        rotary.rope_config({"rope_type": "linear"}, what="Transformer", arg="rope_scaling")
    with pytest.raises(ValueError, match=r"^Transformer: rope_scaling\['beta_fst'\] is not a key"):
        rotary.rope_config({"rope_type": "yarn", "factor": 2.0, "beta_fst": 1.0,
                            "original_max_position_embeddings": 8},
                           what="Transformer", arg="rope_scaling")


@pytest.mark.parametrize("face", FACES)
def test_layer_takes_the_legacy_type_key(face):
    """``{"type": "dynamic"}`` (Hugging Face v4's key) is the dynamic layer, not a refusal."""
    new = {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 16}
    legacy = {"type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 16}
    q, k = qk(shape=(1, 2, 40, 16))
    want = np32(FACES[face].RotaryEmbedding(16, scaling=new)(tensor(face, q), tensor(face, k))[0])
    layer = FACES[face].RotaryEmbedding(16, scaling=legacy)
    assert layer.dynamic
    got = np32(layer(tensor(face, q), tensor(face, k))[0])
    np.testing.assert_array_equal(got, want)


# --------------------------------------------------------------------------- Hugging Face's v5 vocabulary

def test_rope_theta_inside_the_scaling_is_the_base():
    """It used to be ignored: base 10000 instead of 500000."""
    got, _ = rotary.rope_frequencies(8, scaling={"rope_type": "default", "rope_theta": 500000.0})
    np.testing.assert_array_equal(got, rotary.rope_frequencies(8, base=500000.0)[0])
    same, _ = rotary.rope_frequencies(8, base=500000.0, scaling={"rope_theta": 500000.0})
    np.testing.assert_array_equal(same, got)


def test_partial_rotary_factor_rotates_the_first_features_of_the_head():
    inv_freq, _ = rotary.rope_frequencies(96, scaling={"partial_rotary_factor": 0.25})
    np.testing.assert_array_equal(inv_freq, rotary.rope_frequencies(24)[0])
    # proportional keeps the whole head: the first pairs turn with exponents over 96, the rest 0
    p, _ = rotary.rope_frequencies(96, scaling={"rope_type": "proportional",
                                                "partial_rotary_factor": 0.25})
    assert p.shape == (48,) and np.all(p[12:] == 0)
    np.testing.assert_allclose(p[:12], rotary.rope_frequencies(96)[0][:12], rtol=1e-7)


@pytest.mark.parametrize("face", FACES)
def test_layer_with_partial_rotary_factor(face):
    q, k = qk(shape=(1, 2, 12, 16))
    layer = FACES[face].RotaryEmbedding(16, scaling={"partial_rotary_factor": 0.5})
    assert layer.rotary_dim == 8
    want = np32(FACES[face].RotaryEmbedding(16, rotary_dim=8)(tensor(face, q), tensor(face, k))[0])
    np.testing.assert_array_equal(np32(layer(tensor(face, q), tensor(face, k))[0]), want)


LONGROPE = {"rope_type": "longrope", "short_factor": [1.0, 1.5, 2.0, 3.0],
            "long_factor": [1.0, 4.0, 8.0, 16.0], "factor": 4.0,
            "original_max_position_embeddings": 16}


def test_longrope_switches_factors_past_the_original_length():
    base = rotary.rope_frequencies(8)[0].astype(np.float64)
    short, factor = rotary.rope_frequencies(8, scaling=LONGROPE, seq_len=16)
    long, _ = rotary.rope_frequencies(8, scaling=LONGROPE, seq_len=17)
    np.testing.assert_allclose(short, base / LONGROPE["short_factor"], rtol=1e-6)
    np.testing.assert_allclose(long, base / LONGROPE["long_factor"], rtol=1e-6)
    assert factor == pytest.approx(np.sqrt(1 + np.log(4.0) / np.log(16)))
    np.testing.assert_array_equal(rotary.rope_frequencies(8, scaling=LONGROPE)[0], short)


@pytest.mark.parametrize("face", FACES)
def test_longrope_layer_follows_the_length_of_each_call(face):
    q, k = qk(shape=(1, 2, 24, 8))
    layer = FACES[face].RotaryEmbedding(8, scaling=LONGROPE)
    for seq in (10, 24):
        inv_freq, factor = rotary.rope_frequencies(8, scaling=LONGROPE, seq_len=seq)
        got = layer(tensor(face, q[:, :, :seq]), tensor(face, k[:, :, :seq]))[0]
        want = factor * rope_np(q[:, :, :seq], np.arange(seq), inv_freq, "half")
        np.testing.assert_allclose(np32(got), want, rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("face", FACES)
def test_from_hf_config_builds_the_layer_of_the_config(face):
    config = {"hidden_size": 256, "num_attention_heads": 4, "max_position_embeddings": 2048,
              "partial_rotary_factor": 0.5, "rope_theta": 500000.0,
              "rope_scaling": {"type": "linear", "factor": 2.0}}
    layer = FACES[face].RotaryEmbedding.from_hf_config(config)
    assert (layer.head_dim, layer.rotary_dim, layer.base) == (64, 32, 500000.0)
    want = rotary.rope_frequencies(64, base=500000.0, scaling={
        "rope_type": "linear", "factor": 2.0, "partial_rotary_factor": 0.5})[0]
    np.testing.assert_array_equal(layer._inv_freq, want)
    np.testing.assert_array_equal(want, rotary.rope_frequencies(32, base=500000.0, scaling={
        "rope_type": "linear", "factor": 2.0})[0])


def test_hf_rope_needs_the_layer_type_where_the_layers_differ():
    config = {"hidden_size": 64, "num_attention_heads": 4, "layer_types": ["a", "b"],
              "rope_parameters": {"a": {"rope_type": "default", "rope_theta": 10.0},
                                  "b": {"rope_type": "linear", "factor": 2.0}}}
    assert rotary.hf_rope(config, layer_type="a")["base"] == 10.0
    with pytest.raises(ValueError, match="hf_rope: layer_type must be one of 'a', 'b'"):
        rotary.hf_rope(config)


# --------------------------------------------------------------------------- length-dependent types, exact angles

@pytest.mark.parametrize("face", FACES)
def test_dynamic_with_positions_scales_by_the_largest_position(face):
    """A cached tail (positions 200 .. 299) turns as the full pass of 300 does; it used to
    take the number of positions (100) as the length."""
    scaling = {"rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": 64}
    q, k = qk(shape=(1, 2, 300, 16))
    layer = FACES[face].RotaryEmbedding(16, scaling=scaling)
    full = np32(layer(tensor(face, q), tensor(face, k))[0])
    tail = layer(tensor(face, q[:, :, 200:]), tensor(face, k[:, :, 200:]),
                 positions=tensor(face, np.arange(200, 300)))[0]
    np.testing.assert_allclose(np32(tail), full[:, :, 200:], rtol=1e-5, atol=2e-5)


@pytest.mark.keras
def test_keras_dynamic_traced_with_an_unknown_length_follows_it():
    """Traced with a length unknown until the call, the dynamic frequencies follow it in the
    graph; they used to be those of max_len (2048 positions)."""
    if keras.backend.backend() != "tensorflow":
        pytest.skip("a tf.function trace")
    import tensorflow as tf
    for scaling in ({"rope_type": "dynamic", "factor": 4.0,
                     "original_max_position_embeddings": 64}, LONGROPE):
        q, _ = qk(shape=(1, 2, 300, 8))
        layer = pk.RotaryEmbedding(8, scaling=scaling)
        traced = tf.function(lambda t, layer=layer: layer(t, t)[0],
                             input_signature=[tf.TensorSpec((1, 2, None, 8), tf.float32)])
        for seq in (40, 300):
            want = np32(layer(q[:, :, :seq], q[:, :, :seq])[0])
            np.testing.assert_allclose(np32(traced(q[:, :, :seq])), want, rtol=1e-5, atol=1e-5)


BIG = np.array([1_000_000, 9_999_999, 10_000_000, 10_000_001, 16_777_217, 2**31 - 1])


def reference_rotation(x, positions, inv_freq64):
    """``x`` rotated in float64 (half layout)."""
    angles = positions[:, None].astype(np.float64) * inv_freq64
    cos, sin = np.cos(angles), np.sin(angles)
    n = inv_freq64.shape[0]
    a, b = x[..., :n].astype(np.float64), x[..., n:2 * n].astype(np.float64)
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


@pytest.mark.parametrize("face", FACES)
def test_exact_angles_match_float64_at_ten_million(face):
    inv_freq64 = 1.0 / 500000.0 ** (np.arange(0, 128, 2) / 128)
    x = qk(shape=(1, 1, len(BIG), 128))[0]
    want = reference_rotation(x, BIG, inv_freq64)
    m = FACES[face]
    positions = tensor(face, BIG.astype(np.int32))
    plain = np32(m.apply_rope(tensor(face, x), positions, inv_freq64.astype(np.float32)))
    assert np.abs(plain - want).max() > 0.1   # the float32 angles: off by tenths of a radian
    exact = np32(m.apply_rope(tensor(face, x), positions, inv_freq64, exact=True))
    np.testing.assert_allclose(exact, want, rtol=0, atol=2e-5)
    layer = m.RotaryEmbedding(128, base=500000.0, exact=True)
    got = np32(layer(tensor(face, x), tensor(face, x), positions=positions)[0])
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5)


@pytest.mark.parametrize("face", FACES)
def test_exact_angles_equal_the_plain_ones_at_small_positions(face):
    q, k = qk(shape=(2, 3, 50, 16))
    for scaling in (None, {"rope_type": "dynamic", "factor": 2.0,
                           "original_max_position_embeddings": 16}):
        plain = FACES[face].RotaryEmbedding(16, scaling=scaling)
        exact = FACES[face].RotaryEmbedding(16, scaling=scaling, exact=True)
        for offset, seq in ((0, 50), (7, 10)):
            want = np32(plain(tensor(face, q[:, :, :seq]), tensor(face, k[:, :, :seq]),
                              offset=offset)[0])
            got = np32(exact(tensor(face, q[:, :, :seq]), tensor(face, k[:, :, :seq]),
                             offset=offset)[0])
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
    inv_freq, _ = rotary.rope_frequencies(16)
    floats = np.arange(50, dtype=np.float32) * 0.75 - 3.0
    np.testing.assert_allclose(
        np32(FACES[face].apply_rope(tensor(face, q), tensor(face, floats), inv_freq, exact=True)),
        np32(FACES[face].apply_rope(tensor(face, q), tensor(face, floats), inv_freq)),
        rtol=0, atol=1e-5)


def test_angles_docstring_states_the_bfloat16_rounding_it_guards_against():
    # The docstring once said "wrong by up to 128 radians" at 65,536, where the step is 512.
    import posenc.torch.rotary as tr

    positions = torch.arange(32768, 131072, dtype=torch.float32)
    error = (positions.to(torch.bfloat16).float() - positions).abs()
    below, above = error[positions < 65536].max().item(), error[positions >= 65536].max().item()
    text = " ".join(tr._angles.__doc__.split())
    assert (below, above) == (128.0, 256.0)
    assert f"up to {below:.0f} and {above:.0f} radians" in text
    assert "65,536 is wrong by up to 128" not in text


@pytest.mark.parametrize("face", FACES)
def test_a_length_known_only_in_the_graph_gives_the_eager_angles_with_rope_theta_in_scaling(face):
    """Dynamic NTK's frequencies for a length the graph holds as a tensor (the path a compiled
    or traced call takes) equal the eager ones when the scaling carries its own rope_theta:
    the base is resolved once, rope_theta winning over the base argument's default."""
    scaling = {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 16,
               "rope_theta": 500000.0}
    rope = FACES[face].RotaryEmbedding(64, scaling=scaling)
    length = 40
    if face == "torch":
        positions = torch.arange(length)
        eager = rope._angles(positions, length)
        traced = rope._angles(positions, torch.tensor(length))
    else:
        from keras import ops

        positions = ops.arange(length)
        eager = rope._angles(positions, length)
        traced = rope._angles(positions, ops.convert_to_tensor(length))
    for a, b in zip(eager, traced, strict=True):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-5)
