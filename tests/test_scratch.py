"""The teaching versions in posenc.torch.scratch and posenc.keras.scratch equal the package."""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest
import torch
from keras import ops

import posenc.keras as pk
import posenc.keras.scratch as sk
import posenc.torch as pt
import posenc.torch.scratch as st
from faces import np32
from posenc.theory import shift_matrix as theory_shift_matrix

# The teaching versions compute their float64 with keras.ops; JAX without x64 has no float64.
NO_JAX_FLOAT64 = pytest.mark.no_jax("the teaching versions compute float64 with keras.ops, which "
                                    "JAX without x64 holds in float32")

# Chapter 1


def _attention_inputs(seed=0, batch=3, seq=37, dim=32, head_dim=8):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(batch, seq, dim)).astype(np.float32)
    w = [rng.normal(size=(dim, head_dim)).astype(np.float32) / dim**0.5 for _ in range(3)]
    return x, w


@pytest.mark.parametrize("causal", [False, True])
def test_self_attention_equals_torch_sdpa(causal):
    x, w = _attention_inputs()
    xt, (wq, wk, wv) = torch.from_numpy(x), [torch.from_numpy(m) for m in w]
    ours = st.self_attention(xt, wq, wk, wv, causal=causal)
    ref = torch.nn.functional.scaled_dot_product_attention(xt @ wq, xt @ wk, xt @ wv,
                                                           is_causal=causal)
    assert ours.shape == (3, 37, 8)
    torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.keras
def test_self_attention_equals_keras_ops_and_torch_scratch(causal):
    x, w = _attention_inputs(seed=1)
    ours = ops.convert_to_numpy(sk.self_attention(x, *w, causal=causal))
    # keras.ops.dot_product_attention takes (batch, seq, heads, head_dim)
    q, k, v = (ops.expand_dims(ops.matmul(x, m), 2) for m in w)
    ref = ops.convert_to_numpy(ops.dot_product_attention(q, k, v, is_causal=causal))[:, :, 0]
    np.testing.assert_allclose(ours, ref, atol=1e-5, rtol=1e-5)
    torch_ours = st.self_attention(torch.from_numpy(x), *map(torch.from_numpy, w), causal=causal)
    np.testing.assert_allclose(ours, torch_ours.numpy(), atol=1e-5, rtol=1e-5)


@pytest.mark.keras
def test_causal_attention_ignores_the_future():
    x, w = _attention_inputs(seed=2)
    changed = x.copy()
    changed[:, 20:] += 1.0
    for face, attend in (("torch", lambda a: st.self_attention(torch.from_numpy(a),
                                                               *map(torch.from_numpy, w),
                                                               causal=True).numpy()),
                         ("keras", lambda a: ops.convert_to_numpy(
                             sk.self_attention(a, *w, causal=True)))):
        before, after = attend(x), attend(changed)
        np.testing.assert_allclose(before[:, :20], after[:, :20], atol=1e-6, err_msg=face)
        assert np.abs(before[:, 20:] - after[:, 20:]).max() > 1e-2, face


@pytest.mark.keras
def test_permutation_gap_both_faces():
    x, w = _attention_inputs(seed=3)
    perm = np.random.default_rng(3).permutation(x.shape[1])
    xt, wt = torch.from_numpy(x), [torch.from_numpy(m) for m in w]
    gaps = {
        ("torch", False): float(st.permutation_gap(lambda a: st.self_attention(a, *wt), xt,
                                                   torch.from_numpy(perm))),
        ("torch", True): float(st.permutation_gap(
            lambda a: st.self_attention(a, *wt, causal=True), xt, torch.from_numpy(perm))),
        ("keras", False): float(sk.permutation_gap(lambda a: sk.self_attention(a, *w), x, perm)),
        ("keras", True): float(sk.permutation_gap(
            lambda a: sk.self_attention(a, *w, causal=True), x, perm)),
    }
    # the definition, in NumPy, for the torch face's causal case
    full = st.self_attention(xt, *wt, causal=True).numpy()
    permuted = st.self_attention(xt[:, perm], *wt, causal=True).numpy()
    assert gaps[("torch", True)] == pytest.approx(np.abs(permuted - full[:, perm]).max(), abs=1e-6)
    assert gaps[("torch", False)] < 1e-5 and gaps[("keras", False)] < 1e-5
    assert gaps[("torch", True)] > 1e-2
    assert gaps[("keras", True)] == pytest.approx(gaps[("torch", True)], abs=1e-4)


# Chapter 2


@NO_JAX_FLOAT64
@pytest.mark.parametrize("dim", [2, 64, 512])
@pytest.mark.keras
def test_sinusoidal_equals_the_package(dim):
    positions = np.arange(0, 4096, 3)
    ours_t = st.sinusoidal(torch.from_numpy(positions), dim)
    ours_k = ops.convert_to_numpy(sk.sinusoidal(positions, dim))
    ref_t = pt.sinusoidal(torch.from_numpy(positions), dim)
    ref_k = ops.convert_to_numpy(pk.sinusoidal(ops.convert_to_tensor(positions), dim))
    assert ours_t.shape == (len(positions), dim) and ours_t.dtype == torch.float32
    assert ours_k.shape == (len(positions), dim) and ours_k.dtype == np.float32
    np.testing.assert_allclose(ours_t.numpy(), ref_t.numpy(), atol=1e-6)
    np.testing.assert_allclose(ours_k, ref_k, atol=1e-6)
    np.testing.assert_allclose(ours_k, ours_t.numpy(), atol=1e-6)


