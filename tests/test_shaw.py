"""Shaw et al.'s relative attention: the index, naive == skew, an explicit loop, clipping,
cached decoding, windowed attention, both faces. (The module's generic checks are rows of
the layer table, ``tests/test_layers.py``; its bad inputs are rows of ``tests/test_errors.py``.)
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc.keras as pk
import posenc.shaw as shaw
import posenc.torch as pt
from faces import dtype_name, np32, numpy, tensor

FACES = {"torch": pt, "keras": pk}
SETTINGS = settings(max_examples=15, deadline=None, derandomize=True)
NAIVE_SKEW = {"rtol": 1e-5, "atol": 1e-5}


def draw(batch, heads, q_len, k_len, head_dim, max_distance, *, seed=0, tables=True):
    """q, k, v ``(batch, heads, len, head_dim)`` and two ``(2k+1, head_dim)`` tables, N(0, 1)."""
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(batch, heads, q_len, head_dim)).astype(np.float32)
    k, v = (rng.normal(size=(batch, heads, k_len, head_dim)).astype(np.float32) for _ in "kv")
    kt, vt = (rng.normal(size=(2 * max_distance + 1, head_dim)).astype(np.float32)
              for _ in "kv")
    return q, k, v, kt, vt


def run(face, q, k, v, kt, vt, max_distance, **kwargs):
    t = [None if a is None else tensor(face, a) for a in (q, k, v, kt, vt)]
    return numpy(FACES[face].shaw_attention(*t, max_distance, **kwargs))


def loop_reference(q, k, v, kt, vt, max_distance, *, causal=False, window=None):
    """Shaw et al.'s equations, one query and one key at a time (float64)."""
    batch, heads, q_len, head_dim = q.shape
    k_len = k.shape[2]
    out = np.zeros(q.shape)
    for b in range(batch):
        for h in range(heads):
            for r in range(q_len):
                i = k_len - q_len + r
                logits, values = [], []
                for j in range(k_len):
                    if (causal and j > i) or (window is not None and abs(j - i) > window):
                        continue
                    row = min(max(j - i, -max_distance), max_distance) + max_distance
                    a_k = 0.0 if kt is None else kt[row]
                    a_v = 0.0 if vt is None else vt[row]
                    logits.append(q[b, h, r] @ (k[b, h, j] + a_k) / np.sqrt(head_dim))
                    values.append(v[b, h, j] + a_v)
                weights = np.exp(np.array(logits) - max(logits))
                out[b, h, r] = (weights / weights.sum()) @ np.array(values)
    return out


# --------------------------------------------------------------------------- the index

@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("q_len, k_len, k", [(5, 5, 2), (2, 7, 3), (1, 9, 0), (4, 4, 10)])
def test_relative_index_is_the_clipped_distance(face, q_len, k_len, k):
    got = numpy(FACES[face].shaw_relative_index(q_len, k_len, k))
    want = [[min(max(j - (k_len - q_len + r), -k), k) + k for j in range(k_len)]
            for r in range(q_len)]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(shaw.shaw_relative_index(q_len, k_len, k), want)
    assert "int" in str(FACES[face].shaw_relative_index(q_len, k_len, k).dtype)


def test_relative_index_clips_far_pairs_to_the_edge_rows():
    index = shaw.shaw_relative_index(8, 8, 2)
    assert index[0, -1] == 4 and index[-1, 0] == 0          # distances +7 and -7
    assert set(np.unique(index)) == {0, 1, 2, 3, 4}
    assert (np.diag(index) == 2).all()                       # j == i reads the middle row


@pytest.mark.parametrize("q_len, k_len, k", [(5, 5, 2), (3, 9, 1), (6, 6, 0), (4, 7, 20)])
def test_bucket_boundaries_give_each_key_to_its_row(q_len, k_len, k):
    """Bucket r of a query holds exactly the keys whose relative index is r."""
    queries = shaw.query_positions(q_len, k_len, np.arange)
    ends = shaw.bucket_boundaries(queries, k_len, k, np.clip, np.arange)
    index = shaw.shaw_relative_index(q_len, k_len, k)
    for r in range(q_len):
        for bucket in range(2 * k + 1):
            keys = set(range(ends[r, bucket] + 1, ends[r, bucket + 1] + 1))
            assert keys == set(np.flatnonzero(index[r] == bucket)), (r, bucket)


