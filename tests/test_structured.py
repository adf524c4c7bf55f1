"""Continuous-time, tree, multimodal and low-rank encodings, in both faces."""

import re

import keras
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from keras import ops

import posenc.keras as ks
import posenc.torch as ts
from posenc.interop import copy_weights
from posenc.torch._util import can_inspect
from posenc.keras.sinusoidal import sinusoidal as k_sinusoidal
from posenc.keras.sinusoidal import sinusoidal_2d as k_sinusoidal_2d
from posenc.torch.sinusoidal import sinusoidal as t_sinusoidal
from posenc.torch.sinusoidal import sinusoidal_2d as t_sinusoidal_2d
from faces import np32, same_error, tensor
import reference as ref

FACES = {"torch": ts, "keras": ks}


# --------------------------------------------------------------------------- helpers


def rotate(pe, angle_per_pair, layout):
    """Rotate each (sin, cos) pair of ``pe`` forward by its angle: PE(p) -> PE(p + c)."""
    half = pe.shape[-1] // 2
    if layout == "interleaved":
        s, c = pe[..., 0::2], pe[..., 1::2]
    else:
        s, c = pe[..., :half], pe[..., half:]
    cs, sn = np.cos(angle_per_pair), np.sin(angle_per_pair)
    s2, c2 = s * cs + c * sn, c * cs - s * sn
    if layout == "interleaved":
        out = np.empty_like(pe)
        out[..., 0::2], out[..., 1::2] = s2, c2
        return out
    return np.concatenate((s2, c2), axis=-1)


def ref_hierarchical(paths, dim, max_depth, base=10000.0):
    paths = np.asarray(paths)
    w = dim // max_depth
    out = np.zeros(paths.shape[:-1] + (dim,))
    for level in range(max_depth):
        idx = paths[..., level]
        block = ref.sinusoidal(np.maximum(idx, 0), w, base)
        out[..., level * w:(level + 1) * w] = block * (idx >= 0)[..., None]
    return out


def ref_modality_positions(ids):
    ids = np.asarray(ids)
    out = np.zeros_like(ids)
    for index in np.ndindex(ids.shape[:-1]):
        seen = {}
        for i, m in enumerate(ids[index]):
            out[index + (i,)] = seen.get(m, 0)
            seen[m] = seen.get(m, 0) + 1
    return out


def random_paths(rng, shape, max_depth, max_children):
    """Valid paths: a random depth in 1..max_depth, then -1 padding."""
    depth = rng.integers(1, max_depth + 1, size=shape)
    idx = rng.integers(0, max_children, size=shape + (max_depth,))
    return np.where(np.arange(max_depth) < depth[..., None], idx, -1)


# --------------------------------------------------------------------------- layer harness
# Every module/layer, its arguments, and the extra call inputs after x (NumPy, with
# the Keras Input spec for symbolic models).

SEQ, DIM, BATCH = 5, 12, 2


def _timestamps(rng):
    return np.cumsum(rng.uniform(0.1, 2.0, size=(BATCH, SEQ)), axis=-1).astype(np.float32)


def _paths(rng):
    return random_paths(rng, (BATCH, SEQ), 3, 4).astype(np.int32)


def _ids(rng):
    return rng.integers(0, 3, size=(BATCH, SEQ)).astype(np.int32)


CASES = {
    "continuous_time": ("ContinuousTimeEncoding", (DIM,), {"time_scale": 0.5},
                        [(_timestamps, (SEQ,), "float32")]),
    "time2vec": ("Time2Vec", (DIM,), {}, [(_timestamps, (SEQ,), "float32")]),
    "hierarchical": ("HierarchicalEncoding", (3, 4, DIM), {}, [(_paths, (SEQ, 3), "int32")]),
    "multimodal_shared": ("MultimodalEncoding", (DIM,),
                          {"num_modalities": 3, "max_len": 8, "mode": "shared"},
                          [(_ids, (SEQ,), "int32")]),
    "multimodal_per_modality": ("MultimodalEncoding", (DIM,),
                                {"num_modalities": 3, "max_len": 8, "mode": "per_modality"},
                                [(_ids, (SEQ,), "int32")]),
    "multimodal_shared_offset": ("MultimodalEncoding", (DIM,),
                                 {"num_modalities": 3, "max_len": 8},
                                 [(_ids, (SEQ,), "int32")]),
    "low_rank": ("LowRankEncoding", (8, DIM), {"rank": 3}, []),
}


def make(face, case, **extra_kwargs):
    name, args, kwargs, _ = CASES[case]
    return getattr(FACES[face], name)(*args, **kwargs, **extra_kwargs)


def inputs(case, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(BATCH, SEQ, DIM)).astype(np.float32)
    return x, [make_extra(rng) for make_extra, _, _ in CASES[case][3]]


def run(face, layer, x, extras):
    return layer(tensor(face, x), *[tensor(face, e) for e in extras])


ALL = sorted(CASES)


@pytest.mark.parametrize("case", ALL)
def test_parity_given_the_same_weights_both_directions(case):
    x, extras = inputs(case)
    for src_face, dst_face in (("torch", "keras"), ("keras", "torch")):
        src, dst = make(src_face, case), make(dst_face, case)
        run(src_face, src, x, extras)
        run(dst_face, dst, x, extras)  # builds the Keras layer before copying
        copy_weights(src, dst)
        np.testing.assert_allclose(np32(run(dst_face, dst, x, extras)),
                                   np32(run(src_face, src, x, extras)), atol=1e-5, rtol=0)