@NO_JAX_FLOAT64
@pytest.mark.keras
def test_sinusoidal_base_and_float32_angles():
    positions = np.arange(10**6 - 512, 10**6 + 512)
    ref = pt.sinusoidal(torch.from_numpy(positions), 64, base=500.0).numpy()
    np.testing.assert_allclose(st.sinusoidal(torch.from_numpy(positions), 64, base=500.0).numpy(),
                               ref, atol=1e-6)
    np.testing.assert_allclose(ops.convert_to_numpy(sk.sinusoidal(positions, 64, base=500.0)),
                               ref, atol=1e-6)
    # float32 angles are the naive computation: far from the package at a million positions
    naive_t = st.sinusoidal(torch.from_numpy(positions), 64, base=500.0, dtype=torch.float32)
    naive_k = sk.sinusoidal(positions, 64, base=500.0, dtype="float32")
    assert np.abs(naive_t.numpy() - ref).max() > 1e-2
    assert np.abs(ops.convert_to_numpy(naive_k) - ref).max() > 1e-2


@NO_JAX_FLOAT64
@pytest.mark.parametrize("k", [0, 1, -3, 17, 2.5, 12345])
@pytest.mark.keras
def test_shift_matrix_equals_theory_and_shifts(k):
    dim = 64
    ref = theory_shift_matrix(k, dim)
    ours_t = st.shift_matrix(k, dim).numpy()
    ours_k = ops.convert_to_numpy(sk.shift_matrix(k, dim))
    np.testing.assert_allclose(ours_t, ref, atol=1e-12)
    np.testing.assert_allclose(ours_k, ref, atol=1e-12)
    positions = torch.arange(0, 5000, 7, dtype=torch.float64)
    pe = pt.sinusoidal(positions, dim).numpy()
    np.testing.assert_allclose(pe @ ours_t.T, pt.sinusoidal(positions + k, dim).numpy(),
                               atol=1e-9)



# Chapter 3






@pytest.mark.keras
def test_learned_scratch_equals_package():
    torch.manual_seed(0)
    enc = pt.LearnedEncoding(12, 8)
    x = torch.randn(3, 7, 8)
    table = enc.table.detach()
    assert torch.equal(st.learned(x, table), enc(x).detach())
    enc_k = pk.LearnedEncoding(12, 8)
    enc_k.table.assign(table.numpy())
    out_k = keras.ops.convert_to_numpy(sk.learned(x.numpy(), enc_k.table))
    np.testing.assert_allclose(out_k, keras.ops.convert_to_numpy(enc_k(x.numpy())), atol=1e-7)
    np.testing.assert_allclose(out_k, st.learned(x, table).numpy(), atol=1e-7)


@pytest.mark.parametrize("old,new", [(8, 16), (8, 13), (16, 5), (7, 7), (1, 4), (5, 1)])
@pytest.mark.keras
def test_resize_linear_scratch_equals_package(old, new):
    table = np.random.default_rng(old * 100 + new).normal(size=(old, 6)).astype("float32")
    want = pt.resize_table(torch.from_numpy(table), new).numpy()
    np.testing.assert_allclose(st.resize_linear(torch.from_numpy(table), new).numpy(), want,
                               atol=1e-5)
    got_k = keras.ops.convert_to_numpy(sk.resize_linear(keras.ops.convert_to_tensor(table), new))
    np.testing.assert_allclose(got_k, want, atol=1e-5)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(pk.resize_table(keras.ops.convert_to_tensor(table), new)),
        want, atol=1e-6)


# Chapter 4


@pytest.mark.keras
def test_chapter4_coordinate_encoding_scratch_equals_the_package():
    boxes = np.random.default_rng(0).uniform(size=(2, 5, 4)).astype(np.float32)
    expected = np32(pt.coordinate_encoding(torch.as_tensor(boxes), 64))
    np.testing.assert_allclose(np32(st.coordinate_encoding(torch.as_tensor(boxes), 64)),
                               expected, atol=1e-6)
    np.testing.assert_allclose(np32(sk.coordinate_encoding(boxes, 64)), expected, atol=1e-5)
    np.testing.assert_allclose(np32(pk.coordinate_encoding(boxes, 64)), expected, atol=1e-6)


@pytest.mark.keras
def test_chapter4_laplacian_positions_scratch_equals_the_package_up_to_sign():
    # a connected graph whose eigenvalues are distinct, so each eigenvector is unique up to sign
    rng = np.random.default_rng(0)
    weights = np.triu(rng.uniform(0.5, 2.0, size=(7, 7)), 1)
    adjacency = (weights + weights.T).astype(np.float32)
    expected = np32(pt.laplacian_positions(adjacency, 3))
    for got in (np32(st.laplacian_positions(torch.as_tensor(adjacency), 3)),
                np32(sk.laplacian_positions(ops.convert_to_tensor(adjacency), 3))):
        signs = np.sign(np.sum(got * expected, axis=0))
        np.testing.assert_allclose(got * signs, expected, atol=1e-4)


# Chapter 5