def test_query_blocks_cover_the_queries_once():
    for q_len, k_len, heads in [(2048, 2048, 8), (7, 3000, 4000), (1, 1, 1), (100, 100, 1)]:
        blocks = shaw.query_blocks(q_len, k_len, heads)
        assert blocks[0][0] == 0 and blocks[-1][1] == q_len
        assert all(a[1] == b[0] for a, b in zip(blocks, blocks[1:]))
        assert all(heads * (stop - start) * k_len <= max(shaw.SKEW_BLOCK_ELEMENTS, heads * k_len)
                   for start, stop in blocks)
    assert shaw.query_blocks(None, 10, 2) == [(0, None)]


# --------------------------------------------------------------------------- naive == skew == loop

@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [(2, 3, 7, 7, 8, 2), (1, 2, 3, 11, 4, 3), (2, 1, 1, 6, 4, 1),
                                   (1, 2, 9, 9, 4, 0), (1, 1, 5, 5, 4, 8)],
                         ids=["square", "q<k", "one-query", "k=0", "k>len"])
def test_naive_and_skew_equal_the_loop(face, causal, shape):
    data = draw(*shape)
    want = loop_reference(*data, shape[-1], causal=causal)
    naive = run(face, *data, shape[-1], causal=causal, method="naive")
    skew = run(face, *data, shape[-1], causal=causal, method="skew")
    np.testing.assert_allclose(skew, naive, **NAIVE_SKEW)
    np.testing.assert_allclose(naive, want, rtol=1e-5, atol=1e-5)


@SETTINGS
@given(q_len=st.integers(1, 12), extra=st.integers(0, 12), k=st.integers(0, 6),
       heads=st.integers(1, 3), causal=st.booleans())
@pytest.mark.keras
def test_naive_equals_skew_for_any_shape(q_len, extra, k, heads, causal):
    data = draw(2, heads, q_len, q_len + extra, 8, k, seed=q_len + 13 * extra)
    for face in FACES:
        np.testing.assert_allclose(run(face, *data, k, causal=causal, method="skew"),
                                   run(face, *data, k, causal=causal, method="naive"),
                                   **NAIVE_SKEW)


@pytest.mark.keras
def test_skew_with_several_query_blocks_equals_naive(monkeypatch):
    monkeypatch.setattr(shaw, "SKEW_BLOCK_ELEMENTS", 2 * 40 * 3)   # blocks of 3 queries
    assert len(shaw.query_blocks(20, 40, 2)) == 7
    data = draw(1, 2, 20, 40, 8, 5, seed=3)
    for face in FACES:
        np.testing.assert_allclose(run(face, *data, 5, causal=True, method="skew"),
                                   run(face, *data, 5, causal=True, method="naive"),
                                   **NAIVE_SKEW)