@pytest.mark.parametrize("case", ALL)
def test_weight_names_and_shapes_match_between_faces(case):
    t, k = make("torch", case), make("keras", case)
    t_names = {n: tuple(p.shape) for n, p in t.named_parameters()}
    k_names = {w.path.split("/")[-1]: tuple(w.shape) for w in k.weights}
    assert t_names == k_names


@pytest.mark.parametrize("case", ALL)
def test_keras_config_round_trip(case):
    layer = make("keras", case)
    clone = type(layer).from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    x, extras = inputs(case)
    clone.set_weights(layer.get_weights())
    np.testing.assert_array_equal(np32(run("keras", clone, x, extras)),
                                  np32(run("keras", layer, x, extras)))


def _model(case, layer):
    x_in = keras.Input((SEQ, DIM))
    extra_in = [keras.Input(shape, dtype=dtype) for _, shape, dtype in CASES[case][3]]
    return keras.Model([x_in, *extra_in], layer(x_in, *extra_in))


@pytest.mark.parametrize("case", ALL)
def test_keras_symbolic_shapes(case):
    model = _model(case, make("keras", case))
    assert tuple(model.outputs[0].shape) == (None, SEQ, DIM)


@pytest.mark.parametrize("case", ALL)
def test_keras_save_and_load_inside_a_model(case, tmp_path):
    model = _model(case, make("keras", case))
    x, extras = inputs(case)
    expected = np32(model.predict([x, *extras], verbose=0))
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(np32(loaded.predict([x, *extras], verbose=0)), expected,
                               atol=1e-6, rtol=0)