@pytest.mark.parametrize("q_len,k_len,max_distance", [(6, 6, 2), (3, 9, 1), (5, 5, 0), (4, 7, 10)])
@pytest.mark.keras
def test_chapter5_shaw_relative_index_scratch_equals_the_package(q_len, k_len, max_distance):
    expected = np.asarray(pt.shaw_relative_index(q_len, k_len, max_distance).cpu())
    assert expected.shape == (q_len, k_len)
    # the definition: queries at the last q_len positions, clip(j - i, -k, k) + k
    i = np.arange(k_len - q_len, k_len)[:, None]
    want = np.clip(np.arange(k_len)[None, :] - i, -max_distance, max_distance) + max_distance
    np.testing.assert_array_equal(expected, want)
    np.testing.assert_array_equal(st.shaw_relative_index(q_len, k_len, max_distance).numpy(), want)
    np.testing.assert_array_equal(np.asarray(ops.convert_to_numpy(
        sk.shaw_relative_index(q_len, k_len, max_distance))), want)
    np.testing.assert_array_equal(ops.convert_to_numpy(
        pk.shaw_relative_index(q_len, k_len, max_distance)), want)


def _shaw_inputs(seed, q_len, k_len, max_distance, batch=2, heads=3, head_dim=8):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(batch, heads, q_len, head_dim)).astype(np.float32)
    k, v = rng.normal(size=(2, batch, heads, k_len, head_dim)).astype(np.float32)
    tables = rng.normal(size=(2, 2 * max_distance + 1, head_dim)).astype(np.float32)
    return q, k, v, tables[0], tables[1]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("q_len,k_len,max_distance",
                         [(7, 7, 2), (3, 10, 1), (6, 6, 0), (5, 9, 12)])
@pytest.mark.keras
def test_chapter5_shaw_attention_scratch_equals_the_package(q_len, k_len, max_distance, causal):
    arrays = _shaw_inputs(q_len * 100 + k_len, q_len, k_len, max_distance)
    tensors = [torch.from_numpy(a) for a in arrays]
    got_t = st.shaw_attention(*tensors, max_distance, causal=causal).numpy()
    got_k = np32(sk.shaw_attention(*arrays, max_distance, causal=causal))
    assert got_t.shape == (2, 3, q_len, 8)
    for method in ("naive", "skew"):
        want = np32(pt.shaw_attention(*tensors, max_distance, causal=causal, method=method))
        np.testing.assert_allclose(got_t, want, atol=1e-5, err_msg=method)
        np.testing.assert_allclose(got_k, want, atol=1e-5, err_msg=method)
        np.testing.assert_allclose(np32(pk.shaw_attention(*arrays, max_distance, causal=causal,
                                                          method=method)), want, atol=1e-5)


@pytest.mark.keras
def test_chapter5_shaw_attention_scratch_mask_is_windowed_attention():
    q_len, k_len, window = 6, 11, 2
    arrays = _shaw_inputs(5, q_len, k_len, window)
    tensors = [torch.from_numpy(a) for a in arrays]
    i = torch.arange(k_len - q_len, k_len)[:, None]
    inside = (torch.arange(k_len)[None, :] - i).abs() <= window
    for causal in (False, True):
        want = np32(pt.windowed_attention(*tensors[:3], window, key_table=tensors[3],
                                          value_table=tensors[4], causal=causal))
        got_t = st.shaw_attention(*tensors, window, causal=causal, mask=inside).numpy()
        got_k = np32(sk.shaw_attention(*arrays, window, causal=causal, mask=inside.numpy()))
        np.testing.assert_allclose(got_t, want, atol=1e-5)
        np.testing.assert_allclose(got_k, want, atol=1e-5)
        # the mask matters: without it the far keys change the result
        unmasked = st.shaw_attention(*tensors, window, causal=causal).numpy()
        assert np.abs(unmasked - want).max() > 1e-3


@pytest.mark.parametrize("q_len,k_len,max_distance", [(7, 7, 2), (2, 9, 3), (4, 4, 0)])
@pytest.mark.keras
def test_chapter5_shaw_logits_gather_equals_the_relative_tensor(q_len, k_len, max_distance):
    q, _, _, key_table, _ = _shaw_inputs(9, q_len, k_len, max_distance)
    index = np.asarray(pt.shaw_relative_index(q_len, k_len, max_distance).cpu())
    want = np.einsum("bhid,ijd->bhij", q, key_table[index])       # through (q_len, k_len, d)
    got_t = st.shaw_logits_gather(torch.from_numpy(q), torch.from_numpy(key_table),
                                  max_distance, k_len).numpy()
    got_k = np32(sk.shaw_logits_gather(q, key_table, max_distance, k_len))
    np.testing.assert_allclose(got_t, want, atol=1e-5)
    np.testing.assert_allclose(got_k, want, atol=1e-5)


def _t5_bucket_reference(relative_position, bidirectional, num_buckets, max_distance):
    """T5's bucketing written out element by element in plain Python."""
    out = []
    for rp in np.asarray(relative_position).ravel().tolist():
        n, offset = num_buckets, 0
        if bidirectional:
            n //= 2
            offset = n if rp > 0 else 0
            d = abs(rp)
        else:
            d = max(-rp, 0)
        exact = n // 2
        if d < exact:
            out.append(offset + d)
        else:
            log_part = int(math.log(d / exact) / math.log(max_distance / exact) * (n - exact))
            out.append(offset + min(exact + log_part, n - 1))
    return np.array(out).reshape(np.shape(relative_position))


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets,max_distance", [(32, 128), (16, 64), (8, 20), (64, 512)])
@pytest.mark.keras
def test_chapter5_t5_buckets_scratch_faces_equal_the_definition(bidirectional, num_buckets,
                                                                max_distance):
    relative_position = np.arange(-700, 701)
    want = _t5_bucket_reference(relative_position, bidirectional, num_buckets, max_distance)
    got_t = st.t5_buckets(torch.from_numpy(relative_position), bidirectional, num_buckets,
                          max_distance).numpy()
    got_k = ops.convert_to_numpy(sk.t5_buckets(relative_position, bidirectional, num_buckets,
                                               max_distance))
    np.testing.assert_array_equal(got_t, want)
    np.testing.assert_array_equal(got_k, want)
    assert want.min() == 0 and want.max() == num_buckets - 1