@pytest.mark.parametrize("face", FACES)
def test_weights_are_the_loops_softmax_in_blocks_and_whole(face, monkeypatch):
    monkeypatch.setattr(shaw, "SKEW_BLOCK_ELEMENTS", 2 * 9 * 2)     # blocks of 2 queries
    q, k, v, kt, vt = draw(1, 2, 5, 9, 4, 2, seed=5)
    t = [tensor(face, a) for a in (q, k, v, kt, vt)]
    logits = np.einsum("bhqd,bhkd->bhqk", q, k) + np.einsum(
        "bhqd,qkd->bhqk", q, kt[shaw.shaw_relative_index(5, 9, 2)])
    logits = np.where(np.arange(9)[None] > np.arange(4, 9)[:, None], -np.inf, logits / 2.0)
    want = np.exp(logits - logits.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)
    for method in ("naive", "skew"):
        out, weights = FACES[face].shaw_attention(*t, 2, causal=True, method=method,
                                                  return_weights=True)
        np.testing.assert_allclose(numpy(weights), want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(numpy(out), run(face, q, k, v, kt, vt, 2, causal=True),
                                   **NAIVE_SKEW)


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("method", ["naive", "skew"])
def test_dropout_drops_the_weights_of_the_keys_and_of_the_values(face, method):
    q, k, v, kt, vt = draw(2, 2, 6, 6, 4, 2, seed=6)
    t = [tensor(face, a) for a in (q, k, v, kt, vt)]
    full = numpy(FACES[face].shaw_attention(*t, 2, method=method))
    dropped = numpy(FACES[face].shaw_attention(*t, 2, method=method, dropout=0.5))
    assert not np.allclose(dropped, full, atol=1e-3)
    # a rate of 0 is no dropout at all
    np.testing.assert_array_equal(numpy(FACES[face].shaw_attention(*t, 2, method=method,
                                                                   dropout=0.0)), full)
    # the values' term is dropped with the same weights as the keys': v = 0 and a^V = 1
    # give sum_j dropped_ij, whose mean over many rows is 1. Over 256 rows of 64 keys (scaled
    # N(0, 1) queries and keys) the mean's standard deviation is about 0.01: 0.15 is over ten
    # of them, whatever the backend's random stream (a 24-row version once failed at 0.28)
    q, k, v, kt, vt = draw(2, 2, 64, 64, 4, 2, seed=6)
    ones = np.ones_like(vt)
    t = [tensor(face, a) for a in (0.3 * q, 0.3 * k, 0 * v, kt, ones)]
    sums = numpy(FACES[face].shaw_attention(*t, 2, method=method, dropout=0.5))
    assert not np.allclose(sums, 1.0) and abs(sums.mean() - 1.0) < 0.15


@pytest.mark.parametrize("face", FACES)
def test_multi_head_attention_runs_the_shaw_core_of_the_module(face):
    """MultiHeadAttention(position="shaw") and ShawRelativeAttention with the same weights
    give the same numbers: one core, one set of tables."""
    F = FACES[face]
    mha = F.MultiHeadAttention(8, 2, position="shaw", causal=True, max_distance=2)
    module = F.ShawRelativeAttention(8, 2, 2, causal=True)
    rng = np.random.default_rng(7)
    for name in ("query_kernel", "key_kernel", "value_kernel", "output_kernel", "query_bias",
                 "value_bias", "output_bias", "key_table", "value_table"):
        value = (0.5 * rng.normal(size=tuple(getattr(mha, name).shape))).astype(np.float32)
        for layer in (mha, module):
            if face == "torch":
                with torch.no_grad():
                    getattr(layer, name).copy_(torch.as_tensor(value))
            else:
                getattr(layer, name).assign(value)
    x = tensor(face, rng.normal(size=(2, 7, 8)).astype(np.float32))
    want = numpy(module(x))
    np.testing.assert_allclose(numpy(mha(x)), want, rtol=1e-5, atol=1e-5)
    out, weights = mha(x, return_attention=True)
    np.testing.assert_allclose(numpy(out), want, rtol=1e-5, atol=1e-5)
    assert numpy(weights).shape == (2, 2, 7, 7)


@pytest.mark.parametrize("method", ["naive", "skew"])
@pytest.mark.keras
def test_keys_only_and_values_only(method):
    """``None`` leaves out a table (Shaw et al.'s Table 3 ablation)."""
    q, k, v, kt, vt = draw(1, 2, 5, 7, 4, 2, seed=4)
    for face in FACES:
        np.testing.assert_allclose(run(face, q, k, v, kt, None, 2, method=method),
                                   loop_reference(q, k, v, kt, None, 2), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(run(face, q, k, v, None, vt, 2, method=method),
                                   loop_reference(q, k, v, None, vt, 2), rtol=1e-5, atol=1e-5)


@pytest.mark.keras
def test_gradients_of_naive_and_skew_agree():
    data = [torch.tensor(a, requires_grad=True) for a in draw(2, 2, 6, 9, 4, 2, seed=5)]
    grads = {}
    for method in ("naive", "skew"):
        out = pt.shaw_attention(*data, 2, causal=True, method=method)
        grads[method] = torch.autograd.grad((out * torch.linspace(-1, 1, 4)).sum(), data)
    for name, a, b in zip("q k v key_table value_table".split(), grads["naive"], grads["skew"]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5, msg=name)


# --------------------------------------------------------------------------- what k means

@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("method", ["naive", "skew"])
def test_k0_is_attention_without_positions_plus_a_constant_value(face, method):
    """With k = 0 every pair reads row 0: the key row shifts each query's logits by one
    constant (the softmax ignores it) and the value row is added to every output."""
    q, k, v, kt, vt = draw(2, 2, 6, 6, 4, 0, seed=6)
    plain = loop_reference(q, k, v, None, None, 0)
    got = run(face, q, k, v, kt, vt, 0, method=method)
    np.testing.assert_allclose(got, plain + vt[0], rtol=1e-5, atol=1e-5)
    # and it cannot tell positions apart: permuting the keys and values changes nothing
    perm = np.random.default_rng(0).permutation(6)
    np.testing.assert_allclose(run(face, q, k[:, :, perm], v[:, :, perm], kt, vt, 0,
                                   method=method), got, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("face", FACES)
def test_clipping_equals_a_full_table_of_repeated_edge_rows(face):
    """Distances beyond k read the edge rows: the same as an unclipped table (one row per
    distance -(L-1) .. L-1) whose outer rows repeat them."""
    length, k = 9, 2
    q, k_, v, kt, vt = draw(1, 2, length, length, 4, k, seed=7)
    rows = np.clip(np.arange(-(length - 1), length), -k, k) + k
    full = run(face, q, k_, v, kt[rows], vt[rows], length - 1)
    np.testing.assert_allclose(run(face, q, k_, v, kt, vt, k), full, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------- decoding with a cache

@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("method", ["naive", "skew"])
def test_token_by_token_decoding_equals_the_full_causal_pass(face, method):
    q, k, v, kt, vt = draw(2, 2, 7, 7, 4, 2, seed=9)
    full = run(face, q, k, v, kt, vt, 2, causal=True, method=method)
    for t in range(7):
        step = run(face, q[:, :, t:t + 1], k[:, :, :t + 1], v[:, :, :t + 1], kt, vt, 2,
                   causal=True, method=method)
        np.testing.assert_allclose(step[:, :, 0], full[:, :, t], rtol=1e-5, atol=1e-5)
    # the last three queries at once, with the whole cache
    np.testing.assert_allclose(run(face, q[:, :, 4:], k, v, kt, vt, 2, causal=True,
                                   method=method), full[:, :, 4:], rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------- both faces, dtypes

@pytest.mark.parametrize("method", ["naive", "skew"])
@pytest.mark.keras
def test_both_faces_give_the_same_numbers(method):
    data = draw(2, 3, 5, 8, 4, 2, seed=10)
    np.testing.assert_allclose(run("keras", *data, 2, causal=True, method=method),
                               run("torch", *data, 2, causal=True, method=method),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("method", ["naive", "skew"])
def test_bfloat16_inputs_give_bfloat16_within_its_rounding(face, method):
    q, k, v, kt, vt = draw(2, 2, 6, 9, 8, 3, seed=11)
    q, k, v = (0.3 * a for a in (q, k, v))       # logits of order one
    want = run(face, q, k, v, kt, vt, 3, method=method)
    t = [tensor(face, a, "bfloat16") for a in (q, k, v)] + [tensor(face, kt), tensor(face, vt)]
    out = FACES[face].shaw_attention(*t, 3, method=method)
    assert dtype_name(out) == "bfloat16"
    np.testing.assert_allclose(np32(out), want, rtol=2e-2, atol=3e-2)


@pytest.mark.parametrize("face", FACES)
def test_empty_queries(face):
    q, k, v, kt, vt = draw(1, 2, 0, 4, 4, 1)
    for method in ("naive", "skew"):
        assert run(face, q, k, v, kt, vt, 1, method=method).shape == (1, 2, 0, 4)
    assert numpy(FACES[face].windowed_attention(tensor(face, q), tensor(face, k),
                                                tensor(face, v), 1)).shape == (1, 2, 0, 4)


def test_skew_never_holds_a_relative_tensor(monkeypatch):
    """With blocks of 8 queries (temporaries of batch * heads * 8 * k_len numbers), no tensor
    the skew method creates is larger than its input q; the naive method creates the
    (q_len, k_len, head_dim) relative tensors."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Largest(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.numel = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if torch.is_tensor(t):
                    self.numel = max(self.numel, t.numel())
            return out

    batch, heads, length, head_dim, k = 1, 2, 64, 16, 4
    monkeypatch.setattr(shaw, "SKEW_BLOCK_ELEMENTS", heads * 8 * length)
    data = [torch.as_tensor(a) for a in draw(batch, heads, length, length, head_dim, k)]
    largest = {}
    for method in ("naive", "skew"):
        with Largest() as mode:
            pt.shaw_attention(*data, k, causal=True, method=method)
        largest[method] = mode.numel
    assert largest["naive"] >= length * length * head_dim
    assert largest["skew"] <= batch * heads * length * head_dim


# --------------------------------------------------------------------------- windowed attention

def window_case(q_len, k_len, window, seed=12):
    return draw(2, 2, q_len, k_len, 4, window, seed=seed)


def windowed(face, q, k, v, kt, vt, window, **kwargs):
    t = [tensor(face, a) for a in (q, k, v)]
    return numpy(FACES[face].windowed_attention(
        *t, window, key_table=None if kt is None else tensor(face, kt),
        value_table=None if vt is None else tensor(face, vt), **kwargs))


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("q_len, k_len, window", [(9, 9, 2), (3, 10, 1), (6, 6, 0), (5, 5, 7),
                                                  (37, 37, 9), (20, 45, 3), (1, 50, 4)])
def test_windowed_equals_masked_full_attention(face, causal, q_len, k_len, window):
    data = window_case(q_len, k_len, window)
    want = loop_reference(*data, window, causal=causal, window=window)
    np.testing.assert_allclose(windowed(face, *data, window, causal=causal), want,
                               rtol=1e-5, atol=1e-5)
    q, k, v, _, _ = data
    np.testing.assert_allclose(windowed(face, q, k, v, None, None, window, causal=causal),
                               loop_reference(q, k, v, None, None, 0, causal=causal,
                                              window=window), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("face", FACES)
def test_a_window_covering_the_sequence_is_shaw_attention(face):
    data = window_case(6, 6, 5)
    np.testing.assert_allclose(windowed(face, *data, 5, causal=True),
                               run(face, *data, 5, causal=True), rtol=1e-5, atol=1e-5)


@pytest.mark.keras
def test_windowed_faces_agree_and_keep_bfloat16():
    q, k, v, kt, vt = window_case(7, 9, 2)
    np.testing.assert_allclose(windowed("keras", q, k, v, kt, vt, 2),
                               windowed("torch", q, k, v, kt, vt, 2), rtol=1e-5, atol=1e-6)
    for face in FACES:
        out = FACES[face].windowed_attention(
            *[tensor(face, 0.3 * a, "bfloat16") for a in (q, k, v)], 2,
            key_table=tensor(face, kt), value_table=tensor(face, vt))
        assert dtype_name(out) == "bfloat16"
        np.testing.assert_allclose(np32(out), windowed(face, 0.3 * q, 0.3 * k, 0.3 * v, kt, vt,
                                                       2), rtol=2e-2, atol=3e-2)


# --------------------------------------------------------------------------- the module

@pytest.mark.parametrize("face", FACES)
def test_causal_module_ignores_the_future(face):
    x = np.random.default_rng(13).normal(size=(2, 8, 16)).astype(np.float32)
    layer = FACES[face].ShawRelativeAttention(16, 4, 3, causal=True)
    changed = x.copy()
    changed[:, 5:] += 1.0
    a, b = numpy(layer(tensor(face, x))), numpy(layer(tensor(face, changed)))
    np.testing.assert_allclose(a[:, :5], b[:, :5], rtol=1e-5, atol=1e-6)
    assert not np.allclose(a[:, 5:], b[:, 5:])


@pytest.mark.parametrize("face", FACES)
def test_module_sees_the_order_only_through_its_tables(face):
    """No absolute position anywhere: a bidirectional layer with k = 0 is
    permutation-equivariant (a bag of tokens); with k > 0 it is not."""
    x = np.random.default_rng(14).normal(size=(1, 7, 8)).astype(np.float32)
    perm = np.random.default_rng(15).permutation(7)
    for k, equivariant in ((0, True), (2, False)):
        layer = FACES[face].ShawRelativeAttention(8, 2, k)
        if face == "torch":
            with torch.no_grad():
                layer.key_table.normal_()
                layer.value_table.normal_()
        else:
            for w in (layer.key_table, layer.value_table):
                w.assign(np.random.default_rng(16).normal(size=w.shape).astype(np.float32))
        a, b = numpy(layer(tensor(face, x))), numpy(layer(tensor(face, x[:, perm])))
        assert np.allclose(a[:, perm], b, atol=1e-5) == equivariant, k


@pytest.mark.keras
def test_keras_layer_builds_on_unknown_lengths():
    layer = pk.ShawRelativeAttention(16, 2, 3)
    assert tuple(layer(keras.Input((None, 16))).shape) == (None, None, 16)


# --------------------------------------------------------------------------- compilers

def test_functions_compile_without_graph_breaks():
    torch._dynamo.reset()
    q, k, v, kt, vt = (torch.as_tensor(a) for a in draw(2, 2, 5, 40, 4, 3, seed=17))
    for method in ("naive", "skew"):
        compiled = torch.compile(pt.shaw_attention, fullgraph=True, backend="eager")
        torch.testing.assert_close(compiled(q, k, v, kt, vt, 3, causal=True, method=method),
                                   pt.shaw_attention(q, k, v, kt, vt, 3, causal=True,
                                                     method=method))
    compiled = torch.compile(pt.windowed_attention, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(q, k, v, 3, key_table=kt, value_table=vt),
                               pt.windowed_attention(q, k, v, 3, key_table=kt, value_table=vt))


@pytest.mark.keras
def test_keras_functions_under_xla():
    if keras.backend.backend() != "tensorflow":
        pytest.skip("jit_compile=True means XLA on TensorFlow")
    import tensorflow as tf

    data = draw(2, 2, 5, 40, 4, 3, seed=18)

    @tf.function(jit_compile=True)
    def both(q, k, v, kt, vt):
        return (pk.shaw_attention(q, k, v, kt, vt, 3, causal=True),
                pk.windowed_attention(q, k, v, 3, key_table=kt, value_table=vt))

    got = both(*data)
    np.testing.assert_allclose(numpy(got[0]), run("keras", *data, 3, causal=True),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(numpy(got[1]), windowed("keras", *data, 3), rtol=1e-5,
                               atol=1e-5)


def test_relative_keys_alone_are_an_sdpa_bias():
    """Keys only: the relative term is the float attn_mask of PyTorch's fused attention."""
    q, k, v, kt, _ = (torch.as_tensor(a) for a in draw(2, 2, 5, 9, 8, 2, seed=19))
    index = pt.shaw_relative_index(5, 9, 2)
    bias = torch.gather(q @ kt.T, -1, index.expand(2, 2, 5, 9)) / 8 ** 0.5
    fused = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    torch.testing.assert_close(pt.shaw_attention(q, k, v, kt, None, 2), fused,
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("face", ["torch", "keras"])
def test_docstrings_credit_shaw_and_music_transformer_with_what_they_did(face):
    # Once: "shared by every head (as in Shaw et al.)", and the value-side sums credited to
    # the Music Transformer, which has no a^V term; then the value side called this package's
    # own extension, although Shaw et al., section 3.3, apply their split to eq. 3 as well:
    # only the clipped bucketing is the package's.
    import posenc.keras as pk
    import posenc.torch as pt

    module = pt if face == "torch" else pk
    layer_doc = " ".join(module.ShawRelativeAttention.__doc__.split())
    core_doc = " ".join(module.shaw_attention.__doc__.split())
    assert "(as in Shaw et al.)" not in layer_doc and "per head" in layer_doc
    assert "relative keys only" in core_doc and "own extension" not in core_doc
    assert "section 3.3" in core_doc and "own bucketing" in core_doc