@pytest.mark.parametrize("case", ALL)
def test_keras_training_step_updates_the_weights(case):
    layer = make("keras", case)
    x_in = keras.Input((SEQ, DIM))
    extra_in = [keras.Input(shape, dtype=dtype) for _, shape, dtype in CASES[case][3]]
    h = keras.layers.Dense(DIM, name="proj")(x_in)
    model = keras.Model([x_in, *extra_in], layer(h, *extra_in))
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    x, extras = inputs(case)
    target = np.random.default_rng(1).normal(size=x.shape).astype(np.float32)
    watched = layer.weights or model.get_layer("proj").weights
    before = [np.array(w.numpy()) for w in watched]
    history = model.fit([x, *extras], target, epochs=1, batch_size=BATCH, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert all(not np.allclose(b, w.numpy()) for b, w in zip(before, watched))


@pytest.mark.parametrize("case", ALL)
def test_torch_training_step_reaches_every_parameter(case):
    module = make("torch", case)
    x, extras = inputs(case)
    xt = torch.tensor(x, requires_grad=True)
    out = module(xt, *[torch.as_tensor(e) for e in extras])
    out.square().mean().backward()
    assert xt.grad is not None
    for name, p in module.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    before = {n: p.detach().clone() for n, p in module.named_parameters()}
    if not before:  # weightless: the gradient reaching x is the whole story
        return
    torch.optim.SGD(module.parameters(), lr=0.1).step()
    for n, p in module.named_parameters():
        assert not torch.equal(before[n], p), n


@pytest.mark.parametrize("case", ALL)
def test_torch_state_dict_round_trip(case):
    src, dst = make("torch", case), make("torch", case)
    dst.load_state_dict(src.state_dict())
    assert set(src.state_dict()) == {n for n, _ in src.named_parameters()}
    x, extras = inputs(case)
    torch.testing.assert_close(run("torch", dst, x, extras), run("torch", src, x, extras),
                               rtol=0, atol=0)


@pytest.mark.parametrize("case", ALL)
def test_keras_mixed_precision(case, mixed_bfloat16):
    keras.utils.set_random_seed(0)  # fixed weights: Time2Vec's linear channel is unbounded
    mixed = make("keras", case)
    keras.mixed_precision.set_global_policy("float32")
    full = make("keras", case)
    x, extras = inputs(case)
    run("keras", mixed, x, extras)
    run("keras", full, x, extras)
    copy_weights(full, mixed)
    out = run("keras", mixed, x, extras)
    assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"
    assert all(keras.backend.standardize_dtype(w.dtype) == "float32" for w in mixed.weights)
    np.testing.assert_allclose(np32(out), np32(run("keras", full, x, extras)),
                               atol=3e-2, rtol=1e-2)


@pytest.mark.parametrize("case", ALL)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_torch_dtypes(case, dtype):
    module = make("torch", case)
    x, extras = inputs(case)
    ref = run("torch", module, x, extras)
    xt = torch.as_tensor(x).to(getattr(torch, dtype))
    out = module(xt, *[torch.as_tensor(e) for e in extras])
    assert out.dtype == xt.dtype and out.shape == xt.shape
    torch.testing.assert_close(out.float(), ref, atol=3e-2, rtol=1e-2)
    # weights in bfloat16 too: P is still computed in float32, then cast
    module.to(getattr(torch, dtype))
    assert module(xt, *[torch.as_tensor(e) for e in extras]).dtype == xt.dtype


@pytest.mark.parametrize("case", ALL)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_keras_dtypes(case, dtype):
    full = make("keras", case)
    layer = make("keras", case, dtype=dtype)
    layer.set_weights(full.get_weights())
    x, extras = inputs(case)
    out = run("keras", layer, x, extras)
    assert keras.backend.standardize_dtype(out.dtype) == dtype
    np.testing.assert_allclose(np32(out), np32(run("keras", full, x, extras)),
                               atol=3e-2, rtol=1e-2)


# --------------------------------------------------------------------------- continuous time

@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("layout", ["interleaved", "concat"])
def test_continuous_time_equals_sinusoid_of_scaled_time(face, layout):
    t = np.array([[0.0, 0.37, 1.5, 9.25], [2.0, 2.01, 40.0, 1000.125]], dtype=np.float32)
    enc = FACES[face].ContinuousTimeEncoding(8, time_scale=0.25, layout=layout)
    expected = ref.sinusoidal(t.astype(np.float64) / 0.25, 8, layout=layout)
    np.testing.assert_allclose(np32(enc.encoding(tensor(face, t))), expected, atol=1e-6)
    sinus = t_sinusoidal if face == "torch" else k_sinusoidal
    np.testing.assert_allclose(np32(enc.encoding(tensor(face, t))),
                               np32(sinus(tensor(face, t / 0.25), 8, layout=layout)), atol=1e-6)
    x = np.random.default_rng(0).normal(size=(2, 4, 8)).astype(np.float32)
    np.testing.assert_allclose(np32(enc(tensor(face, x), tensor(face, t))),
                               x + expected, atol=1e-6)


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("layout", ["interleaved", "concat"])
def test_continuous_time_shift_is_one_rotation_for_every_token(face, layout):
    rng = np.random.default_rng(3)
    dim, time_scale, shift = 16, 0.5, 3.7
    t = np.cumsum(rng.uniform(0.01, 3.0, size=(3, 7)), axis=-1)  # irregular float times
    enc = FACES[face].ContinuousTimeEncoding(dim, time_scale=time_scale, layout=layout)
    before = np32(enc.encoding(tensor(face, t)))
    after = np32(enc.encoding(tensor(face, t + shift)))
    angles = shift / time_scale * 10000.0 ** (-np.arange(0, dim, 2) / dim)
    np.testing.assert_allclose(after, rotate(before, angles, layout), atol=2e-5)
    # ... so dot products depend only on time differences
    assert not np.allclose(after, before, atol=1e-2)
    np.testing.assert_allclose(np.einsum("bid,bjd->bij", after, after),
                               np.einsum("bid,bjd->bij", before, before), atol=1e-4)


@pytest.mark.parametrize("face", FACES)
def test_continuous_time_keeps_fractions_of_large_timestamps(face):
    t = np.array([1_000_000.25, 1_000_000.5, 1_048_576.75], dtype=np.float32)
    enc = FACES[face].ContinuousTimeEncoding(8)
    np.testing.assert_allclose(np32(enc.encoding(tensor(face, t))),
                               ref.sinusoidal(t.astype(np.float64), 8), atol=1e-5)


@pytest.mark.parametrize("face", FACES)
def test_continuous_time_integer_timestamps_equal_float_ones(face):
    enc = FACES[face].ContinuousTimeEncoding(8, time_scale=2.0)
    np.testing.assert_array_equal(np32(enc.encoding(tensor(face, np.arange(5)))),
                                  np32(enc.encoding(tensor(face, np.arange(5.0)))))


@pytest.mark.parametrize("face", FACES)
def test_continuous_time_errors(face):
    cls = FACES[face].ContinuousTimeEncoding
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match=r"time_scale must be greater than 0.*time_scale="):
            cls(8, time_scale=bad)
    with pytest.raises(ValueError, match="time_scale must be finite"):
        cls(8, time_scale=float("inf"))
    with pytest.raises(ValueError, match="dim must be a multiple of 2"):
        cls(7)
    enc = cls(8)
    x = tensor(face, np.zeros((2, 4, 8), np.float32))
    with pytest.raises(ValueError, match="one time per token"):
        enc(x, tensor(face, np.zeros(5, np.float32)))
    with pytest.raises(ValueError, match=r"timestamps must have shape \(seq,\) or \(batch, seq\)"):
        enc(x, tensor(face, np.zeros((2, 4, 1), np.float32)))
    with pytest.raises(ValueError, match=r"x must be \(\.\.\., seq, dim\) with dim=8"):
        enc(tensor(face, np.zeros((2, 4, 6), np.float32)), tensor(face, np.zeros(4, np.float32)))


# --------------------------------------------------------------------------- Time2Vec

@pytest.mark.parametrize("face", FACES)
def test_time2vec_formula(face):
    dim = 6
    layer = FACES[face].Time2Vec(dim)
    t = np.array([[0.0, 0.5, 2.25], [1.0, -3.0, 10.0]], dtype=np.float32)
    layer(tensor(face, np.zeros((2, 3, dim), np.float32)), tensor(face, t))
    freq = np.linspace(-2.0, 2.0, dim).astype(np.float32)
    phase = np.linspace(0.3, -0.7, dim).astype(np.float32)
    if face == "torch":
        with torch.no_grad():
            layer.frequency.copy_(torch.as_tensor(freq))
            layer.phase.copy_(torch.as_tensor(phase))
    else:
        layer.frequency.assign(freq)
        layer.phase.assign(phase)
    lin = t[..., None].astype(np.float64) * freq + phase
    expected = np.concatenate((lin[..., :1], np.sin(lin[..., 1:])), axis=-1)
    out = np32(layer.encoding(tensor(face, t)))
    np.testing.assert_allclose(out, expected, atol=1e-5)
    assert np.abs(out[..., 1:]).max() <= 1.0
    assert out.shape == (2, 3, dim)


