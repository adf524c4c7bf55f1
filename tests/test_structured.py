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


# --------------------------------------------------------------------------- cases
# The generic checks (parity, round trips, shapes, training, precision, compilers) are in
# tests/test_layers.py; these cases serve the per-token shape errors below.

DIM = 12

CASES = {
    "continuous_time": ("ContinuousTimeEncoding", (DIM,), {"time_scale": 0.5}),
    "time2vec": ("Time2Vec", (DIM,), {}),
    "hierarchical": ("HierarchicalEncoding", (3, 4, DIM), {}),
    "multimodal_shared": ("MultimodalEncoding", (DIM,),
                          {"num_modalities": 3, "max_len": 8, "mode": "shared"}),
    "multimodal_per_modality": ("MultimodalEncoding", (DIM,),
                                {"num_modalities": 3, "max_len": 8, "mode": "per_modality"}),
    "multimodal_shared_offset": ("MultimodalEncoding", (DIM,),
                                 {"num_modalities": 3, "max_len": 8}),
}


def make(face, case):
    name, args, kwargs = CASES[case]
    return getattr(FACES[face], name)(*args, **kwargs)


def run(face, layer, x, extras):
    return layer(tensor(face, x), *[tensor(face, e) for e in extras])


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
def test_modality_positions_example(face):
    fn = FACES[face].modality_positions
    ids = tensor(face, np.array([0, 0, 1, 1, 1, 0]))
    np.testing.assert_array_equal(np32(fn(ids)), [0, 1, 0, 1, 2, 2])
    np.testing.assert_array_equal(np32(fn(tensor(face, np.array([7, -3, 7])))), [0, 0, 1])


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
def test_per_modality_mode_takes_an_odd_dim(face):
    # no sinusoid in this mode, so nothing needs sine/cosine pairs
    enc = FACES[face].MultimodalEncoding(7, num_modalities=2, max_len=4, mode="per_modality")
    ids = np.array([0, 1, 1])
    out = np32(enc(tensor(face, np.zeros((1, 3, 7), np.float32)), tensor(face, ids)))
    np.testing.assert_array_equal(out[0], np32(enc.modality_tables)[ids, np.arange(3)])


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


@pytest.mark.parametrize("case", sorted(BAD_SHAPES))
def test_per_token_arguments_must_match_x(case):
    name, dtype, shapes = BAD_SHAPES[case]
    x = np.zeros((2, 3, DIM), np.float32)
    for shape in shapes:
        arg = np.zeros(shape, dtype)
        message = same_error(FACES, lambda face: make(face, case)(tensor(face, x), tensor(face, arg)))
        assert re.search(rf"{name} must have shape .* matching x's \(\.\.\., seq, dim\), got "
                         + re.escape(f"{name}.shape={shape} for x.shape=(2, 3, {DIM})"), message)


# --------------------------------------------------------------------------- the registry of modes

def test_multimodal_modes_come_from_one_registry(monkeypatch):
    from posenc.modalities import MULTIMODAL_MODES, MultimodalMode

    for face in FACES:
        for mode, spec in MULTIMODAL_MODES.items():
            enc = FACES[face].MultimodalEncoding(8, num_modalities=3, max_len=4, mode=mode)
            names = ([n for n, _ in enc.named_parameters()] if face == "torch"
                     else [w.path.split("/")[-1] for w in enc.weights])
            assert names == ([spec.table] if spec.table else []), (face, mode)
    # a new mode is one entry: a learned vector per modality, no sinusoid, any dim
    monkeypatch.setitem(MULTIMODAL_MODES, "offset_only", MultimodalMode(
        sinusoid=False, table="modality_embedding",
        table_shape=lambda m, n, d: (m, d), row=lambda ids, pos, max_len: ids))
    ids = np.array([[0, 2, 1]])
    message = same_error(list(FACES), lambda f: FACES[f].MultimodalEncoding(
        8, num_modalities=3, max_len=4, mode="unknown"))
    assert "'offset_only'" in message
    outs = {}
    for face in FACES:
        enc = FACES[face].MultimodalEncoding(7, num_modalities=3, max_len=4, mode="offset_only")
        table = np32(enc.modality_embedding)
        outs[face] = np32(enc.encoding(tensor(face, ids)))
        np.testing.assert_array_equal(outs[face], table[ids])