def test_chapter5_t5_buckets_known_values():
    # T5's defaults (32 buckets, max_distance 128), worked by hand from the formula
    rp = torch.tensor([-1, 1, -7, -8, -200, 200, 0])
    assert st.t5_buckets(rp).tolist() == [1, 17, 7, 8, 15, 31, 0]
    assert st.t5_buckets(torch.tensor([5, 0, -15, -16, -20, -500]), False).tolist() == [
        0, 0, 15, 16, 17, 31]


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.keras
def test_chapter5_t5_buckets_scratch_equals_the_package(bidirectional):
    relative_position = np.arange(-300, 301)
    want = np.asarray(pt.t5_buckets(torch.from_numpy(relative_position),
                                    bidirectional=bidirectional).cpu())
    np.testing.assert_array_equal(
        st.t5_buckets(torch.from_numpy(relative_position), bidirectional).numpy(), want)
    np.testing.assert_array_equal(ops.convert_to_numpy(sk.t5_buckets(relative_position,
                                                                     bidirectional)), want)
    np.testing.assert_array_equal(ops.convert_to_numpy(
        pk.t5_buckets(relative_position, bidirectional=bidirectional)), want)


# Chapter 6


def _swin_index_loops(h, w):
    """Swin's index pair by pair, straight from the definition."""
    cells = [(r, c) for r in range(h) for c in range(w)]
    return np.array([[(ri - rj + h - 1) * (2 * w - 1) + (ci - cj + w - 1)
                      for (rj, cj) in cells] for (ri, ci) in cells])


@pytest.mark.parametrize("h,w", [(1, 1), (2, 3), (3, 2), (4, 4), (7, 7)])
@pytest.mark.keras
def test_chapter6_swin_relative_index_scratch(h, w):
    want = _swin_index_loops(h, w)
    np.testing.assert_array_equal(st.swin_relative_index(h, w).numpy(), want)
    np.testing.assert_array_equal(ops.convert_to_numpy(sk.swin_relative_index(h, w)), want)
    # every entry of the (2H-1)(2W-1) table is used, and a pair's index is its offset's alone
    assert set(want.ravel()) == set(range((2 * h - 1) * (2 * w - 1)))


@pytest.mark.parametrize("num_heads", [1, 2, 3, 5, 8, 12, 16, 24, 32])
@pytest.mark.keras
def test_chapter6_alibi_slopes_scratch(num_heads):
    def powers(n):                               # 2^(-8k/n), k = 1..n
        return [2.0 ** (-8.0 * k / n) for k in range(1, n + 1)]

    n = 2 ** int(np.floor(np.log2(num_heads)))
    want = np.array(powers(n) + powers(2 * n)[0::2][: num_heads - n], dtype=np.float32)
    got_t = st.alibi_slopes(num_heads).numpy()
    got_k = ops.convert_to_numpy(sk.alibi_slopes(num_heads))
    assert got_t.shape == (num_heads,) and len(set(want.tolist())) == num_heads
    np.testing.assert_allclose(got_t, want, rtol=1e-6)
    np.testing.assert_allclose(got_k, want, rtol=1e-6)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("q_len,k_len", [(5, 5), (1, 7), (3, 8)])
@pytest.mark.keras
def test_chapter6_alibi_bias_scratch(causal, q_len, k_len):
    heads = 6
    slopes = st.alibi_slopes(heads).numpy()
    i = np.arange(k_len - q_len, k_len)[:, None]
    distance = i - np.arange(k_len)[None, :]
    want = -slopes[:, None, None] * (distance if causal else np.abs(distance))
    got_t = st.alibi_bias(heads, q_len, k_len, causal=causal).numpy()
    got_k = ops.convert_to_numpy(sk.alibi_bias(heads, q_len, k_len, causal=causal))
    assert got_t.shape == (heads, q_len, k_len)
    np.testing.assert_allclose(got_t, want, rtol=1e-6, atol=0)
    np.testing.assert_allclose(got_k, want, rtol=1e-6, atol=0)
    # the last query is the last position: its own key gets 0, older keys less
    assert np.all(got_t[:, -1, -1] == 0) and np.all(np.diff(got_t[:, -1], axis=-1) > 0)


@pytest.mark.parametrize("h,w", [(1, 1), (2, 3), (7, 7), (12, 5)])
@pytest.mark.keras
def test_chapter6_swin_relative_index_scratch_equals_the_package(h, w):
    want = pt.swin_relative_index(h, w).numpy()
    np.testing.assert_array_equal(st.swin_relative_index(h, w).numpy(), want)
    np.testing.assert_array_equal(ops.convert_to_numpy(sk.swin_relative_index(h, w)),
                                  ops.convert_to_numpy(pk.swin_relative_index(h, w)))
    np.testing.assert_array_equal(ops.convert_to_numpy(sk.swin_relative_index(h, w)), want)


@pytest.mark.parametrize("num_heads", [1, 3, 8, 12, 16, 20])
@pytest.mark.keras
def test_chapter6_alibi_slopes_scratch_equals_the_package(num_heads):
    want = pt.alibi_slopes(num_heads).numpy()
    np.testing.assert_allclose(st.alibi_slopes(num_heads).numpy(), want, rtol=1e-6, atol=0)
    np.testing.assert_allclose(ops.convert_to_numpy(sk.alibi_slopes(num_heads)),
                               ops.convert_to_numpy(pk.alibi_slopes(num_heads)), rtol=1e-6, atol=0)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("q_len,k_len", [(6, 6), (1, 9), (4, 10)])