@pytest.mark.parametrize("face", FACES)
def test_time2vec_errors(face):
    with pytest.raises(ValueError, match="dim must be a positive integer"):
        FACES[face].Time2Vec(0)


# --------------------------------------------------------------------------- hierarchical

@settings(max_examples=25, deadline=None)
@given(max_depth=st.integers(1, 4), half_width=st.integers(1, 4),
       lead=st.lists(st.integers(1, 3), min_size=0, max_size=2), seed=st.integers(0, 2**16))
def test_hierarchical_matches_reference_in_both_faces(max_depth, half_width, lead, seed):
    dim = 2 * half_width * max_depth
    paths = random_paths(np.random.default_rng(seed), tuple(lead), max_depth, 50)
    expected = ref_hierarchical(paths, dim, max_depth)
    for face in FACES:
        out = FACES[face].hierarchical(tensor(face, paths), dim, max_depth=max_depth)
        assert tuple(out.shape) == tuple(lead) + (dim,)
        np.testing.assert_allclose(np32(out), expected, atol=1e-6)


def test_hierarchical_torch_keras_parity():
    paths = random_paths(np.random.default_rng(0), (4, 9), 3, 1000)
    np.testing.assert_allclose(
        np32(ts.hierarchical(torch.as_tensor(paths), 24, max_depth=3, base=500.0)),
        np32(ks.hierarchical(ops.convert_to_tensor(paths), 24, max_depth=3, base=500.0)),
        atol=1e-5)


@pytest.mark.parametrize("face", FACES)
def test_hierarchical_siblings_share_the_parents_channels(face):
    # root's children 2 and 5, and two children of node [2]
    paths = np.array([[2, -1, -1], [5, -1, -1], [2, 0, -1], [2, 7, -1], [2, 7, 3]])
    pe = np32(FACES[face].hierarchical(tensor(face, paths), 12, max_depth=3))
    w = 4
    parent, child_a, child_b, grandchild = pe[0], pe[2], pe[3], pe[4]
    np.testing.assert_array_equal(child_a[:w], parent[:w])   # the parent's level
    np.testing.assert_array_equal(child_b[:w], parent[:w])
    assert not np.allclose(child_a[w:2 * w], child_b[w:2 * w])  # their own level differs
    np.testing.assert_array_equal(parent[w:], 0.0)          # padded levels are zero
    np.testing.assert_array_equal(grandchild[:2 * w], child_b[:2 * w])
    assert not np.allclose(pe[0][:w], pe[1][:w])             # root-level siblings differ


@pytest.mark.parametrize("face", FACES)
def test_hierarchical_errors(face):
    fn = FACES[face].hierarchical
    good = tensor(face, np.array([[0, 1, -1]]))
    with pytest.raises(ValueError, match=r"dim must be a multiple of 2 \* max_depth = 6.*dim=9"):
        fn(good, 9, max_depth=3)
    with pytest.raises(ValueError, match=r"dim must be a multiple of 2 \* max_depth = 6.*is odd"):
        fn(good, 3 * 3, max_depth=3)
    with pytest.raises(ValueError, match=r"paths must have shape \(\.\.\., max_depth\).*pad"):
        fn(tensor(face, np.array([[0, 1]])), 12, max_depth=3)
    with pytest.raises(ValueError, match=r"build it with max_depth=4"):
        fn(tensor(face, np.array([[0, 1, 2, 3]])), 12, max_depth=3)
    with pytest.raises(ValueError, match="got the value -2"):
        fn(tensor(face, np.array([[0, -2, -1]])), 12, max_depth=3)
    with pytest.raises(ValueError, match="child index after a -1"):
        fn(tensor(face, np.array([[0, -1, 4]])), 12, max_depth=3)
    with pytest.raises(ValueError, match="must be integers, got dtype float32"):
        fn(tensor(face, np.array([[0.0, 1.0, -1.0]], np.float32)), 12, max_depth=3)


@pytest.mark.parametrize("face", FACES)
def test_hierarchical_encoding_sums_one_row_per_level(face):
    enc = FACES[face].HierarchicalEncoding(3, 4, 8)
    paths = np.array([[1, -1, -1], [1, 3, -1], [1, 3, 0], [1, 2, -1]])
    out = np32(enc.encoding(tensor(face, paths)))
    tables = (enc.level_tables.detach().numpy() if face == "torch"
              else np.asarray(enc.level_tables.numpy()))
    np.testing.assert_allclose(out[0], tables[0, 1], atol=1e-7)
    np.testing.assert_allclose(out[1], tables[0, 1] + tables[1, 3], atol=1e-7)
    np.testing.assert_allclose(out[2], tables[0, 1] + tables[1, 3] + tables[2, 0], atol=1e-7)
    # a child is its parent plus its own row; siblings share the parent's part
    np.testing.assert_allclose(out[1] - out[0], tables[1, 3], atol=1e-7)
    np.testing.assert_allclose(out[3] - out[0], tables[1, 2], atol=1e-7)


@pytest.mark.parametrize("face", FACES)
def test_hierarchical_encoding_bounds(face):
    enc = FACES[face].HierarchicalEncoding(2, 3, 8)
    x = tensor(face, np.zeros((1, 2, 8), np.float32))
    with pytest.raises(ValueError, match=r"child index 3 is out of range for max_children=3"
                                         r".*max_children=4"):
        enc(x, tensor(face, np.array([[0, 3], [1, -1]])))
    with pytest.raises(ValueError, match=r"max_depth=2, got paths.shape=\(2, 3\)"):
        enc(x, tensor(face, np.array([[0, 1, 1], [1, -1, -1]])))
    with pytest.raises(ValueError, match="max_children must be a positive integer"):
        FACES[face].HierarchicalEncoding(2, 0, 8)


# --------------------------------------------------------------------------- modalities

@settings(max_examples=25, deadline=None)
@given(lead=st.lists(st.integers(1, 3), min_size=0, max_size=2), seq=st.integers(1, 12),
       num_modalities=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_modality_positions_count_within_each_modality(lead, seq, num_modalities, seed):
    ids = np.random.default_rng(seed).integers(0, num_modalities, size=(*lead, seq))
    expected = ref_modality_positions(ids)
    for face in FACES:
        for kwargs in ({}, {"num_modalities": num_modalities}):
            out = FACES[face].modality_positions(tensor(face, ids), **kwargs)
            assert tuple(out.shape) == ids.shape
            np.testing.assert_array_equal(np.asarray(np32(out), dtype=np.int64), expected)


@pytest.mark.parametrize("face", FACES)
def test_modality_positions_example_and_errors(face):
    fn = FACES[face].modality_positions
    ids = tensor(face, np.array([0, 0, 1, 1, 1, 0]))
    np.testing.assert_array_equal(np32(fn(ids)), [0, 1, 0, 1, 2, 2])
    np.testing.assert_array_equal(np32(fn(tensor(face, np.array([7, -3, 7])))), [0, 0, 1])
    with pytest.raises(ValueError, match=r"modality_ids must lie in 0 \.\. 1, got 2"):
        fn(tensor(face, np.array([0, 2])), num_modalities=2)
    with pytest.raises(ValueError, match="must be integers"):
        fn(tensor(face, np.array([0.0, 1.0], np.float32)))


@pytest.mark.parametrize("face", FACES)
def test_multimodal_modes(face):
    mod = FACES[face]
    rng = np.random.default_rng(0)
    ids = np.array([[0, 0, 1, 1, 2, 0], [2, 2, 2, 1, 0, 0]])
    pos = ref_modality_positions(ids)
    x = rng.normal(size=(2, 6, 8)).astype(np.float32)
    sin = ref.sinusoidal(pos, 8)
    shared = mod.MultimodalEncoding(8, num_modalities=3, max_len=4, mode="shared")
    np.testing.assert_allclose(np32(shared(tensor(face, x), tensor(face, ids), tensor(face, pos))),
                               x + sin, atol=1e-6)
    # the default positions are 0 .. seq-1 over the whole sequence, whatever the modality
    # (the ids are unused in this mode, so P has the positions' shape)
    np.testing.assert_allclose(np32(shared.encoding(tensor(face, ids))),
                               ref.sinusoidal(np.arange(6), 8), atol=1e-6)

    per = mod.MultimodalEncoding(8, num_modalities=3, max_len=4, mode="per_modality")
    table = np32(per.modality_tables)
    np.testing.assert_allclose(np32(per.encoding(tensor(face, ids), tensor(face, pos))),
                               table[ids, pos], atol=1e-7)

    offset = mod.MultimodalEncoding(8, num_modalities=3, max_len=4)
    emb = np32(offset.modality_embedding)
    np.testing.assert_allclose(np32(offset.encoding(tensor(face, ids), tensor(face, pos))),
                               sin + emb[ids], atol=1e-6)


@pytest.mark.parametrize("face", FACES)
def test_multimodal_weights_per_mode(face):
    def names(layer):
        if face == "torch":
            return {n: tuple(p.shape) for n, p in layer.named_parameters()}
        return {w.path.split("/")[-1]: tuple(w.shape) for w in layer.weights}

    def make_mm(mode):
        return FACES[face].MultimodalEncoding(8, num_modalities=3, max_len=5, mode=mode)

    assert names(make_mm("shared")) == {}
    assert names(make_mm("per_modality")) == {"modality_tables": (3, 5, 8)}
    assert names(make_mm("shared_offset")) == {"modality_embedding": (3, 8)}


@pytest.mark.parametrize("face", FACES)
def test_multimodal_errors(face):
    cls = FACES[face].MultimodalEncoding
    with pytest.raises(ValueError, match="mode must be one of 'shared', 'per_modality', "
                                         "'shared_offset', got mode='concat'"):
        cls(8, num_modalities=2, max_len=4, mode="concat")
    with pytest.raises(ValueError, match=r"MultimodalEncoding\(mode='shared'\): dim must be a "
                                         r"multiple of 2"):
        cls(7, num_modalities=2, max_len=4, mode="shared")
    cls(7, num_modalities=2, max_len=4, mode="per_modality")  # no sinusoid: odd dim is fine
    enc = cls(8, num_modalities=2, max_len=4, mode="per_modality")
    x = tensor(face, np.zeros((1, 3, 8), np.float32))
    with pytest.raises(ValueError, match=r"modality_ids must lie in 0 \.\. 1, got 2.*"
                                         r"num_modalities=3"):
        enc(x, tensor(face, np.array([0, 1, 2])))
    with pytest.raises(ValueError, match=r"positions must lie in 0 \.\. 3, got 4.*max_len"):
        enc(x, tensor(face, np.array([0, 1, 1])), tensor(face, np.array([0, 1, 4])))
    with pytest.raises(ValueError, match="sequence length 5 exceeds the table's max_len=4"):
        enc(tensor(face, np.zeros((1, 5, 8), np.float32)), tensor(face, np.zeros(5, np.int32)))
    with pytest.raises(ValueError, match="positions index a table, so they must be integers"):
        enc(x, tensor(face, np.array([0, 1, 1])), tensor(face, np.array([0.0, 1.0, 2.0])))
    with pytest.raises(ValueError, match=r"modality_ids must have shape \(seq,\) or \(batch, seq\)"):
        enc(x, tensor(face, np.zeros((1, 1, 3), np.int32)))


@pytest.mark.parametrize("face", FACES)
def test_multimodal_text_and_image_example(face):
    """The docstring's recipe: patches carry a 2D code and share one 1D offset."""
    dim, rows, cols = 16, 3, 4
    rng = np.random.default_rng(0)
    text = rng.normal(size=(2, 5, dim)).astype(np.float32)
    patches = rng.normal(size=(2, rows * cols, dim)).astype(np.float32)
    grid = np32((t_sinusoidal_2d if face == "torch" else k_sinusoidal_2d)(rows, cols, dim))
    x = np.concatenate((text, patches + grid), axis=1)
    ids = np.array([0] * 5 + [1] * rows * cols)
    positions = np.where(ids == 0, np32(FACES[face].modality_positions(tensor(face, ids))), 0)
    enc = FACES[face].MultimodalEncoding(dim, num_modalities=2, max_len=64)
    out = np32(enc(tensor(face, x), tensor(face, ids), tensor(face, positions.astype(np.int64))))
    emb = np32(enc.modality_embedding)
    added = out - x
    np.testing.assert_allclose(added[:, :5], np.broadcast_to(
        ref.sinusoidal(np.arange(5), dim) + emb[0], (2, 5, dim)), atol=1e-6)
    np.testing.assert_allclose(added[:, 5:], np.broadcast_to(ref.sinusoidal(np.asarray(0), dim) + emb[1],
                                                             (2, rows * cols, dim)), atol=1e-6)
    # so the patches differ only by their content and their 2D code
    np.testing.assert_allclose(out[:, 6:] - out[:, 5:6],
                               (patches + grid)[:, 1:] - (patches + grid)[:, :1], atol=1e-5)


# --------------------------------------------------------------------------- low rank

@pytest.mark.parametrize("face", FACES)
def test_low_rank_parameter_count_and_rank(face):
    enc = FACES[face].LowRankEncoding(40, 24, rank=5)
    count = (sum(p.numel() for p in enc.parameters()) if face == "torch"
             else enc.count_params())
    assert count == 5 * (40 + 24)
    table = np32(enc.encoding(40))
    assert table.shape == (40, 24)
    assert np.linalg.matrix_rank(table.astype(np.float64), tol=1e-6) == 5
    np.testing.assert_allclose(table, np32(enc.left) @ np32(enc.right), atol=1e-6)
    # gathered rows equal the table's rows
    pos = np.array([[3, 0, 39], [7, 7, 1]])
    np.testing.assert_allclose(np32(enc.encoding(tensor(face, pos))), table[pos], atol=1e-6)


@pytest.mark.parametrize("face", FACES)
def test_low_rank_initial_scale_matches_a_learned_table(face):
    table = np32(FACES[face].LowRankEncoding(512, 256, rank=16).encoding(512))
    assert abs(table.std() - 0.02) < 0.02 * 0.15


@pytest.mark.parametrize("face", FACES)
def test_low_rank_errors(face):
    cls = FACES[face].LowRankEncoding
    with pytest.raises(ValueError, match=r"rank must be at least 1, got rank=0.*min\(max_len, "
                                         r"dim\)=16"):
        cls(32, 16, rank=0)
    with pytest.raises(ValueError, match=r"rank=17 exceeds min\(max_len, dim\)=16.*rank <= 16"):
        cls(32, 16, rank=17)
    with pytest.raises(ValueError, match=r"rank=9 exceeds min\(max_len, dim\)=8"):
        cls(8, 16, rank=9)
    with pytest.raises(ValueError, match="rank must be an integer"):
        cls(32, 16, rank=2.0)
    enc = cls(8, 16, rank=2)
    with pytest.raises(ValueError, match="sequence length 9 exceeds the table's max_len=8"):
        enc(tensor(face, np.zeros((1, 9, 16), np.float32)))
    with pytest.raises(ValueError, match=r"positions must lie in 0 \.\. 7, got 8"):
        enc.encoding(tensor(face, np.array([0, 8])))
    with pytest.raises(ValueError, match=r"positions must lie in 0 \.\. 7, got -1"):
        enc.encoding(tensor(face, np.array([-1, 2])))


@pytest.mark.parametrize("face", FACES)
def test_explicit_default_positions_equal_the_default(face):
    x = tensor(face, np.random.default_rng(0).normal(size=(2, 6, 16)).astype(np.float32))
    enc = FACES[face].LowRankEncoding(8, 16, rank=2)
    np.testing.assert_array_equal(np32(enc(x)), np32(enc(x, tensor(face, np.arange(6)))))


# --------------------------------------------------------------------------- inputs at the edges

INDEX_DTYPES = ["uint8", "int8", "int16", "uint32", "int32", "int64"]


def _index_calls(face, signed):
    """Every call that indexes with integer tensors: name -> (function of a dtype)."""
    mod = FACES[face]
    pad = -1 if signed else 2
    # max_depth * max_children > 255: the flat row index overflows a small dtype
    paths = np.array([[2, 99, pad], [1, 0, 3], [0, pad, pad] if signed else [0, 5, 7]])
    tree = mod.HierarchicalEncoding(3, 100, 6)
    low_rank = mod.LowRankEncoding(300, 6, rank=2)
    per = mod.MultimodalEncoding(6, num_modalities=3, max_len=8, mode="per_modality")
    offset = mod.MultimodalEncoding(6, num_modalities=3, max_len=8)
    ids, pos = np.array([1, 0, 2]), np.array([1, 0, 7])
    x = tensor(face, np.zeros((1, 3, 6), np.float32))

    def t(array, dtype):
        return tensor(face, array, dtype)

    return {
        "hierarchical": lambda d: mod.hierarchical(t(paths, d), 6, max_depth=3),
        "HierarchicalEncoding": lambda d: tree(x, t(paths, d)),
        "LowRankEncoding": lambda d: low_rank(x, t(np.array([100, 0, 127] if signed
                                                            else [200, 0, 255]), d)),
        "modality_positions": lambda d: mod.modality_positions(t(ids, d), num_modalities=3),
        "per_modality": lambda d: per(x, t(ids, d), t(pos, d)),
        "shared_offset": lambda d: offset(x, t(ids, d), t(pos, d)),
    }


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("signed", [True, False])
def test_small_integer_index_dtypes_pick_the_same_rows(face, signed):
    # uint8 must not be read as a boolean mask (torch), int8/uint8 must not overflow the
    # flat row index, and every backend gathers with every integer dtype.
    calls = _index_calls(face, signed)
    for name, call in calls.items():
        want = np32(call("int64"))
        for dtype in INDEX_DTYPES:
            if dtype.startswith("u") == signed:  # -1 padding needs a signed dtype
                continue
            np.testing.assert_array_equal(np32(call(dtype)), want, err_msg=f"{name} {dtype}")


def test_faces_agree_on_small_integer_indices():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 3, 6)).astype(np.float32)
    pairs = [(ts.LowRankEncoding(300, 6, rank=2), ks.LowRankEncoding(300, 6, rank=2),
              [np.array([[3, 200, 255], [0, 1, 2]], np.uint8)]),
             (ts.HierarchicalEncoding(3, 100, 6), ks.HierarchicalEncoding(3, 100, 6),
              [np.array([[2, 99, -1], [1, 0, 3], [0, -1, -1]], np.int8)])]
    for source, target, extras in pairs:
        copy_weights(source, target)
        np.testing.assert_allclose(np32(run("torch", source, x, extras)),
                                   np32(run("keras", target, x, extras)), atol=1e-6)