@pytest.mark.keras
def test_chapter6_alibi_bias_scratch_equals_the_package(causal, q_len, k_len):
    heads = 12
    want_t = pt.alibi_bias(heads, q_len, k_len, causal=causal).numpy()
    want_k = ops.convert_to_numpy(pk.alibi_bias(heads, q_len, k_len, causal=causal))
    got_t = st.alibi_bias(heads, q_len, k_len, causal=causal).numpy()
    got_k = ops.convert_to_numpy(sk.alibi_bias(heads, q_len, k_len, causal=causal))
    # the package's causal bias holds -inf for future keys (it is the mask too); the teaching
    # versions continue the line there, so the comparison is on the keys a query may see
    seen = np.ones((q_len, k_len), bool) if not causal else (
        np.arange(k_len)[None, :] <= np.arange(k_len - q_len, k_len)[:, None])
    assert np.all(np.isinf(want_t[:, ~seen])) and np.all(np.isfinite(want_t[:, seen]))
    for got, want in ((got_t, want_t), (got_k, want_k), (got_k, want_t)):
        np.testing.assert_allclose(got[:, seen], want[:, seen], rtol=1e-6, atol=0)


# Chapter 10


@pytest.mark.keras
def test_perplexity_equals_the_lab():
    from posenc.experiments.context import ExperimentContext
    from posenc.experiments.runners import TorchRunner

    rng = np.random.default_rng(0)
    logits = rng.normal(size=(8, 6, 5)).astype(np.float32)
    targets = rng.integers(0, 5, size=(8, 6))

    class Fixed(torch.nn.Module):
        def forward(self, tokens):
            return torch.from_numpy(logits)

    ctx = ExperimentContext(name="t", device=torch.device("cpu"), progress_bars=False)
    want = TorchRunner(ctx).evaluate(Fixed(), [(targets, targets, np.ones((8, 6), np.float32))]
                                     )["perplexity"]
    got_t = float(st.perplexity(torch.from_numpy(logits), torch.from_numpy(targets)))
    got_k = float(ops.convert_to_numpy(sk.perplexity(logits, targets)))
    assert got_t == pytest.approx(want, rel=1e-6) and got_k == pytest.approx(want, rel=1e-6)
    assert want > 5.0 / 2          # random logits: worse than half the vocabulary's 5


# Chapter 11


@pytest.mark.keras
def test_chapter11_cosine_similarity_scratch_equals_the_package():
    from posenc.diagnostics import similarity

    table = np.random.default_rng(11).normal(size=(17, 12))
    want = similarity(table)
    got_t = st.cosine_similarity(torch.from_numpy(table)).numpy()
    got_k = ops.convert_to_numpy(sk.cosine_similarity(ops.convert_to_tensor(table)))
    np.testing.assert_allclose(got_t, want, atol=1e-12)
    np.testing.assert_allclose(got_k, want, atol=1e-6)
    assert np.allclose(np.diag(got_t), 1.0) and np.abs(got_t).max() <= 1 + 1e-12