def test_torch_data_checks_read_cpu_tensors_only():
    # reading a min/max back from an accelerator stops the host at every forward
    from types import SimpleNamespace

    on_gpu = SimpleNamespace(numel=lambda: 3, device=torch.device("cuda"))
    assert not can_inspect(on_gpu)
    assert can_inspect(torch.zeros(3))
    assert not can_inspect(torch.zeros(0))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_torch_forward_on_cuda_never_syncs():
    dev = torch.device("cuda")
    x = torch.zeros(2, 3, 12, device=dev)
    ids = torch.tensor([0, 1, 2], device=dev)
    paths = torch.tensor([[0, -1, -1], [1, 2, -1], [3, 0, 1]], device=dev)
    times = torch.tensor([0.0, 0.5, 2.0], device=dev)
    calls = [(ts.ContinuousTimeEncoding(12), (times,)), (ts.Time2Vec(12), (times,)),
             (ts.HierarchicalEncoding(3, 4, 12), (paths,)),
             (ts.MultimodalEncoding(12, num_modalities=3, max_len=8, mode="per_modality"),
              (ids, ids)),
             (ts.MultimodalEncoding(12, num_modalities=3, max_len=8), (ids, ids)),
             (ts.LowRankEncoding(8, 12, rank=2), ()), (ts.LowRankEncoding(8, 12, rank=2), (ids,))]
    for module, extras in calls:
        module.to(dev)
        module(x, *extras)                       # warm-up (caches, lazy init)
        torch.cuda.set_sync_debug_mode("error")
        try:
            out = module(x, *extras)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        assert out.device.type == "cuda"


# Bad per-token shapes for x of shape (2, 3, dim): each raises the same message in both faces.
BAD_SHAPES = {
    "continuous_time": ("timestamps", "float32", [(4,), (3, 3), (2, 1), (2, 3, 1), (1, 2, 3)]),
    "time2vec": ("timestamps", "float32", [(4,), (3, 3), (2, 1), (2, 3, 1)]),
    "hierarchical": ("paths", "int32", [(4, 3), (3, 3, 3), (2, 1, 3), (3,)]),
    "multimodal_shared": ("modality_ids", "int32", [(4,), (3, 3), (2, 1), (1, 2, 3)]),
    "multimodal_per_modality": ("modality_ids", "int32", [(4,), (3, 3), (2, 1)]),
    "multimodal_shared_offset": ("modality_ids", "int32", [(4,), (3, 3), (2, 1)]),
}
POSITION_SHAPES = [(4,), (3, 3), (2, 1), (1, 2, 3)]


@pytest.mark.parametrize("case", sorted(BAD_SHAPES))
def test_per_token_arguments_must_match_x(case):
    name, dtype, shapes = BAD_SHAPES[case]
    x = np.zeros((2, 3, DIM), np.float32)
    for shape in shapes:
        arg = np.zeros(shape, dtype)
        message = same_error(FACES, lambda face: make(face, case)(tensor(face, x), tensor(face, arg)))
        assert re.search(rf"{name} must have shape .* matching x's \(\.\.\., seq, dim\), got "
                         + re.escape(f"{name}.shape={shape} for x.shape=(2, 3, {DIM})"), message)