@pytest.mark.parametrize("ridge", [0.0, 0.5, 10.0])
@pytest.mark.keras
def test_chapter11_ridge_regression_scratch_equals_the_package(ridge):
    from posenc.diagnostics import ridge_regression

    rng = np.random.default_rng(int(ridge * 10))
    x = rng.normal(size=(60, 5)) + 3.0
    y = x @ np.array([1.0, -2.0, 0.5, 0.0, 3.0]) + 7.0 + 0.1 * rng.normal(size=60)
    w, b = ridge_regression(x, y, ridge)
    w_t, b_t = st.ridge_regression(torch.from_numpy(x), torch.from_numpy(y), ridge)
    w_k, b_k = sk.ridge_regression(ops.convert_to_tensor(x), ops.convert_to_tensor(y), ridge)
    np.testing.assert_allclose(w_t.numpy(), w, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(float(b_t), b, rtol=1e-9)
    np.testing.assert_allclose(ops.convert_to_numpy(w_k), w, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(float(ops.convert_to_numpy(b_k)), b, rtol=1e-4)
    if ridge == 0.0:   # least squares recovers the generating line
        np.testing.assert_allclose(w, [1.0, -2.0, 0.5, 0.0, 3.0], atol=0.05)


# Chapter 9 (the lab's attention: every route through the few-line version)

_LAB_SCHEMES = [("none", True, {}), ("rope", True, {}), ("rope", False, {}),
                ("alibi", True, {}), ("alibi", False, {}), ("t5", True, {}), ("t5", False, {}),
                ("shaw", True, {}), ("shaw", False, {"max_distance": 3}),
                ("swin", False, {"grid": (3, 4)})]


def _lab_hooks(layer, n, face):
    """The scratch attention's route arguments for a package MultiHeadAttention's scheme."""
    hooks = {}
    if layer.rotary is not None:
        hooks["rotate"] = layer.rotary
    if layer.position_bias is not None:
        hooks["bias"] = layer.position_bias(n, n)
    if layer.route == "relative":
        scratch = st if face == "torch" else sk
        idx = scratch.shaw_relative_index(n, n, layer.options["max_distance"])
        take = (lambda t: t[idx]) if face == "torch" else (lambda t: ops.take(t, idx, axis=0))
        hooks["relative"] = (take(layer.key_table), take(layer.value_table))
    return hooks


@pytest.mark.parametrize("position,causal,options", _LAB_SCHEMES,
                         ids=[f"{p}-{'causal' if c else 'encoder'}" for p, c, _ in _LAB_SCHEMES])
@pytest.mark.keras
def test_chapter9_attention_scratch_equals_the_package(position, causal, options):
    dim, heads, n = 24, 3, 12
    rng = np.random.default_rng(9)
    x = rng.normal(size=(2, n, dim)).astype(np.float32)
    torch.manual_seed(9)
    layer_t = pt.MultiHeadAttention(dim, heads, position=position, causal=causal, **options)
    layer_k = pk.MultiHeadAttention(dim, heads, position=position, causal=causal, **options)
    from posenc.interop import copy_weights

    with torch.no_grad():   # tables large enough that every route moves the output
        for p in layer_t.position_weights():
            p.copy_(torch.from_numpy(rng.normal(size=tuple(p.shape)).astype(np.float32)))
    copy_weights(layer_t, layer_k)
    for bias in (layer_t.query_bias, layer_t.value_bias, layer_t.output_bias):
        assert not bias.any()     # the package's projection biases start at zero
    kernels_t = [layer_t.query_kernel, layer_t.key_kernel, layer_t.value_kernel,
                 layer_t.output_kernel]
    kernels_k = [layer_k.query_kernel, layer_k.key_kernel, layer_k.value_kernel,
                 layer_k.output_kernel]
    xt = torch.from_numpy(x)
    with torch.no_grad():
        want = layer_t(xt).numpy()
        got_t = st.attention(xt, *kernels_t, heads, causal=causal,
                             **_lab_hooks(layer_t, n, "torch")).numpy()
        plain_t = st.attention(xt, *kernels_t, heads, causal=causal).numpy()
    got_k = np32(sk.attention(x, *kernels_k, heads, causal=causal,
                              **_lab_hooks(layer_k, n, "keras")))
    np.testing.assert_allclose(got_t, want, atol=2e-5, rtol=1e-5)
    np.testing.assert_allclose(got_k, want, atol=2e-5, rtol=1e-5)
    np.testing.assert_allclose(np32(layer_k(x)), want, atol=2e-5, rtol=1e-5)
    # the route matters: without it the scratch attention is another function (but NoPE's)
    assert (np.abs(plain_t - want).max() < 1e-5) == (position == "none")


@pytest.mark.keras
def test_chapter9_attention_scratch_causal_ignores_the_future():
    dim, heads, n = 16, 2, 10
    rng = np.random.default_rng(3)
    x = rng.normal(size=(1, n, dim)).astype(np.float32)
    w = [rng.normal(size=(dim, dim)).astype(np.float32) / dim ** 0.5 for _ in range(4)]
    changed = x.copy()
    changed[:, 6:] += 1.0
    for face in ("torch", "keras"):
        if face == "torch":
            run = lambda a: st.attention(torch.from_numpy(a), *map(torch.from_numpy, w), heads,
                                         causal=True).numpy()
        else:
            run = lambda a: np32(sk.attention(a, *w, heads, causal=True))
        before, after = run(x), run(changed)
        np.testing.assert_allclose(before[:, :6], after[:, :6], atol=1e-6)
        assert np.abs(before[:, 6:] - after[:, 6:]).max() > 1e-3


# Chapter 7


def _rope_inputs(seed=0, shape=(2, 3, 11, 16)):
    x = np.random.default_rng(seed).normal(size=shape).astype(np.float32)
    return x, np.arange(shape[-2])


@pytest.mark.parametrize("head_dim,base", [(2, 10000.0), (16, 10000.0), (64, 500000.0)])
@pytest.mark.keras
def test_chapter7_rope_inv_freq_scratch_equals_the_package(head_dim, base):
    want = pt.rope_frequencies(head_dim, base=base)[0].numpy()
    np.testing.assert_allclose(st.rope_inv_freq(head_dim, base).numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(np32(sk.rope_inv_freq(head_dim, base)), want, rtol=1e-6)


@pytest.mark.parametrize("scratch,layout", [("rope_complex", "interleaved"), ("rope_half", "half")])
@pytest.mark.parametrize("shape", [(11, 2), (2, 3, 11, 16), (1, 40, 64)])
@pytest.mark.keras
def test_chapter7_rope_scratch_equals_the_package(scratch, layout, shape):
    x, positions = _rope_inputs(shape=shape)
    head_dim = shape[-1]
    want = pt.apply_rope(torch.from_numpy(x), torch.from_numpy(positions),
                         pt.rope_frequencies(head_dim)[0], layout=layout).numpy()
    got_t = getattr(st, scratch)(torch.from_numpy(x), torch.from_numpy(positions),
                                 st.rope_inv_freq(head_dim))
    got_k = getattr(sk, scratch)(x, positions, sk.rope_inv_freq(head_dim))
    np.testing.assert_allclose(got_t.numpy(), want, atol=2e-5, rtol=1e-5)
    np.testing.assert_allclose(np32(got_k), want, atol=2e-5, rtol=1e-5)
    want_k = pk.apply_rope(x, positions, pk.rope_frequencies(head_dim)[0], layout=layout)
    np.testing.assert_allclose(np32(got_k), np32(want_k), atol=2e-5, rtol=1e-5)
    # a rotation: every token keeps its norm
    np.testing.assert_allclose(np.linalg.norm(got_t.numpy(), axis=-1),
                               np.linalg.norm(x, axis=-1), rtol=1e-5)


@pytest.mark.parametrize("position", [0, 1, 7, 1000])
@pytest.mark.keras
def test_chapter7_rope_matrix_is_the_interleaved_rotation(position):
    head_dim = 16
    x, _ = _rope_inputs(shape=(5, head_dim))
    inv_t, inv_k = st.rope_inv_freq(head_dim), sk.rope_inv_freq(head_dim)
    r_t, r_k = st.rope_matrix(position, inv_t), sk.rope_matrix(position, inv_k)
    np.testing.assert_allclose(np32(r_k), r_t.numpy(), atol=1e-6)
    np.testing.assert_allclose(r_t.numpy() @ r_t.numpy().T, np.eye(head_dim), atol=1e-5)
    want = pt.apply_rope(torch.from_numpy(x), torch.full((5,), position),
                         pt.rope_frequencies(head_dim)[0], layout="interleaved").numpy()
    np.testing.assert_allclose(x @ r_t.numpy().T, want, atol=1e-4)
    # block i sits on rows and columns 2i, 2i+1 and nowhere else
    mask = np.kron(np.eye(head_dim // 2), np.ones((2, 2))) == 0
    assert np.all(r_t.numpy()[mask] == 0)


# Chapter 8


_L = 2048


@pytest.mark.parametrize("head_dim,base,factor", [(64, 10000.0, 4.0), (128, 500000.0, 8.0)])
@pytest.mark.keras
def test_chapter8_ntk_and_dynamic_scratch_equal_the_package(head_dim, base, factor):
    want = pt.rope_frequencies(head_dim, base=base,
                               scaling={"rope_type": "ntk", "factor": factor})[0].numpy()
    for face in (st, sk):
        np.testing.assert_allclose(np32(face.ntk_inv_freq(head_dim, base, factor)), want,
                                   rtol=1e-5)
    # the slowest pair is exactly interpolated by factor, the fastest is kept
    default = pt.rope_frequencies(head_dim, base=base)[0].numpy()
    np.testing.assert_allclose(want[-1], default[-1] / factor, rtol=1e-5)
    assert want[0] == default[0] == 1.0
    scaling = {"rope_type": "dynamic", "factor": factor, "original_max_position_embeddings": _L}
    for seq_len in (100, _L, 3 * _L, 10 * _L):
        want = pt.rope_frequencies(head_dim, base=base, scaling=scaling, seq_len=seq_len)[0]
        for face in (st, sk):
            got = face.dynamic_inv_freq(head_dim, base, factor, seq_len, _L)
            np.testing.assert_allclose(np32(got), want.numpy(), rtol=1e-5)
        if seq_len <= _L:
            np.testing.assert_allclose(want.numpy(), default, rtol=1e-6)


@pytest.mark.parametrize("head_dim,base,factor,beta", [(64, 10000.0, 4.0, (32.0, 1.0)),
                                                       (128, 10000.0, 16.0, (32.0, 1.0)),
                                                       (128, 500000.0, 8.0, (16.0, 2.0))])
@pytest.mark.keras
def test_chapter8_yarn_scratch_equals_the_package(head_dim, base, factor, beta):
    scaling = {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": _L,
               "beta_fast": beta[0], "beta_slow": beta[1]}
    want, want_factor = pt.rope_frequencies(head_dim, base=base, scaling=scaling)
    for face in (st, sk):
        got, got_factor = face.yarn_inv_freq(head_dim, base, factor, _L, *beta)
        np.testing.assert_allclose(np32(got), want.numpy(), rtol=1e-5)
        assert math.isclose(got_factor, want_factor, rel_tol=1e-12)


@pytest.mark.parametrize("head_dim,base,factor,low,high", [(64, 10000.0, 4.0, 1.0, 4.0),
                                                           (128, 500000.0, 8.0, 1.0, 4.0),
                                                           (128, 10000.0, 8.0, 2.0, 8.0)])
@pytest.mark.keras
def test_chapter8_llama3_scratch_equals_the_package(head_dim, base, factor, low, high):
    scaling = {"rope_type": "llama3", "factor": factor, "original_max_position_embeddings": _L,
               "low_freq_factor": low, "high_freq_factor": high}
    want = pt.rope_frequencies(head_dim, base=base, scaling=scaling)[0].numpy()
    for face in (st, sk):
        got = face.llama3_inv_freq(head_dim, base, factor, _L, low, high)
        np.testing.assert_allclose(np32(got), want, rtol=1e-5)


# Chapters 3 and 4: the hybrid, low-rank and regularised codes, times, trees and modalities


@pytest.mark.keras
def test_hybrid_and_low_rank_scratch_equal_the_package():
    torch.manual_seed(0)
    hybrid, low = pt.HybridEncoding(12, 8), pt.LowRankEncoding(12, 8, rank=3)
    with torch.no_grad():
        hybrid.scale.fill_(0.7)
        hybrid.offset.normal_()
    x = torch.randn(2, 9, 8)
    torch.testing.assert_close(st.hybrid(x, hybrid.scale, hybrid.offset), hybrid(x),
                               atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(st.low_rank(x, low.left, low.right), low(x), atol=1e-6, rtol=1e-6)
    hybrid_k, low_k = pk.HybridEncoding(12, 8), pk.LowRankEncoding(12, 8, rank=3)
    from posenc.interop import copy_weights
    copy_weights(hybrid, hybrid_k)
    copy_weights(low, low_k)
    xk = x.numpy()
    for ours, theirs in ((sk.hybrid(xk, hybrid_k.scale, hybrid_k.offset), hybrid_k(xk)),
                         (sk.low_rank(xk, low_k.left, low_k.right), low_k(xk))):
        np.testing.assert_allclose(np32(ours), np32(theirs), atol=1e-5)
    np.testing.assert_allclose(np32(sk.hybrid(xk, hybrid_k.scale, hybrid_k.offset)),
                               hybrid(x).detach().numpy(), atol=1e-5)


@pytest.mark.parametrize("kind", ["dropout", "channel dropout", "noise"])
@pytest.mark.keras
def test_regulariser_scratch_equals_the_package_given_its_draws(kind):
    """The scratch versions take the random draws as arguments: read them off a module with the
    same seed applied to ones (or zeros), then compare on a real code."""
    rate, std = 0.25, 0.3
    code = pt.sinusoidal(16, 8).expand(3, 16, 8).contiguous()
    make_t = {"dropout": lambda: pt.EncodingDropout(rate, seed=4),
              "channel dropout": lambda: pt.ChannelDropout(rate, seed=4),
              "noise": lambda: pt.GaussianNoise(std, seed=4)}[kind]
    make_k = {"dropout": lambda: pk.EncodingDropout(rate, seed=4),
              "channel dropout": lambda: pk.ChannelDropout(rate, seed=4),
              "noise": lambda: pk.GaussianNoise(std, seed=4)}[kind]
    want_t = make_t().train()(code)
    want_k = np32(make_k()(code.numpy(), training=True))
    if kind == "noise":
        draw_t = make_t().train()(torch.zeros_like(code)) / std
        draw_k = np32(make_k()(np.zeros_like(code.numpy()), training=True)) / std
        got_t, got_k = st.gaussian_noise(code, draw_t, std), sk.gaussian_noise(code.numpy(),
                                                                               draw_k, std)
    else:
        keep_t = make_t().train()(torch.ones_like(code)) != 0
        keep_k = np32(make_k()(np.ones_like(code.numpy()), training=True)) != 0
        if kind == "channel dropout":        # one mask per channel, the same at every position
            assert torch.equal(keep_t, keep_t[:, :1].expand_as(keep_t))
            keep_t, keep_k = keep_t[:, :1], keep_k[:, :1]
        got_t, got_k = st.dropout(code, keep_t, rate), sk.dropout(code.numpy(), keep_k, rate)
    torch.testing.assert_close(got_t, want_t, atol=1e-6, rtol=1e-6)
    np.testing.assert_allclose(np32(got_k), want_k, atol=1e-6)


@pytest.mark.keras
def test_time_scratch_equals_the_package():
    times = torch.tensor([0.0, 0.4, 0.5, 3.0, 3.1, 9.0, 1234.25], dtype=torch.float64)
    want = pt.ContinuousTimeEncoding(16, time_scale=0.5).encoding(times)
    torch.testing.assert_close(st.continuous_time(times, 16, time_scale=0.5), want,
                               atol=1e-6, rtol=1e-6)
    # the scratch forms its angles in the backend's float32 (JAX has no float64 by default),
    # the package in float64: at t = 1234.25 the angle t / 0.5 = 2468.5 rad has a float32 spacing
    # of 2.4e-4, so the two may differ by half of that
    np.testing.assert_allclose(np32(sk.continuous_time(times.numpy(), 16, time_scale=0.5)),
                               np32(pk.ContinuousTimeEncoding(16, time_scale=0.5)
                                    .encoding(times.numpy())), atol=1.3e-4)
    torch.manual_seed(0)
    t2v = pt.Time2Vec(16)
    t32 = times.float()
    torch.testing.assert_close(st.time2vec(t32, t2v.frequency, t2v.phase), t2v.encoding(t32),
                               atol=1e-5, rtol=1e-5)
    t2v_k = pk.Time2Vec(16)
    from posenc.interop import copy_weights
    copy_weights(t2v, t2v_k)
    np.testing.assert_allclose(np32(sk.time2vec(t32.numpy(), t2v_k.frequency, t2v_k.phase)),
                               np32(t2v_k.encoding(t32.numpy())), atol=1e-4)


@pytest.mark.keras
def test_tree_and_modality_scratch_equal_the_package():
    paths = torch.tensor([[0, -1, -1], [0, 2, -1], [0, 3, 1], [1, -1, -1], [3, 3, 3]])
    fixed = pt.hierarchical(paths, 12, max_depth=3)
    torch.testing.assert_close(st.tree_code(paths, 12, 3), fixed, atol=1e-6, rtol=1e-6)
    np.testing.assert_allclose(np32(sk.tree_code(paths.numpy(), 12, 3)),
                               np32(pk.hierarchical(paths.numpy(), 12, max_depth=3)), atol=1e-6)
    torch.manual_seed(0)
    learned = pt.HierarchicalEncoding(3, 4, 12)
    torch.testing.assert_close(st.tree_learned(paths, learned.level_tables),
                               learned.encoding(paths), atol=1e-6, rtol=1e-6)
    learned_k = pk.HierarchicalEncoding(3, 4, 12)
    from posenc.interop import copy_weights
    copy_weights(learned, learned_k)
    np.testing.assert_allclose(np32(sk.tree_learned(paths.numpy(), learned_k.level_tables)),
                               np32(learned_k.encoding(paths.numpy())), atol=1e-6)
    ids = torch.tensor([0, 0, 1, 1, 1, 0, 2, 1, 0])
    assert st.modality_positions(ids).tolist() == pt.modality_positions(ids).tolist()
    assert (np32(sk.modality_positions(ids.numpy())).tolist()
            == np32(pk.modality_positions(ids.numpy())).tolist())