@pytest.mark.parametrize("case", ["multimodal_shared", "multimodal_per_modality",
                                  "multimodal_shared_offset", "low_rank"])
def test_positions_must_match_x(case):
    x = np.zeros((2, 3, DIM), np.float32)
    for shape in POSITION_SHAPES:
        pos = np.zeros(shape, np.int32)

        def call(face):
            layer, extras = make(face, case), [tensor(face, np.zeros(3, np.int32))]
            return layer(tensor(face, x), *extras[:len(CASES[case][3])], tensor(face, pos))

        message = same_error(FACES, call)
        assert re.escape(f"got positions.shape={shape} for x.shape=(2, 3, {DIM})") in \
            re.escape(message)


@pytest.mark.parametrize("case", ALL)
@pytest.mark.parametrize("shape", [(3,), (1, 3), (2, 3)])
def test_per_token_arguments_of_accepted_shapes(case, shape):
    x, extras = inputs(case)
    extras = [np.broadcast_to(e[1, :3], shape + e.shape[2:]).copy() for e in extras]
    for face in FACES:
        layer = make(face, case)
        out = np32(run(face, layer, x[:, :3], extras))
        assert out.shape == (BATCH, 3, DIM)
        # the second example's tokens get the encoding of the second row of the argument
        if extras:
            last = [np.broadcast_to(e, (BATCH, 3) + e.shape[len(shape):])[-1].copy()
                    for e in extras]
            pe = np32(layer.encoding(*[tensor(face, e) for e in last]))
            np.testing.assert_allclose(out[1] - x[1, :3], pe, atol=1e-6)


@pytest.mark.parametrize("case", ALL)
def test_empty_sequence_is_returned_unchanged_in_both_faces(case):
    x = np.zeros((2, 0, DIM), np.float32)
    extras = [np.zeros((0,) + spec[1:], np.dtype(dtype)) for _, spec, dtype in CASES[case][3]]
    for face in FACES:
        out = run(face, make(face, case), x, extras)
        assert tuple(out.shape) == (2, 0, DIM)


@pytest.mark.parametrize("face", FACES)
def test_bad_index_values_are_refused(face):
    x = tensor(face, np.zeros((1, 3, 8), np.float32))
    enc = FACES[face].MultimodalEncoding(8, num_modalities=3, max_len=4)
    with pytest.raises(ValueError, match=r"modality_ids index a table, so they must be integers, "
                                         r"got dtype bool"):
        enc(x, tensor(face, np.array([True, False, True])))
    with pytest.raises(ValueError, match="modality_ids index a table.*got dtype float32"):
        enc(x, tensor(face, np.array([0.0, 1.0, 1.0], np.float32)))
    with pytest.raises(ValueError, match=r"modality_ids must lie in 0 \.\. 2, got -1"):
        enc(x, tensor(face, np.array([0, -1, 1])))
    with pytest.raises(ValueError, match=r"positions must be integers or floats, got dtype "
                                         r"bool; a boolean tensor is a mask"):
        FACES[face].LowRankEncoding(4, 8, rank=2)(x, tensor(face, np.array([True, False, True])))
    with pytest.raises(ValueError, match="paths index a table.*got dtype bool"):
        FACES[face].HierarchicalEncoding(3, 2, 8)(x, tensor(face, np.ones((3, 3), bool)))
    for cls in (FACES[face].ContinuousTimeEncoding, FACES[face].Time2Vec):
        with pytest.raises(ValueError, match=r"\w+: timestamps must be integers or floats, "
                                             r"got dtype bool"):
            cls(8)(x, tensor(face, np.array([True, False, True])))
